#!/usr/bin/env bash
# The numeric core tests on aarch64 code, under qemu user-mode emulation (issue 28, item 5): Debian bookworm's arm64
# Python 3.11 (debootstrap --foreign, packages only extracted, nothing run as root inside) run by qemu-aarch64-static,
# with the aarch64 manylinux wheels of numpy, OpenCV, ONNX Runtime and the test tools. Not part of `make test`
# (`make test-aarch64`): it needs root for apt-get, and takes about 6 minutes on 2 cores (measured 2026-12-01:
# apt 20 s, debootstrap 36 s, pip 26 s, the tests below 4 min 25 s).
#
# ONNX Runtime is pinned to 1.20.1 here: 1.32's aarch64 wheel dies with SIGSEGV at import under qemu 7.2 (its CPU
# probe reads the x86 host's /sys cache topology), 1.20.1 imports and runs.
#
# Usage: sudo scripts/test_aarch64_qemu.sh [pytest args...]   (ROOT=/tmp/vrt-arm64, default test set below)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
root="${ROOT:-/tmp/vrt-arm64}"
say() { echo "aarch64: $*"; }
TESTS=(test/test_nms.py test/test_preprocess.py test/test_postprocess.py test/test_cpu_pipeline.py)

command -v qemu-aarch64-static >/dev/null && command -v debootstrap >/dev/null \
  || { say "installing qemu-user-static and debootstrap (apt-get)"; apt-get install -y qemu-user-static debootstrap >/dev/null; }
if [ ! -x "$root/sysroot/usr/bin/python3.11" ]; then
  say "arm64 Debian bookworm with python3 into $root/sysroot (extracted only)"
  debootstrap --arch=arm64 --foreign --variant=minbase --include=python3,python3-venv,libgomp1 bookworm \
    "$root/sysroot" http://deb.debian.org/debian >"$root.debootstrap.log" 2>&1
  for deb in "$root"/sysroot/var/cache/apt/archives/*.deb; do dpkg -x "$deb" "$root/sysroot"; done
fi
plat=(--platform manylinux_2_28_aarch64 --platform manylinux_2_27_aarch64 --platform manylinux_2_17_aarch64
      --platform manylinux2014_aarch64)
if [ ! -d "$root/site/numpy" ]; then
  say "aarch64 wheels into $root/site"
  grep -v '^onnxruntime' requirements/runtime.txt | grep -v '^ros-' >"$root.runtime.txt"
  python3 -m pip install -q --target "$root/site" --only-binary=:all: "${plat[@]}" --python-version 3.11 \
    -r "$root.runtime.txt" -r requirements/test.txt onnxruntime==1.20.1
fi
export QEMU_LD_PREFIX="$root/sysroot"
[ "$#" -gt 0 ] || set -- "${TESTS[@]}" -q
say "$(PYTHONPATH="$root/site" qemu-aarch64-static "$root/sysroot/usr/bin/python3.11" -c \
  'import platform, numpy, cv2, onnxruntime; print(platform.machine(), "numpy", numpy.__version__, "opencv", cv2.__version__, "onnxruntime", onnxruntime.__version__)')"
PYTHONPATH="$root/site:$repo" qemu-aarch64-static "$root/sysroot/usr/bin/python3.11" -m pytest -m "not ros" \
  -p no:cacheprovider "$@"
