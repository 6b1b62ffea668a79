#!/usr/bin/env bash
# Run on the GPU machine (repo root): scripts/gpu_trt_check.sh STEP... with the steps
#   fp16   the GPU tests (torch engine FP16 included), the TensorRT lean-runtime checks,
#                                   and `python -m vrt_ros.bench.stages.torch_fp16` (FP16 vs FP32 engine time + agreement)
#   rtx    TensorRT for RTX on this GPU: test/test_tensorrt_rtx.py (builder, cache,
#                                   errors; the runtime's refusal; backend auto skips it, a forced flavour fails)
# Inputs, carried beside the repo: $VRT_SHARED_DIR (default .gpu_data: models/, data/, assets/), and in $WHL
# (default .whl) cp312 wheels plus xz-compressed libraries (NAME.xz) that are unpacked into the wheels' package
# folders: the TensorRT libs wheels are too large to carry as they are. A big .xz may come split in parts
# (NAME.xz.part-*), the parts of an earlier call kept in /tmp/vrt_parts (same machine, still warm). BAGS: the
# bags folder, or an .npz of their messages (python -m vrt_ros.bench.stages.torch_fp16 --export-bag-frames F.npz) where
# rosbags is not installed.
set -u -o pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 fp16|rtx [fp16|rtx]" >&2; exit 2; }
export VRT_SHARED_DIR="${VRT_SHARED_DIR:-$PWD/.gpu_data}" VRT_ASSETS_DIR="${VRT_ASSETS_DIR:-$PWD/.gpu_data/assets}"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-63}" PYTHONUNBUFFERED=1
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-/tmp/vrt_cache}"
OUT="${OUT:-/tmp/vrt_gpu_out}"; WHL="${WHL:-.whl}"
mkdir -p "$OUT" /tmp/vrt_parts
cp "$WHL"/*.part-* /tmp/vrt_parts/ 2>/dev/null  # parts of a split library, for this or a later call
ls -la /tmp/vrt_parts
unpack() {  # unpack SITE PACKAGE_DIR LIB: $WHL/LIB.xz (or its parts) -> SITE/PACKAGE_DIR/LIB
  mkdir -p "$1/$2"
  if [ -f "$WHL/$3.xz" ]; then xz -dc "$WHL/$3.xz"; else cat /tmp/vrt_parts/"$3".xz.part-* | xz -dc; fi >"$1/$2/$3" || return 1
  [ -f "$1/$2/__init__.py" ] || cp "$WHL/$2.__init__.py" "$1/$2/__init__.py"
}
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader || true
rc=0
for step in "$@"; do
  site=/tmp/site_$step; mkdir -p "$site"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$WHL"/*.whl || exit 1
  export PYTHONPATH="$site:$PWD"
  if [ "$step" = fp16 ]; then
    if [ -f "$WHL/libnvinfer_lean.so.11.xz" ]; then
      unpack "$site" tensorrt_lean_libs libnvinfer_lean.so.11 && unpack "$site" tensorrt_lean_libs libnvinfer_vc_plugin.so.11 || exit 1
    fi
    python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_*.py test/test_tensorrt.py -v -s -rs 2>&1 \
      | tee "$OUT/pytest_gpu_fp16.log" || rc=1
    python3 -m vrt_ros.bench.stages.torch_fp16 --shared "$VRT_SHARED_DIR" --bags "${BAGS:-$VRT_SHARED_DIR/data/bags}" \
      --out "$OUT/torch_fp16" --frames "${FRAMES:-300}" 2>&1 | tee "$OUT/torch_fp16.log" || rc=1
  elif [ "$step" = rtx ]; then
    if unpack "$site" tensorrt_rtx_libs libtensorrt_rtx.so.1 && unpack "$site" tensorrt_rtx_libs libtensorrt_onnxparser_rtx.so.1; then
      python3 -m pytest -p no:cacheprovider test/test_tensorrt_rtx.py -v -s -rs 2>&1 | tee "$OUT/pytest_rtx_h200.log" || rc=1
    else
      echo "TensorRT for RTX libraries could not be unpacked (a part missing from /tmp/vrt_parts?)" | tee "$OUT/pytest_rtx_h200.log"
      rc=1
    fi
  fi
done
exit $rc
