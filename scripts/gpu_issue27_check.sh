#!/usr/bin/env bash
# Run on the GPU machine (repo root), issue 27: the torch engine's disk cache (warm start), the GPU memory a cleanup
# leaves, and the recovery figures with the torch engine.
# Needs, beside the repo (git-ignored, carried): .ros312/ (scripts/build_ros312_bundle.sh) and .whl/nvsite.tar.gz
# (nvImageCodec + nvJPEG for the JPEG tests; see scripts/gpu_decode_e2e_check.sh).
#
# Usage (device): scripts/gpu_issue27_check.sh OUT_DIR PART...
#   cache     pytest -m gpu: the cache (test_gpu_torch_cache.py), the torch engine, the lifecycle memory test, the
#             mapped-memory equality test (issue 28) -> OUT_DIR/gpu_tests_cache.log
#   memory    python -m vrt_ros.bench.stages.gpu_memory -> OUT_DIR/gpu_memory.{json,md}
#   recovery  python -m vrt_ros.bench.restart.recovery --backend cuda: starts (cold = empty cache, warm = cached), three
#             faults under the bench's supervisor respawn (no ros2 launch there), lifecycle configure times
#             -> OUT_DIR/recovery_h200.{json,md}
#   fault     test_gpu_recovery.py (a real illegal memory access, twice, under the supervisor respawn) and the bench's
#             three faults of that kind -> OUT_DIR/gpu_tests_recovery.log, recovery_h200_illegal_address.{json,md}
#   standby   the same bench's three faults under the node's own --warm-standby (--respawn standby, a fault after 60
#             frames), and the lifecycle configure 8 s after the node is up (its background import done)
#             -> OUT_DIR/recovery_h200_standby.{json,md}
#   tests     every GPU test (pytest -m gpu test/test_gpu_*.py) -> OUT_DIR/gpu_tests.log
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_issue27_check.sh OUT_DIR PART...}"
shift
mkdir -p "$out"
. scripts/ros312_env.sh 69 nvsite
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
filter() { grep -v "UserWarning\|warnings.warn\|x\[seq\]\|TracerWarning\|^  \(scales\|steps\|if torch\|return torch\)"; }
model="$VRT_SHARED_DIR/models/yolox_nano.onnx"
for part in "$@"; do
  echo "=== $part ($(date +%T))"
  case "$part" in
    cache) timeout 300 python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_torch_cache.py \
             test/test_gpu_torch_engine.py test/test_gpu_lifecycle.py test/test_gpu_mapped_device.py -v -rs -s \
             2>&1 | filter > "$out/gpu_tests_cache.log"
           grep -E "^(cold|warm|yolox)|MiB|FAILED|ERROR|SKIPPED|passed|failed|Error" "$out/gpu_tests_cache.log" | tail -40 ;;
    memory) timeout 240 python3 -m vrt_ros.bench.stages.gpu_memory --model "$model" --cycles 3 --frames 20 --out "$out" 2>&1 \
             | filter | tail -20 ;;
    recovery) timeout "${RECOVERY_TIMEOUT:-420}" python3 -m vrt_ros.bench.restart.recovery --backend cuda --model "$model" \
             --repeats "${REPEATS:-3}" --import-runs 5 --respawn supervisor --faults 3 --respawn-delay 0.5 \
             --lifecycle-repeats "${REPEATS:-3}" --domain-id 69 --name recovery_h200 --out "$out" 2>&1 | filter | tail -60 ;;
    fault) timeout 300 python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_recovery.py -v -rs -s 2>&1 | filter \
             > "$out/gpu_tests_recovery.log"; grep -E "^fault|PASSED|FAILED|Error|passed|failed" "$out/gpu_tests_recovery.log" | tail -20
           timeout 280 python3 -m vrt_ros.bench.restart.recovery --backend cuda --model "$model" --repeats 1 --import-runs 1 \
             --respawn supervisor --faults 3 --respawn-delay 0.5 --fault-kind illegal_address --lifecycle-repeats 0 \
             --domain-id 69 --name recovery_h200_illegal_address --out "$out" 2>&1 | filter | grep -A12 "## Fault" ;;
    standby) timeout "${RECOVERY_TIMEOUT:-420}" python3 -m vrt_ros.bench.restart.recovery --backend cuda --model "$model" \
             --repeats 1 --import-runs 1 --respawn standby --faults 3 --fault-after 60 --respawn-delay 0.5 \
             --lifecycle-repeats "${REPEATS:-3}" --configure-after 8 --domain-id 69 --name recovery_h200_standby \
             --out "$out" 2>&1 \
             | filter | tail -40 ;;
    tests) timeout "${TESTS_TIMEOUT:-420}" python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_*.py -v -rs \
             --timeout 120 2>&1 | filter > "$out/gpu_tests.log"
           grep -E "FAILED|ERROR|SKIPPED|passed|failed" "$out/gpu_tests.log" | tail -40 ;;
    *) echo "unknown PART $part" ;;
  esac
done
