#!/usr/bin/env bash
# Build interfaces/vision_msgs with rosidl from the PyPI ROS 2 wheels and install it into a venv prefix.
#
# Usage: scripts/build_vision_msgs.sh VENV_DIR
# Needs the packages of requirements/build-interfaces.txt in VENV_DIR (scripts/venv.sh installs them), cmake
# and a C/C++ compiler. Installing into the venv prefix means nothing is needed at run time (no
# LD_LIBRARY_PATH, no sourcing). Recipe and pitfalls: ../shared/ENVIRONMENT.md.
set -euo pipefail

venv="$(cd "${1:?usage: $0 VENV_DIR}" && pwd)"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$repo/interfaces/vision_msgs"
pyver="$("$venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
build="$repo/build/vision_msgs-py$pyver"
mkdir -p "$build"

for tool in cmake cc c++; do
  command -v "$tool" >/dev/null \
    || { echo "build_vision_msgs: '$tool' not found; install cmake and a C/C++ compiler (apt-get install cmake g++)" >&2; exit 1; }
done

# Configure needs AMENT_PREFIX_PATH (ament_index lookups of the wheels' packages) and CMAKE_PREFIX_PATH.
export AMENT_PREFIX_PATH="$venv" CMAKE_PREFIX_PATH="$venv" PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
jobs="$(nproc 2>/dev/null || echo 2)"

# shellcheck source=scripts/progress.sh
. "$repo/scripts/progress.sh"
echo "build_vision_msgs: $src -> $build (Python $pyver, $jobs jobs)"
run_logged "configure" "about 20 s" "$build.configure.log" \
  cmake -S "$src" -B "$build" \
    -DCMAKE_INSTALL_PREFIX="$venv" \
    -DPython3_EXECUTABLE="$venv/bin/python3" \
    -DBUILD_TESTING=OFF \
    -DCMAKE_BUILD_TYPE=Release || exit 1
run_logged "build" "about 3-5 minutes on 2 cores (C/C++ type support for 16 messages)" "$build.build.log" \
  cmake --build "$build" -j"$jobs" || exit 1
run_logged "install" "a few seconds" "$build.install.log" cmake --install "$build" || exit 1

"$venv/bin/python" -c "import vision_msgs.msg as m; m.Detection2DArray(); print('build_vision_msgs: vision_msgs importable from', m.__file__)"
