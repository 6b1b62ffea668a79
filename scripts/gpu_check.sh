#!/usr/bin/env bash
# Run on the GPU machine (repo root): every GPU test, then the benchmark.
# Expects a folder laid out like ../shared (models/yolox_nano.onnx, data/images/) in $VRT_SHARED_DIR
# (default .gpu_data) and optional wheels to install in $VRT_WHEELS (default .gpu_data/whl, e.g. onnx2torch).
set -u -o pipefail
cd "$(dirname "$0")/.."
export VRT_SHARED_DIR="${VRT_SHARED_DIR:-$PWD/.gpu_data}"
export VRT_ASSETS_DIR="${VRT_ASSETS_DIR:-$VRT_SHARED_DIR/assets}"  # CenterFace model + crowd photo (make demo fills the real cache)
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-57}"
export PYTHONUNBUFFERED=1 XDG_CACHE_HOME="${XDG_CACHE_HOME:-/tmp/vrt_cache}"
OUT="${OUT:-/tmp/vrt_gpu_out}"; mkdir -p "$OUT"
WHEELS="${VRT_WHEELS:-.gpu_data/whl}"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHEELS"/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 - <<'PY'
import cuda.core, cuda.bindings, torch, numpy
print("cuda.core", cuda.core.__version__, "| cuda.bindings", cuda.bindings.__version__, "| torch", torch.__version__,
      "| numpy", numpy.__version__)
from cuda.core import Device
d = Device(0); d.set_current(); print("device", d.name, "sm_" + d.arch)
PY
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
rc=0
python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_*.py -v -s ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest.log" || rc=1
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  python3 -m vrt_ros.bench.stages.gpu_stages "$VRT_SHARED_DIR/models/yolox_nano.onnx" --frames "${BENCH_FRAMES:-300}" \
    --image "$VRT_SHARED_DIR/data/images/darknet_horses.jpg" 2>&1 | tee "$OUT/bench.log" || rc=1
  python3 -m vrt_ros.bench.stages.gpu_stages "$VRT_SHARED_DIR/models/yolox_nano.onnx" --frames 100 --eager \
    --image "$VRT_SHARED_DIR/data/images/darknet_horses.jpg" 2>&1 | tee "$OUT/bench_eager.log" || rc=1
  # issue 23: each new head's decode at 1080p, and the mask assembly against detections at 1 and 8 cameras
  python3 -m vrt_ros.bench.outputs.heads --frames "${BENCH_FRAMES:-300}" --out "$OUT/heads" 2>&1 | tee "$OUT/bench_heads.log" || rc=1
fi
if [ "${SOAK_FRAMES:-0}" -gt 0 ]; then  # HC-16 on the GPU path: resident and device memory over N frames
  python3 -m vrt_ros.bench.robustness.soak --backend cuda --model "$VRT_SHARED_DIR/models/yolox_nano.onnx" \
    --bag "$VRT_SHARED_DIR/data/bags/vtest_raw_sqlite3" --frames "$SOAK_FRAMES" --json "$OUT/soak_gpu.json" \
    2>&1 | tee "$OUT/soak_gpu.log" || rc=1
fi
exit $rc
