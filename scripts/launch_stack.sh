#!/usr/bin/env bash
# Install the real ROS 2 launch stack for the launch tests into a venv, when ../shared/ros2_launch exists:
# the upstream launch/launch_ros/launch_testing/ros2cli wheels there (--no-deps: their ROS dependencies come from
# the ros-jazzy-* wheels), their PyPI dependencies and colcon (requirements/launch-test.txt), and the
# composition_interfaces package built from its source there (launch_ros imports it) with scripts/build_interface.sh,
# as vision_msgs is built. Tests only: the product never needs it; test/test_launch_real.py skips without it.
#
# Usage: scripts/launch_stack.sh VENV_DIR   (the shared folder: $VRT_SHARED_DIR, default ../shared)
# Idempotent: one stamp in VENV_DIR/.vrt-stamps holds the sha256 of everything it depends on (scripts/venv.sh).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="$(cd "${1:?usage: $0 VENV_DIR}" && pwd)"
stack="${VRT_SHARED_DIR:-$repo/../shared}/ros2_launch"
stamps="$venv/.vrt-stamps"
say() { echo "launch stack: $*"; }

if [ ! -d "$stack/wheels" ]; then
  say "$stack not found: launch tests will skip (set VRT_SHARED_DIR to the shared/ folder)"
  exit 0
fi
stack="$(cd "$stack" && pwd)"
pyver="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
key="$(
  {
    for f in "$stack"/wheels/*.whl; do echo "$(basename "$f") $(stat -c %s "$f")"; done
    find "$stack/composition_interfaces" -type f | LC_ALL=C sort | xargs cat
    cat requirements/launch-test.txt requirements/build-interfaces.txt scripts/launch_stack.sh \
      scripts/build_interface.sh cmake/rosidl_py_include_fix.cmake
    echo "py$pyver"
  } | sha256sum | cut -d' ' -f1
)"
if [ -f "$stamps/launch_stack" ] && [ "$(cat "$stamps/launch_stack")" = "$key" ]; then
  say "up to date"
  exit 0
fi

pip_install() { "$venv/bin/python" -m pip install -q "$@" 2>&1 | { grep -v -e "is ignored: it is neither a file nor a directory" -e "ament-index-python, which is not installed" -e "resolver does not currently take into account" || true; }; return "${PIPESTATUS[0]}"; }
say "installing the upstream wheels of $stack and requirements/launch-test.txt"
# pip warns that launch-ros needs ament-index-python: the module is there (wheel ros-jazzy-ament-index-python).
pip_install --no-deps "$stack"/wheels/*.whl
pip_install -r requirements/launch-test.txt -r requirements/build-interfaces.txt
say "building composition_interfaces"
scripts/build_interface.sh "$venv" "$stack/composition_interfaces" "import composition_interfaces.srv"
(cd / && "$venv/bin/python" -c "import composition_interfaces.srv, launch, launch_ros, launch_testing, rosidl_runtime_py")
mkdir -p "$stamps"
echo "$key" >"$stamps/launch_stack"
say "ready"
