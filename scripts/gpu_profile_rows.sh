#!/usr/bin/env bash
# Run on the GPU machine (repo root): where the node's threads spend their time in some of issue 35's target rows.
# Each row runs once (FRAMES a camera, default 450: 15 s measured) while py-spy samples the node process without
# pausing it (--nonblocking): first every thread with idle frames (--threads --idle: where each thread waits), then
# only the thread holding the GIL (--gil). Output: OUT_DIR/<row>_threads.txt, <row>_gil.txt (py-spy's raw collapsed
# stacks: "thread;frame;frame count") and the rows' cameras_targets_<row>.{json,md}. Summarise them on any machine:
#   python scripts/pyspy_summary.py OUT_DIR/<row>_threads.txt
# Needs, beside the repo (git-ignored, carried): .ros312/, .whl/nvsite.tar.gz and .whl/pyspy/py_spy-*.whl
# (pip download py-spy --no-deps --only-binary=:all: --platform manylinux2014_x86_64 -d .whl/pyspy).
#
# Usage (device): scripts/gpu_profile_rows.sh OUT_DIR ROW... (env PARAMS: extra node parameters, as gpu_issue35_bench.sh)
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_profile_rows.sh OUT_DIR ROW...}"
shift
mkdir -p "$out"
. scripts/ros312_env.sh 73 nvsite
spy_dir=/tmp/pyspy && rm -rf "$spy_dir" && mkdir -p "$spy_dir" && python3 -m zipfile -e .whl/pyspy/py_spy-*.whl "$spy_dir"
spy=$(find "$spy_dir" -name py-spy -type f | head -1) && chmod +x "$spy"
extra=()
for p in ${PARAMS:-}; do extra+=(--param "$p"); done
for row in "$@"; do
  (  # the profiler: waits for the cameras, then their warm-up and the node's first measured frames
    for _ in $(seq 1 1200); do pgrep -f vrt_ros.bench.cameras.camera_pub >/dev/null && break; sleep 0.1; done
    sleep "${PROFILE_AFTER_S:-7}"
    pid=$(pgrep -f "vrt_ros.ros.main" | head -1)
    timeout 20 "$spy" record --pid "$pid" -d 4 -r 250 --nonblocking --format raw --threads --idle \
      -o "$out/${row}_threads.txt" 2>&1 | tail -1
    timeout 20 "$spy" record --pid "$pid" -d 4 -r 250 --nonblocking --format raw --threads --gil \
      -o "$out/${row}_gil.txt" 2>&1 | tail -1
  ) &
  timeout 150 python3 -m vrt_ros.bench.cameras.cameras_e2e --targets --only "$row" --repeats 1 --backend cuda \
    --shared "$VRT_SHARED_DIR" --rate 30 --frames "${FRAMES:-450}" --warmup-s 2 --domain-id "$domain" \
    --start-timeout 90 --label "NVIDIA H200" --out "$out" --name "cameras_targets_$row" "${extra[@]}" 2>&1 \
    | grep -A12 "^| target row | target |" | head -12
  wait
done
