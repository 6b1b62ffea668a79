#!/usr/bin/env bash
# Pack what the GPU machine lacks to run the ROS node tests there (it has Python 3.12, numpy, OpenCV, onnx,
# onnxruntime, torch, cuda-python, PyYAML, pytest; no rclpy, no registry): rclpy and the ros-jazzy message
# packages (Python modules + their shared libraries), vision_msgs built for Python 3.12, rosbags and its
# dependencies, onnx2torch; plus the shared data the GPU tests read (YOLOX-nano, labels, the two vtest bags, the
# photos, and the YOLOv8-seg export with its photos: about 30 MiB, the masks' truth images left out).
#
# Usage: scripts/build_ros312_bundle.sh [VENV312] [OUT_DIR] [SHARED_DIR] [ONNX2TORCH_WHEEL]
#   VENV312     a Python 3.12 venv made by scripts/venv.sh  (default /tmp/venv312;
#               create it with `PYTHON=~/.pyenv/versions/3.12.1/bin/python3 make venv VENV=/tmp/venv312`)
#   OUT_DIR     git-ignored folder to write (default .ros312; add `/.ros312/` to .git/info/exclude)
#   SHARED_DIR  the shared data folder (default ../shared)
#   ONNX2TORCH_WHEEL  default: .gpu_data/whl/onnx2torch-*.whl
# Writes OUT_DIR/ros312.tar.gz (site/ = Python packages, lib/ = shared libraries; identical files stored once as
# hard links) and OUT_DIR/shared/ laid out like ../shared (models/, data/bags/). scripts/gpu_node_check.sh
# unpacks and uses it on the GPU machine. Carry OUT_DIR (the whole is well under the 64 MiB a device run takes).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="${1:-/tmp/venv312}"
out="${2:-.ros312}"
shared="${3:-../shared}"
o2t="${4:-$(ls .gpu_data/whl/onnx2torch-*.whl 2>/dev/null | head -1 || true)}"
site_src="$venv/lib/python3.12/site-packages"
[ -d "$site_src" ] || { echo "bundle: $site_src not found (need a Python 3.12 venv from scripts/venv.sh)" >&2; exit 1; }
[ -n "$o2t" ] && [ -f "$o2t" ] || { echo "bundle: onnx2torch wheel not found (pass it as 4th argument)" >&2; exit 1; }

stage="$(mktemp -d)"; trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/site" "$stage/lib"
# Packages the GPU machine already has (its package list in the device notes: scipy and matplotlib too), build-time-only
# tools, this repo.
deny='^(numpy|numpy\.libs|scipy|scipy\.libs|matplotlib|mpl_toolkits|pylab\.py|PIL|pillow\.libs|fontTools|kiwisolver|contourpy|cycler|docutils|cv2|opencv_python_headless.*|onnx|onnxruntime|ml_dtypes|google|protobuf.*|flatbuffers|yaml|_yaml|PyYAML.*|pip|setuptools|pkg_resources|_distutils_hack|distutils-precedence\.pth|_pytest|pytest|py\.py|pluggy|iniconfig|packaging|pygments|hypothesis|_hypothesis.*|sortedcontainers|attrs?|typing_extensions\.py|pyparsing|dateutil|six\.py|coloredlogs|humanfriendly|sympy|mpmath|catkin_pkg|docutils|ament_cmake.*|__editable__.*|ros_wheels_bootstrapper.*|vrt_ros.*|__pycache__|.*\.dist-info|.*\.egg-info)$'
for entry in "$site_src"/*; do
  name="$(basename "$entry")"
  [[ "$name" =~ $deny ]] && continue
  cp -a "$entry" "$stage/site/"
done
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$o2t" "$stage/site"
rm -rf "$stage"/site/*.dist-info
find "$stage/site" -name __pycache__ -type d -prune -exec rm -rf {} +
cp -a "$venv"/lib/*.so* "$stage/lib/"
# Identical files (the wheels ship each library several times) become hard links: tar stores them once.
python3 - "$stage" <<'PY'
import hashlib, os, sys
seen, saved = {}, 0
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        if os.path.islink(p) or os.path.getsize(p) < 65536:
            continue
        h = hashlib.sha256(open(p, "rb").read()).hexdigest()
        if h in seen:
            saved += os.path.getsize(p)
            os.unlink(p)
            os.link(seen[h], p)
        else:
            seen[h] = p
print(f"bundle: {saved / 2**20:.1f} MiB of duplicate files stored once")
PY
mkdir -p "$out"
tar -C "$stage" -czf "$out/ros312.tar.gz" site lib
rm -rf "$out/shared"
mkdir -p "$out/shared/models/seg" "$out/shared/data/bags"
cp "$shared/models/yolox_nano.onnx" "$shared/models/coco80.names" "$out/shared/models/"
cp -r "$shared/models/seg/idcard_yolov8seg.onnx" "$shared/models/seg/photos" "$out/shared/models/seg/"
cp -r "$shared/data/bags/vtest_compressed_mcap" "$shared/data/bags/vtest_raw_sqlite3" "$out/shared/data/bags/"
cp -r "$shared/data/images" "$out/shared/data/"
du -sh "$out/ros312.tar.gz" "$out/shared" "$out"
