#!/usr/bin/env bash
# Run on the GPU machine (repo root), issue 14 items 4 and 5: the whole GPU test suite, the host-copy benchmark,
# then the end-to-end bench at 1920x1080 (raw and JPEG, cuda and the floor relay) with the multi-threaded host copy.
# Needs, beside the repo (git-ignored, carried): .ros312/ (scripts/build_ros312_bundle.sh), .whl/nvsite.tar.gz
# (nvImageCodec + nvJPEG, see scripts/gpu_decode_e2e_check.sh) and optionally .gpu_assets/ (the CenterFace model and
# crowd photo of the asset cache).
#
# Usage (device): scripts/gpu_issue14_check.sh OUT_DIR [tests|bench|all]   env: FRAMES (default 300)
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_issue14_check.sh OUT_DIR [tests|bench|all]}"
what="${2:-all}"
frames="${FRAMES:-300}"
mkdir -p "$out"
. scripts/ros312_env.sh 66 nvsite
[ -d .gpu_assets ] && export VRT_ASSETS_DIR="$PWD/.gpu_assets"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  timeout 240 python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_*.py test/test_heads.py -rs -q \
    2>&1 | grep -v "UserWarning\|nvjpeg2k\|nvtiff\|Note: If\|warnings.warn\|x\[seq\]" > "$out/gpu_tests.log" || rc=1
  tail -8 "$out/gpu_tests.log"
  timeout 150 python3 -m vrt_ros.bench.stages.host_copy --sizes 1920x1080,1280x720,640x480 --frames 150 \
    --json "$out/host_copy.json" > "$out/host_copy.md" 2> "$out/host_copy.log" || { rc=1; tail -5 "$out/host_copy.log"; }
  cat "$out/host_copy.md"
  VRT_NVIMGCODEC_BACKEND=hw timeout 200 python3 -m vrt_ros.bench.transport.ros_e2e --shared "$VRT_SHARED_DIR" \
    --backend cuda,floor-worker --compressed --sizes 1920x1080 --rate 30 --frames "$frames" --warmup 30 \
    --domain-id "$domain" --start-timeout 60 --out "$out" --name ros_e2e_1080p_item4 2>&1 \
    | grep -v "UserWarning\|x\[seq\]\|warnings.warn" | tail -20 || rc=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  timeout "${BENCH_TIMEOUT:-560}" python3 -m vrt_ros.bench --frames "${BENCH_FRAMES:-200}" --eager-frames "${EAGER_FRAMES:-100}" --cpu-frames "${CPU_FRAMES:-20}" \
    --upload-frames "${UPLOAD_FRAMES:-100}" --repeats "${REPEATS:-3}" --out "$out" > /dev/null 2> "$out/bench.log" || rc=1
  tail -5 "$out/bench.log"; sed -n '/## Summary/,/^Ratios/p' "$out/bench.md"; sed -n '/## Targets/,$p' "$out/bench.md"
fi
exit $rc
