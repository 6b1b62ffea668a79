#!/usr/bin/env bash
# Run on the GPU machine (repo root): the DetectorNode on the GPU path against the CPU path on the real bags
# (test/test_gpu_node.py). The machine has no rclpy and no registry, so the ROS 2 Python packages, their shared
# libraries, vision_msgs (built for Python 3.12), rosbags and onnx2torch come from the bundle that
# scripts/build_ros312_bundle.sh writes into the git-ignored .ros312/ (carry it), with the data beside it.
# Also test/test_gpu_lifecycle.py: the managed node gives the device memory back on cleanup.
#
# Usage (device): scripts/gpu_node_check.sh [extra pytest args]     env: VRT_BUNDLE (default .ros312)
set -u -o pipefail
cd "$(dirname "$0")/.."
. scripts/ros312_env.sh 57
python3 - <<'PY' || exit 1
import sys, rclpy, vision_msgs.msg, rosbags, onnx2torch, torch, cuda.core
print("python", sys.version.split()[0], "| rclpy", rclpy.__file__, "| torch", torch.__version__,
      "| cuda available", torch.cuda.is_available())
PY
python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_node.py test/test_gpu_lifecycle.py -v -s "$@"
