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

# 1. The interpreter and the venv.
if [ ! -x "$venv/bin/python" ]; then
  command -v "$python" >/dev/null || die "interpreter '$python' not found (set PYTHON=python3.11 or similar)"
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$python is $("$python" -V 2>&1); Python >= 3.10 is needed (set PYTHON=...)"
  say "creating $venv with $("$python" -V 2>&1)"
  "$python" -m venv "$venv"
fi
venv="$(cd "$venv" && pwd)"
pyver="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

# 2. Pinned third-party dependencies.
key="$(fingerprint requirements/runtime.txt requirements/test.txt requirements/tools.txt "py$pyver")"
if stamp_ok deps "$key"; then
  say "dependencies up to date"
else
  say "installing pinned dependencies (requirements/tools.txt, runtime.txt, test.txt)"
  pip_install -r requirements/tools.txt
  pip_install -r requirements/runtime.txt -r requirements/test.txt
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
    [ -n "$where" ] && say "interfaces/vision_msgs changed: rebuilding" || say "vision_msgs not importable: building interfaces/vision_msgs"
    pip_install -r requirements/build-interfaces.txt
    scripts/build_vision_msgs.sh "$venv"
  fi
  stamp_set vision_msgs "$key"
fi

# 4. vrt_ros itself, editable, so its console scripts exist in $venv/bin.
key="$(fingerprint setup.py setup.cfg package.xml "py$pyver")"
if stamp_ok package "$key" && [ -x "$venv/bin/detector_node" ]; then
  say "vrt_ros (editable) up to date"
else
  say "installing vrt_ros in editable mode"
  # PYTHONWARNINGS: silence setuptools' generic "editable installation" notice printed by the build backend.
  PYTHONWARNINGS=ignore pip_install --no-deps --no-build-isolation -e .
  stamp_set package "$key"
fi
say "ready: $venv (Python $pyver)"
