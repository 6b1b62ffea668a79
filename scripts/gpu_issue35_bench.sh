#!/usr/bin/env bash
# Run on the GPU machine (repo root), issue 35 item 6: the many-camera bench's target rows, three interleaved repeats
# each, in one device command of at most ten minutes (--budget-s: no run is started that would end past it; the ones
# not started are listed in the JSON under "not_run", to be run with ONLY=... and APPEND=1 in a second command).
# Needs, beside the repo (git-ignored, carried): .ros312/ (scripts/build_ros312_bundle.sh) and .whl/nvsite.tar.gz
# (nvImageCodec + nvJPEG for the JPEG rows' GPU decode; see scripts/gpu_decode_e2e_check.sh).
#
# Usage (device): scripts/gpu_issue35_bench.sh OUT_DIR
#   env: FRAMES (default 150 a camera), REPEATS (3), BUDGET_S (500), ONLY (rows, default all), APPEND (1: add to
#   OUT_DIR/cameras_targets.json), PARAMS (extra node parameters, e.g. "input.batch_wait_ms:=3")
# Writes OUT_DIR/tracking.{json,md} (the tracker bench, first, when ONLY is unset), OUT_DIR/cameras_targets.{json,md}
# and cameras_targets_node.log. Then, on any machine:
#   python -m vrt_ros.bench.cameras.cameras_report OUT_DIR/cameras_targets.json --targets
#   python -m vrt_ros.bench.cameras.scaling_plot results/bench/cameras_e2e.json OUT_DIR/cameras_targets.json --all
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_issue35_bench.sh OUT_DIR}"
mkdir -p "$out"
. scripts/ros312_env.sh 71 nvsite
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
extra=()
[ -n "${ONLY:-}" ] && extra+=(--only "$ONLY")
[ "${APPEND:-0}" = 1 ] && extra+=(--append)
for p in ${PARAMS:-}; do extra+=(--param "$p"); done
start=$(date +%s)
# the tracker's cost per frame on an unloaded core (issue 35 item 5: <= 0.3 ms p50 at 100 detections), a few seconds
[ -z "${ONLY:-}" ] && timeout 40 python3 -m vrt_ros.bench.tracker.tracking --out "$out" 2>&1 | tail -3
timeout 560 python3 -m vrt_ros.bench.cameras.cameras_e2e --targets --backend cuda --shared "$VRT_SHARED_DIR" --rate 30 \
  --frames "${FRAMES:-150}" --warmup-s 2 --repeats "${REPEATS:-3}" --budget-s "${BUDGET_S:-500}" \
  --domain-id "$domain" --start-timeout 90 --label "NVIDIA H200" --out "$out" "${extra[@]}" 2>&1 \
  | grep -v "UserWarning\|x\[seq\]\|warnings.warn\|TracerWarning" | tail -60
echo "targets: $(( $(date +%s) - start )) s"
