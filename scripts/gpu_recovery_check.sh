#!/usr/bin/env bash
# Run on the GPU machine (repo root): the recovery bench (issue 27 item 3) on the GPU path, `python -m
# vrt_ros.bench.recovery --backend cuda --respawn supervisor`: process start → first detection cold and warm, fault →
# detections again three times in a row restarted by the bench's supervisor (the machine has no ros2 launch and no
# colcon), and the lifecycle configure cold, warm and again. The ROS 2 Python packages, their shared libraries,
# vision_msgs, onnx2torch and the shared data come from the bundle that scripts/build_ros312_bundle.sh writes into
# the git-ignored .ros312/ (carry it).
#
# Usage (device): scripts/gpu_recovery_check.sh OUT_DIR [extra recovery args, e.g. --lifecycle-only]
#   env: VRT_BUNDLE (default .ros312), ROS_DOMAIN_ID (default 72), RECOVERY_NAME (default recovery_h200)
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_recovery_check.sh OUT_DIR [extra recovery args]}"; shift
. scripts/ros312_env.sh 72
mkdir -p "$out"
python3 - <<'PY' || exit 1
import sys, rclpy, rclpy.lifecycle, lifecycle_msgs.srv, vision_msgs.msg, onnx2torch, torch
print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda available", torch.cuda.is_available())
PY
python3 -m vrt_ros.bench.recovery --backend cuda --respawn supervisor --faults 3 --domain-id "$domain" \
  --model "$VRT_SHARED_DIR/models/yolox_nano.onnx" --name "${RECOVERY_NAME:-recovery_h200}" --out "$out" "$@" \
  2>&1 | tee "$out/recovery_console.log"
