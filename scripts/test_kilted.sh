#!/usr/bin/env bash
# The rclpy 9 / Fast DDS 3 leg of `make test`: the ROS-edge tests under ROS 2 Kilted's PyPI wheels (rclpy 9.1,
# Fast DDS 3.2), the nearest stand-in for ROS 2 Lyrical, which has no wheels. Its own venv (default .venv-kilted):
# the Kilted and Jazzy wheels share distribution names (ros-rclpy, ...), so they cannot share one. Pins:
# requirements/kilted.txt (the ros-kilted-* equivalents of runtime.txt's ros-jazzy-* lines), the rest of
# runtime.txt, test.txt; vision_msgs is built from interfaces/vision_msgs as in the main venv, with
# requirements/kilted-build-interfaces.txt, into build/vision_msgs-kilted-pyXY. No Kilted launch wheels exist, so the
# launch tests skip with that reason.
#
# Usage: scripts/test_kilted.sh [pytest args...]   (VENV_KILTED=dir, PYTHON=interpreter, default python3)
#   Without pytest args it runs the ROS-edge set (KILTED_TESTS below); with args, exactly those.
# Idempotent: the venv's dependencies carry a stamp (sha256 of the files they come from), as scripts/venv.sh.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="${VENV_KILTED:-.venv-kilted}"
python="${PYTHON:-python3}"
logs="$repo/build/setup"
say() { echo "kilted: $*"; }
# shellcheck source=scripts/progress.sh
. "$repo/scripts/progress.sh"
# The ROS edge: node, parameters, replay/record, lifecycle (and its launch tests, which skip), diagnostics, faults,
# the DDS profile, the message definitions, and the packaging checks of the pins.
KILTED_TESTS=(test/test_node.py test/test_node_faults.py test/test_param_files.py test/test_robot_yamls.py
              test/test_replay_record.py test/test_replay_delivery.py test/test_lifecycle.py
              test/test_lifecycle_launch.py test/test_launch_real.py test/test_dds_profile.py
              test/test_vision_msgs_interface.py test/test_camera_log.py test/test_packaging.py test/test_config.py
              test/test_node_raw_input.py test/test_cdr_read.py test/test_wakeup.py)

start=$SECONDS
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv with $("$python" -V 2>&1)"
  "$python" -m venv "$venv" || exit 1
fi
venv="$(cd "$venv" && pwd)"
pip_install() { "$venv/bin/python" -m pip install -q "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; return "${PIPESTATUS[0]}"; }
mkdir -p "$venv/.vrt-stamps" "$logs"
# runtime.txt without its ros-jazzy-* lines: numpy, OpenCV, ONNX Runtime, rosbags, PyYAML, pinned once, there.
common="$venv/.vrt-stamps/runtime-common.txt"
grep -v '^ros-jazzy-' requirements/runtime.txt >"$common"
key="$({ cat requirements/tools.txt requirements/runtime.txt requirements/kilted.txt requirements/test.txt \
         requirements/kilted-build-interfaces.txt; "$venv/bin/python" -V; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$venv/.vrt-stamps/deps" 2>/dev/null)" != "$key" ]; then
  say "installing requirements/tools.txt, kilted.txt, runtime.txt (less ros-jazzy-*), test.txt, kilted-build-interfaces.txt"
  run_logged "pip (kilted)" "about 1-2 minutes from a fresh venv" "$logs/pip-kilted.log" \
    bash -c '"$1" -m pip install -r requirements/tools.txt && "$1" -m pip install -r requirements/kilted.txt -r "$2" -r requirements/test.txt -r requirements/kilted-build-interfaces.txt' \
    _ "$venv/bin/python" "$common" || { say "pip failed; see $logs/pip-kilted.log" >&2; exit 1; }
  echo "$key" >"$venv/.vrt-stamps/deps"
else
  say "dependencies up to date"
fi
key="$({ find interfaces/vision_msgs -type f | LC_ALL=C sort | xargs cat; cat scripts/build_vision_msgs.sh \
         scripts/build_interface.sh cmake/rosidl_py_include_fix.cmake requirements/kilted-build-interfaces.txt; \
         "$venv/bin/python" -V; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$venv/.vrt-stamps/vision_msgs" 2>/dev/null)" != "$key" ]; then
  scripts/build_vision_msgs.sh "$venv" || exit 1
  echo "$key" >"$venv/.vrt-stamps/vision_msgs"
else
  say "vision_msgs up to date"
fi
key="$(cat setup.py setup.cfg package.xml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$venv/.vrt-stamps/package" 2>/dev/null)" != "$key" ] || [ ! -x "$venv/bin/detector_node" ]; then
  PYTHONWARNINGS=ignore pip_install --no-deps --no-build-isolation -e . || exit 1
  echo "$key" >"$venv/.vrt-stamps/package"
fi
setup_s=$((SECONDS - start))

export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-57}"
export VRT_TEST_DOMAIN_ID="${VRT_TEST_DOMAIN_ID:-$ROS_DOMAIN_ID}"
export ROS_LOG_DIR="${ROS_LOG_DIR:-$repo/build/ros_log}"
export VRT_NO_LAUNCH_REASON="no ROS 2 Kilted launch wheels exist (PyPI has none; ../shared/ros2_launch holds Jazzy's): the launch tests run in the Jazzy leg"
# Fast DDS 3 reads FASTDDS_DEFAULT_PROFILES_FILE (vrt_ros/ros/dds.py sets only that one under it)
say "$(cd / && "$venv/bin/python" -c 'import sys, rclpy, importlib.metadata as m; print("Python %d.%d.%d" % sys.version_info[:3], "rclpy", m.version("ros-rclpy"), "Fast DDS", m.version("ros-fastdds"))' 2>&1 | tail -1) (set-up $setup_s s)"
[ "$#" -gt 0 ] || set -- "${KILTED_TESTS[@]}" -q
t0=$SECONDS
# no pytest cache shared with the main leg
"$venv/bin/python" -m pytest -p no:cacheprovider "$@"
rc=$?
say "tests took $((SECONDS - t0)) s (set-up $setup_s s)"
[ "$rc" -eq 5 ] && { say "pytest collected no tests: collection is broken" >&2; exit 1; }
exit "$rc"
