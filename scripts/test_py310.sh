#!/usr/bin/env bash
# The Python 3.10 leg of `make test`: every test that does not need rclpy, under the stack of Ubuntu 22.04 / ROS 2
# Humble / JetPack 6 as PyPI can stand in for it (requirements/humble-test.txt: numpy 1.21.6, opencv-python-headless
# 4.5.5, onnxruntime 1.20.1), in a second small venv (default .venv-py310). No Humble rclpy wheels exist, so the
# ROS edge is covered by the main leg only; tests marked `ros` are deselected and the rest skip without rclpy.
#
# Usage: scripts/test_py310.sh [pytest args...]   (VENV310=dir, PYTHON310=interpreter; default: pyenv's 3.10)
# Idempotent: the venv's dependencies carry a stamp (sha256 of requirements/humble-test.txt), as scripts/venv.sh.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="${VENV310:-.venv-py310}"
say() { echo "py310: $*"; }

find_python310() {
  local c
  for c in "${PYTHON310:-}" "$(command -v python3.10 2>/dev/null)" \
           "$(pyenv root 2>/dev/null)"/versions/3.10*/bin/python3.10 "$HOME"/.pyenv/versions/3.10*/bin/python3.10; do
    if [ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  return 1
}

if [ ! -x "$venv/bin/python" ]; then
  if ! py="$(find_python310)"; then
    say "no Python 3.10 interpreter found (set PYTHON310=/path/to/python3.10, or 'pyenv install 3.10'): leg NOT run" >&2
    exit 1
  fi
  say "creating $venv with $("$py" -V 2>&1)"
  "$py" -m venv "$venv" || exit 1
fi
key="$({ cat requirements/tools.txt requirements/humble-test.txt requirements/test-nodeps.txt; "$venv/bin/python" -V; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$venv/.vrt-stamp" 2>/dev/null)" != "$key" ]; then
  say "installing requirements/tools.txt, humble-test.txt, test-nodeps.txt (--no-deps)"
  # tools.txt first: Python 3.10's bundled pip 23.0 cannot resolve for another platform (test_humble_install.py)
  for req in "-r requirements/tools.txt" "-r requirements/humble-test.txt" "--no-deps -r requirements/test-nodeps.txt"; do
    # shellcheck disable=SC2086  # each item is pip's options and file, split on purpose
    "$venv/bin/python" -m pip install -q $req 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
    [ "${PIPESTATUS[0]}" -eq 0 ] || { say "pip install $req failed" >&2; exit 1; }
  done
  echo "$key" >"$venv/.vrt-stamp"
else
  say "dependencies up to date"
fi

export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-57}"
export VRT_TEST_DOMAIN_ID="${VRT_TEST_DOMAIN_ID:-$ROS_DOMAIN_ID}"
say "$("$venv/bin/python" -c 'import sys, numpy, cv2, onnxruntime; print("Python %d.%d.%d" % sys.version_info[:3], "numpy", numpy.__version__, "opencv", cv2.__version__, "onnxruntime", onnxruntime.__version__)')"
# vrt_ros from the working tree (not installed in this venv); no pytest cache shared with the main leg.
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$venv/bin/python" -m pytest -m "not ros" -p no:cacheprovider "$@"
rc=$?
[ "$rc" -eq 5 ] && { say "pytest collected no tests: collection is broken" >&2; exit 1; }
exit "$rc"
