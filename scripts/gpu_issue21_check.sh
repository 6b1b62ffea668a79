#!/usr/bin/env bash
# Run on the GPU machine (repo root), issue 21: the batched GPU tests, then the many-camera matrix in parts (each part
# fits one 10-minute device command), then the scaling curve.
# Needs, beside the repo (git-ignored, carried): .ros312/ (scripts/build_ros312_bundle.sh) and .whl/nvsite.tar.gz
# (nvImageCodec + nvJPEG, for the JPEG rows' GPU decode; see scripts/gpu_decode_e2e_check.sh).
#
# Usage (device): scripts/gpu_issue21_check.sh OUT_DIR PART
#   PART: tests | jpeg | raw | off | 720 | floor | events | plot      env: FRAMES (default 300), REPEATS (default 3)
# The matrix (issue 21, "The bench grows with the work"): 1920x1080 raw and JPEG at N = 1, 2, 4, 8 with batching on,
# both phases (parts jpeg, raw); batching off at N = 8 (off); 1280x720 at N = 8 (720); the floor relay at N = 1, 8
# (floor). Every part appends to OUT_DIR/cameras_e2e.json; `plot` draws OUT_DIR/cameras_scaling_{jpeg,raw}.png.
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_issue21_check.sh OUT_DIR PART}"
part="${2:?PART: tests|jpeg|raw|off|720|floor|events|plot}"
frames="${FRAMES:-300}"
repeats="${REPEATS:-3}"
mkdir -p "$out"
. scripts/ros312_env.sh 67 nvsite
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bench() {  # the many-camera bench, appended to one JSON
  timeout 580 python3 -m vrt_ros.bench.cameras.cameras_e2e --shared "$VRT_SHARED_DIR" --rate 30 --frames "$frames" \
    --warmup-s 3 --repeats "$repeats" --domain-id "$domain" --start-timeout 60 --label "NVIDIA H200" --out "$out" --append "$@" 2>&1 \
    | grep -v "UserWarning\|x\[seq\]\|warnings.warn" | tail -25
}
case "$part" in
  tests) timeout "${TESTS_TIMEOUT:-400}" python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_*.py -v -rs \
           --timeout 120 2>&1 | grep -v "UserWarning\|warnings.warn\|x\[seq\]" > "$out/gpu_tests.log"
         grep -E "FAILED|ERROR|SKIPPED|passed|failed" "$out/gpu_tests.log" | tail -40 ;;
  jpeg)  bench --backend cuda --sizes 1920x1080 --inputs jpeg --cameras 1,2,4,8 --phase stagger,sync --batching on ;;
  raw)   bench --backend cuda --sizes 1920x1080 --inputs raw --cameras 1,2,4,8 --phase stagger,sync --batching on ;;
  off)   bench --backend cuda --sizes 1920x1080 --inputs raw,jpeg --cameras 8 --phase stagger,sync --batching off ;;
  720)   bench --backend cuda --sizes 1280x720 --inputs raw,jpeg --cameras 8 --phase stagger,sync --batching on ;;
  floor) bench --backend floor --sizes 1920x1080 --inputs raw,jpeg --cameras 1,8 --phase stagger --batching on ;;
  events) for ex in single events; do  # issue 22 item 3: the node under rclpy's EventsExecutor vs the default
           bench --backend cuda --sizes 1920x1080 --inputs jpeg,raw --cameras 8 --phase stagger --batching on \
             --node-arg=--executor=$ex --name cameras_e2e_executor
         done ;;
  plot)  for inp in jpeg raw; do
           python3 -m vrt_ros.bench.cameras.scaling_plot "$out/cameras_e2e.json" --size 1920x1080 --input "$inp" \
             --phase stagger -o "$out/cameras_scaling_$inp.png"
         done ;;
  *) echo "unknown PART $part"; exit 2 ;;
esac
