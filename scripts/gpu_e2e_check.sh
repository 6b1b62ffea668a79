#!/usr/bin/env bash
# Run on the GPU machine (repo root): end to end through ROS (issue 5) with `python -m vrt_ros.bench.transport.ros_e2e`:
# the detector node in its own process (backends cuda and cpu), the bench publishing real frames at 30 Hz and
# receiving the detections in another process, sizes 640x480, 1280x720, 1920x1080. The machine has no rclpy and no
# registry, so the ROS 2 Python packages, their shared libraries, vision_msgs (built for Python 3.12), rosbags and
# onnx2torch come from the bundle that scripts/build_ros312_bundle.sh writes into the git-ignored .ros312/ (carry
# it), with the model and bags beside it; the photos come from a second git-ignored folder (carry it too), made here
# with `mkdir -p .e2e_data && cp -r ../shared/data/images .e2e_data/` (and `/.e2e_data/` in .git/info/exclude).
#
# Usage (device): scripts/gpu_e2e_check.sh OUT_DIR [extra ros_e2e args]
#   env: VRT_BUNDLE (default .ros312), VRT_E2E_IMAGES (default .e2e_data/images), ROS_DOMAIN_ID (default 64)
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_e2e_check.sh OUT_DIR [extra ros_e2e args]}"; shift
images="${VRT_E2E_IMAGES:-.e2e_data/images}"
. scripts/ros312_env.sh 64
mkdir -p "$out"
python3 - <<'PY' || exit 1
import sys, rclpy, vision_msgs.msg, rosbags, torch
print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda available", torch.cuda.is_available())
PY
img_args=()
[ -d "$images" ] && img_args=(--images "$images")
python3 -m vrt_ros.bench.transport.ros_e2e --shared "$VRT_SHARED_DIR" "${img_args[@]}" --backend cuda,cpu \
  --sizes 640x480,1280x720,1920x1080 --rate 30 --frames 300 --warmup 30 --domain-id "$domain" \
  --out "$out" "$@" 2>&1 | tee "$out/ros_e2e_console.log"
