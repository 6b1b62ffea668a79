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

echo "build_vision_msgs: configuring $src -> $build (Python $pyver)"
cmake -S "$src" -B "$build" \
  -DCMAKE_INSTALL_PREFIX="$venv" \
  -DPython3_EXECUTABLE="$venv/bin/python3" \
  -DBUILD_TESTING=OFF \
  -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 \
  || { tail -40 "$build.configure.log" >&2; echo "build_vision_msgs: configure failed (full log $build.configure.log)" >&2; exit 1; }
echo "build_vision_msgs: building with $jobs jobs"
cmake --build "$build" -j"$jobs" >"$build.build.log" 2>&1 \
  || { tail -40 "$build.build.log" >&2; echo "build_vision_msgs: build failed (full log $build.build.log)" >&2; exit 1; }
cmake --install "$build" >"$build.install.log" 2>&1 \
  || { tail -40 "$build.install.log" >&2; echo "build_vision_msgs: install failed (full log $build.install.log)" >&2; exit 1; }

"$venv/bin/python" -c "import vision_msgs.msg as m; m.Detection2DArray(); print('build_vision_msgs: vision_msgs importable from', m.__file__)"
