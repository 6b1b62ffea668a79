#!/usr/bin/env bash
# Install the optional test dependencies into the venv. Called by `make test` after scripts/venv.sh.
#   tensorrt_rtx      requirements/test-tensorrt-rtx.txt: TensorRT for RTX (pip install), so that the real TensorRT
#                     builder runs in CI (test/test_tensorrt_rtx.py)
#   tensorrt_lean     requirements/test-tensorrt-lean.txt: the TensorRT 11 lean runtime (pip install --target
#                     VENV/.vrt-extras/tensorrt-lean, off sys.path: test/test_tensorrt_surfaces.py imports it in a
#                     subprocess)
#   tensorrt_wheels   requirements/test-tensorrt-bindings.txt: compiled bindings and type stubs, downloaded (never
#                     installed) into VENV/.vrt-extras/tensorrt-wheels for test/test_tensorrt_surfaces.py
#   docs              requirements/test-docs.txt: mkdocs and mkdocs-material for the docs leg (scripts/docs_build.sh),
#                     which fails, naming this step, when they are missing
#
# Usage: scripts/test_extras.sh [VENV_DIR]   (default .venv)
# Idempotent like scripts/venv.sh: a stamp in VENV_DIR/.vrt-stamps per extra holds the sha256 of its requirements
# file and the Python version, and the step is skipped while it is unchanged. Never fails the test run: when pip
# cannot get the wheels (no registry, no wheel for this Python/platform), its last lines go to
# VENV_DIR/.vrt-stamps/<extra>.failed and the tests that need it skip with that reason.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="$(cd "${1:-.venv}" && pwd)"
stamps="$venv/.vrt-stamps"
extras="$venv/.vrt-extras"
mkdir -p "$stamps" "$extras"
pyver="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
pip() { "$venv/bin/python" -m pip "$@"; }

# download_each REQ DIR: `pip download --no-deps` of every requirement line of REQ into DIR
download_each() {
  local line
  rm -rf "$2" && mkdir -p "$2" || return 1
  grep -vE '^\s*(#|$)' "$1" | while read -r line; do
    pip download -q --no-deps --only-binary=:all: -d "$2" "$line" || exit 1
  done
}

# extra NAME REQ WHAT CMD...: run CMD (a pip step for REQ) unless its stamp is current
extra() {
  local name="$1" req="$2" what="$3" failed="$stamps/$1.failed" key out start=$SECONDS
  shift 3
  key="$({ echo "$req"; cat "$req"; echo "py$pyver"; } | sha256sum | cut -d' ' -f1)"
  if [ -f "$stamps/$name" ] && [ "$(cat "$stamps/$name")" = "$key" ]; then
    echo "test extras: $what up to date"
    return 0
  fi
  echo "test extras: $req ($what)"
  if out="$("$@" 2>&1)"; then
    rm -f "$failed"
    echo "$key" >"$stamps/$name"
    echo "test extras: $what ready in $((SECONDS - start)) s"
  else
    { echo "pip for $req failed:"; echo "$out" | grep -v "is ignored: it is neither" | tail -n 5; } >"$failed"
    rm -f "$stamps/$name"
    echo "test extras: WARNING: could not get $req; the tests needing it will skip ($failed)" >&2
  fi
}

extra tensorrt_rtx requirements/test-tensorrt-rtx.txt "TensorRT for RTX, about 100 MB" \
  pip install -q -r requirements/test-tensorrt-rtx.txt
extra tensorrt_lean requirements/test-tensorrt-lean.txt "TensorRT 11 lean runtime, 44 MB" \
  bash -c 'rm -rf "$1" && "$2" -m pip install -q --no-deps --target "$1" -r "$3"' _ \
  "$extras/tensorrt-lean" "$venv/bin/python" requirements/test-tensorrt-lean.txt
extra tensorrt_wheels requirements/test-tensorrt-bindings.txt "TensorRT bindings and stubs to read, about 4 MB" \
  download_each requirements/test-tensorrt-bindings.txt "$extras/tensorrt-wheels"
extra docs requirements/test-docs.txt "mkdocs and mkdocs-material for the docs site, about 15 MB" \
  pip install -q -r requirements/test-docs.txt
exit 0
