#!/usr/bin/env bash
# Install the optional test dependencies of requirements/test-tensorrt-rtx.txt (TensorRT for RTX, so the real
# TensorRT builder runs in CI) into the venv. Called by `make test` after scripts/venv.sh.
#
# Usage: scripts/test_extras.sh [VENV_DIR]   (default .venv)
# Idempotent like scripts/venv.sh: a stamp in VENV_DIR/.vrt-stamps holds the sha256 of the requirements file and
# the Python version, and the step is skipped while it is unchanged. Never fails the test run: when pip cannot
# install the wheels (no registry, no wheel for this Python/platform), its last lines go to
# VENV_DIR/.vrt-stamps/tensorrt_rtx.failed and the tests that need TensorRT for RTX skip with that reason.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="$(cd "${1:-.venv}" && pwd)"
stamps="$venv/.vrt-stamps"
req=requirements/test-tensorrt-rtx.txt
failed="$stamps/tensorrt_rtx.failed"
mkdir -p "$stamps"

pyver="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
key="$({ echo "$req"; cat "$req"; echo "py$pyver"; } | sha256sum | cut -d' ' -f1)"
if [ -f "$stamps/tensorrt_rtx" ] && [ "$(cat "$stamps/tensorrt_rtx")" = "$key" ]; then
  echo "test extras: TensorRT for RTX up to date"
  exit 0
fi
echo "test extras: installing $req (TensorRT for RTX wheels, about 100 MB)"
start=$SECONDS
if out="$("$venv/bin/python" -m pip install -q -r "$req" 2>&1)"; then
  rm -f "$failed"
  echo "$key" >"$stamps/tensorrt_rtx"
  echo "test extras: installed in $((SECONDS - start)) s"
else
  { echo "pip install -r $req failed:"; echo "$out" | grep -v "is ignored: it is neither" | tail -n 5; } >"$failed"
  rm -f "$stamps/tensorrt_rtx"
  echo "test extras: WARNING: could not install $req; the tests needing TensorRT for RTX will skip ($failed)" >&2
fi
exit 0
