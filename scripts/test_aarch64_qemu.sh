#!/usr/bin/env bash
# The numeric core tests on aarch64 code, under qemu user-mode emulation (issue 28, item 5): Debian bookworm's arm64
# Python 3.11 (debootstrap --foreign, packages only extracted, nothing run as root inside) run by qemu-aarch64-static,
# with the aarch64 manylinux wheels of numpy, OpenCV, ONNX Runtime and the test tools. A leg of `make test`
# (`--leg`), and `make test-aarch64` alone. About 6 minutes on 2 cores from nothing (measured 2026-12-01: apt 20 s,
# debootstrap 36 s, pip 26 s, the tests below 4 min 25 s); the sysroot and wheels are kept in $ROOT, so a second run
# only runs the tests.
#
# ONNX Runtime is pinned to 1.20.1 here: 1.32's aarch64 wheel dies with SIGSEGV at import under qemu 7.2 (its CPU
# probe reads the x86 host's /sys cache topology), 1.20.1 imports and runs.
#
# Usage: scripts/test_aarch64_qemu.sh [--leg] [pytest args...]   (ROOT=/tmp/vrt-arm64, default test set below)
#   --leg  as a leg of `make test`: what cannot be set up here (no root for apt-get, no Debian mirror, no aarch64
#          wheels) skips the leg with one line saying why and the log to read, exit 0; failing tests still fail.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
root="${ROOT:-/tmp/vrt-arm64}"
say() { echo "aarch64: $*"; }
leg=0
[ "${1:-}" = --leg ] && { leg=1; shift; }
# cannot LOG WHY: as a leg, skip with the reason; alone, fail
cannot() {
  if [ "$leg" = 1 ]; then say "leg skipped: $2 (log: $1; run make test-aarch64 to retry)"; exit 0; fi
  say "error: $2 (log: $1)" >&2; exit 1
}
TESTS=(test/test_nms.py test/test_preprocess.py test/test_postprocess.py test/test_cpu_pipeline.py)
mkdir -p "$(dirname "$root")"

if ! command -v qemu-aarch64-static >/dev/null || ! command -v debootstrap >/dev/null; then
  [ "$(id -u)" = 0 ] || cannot - "qemu-user-static and debootstrap are not installed, and apt-get needs root"
  say "installing qemu-user-static and debootstrap (apt-get)"
  { apt-get install -y qemu-user-static debootstrap || { apt-get update && apt-get install -y qemu-user-static debootstrap; }; } \
    >"$root.apt.log" 2>&1 || cannot "$root.apt.log" "apt-get could not install qemu-user-static and debootstrap"
fi
if [ ! -x "$root/sysroot/usr/bin/python3.11" ]; then
  say "arm64 Debian bookworm with python3 into $root/sysroot (extracted only)"
  rm -rf "$root/sysroot"
  debootstrap --arch=arm64 --foreign --variant=minbase --include=python3,python3-venv,libgomp1 bookworm \
    "$root/sysroot" http://deb.debian.org/debian >"$root.debootstrap.log" 2>&1 \
    || cannot "$root.debootstrap.log" "debootstrap of arm64 Debian bookworm failed"
  for deb in "$root"/sysroot/var/cache/apt/archives/*.deb; do dpkg -x "$deb" "$root/sysroot"; done
  [ -x "$root/sysroot/usr/bin/python3.11" ] || cannot "$root.debootstrap.log" "no python3.11 in the arm64 sysroot"
fi
plat=(--platform manylinux_2_28_aarch64 --platform manylinux_2_27_aarch64 --platform manylinux_2_17_aarch64
      --platform manylinux2014_aarch64)
wheels_key="$(cat requirements/runtime.txt requirements/test.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$root/site.key" 2>/dev/null)" != "$wheels_key" ]; then
  say "aarch64 wheels into $root/site"
  rm -rf "$root/site"
  grep -v '^onnxruntime' requirements/runtime.txt | grep -v '^ros-' >"$root.runtime.txt"
  python3 -m pip install -q --target "$root/site" --only-binary=:all: "${plat[@]}" --python-version 3.11 \
    -r "$root.runtime.txt" -r requirements/test.txt onnxruntime==1.20.1 >"$root.pip.log" 2>&1 \
    || cannot "$root.pip.log" "pip could not get the aarch64 wheels"
  echo "$wheels_key" >"$root/site.key"
fi
export QEMU_LD_PREFIX="$root/sysroot"
[ "$#" -gt 0 ] || set -- "${TESTS[@]}" -q
say "$(PYTHONPATH="$root/site" qemu-aarch64-static "$root/sysroot/usr/bin/python3.11" -c \
  'import platform, numpy, cv2, onnxruntime; print(platform.machine(), "numpy", numpy.__version__, "opencv", cv2.__version__, "onnxruntime", onnxruntime.__version__)')"
PYTHONPATH="$root/site:$repo" qemu-aarch64-static "$root/sysroot/usr/bin/python3.11" -m pytest -m "not ros" \
  -p no:cacheprovider "$@"
