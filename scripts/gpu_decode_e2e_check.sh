#!/usr/bin/env bash
# Run on the GPU machine (repo root), issue 14: the GPU JPEG decode tests, the node on the compressed street bag
# (GPU decode vs the CPU path), then the end-to-end bench at 1920x1080 with compressed rows and the transport floor
# (the zero-work relay), and the floor again without the Fast DDS profile (the "naive relay" question).
# Needs, beside the repo (all git-ignored, carried): .ros312/ (scripts/build_ros312_bundle.sh: rclpy, vision_msgs,
# rosbags, onnx2torch, the model and bags), .e2e_data/images (the shared photos), and .whl/nvsite.tar.gz (an
# unpacked nvidia-nvimgcodec-cu13 0.9.0.20 + nvidia-nvjpeg 13.2.3.58 install for Python 3.12, trimmed to the JPEG
# decoder: `pip install --no-deps --target DIR` of both wheels, then `tar czf nvsite.tar.gz -C DIR nvidia`).
#
# Usage (device): scripts/gpu_decode_e2e_check.sh OUT_DIR         env: FRAMES (default 300)
set -u -o pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu_decode_e2e_check.sh OUT_DIR}"
frames="${FRAMES:-300}"
mkdir -p "$out"
. scripts/ros312_env.sh 64 nvsite
python3 -c "from nvidia import nvimgcodec; print('nvImageCodec', nvimgcodec.__version__)" 2>&1 | grep -v "nvjpeg2k\|nvtiff\|Note:"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rc=0
timeout 130 python3 -m pytest -p no:cacheprovider -m gpu test/test_gpu_jpeg.py test/test_gpu_pipeline.py \
  "test/test_gpu_node.py::test_gpu_node_replays_bag_with_cpu_detections[vtest_compressed_mcap]" -v -s -rs \
  2>&1 | grep -v "UserWarning\|nvjpeg2k\|nvtiff\|Note: If\|warnings.warn\|x\[seq\]" > "$out/pytest.log" || rc=1
tail -15 "$out/pytest.log"
img_args=()
[ -d .e2e_data/images ] && img_args=(--images .e2e_data/images)
timeout 180 python3 -m vrt_ros.bench.transport.ros_e2e --shared "$VRT_SHARED_DIR" "${img_args[@]}" --backend cuda,floor,cpu \
  --compressed --sizes 1920x1080 --rate 30 --frames "$frames" --warmup 30 --domain-id "$domain" --start-timeout 60 \
  --out "$out" --name ros_e2e_1080p 2>&1 | grep -v "UserWarning\|x\[seq\]\|warnings.warn" || rc=1
# (only the JSON of the next two comes back: the device returns at most 8 files)
timeout 40 python3 -m vrt_ros.bench.transport.ros_e2e --shared "$VRT_SHARED_DIR" "${img_args[@]}" --backend floor \
  --sizes 1920x1080 --rate 30 --frames 150 --warmup 10 --domain-id "$domain" --dds-profile none \
  --out /tmp/e2e_more --name ros_e2e_floor_no_dds_profile 2>&1 | tail -3 || rc=1
cp /tmp/e2e_more/ros_e2e_floor_no_dds_profile.json "$out/" 2>/dev/null
timeout 60 python3 -m vrt_ros.bench.transport.ros_e2e --shared "$VRT_SHARED_DIR" "${img_args[@]}" --backend cuda \
  --sizes 640x480,1280x720 --rate 30 --frames 100 --warmup 30 --domain-id "$domain" --start-timeout 60 \
  --out /tmp/e2e_more --name ros_e2e_small 2>&1 | grep -v "UserWarning\|x\[seq\]\|warnings.warn" | tail -4 || rc=1
cp /tmp/e2e_more/ros_e2e_small.json "$out/" 2>/dev/null
exit $rc
