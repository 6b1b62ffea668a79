# Sourced by the GPU-machine scripts that need ROS (gpu_node_check.sh, gpu_e2e_check.sh), from the repo root:
# unpacks the Python 3.12 ROS bundle that scripts/build_ros312_bundle.sh writes into the git-ignored .ros312/
# (rclpy and the ros-jazzy modules with their shared libraries, vision_msgs, rosbags, onnx2torch) and sets the
# environment for it. The shared libraries must be on the loader path before Python starts (the wheels' own
# bootstrapper re-execs); child processes (the node under the e2e bench) inherit it.
# With "nvsite" as $2 it also unpacks nvImageCodec + nvJPEG for the GPU JPEG decode (.whl/nvsite.tar.gz, see
# scripts/gpu_decode_e2e_check.sh) onto PYTHONPATH, and exits the calling script when that archive is missing.
# In: VRT_BUNDLE (default .ros312), ROS_DOMAIN_ID (default $1, else 57), $2. Out: the exported variables below.
bundle="${VRT_BUNDLE:-.ros312}"
root="${TMPDIR:-/tmp}/vrt_ros312"
rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xzf "$bundle/ros312.tar.gz" || exit 1
libs="$root/lib"
for d in "$root"/site/ros_*.libs; do libs="$libs:$d"; done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$root/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ "${2:-}" = nvsite ]; then
  mkdir -p "$root/nvsite" && tar -C "$root/nvsite" -xzf .whl/nvsite.tar.gz || exit 1
  export PYTHONPATH="$root/nvsite:$PYTHONPATH"
fi
export VRT_SHARED_DIR="${VRT_SHARED_DIR:-$PWD/$bundle/shared}"
domain="${ROS_DOMAIN_ID:-${1:-57}}"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID="$domain" VRT_TEST_DOMAIN_ID="$domain"
export ROS_LOG_DIR="${ROS_LOG_DIR:-/tmp/vrt_ros_log}" PYTHONUNBUFFERED=1 XDG_CACHE_HOME="${XDG_CACHE_HOME:-/tmp/vrt_cache}"
