#!/usr/bin/env bash
# Run on the GPU machine (repo root): the DetectorNode on the GPU path against the CPU path on the real bags
# (test/test_gpu_node.py). The machine has no rclpy and no registry, so the ROS 2 Python packages, their shared
# libraries, vision_msgs (built for Python 3.12), rosbags and onnx2torch come from the bundle that
# scripts/build_ros312_bundle.sh writes into the git-ignored .ros312/ (carry it), with the data beside it.
#
# Usage (device): scripts/gpu_node_check.sh [extra pytest args]     env: VRT_BUNDLE (default .ros312)
set -u -o pipefail
cd "$(dirname "$0")/.."
bundle="${VRT_BUNDLE:-.ros312}"
root="${TMPDIR:-/tmp}/vrt_ros312"
rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xzf "$bundle/ros312.tar.gz" || exit 1
libs="$root/lib"
for d in "$root"/site/ros_*.libs; do libs="$libs:$d"; done
# The shared libraries must be on the loader path before Python starts (the wheels' own bootstrapper re-execs).
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$root/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export VRT_SHARED_DIR="${VRT_SHARED_DIR:-$PWD/$bundle/shared}"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-57}" VRT_TEST_DOMAIN_ID="${ROS_DOMAIN_ID:-57}"
export ROS_LOG_DIR="${ROS_LOG_DIR:-/tmp/vrt_ros_log}" PYTHONUNBUFFERED=1 XDG_CACHE_HOME="${XDG_CACHE_HOME:-/tmp/vrt_cache}"
python3 - <<'PY' || exit 1
import sys, rclpy, vision_msgs.msg, rosbags, onnx2torch, torch, cuda.core
print("python", sys.version.split()[0], "| rclpy", rclpy.__file__, "| torch", torch.__version__,
      "| cuda available", torch.cuda.is_available())
PY
python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_node.py -v -s "$@"
