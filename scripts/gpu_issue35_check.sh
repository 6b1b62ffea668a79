#!/usr/bin/env bash
# Run on the GPU machine (repo root), issue 35: the GPU tests of the one batch path, the batched JPEG decode and the
# mixed transports, and the two decode/staging benchmarks (the target rows: scripts/gpu_issue35_bench.sh).
# Needs, beside the repo (git-ignored, carried): .ros312/ (scripts/build_ros312_bundle.sh) and .whl/nvsite.tar.gz.
#
# Usage (device): scripts/gpu_issue35_check.sh OUT_DIR PART...
#   decode   python -m vrt_ros.bench.stages.jpeg_batch, backends default, hw, hw+gpu -> OUT_DIR/jpeg_batch.{json,md}
#   staging  python -m vrt_ros.bench.stages.batch_staging (serial vs parallel copies vs raw_subscription, batches of 4 and 8
#            raw 1920x1080 bgr8) -> OUT_DIR/batch_staging.json
#   tests    pytest -m gpu: the one path, batched JPEG decode, mixed transports, batch device, depth, pipeline,
#            frame buffers -> OUT_DIR/gpu_tests_issue35.log
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_issue35_check.sh OUT_DIR PART...}"
shift
mkdir -p "$out"
. scripts/ros312_env.sh 72 nvsite
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
filter() { grep -v "UserWarning\|warnings.warn\|x\[seq\]\|TracerWarning\|^  \(scales\|steps\|if torch\|return torch\)"; }
for part in "$@"; do
  echo "=== $part ($(date +%T))"
  case "$part" in
    decode) timeout 150 python3 -m vrt_ros.bench.stages.jpeg_batch --backends default,hw,hw+gpu --out "$out" 2>&1 | tail -16 ;;
    staging) timeout 120 python3 -m vrt_ros.bench.stages.batch_staging --sizes 4 8 --out "$out/batch_staging.json" 2>&1 \
               | tail -16 ;;
    tests) timeout "${TESTS_TIMEOUT:-330}" python3 -m pytest -p no:cacheprovider -m gpu -v -rs -s --timeout 150 \
             test/test_gpu_onepath.py test/test_gpu_jpeg_batch.py test/test_gpu_mixed_transport.py \
             test/test_gpu_batch_device.py test/test_gpu_depth.py test/test_gpu_jpeg.py test/test_gpu_pipeline.py \
             test/test_gpu_frame_buffers.py 2>&1 | filter > "$out/gpu_tests_issue35.log"
           grep -E "vs alone|stages|FAILED|ERROR|SKIPPED|passed|failed" "$out/gpu_tests_issue35.log" | tail -45 ;;
    *) echo "unknown PART $part" ;;
  esac
done
