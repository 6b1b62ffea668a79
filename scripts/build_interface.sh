#!/usr/bin/env bash
# Build a ROS 2 interface package (.msg/.srv) with rosidl from the PyPI ROS 2 wheels and install it into a venv
# prefix: interfaces/vision_msgs (scripts/build_vision_msgs.sh) and, for the launch tests,
# ../shared/ros2_launch/composition_interfaces (scripts/launch_stack.sh).
#
# Usage: scripts/build_interface.sh VENV_DIR PACKAGE_SOURCE_DIR [IMPORT_CHECK]
#   IMPORT_CHECK: Python statement run afterwards (default: import the package's msg or srv module).
# Needs the packages of requirements/build-interfaces.txt in VENV_DIR (scripts/venv.sh installs them), cmake
# and a C/C++ compiler. The source folder is only read (it may be read-only); cmake/rosidl_py_include_fix.cmake
# is injected so that the wheels' exported targets work with this interpreter. Installing into the venv prefix means nothing is needed at run time (no
# LD_LIBRARY_PATH, no sourcing). Recipe and pitfalls: ../shared/ENVIRONMENT.md.
set -euo pipefail

venv="$(cd "${1:?usage: $0 VENV_DIR PACKAGE_SOURCE_DIR [IMPORT_CHECK]}" && pwd)"
src="$(cd "${2:?usage: $0 VENV_DIR PACKAGE_SOURCE_DIR [IMPORT_CHECK]}" && pwd)"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="$(basename "$src")"
check="${3:-}"
pyver="$("$venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
# The ROS distribution whose rclpy wheels the venv holds (ros-jazzy-rclpy -> jazzy): the build folder is keyed by
# distro and Python, so the Jazzy and Kilted venvs (scripts/test_kilted.sh) never share one.
distro="$("$venv/bin/python" - <<'PY'
import importlib.metadata as md, re
names = (re.fullmatch(r"ros[-_.]([a-z]+)[-_.]rclpy", (d.metadata["Name"] or "").lower()) for d in md.distributions())
print(next((m.group(1) for m in names if m), "ros"))
PY
)"
build="$repo/build/$name-$distro-py$pyver"
mkdir -p "$build"
me=build_interface

for tool in cmake cc c++; do
  command -v "$tool" >/dev/null \
    || { echo "$me: '$tool' not found; install cmake and a C/C++ compiler (apt-get install cmake g++)" >&2; exit 1; }
done

# Configure needs AMENT_PREFIX_PATH (ament_index lookups of the wheels' packages) and CMAKE_PREFIX_PATH.
export AMENT_PREFIX_PATH="$venv" CMAKE_PREFIX_PATH="$venv" PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
jobs="$(nproc 2>/dev/null || echo 2)"

# shellcheck source=scripts/progress.sh
. "$repo/scripts/progress.sh"
echo "$me: $src -> $build ($distro, Python $pyver, $jobs jobs)"
run_logged "configure $name" "about 20 s" "$build.configure.log" \
  cmake -S "$src" -B "$build" \
    -DCMAKE_INSTALL_PREFIX="$venv" \
    -DPython3_EXECUTABLE="$venv/bin/python3" \
    -DBUILD_TESTING=OFF \
    -DCMAKE_PROJECT_INCLUDE="$repo/cmake/rosidl_py_include_fix.cmake" \
    -DCMAKE_BUILD_TYPE=Release || exit 1
run_logged "build $name" "about 2-5 minutes on 2 cores (C/C++ type support for every message)" "$build.build.log" \
  cmake --build "$build" -j"$jobs" || exit 1
run_logged "install $name" "a few seconds" "$build.install.log" cmake --install "$build" || exit 1

if [ -z "$check" ]; then
  kind=msg; [ -d "$src/msg" ] || kind=srv
  check="import $name.$kind"
fi
(cd / && "$venv/bin/python" -c "$check; import $name; print('$me: $name importable from', $name.__path__[0])")
