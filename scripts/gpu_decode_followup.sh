#!/usr/bin/env bash
# Run on the GPU machine (repo root) after scripts/gpu_decode_e2e_check.sh, issue 14 follow-up (same carried
# .ros312/ and .whl/nvsite.tar.gz): the no-allocation test with a full warm-up, nvImageCodec's backends against each
# other (python -m vrt_ros.bench.stages.jpeg_decode), then the 1920x1080 end-to-end rows again with the fastest backend:
# cuda raw and jpeg, the floor relay answering from its callback and from a worker thread (the node's hand-off).
#
# Usage (device): scripts/gpu_decode_followup.sh OUT_DIR
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_decode_followup.sh OUT_DIR}"
mkdir -p "$out"
. scripts/ros312_env.sh 64 nvsite
quiet() { grep -v "UserWarning\|x\[seq\]\|warnings.warn\|nvjpeg2k\|nvtiff\|Note: If\|x = x\["; }
rc=0
timeout 90 python3 -m pytest -p no:cacheprovider -m gpu \
  "test/test_gpu_jpeg.py::test_compressed_frames_one_sync_no_allocation_after_warm_up" -v -s -rs 2>&1 | quiet \
  > "$out/pytest_followup.log" || rc=1
grep -E "PASS|FAIL|device memory|frames 1080p|assert" "$out/pytest_followup.log" | head -12
timeout 60 python3 -m vrt_ros.bench.stages.jpeg_decode --shared "$VRT_SHARED_DIR" --sizes 1920x1080 --frames 200 \
  --backends default,hw,hybrid,gpu,hw+hybrid --out "$out" 2>&1 | quiet || rc=1
best=$(python3 -c "
import json; d=json.load(open('$out/jpeg_decode.json'))
r=[x for x in d['rows'] if 'host_call_ms' in x]; print(min(r, key=lambda x: x['synced_ms']['p50'])['decoder'].split()[-1] if r else 'default')")
echo "fastest nvImageCodec backend: $best"
export VRT_NVIMGCODEC_BACKEND="$best"
timeout 150 python3 -m vrt_ros.bench.transport.ros_e2e --shared "$VRT_SHARED_DIR" --backend cuda,floor,floor-worker \
  --compressed --sizes 1920x1080 --rate 30 --frames 300 --warmup 30 --domain-id "$domain" --start-timeout 60 \
  --out "$out" --name ros_e2e_1080p_final 2>&1 | quiet | grep -v "^- \|^$\|^# " || rc=1
grep "^relay:" "$out/ros_e2e_1080p_final_node.log"
exit $rc
