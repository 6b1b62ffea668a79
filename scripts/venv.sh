#!/usr/bin/env bash
# Create or update the project venv: pinned runtime + test dependencies (requirements/*.txt), the vision_msgs
# interface package when it is not importable, and vrt_ros itself in editable mode (console scripts).
#
# Usage: scripts/venv.sh [VENV_DIR]     (default .venv; interpreter: $PYTHON, default python3, must be >= 3.10)
# Idempotent: each step keeps a stamp in VENV_DIR/.vrt-stamps holding the sha256 of the files it depends on,
# and is skipped while that hash is unchanged, so a second run installs nothing and takes about a second.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="${1:-.venv}"
python="${PYTHON:-python3}"
stamps="$venv/.vrt-stamps"
logs="$repo/build/setup"
# shellcheck source=scripts/progress.sh
. "$repo/scripts/progress.sh"

say() { echo "venv: $*"; }
die() { echo "venv: error: $*" >&2; exit 1; }

# sha256 over the named files/directories (sorted paths and contents) plus extra strings.
fingerprint() {
  {
    for item in "$@"; do
      if [ -d "$item" ]; then
        find "$item" -type f -not -name '*.pyc' | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done
      elif [ -f "$item" ]; then
        echo "$item"; cat "$item"
      else
        echo "$item"
      fi
    done
  } | sha256sum | cut -d' ' -f1
}
stamp_ok() { [ -f "$stamps/$1" ] && [ "$(cat "$stamps/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$stamps"; echo "$2" >"$stamps/$1"; }

# pip: quiet, and without the "Location ... is ignored" noise of the local index mirrors.
pip_install() { "$venv/bin/python" -m pip install -q "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; return "${PIPESTATUS[0]}"; }

# 0. Prerequisites, all checked before anything is downloaded (README, "Quick start").
if [ ! -x "$venv/bin/python" ] || [ ! -f "$stamps/vision_msgs" ]; then
  check_python="$python" need_build=1
  [ -x "$venv/bin/python" ] && check_python="$venv/bin/python"
  (cd / && "$check_python" -c 'import vision_msgs.msg' 2>/dev/null) && need_build=0
  check_prerequisites "$check_python" "$(dirname "$venv")" "$need_build"
  [ -x "$venv/bin/python" ] \
    || say "first set-up: about 4-7 minutes on 2 cores (pip 1-2 min, the vision_msgs build 3-5 min), ~600 MiB of disk"
fi

# 1. The interpreter and the venv.
if [ ! -x "$venv/bin/python" ]; then
  say "[1/4] creating $venv with $("$python" -V 2>&1)"
  "$python" -m venv "$venv"
fi
venv="$(cd "$venv" && pwd)"
pyver="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

# 2. Pinned third-party dependencies.
key="$(fingerprint requirements/runtime.txt requirements/test.txt requirements/test-nodeps.txt requirements/tools.txt "py$pyver")"
if stamp_ok deps "$key"; then
  say "dependencies up to date"
else
  say "[2/4] installing pinned dependencies (requirements/tools.txt, runtime.txt, test.txt, test-nodeps.txt)"
  run_logged pip "about 1-2 minutes from a fresh venv" "$logs/pip.log" \
    bash -c '"$1" -m pip install -r requirements/tools.txt && "$1" -m pip install -r requirements/runtime.txt -r requirements/test.txt && "$1" -m pip install --no-deps -r requirements/test-nodeps.txt' \
    _ "$venv/bin/python" || die "pip failed; see $logs/pip.log"
  stamp_set deps "$key"
fi

# 3. vision_msgs: built from interfaces/vision_msgs into the venv prefix unless importable from elsewhere.
key="$(fingerprint interfaces/vision_msgs requirements/build-interfaces.txt scripts/build_vision_msgs.sh scripts/build_interface.sh cmake/rosidl_py_include_fix.cmake "py$pyver")"
if stamp_ok vision_msgs "$key"; then
  say "vision_msgs up to date"
else
  where="$(cd / && "$venv/bin/python" -c 'import vision_msgs.msg as m; print(m.__file__)' 2>/dev/null || true)"
  if [ -n "$where" ] && [ "${where#"$venv"/}" = "$where" ]; then
    say "vision_msgs importable from $where (not built here)"
  else
    [ -n "$where" ] && say "[3/4] interfaces/vision_msgs changed: rebuilding" || say "[3/4] vision_msgs not importable: building interfaces/vision_msgs"
    run_logged "pip (build tools)" "about 20 s" "$logs/pip-build-interfaces.log" \
      "$venv/bin/python" -m pip install -r requirements/build-interfaces.txt || die "pip failed; see $logs/pip-build-interfaces.log"
    scripts/build_vision_msgs.sh "$venv"
  fi
  stamp_set vision_msgs "$key"
fi

# 4. vrt_ros itself, editable, so its console scripts exist in $venv/bin.
key="$(fingerprint setup.py setup.cfg package.xml "py$pyver")"
if stamp_ok package "$key" && [ -x "$venv/bin/detector_node" ]; then
  say "vrt_ros (editable) up to date"
else
  say "[4/4] installing vrt_ros in editable mode"
  # PYTHONWARNINGS: silence setuptools' generic "editable installation" notice printed by the build backend.
  PYTHONWARNINGS=ignore pip_install --no-deps --no-build-isolation -e .
  stamp_set package "$key"
fi
say "ready: $venv (Python $pyver)"
