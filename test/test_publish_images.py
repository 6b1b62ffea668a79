"""publish_images (issue 37): a folder of images, one image or a video published as a camera, so a model can be tried
on one's own pictures without writing a publisher.

The sources are read with OpenCV from real photos (``shared_dir``); the end-to-end test runs the tool as a user does
(its own process, ``python -m vrt_ros.tools.publish_images``: its own DDS participant with the large-frame profile it
loads for itself) against a detector node on the real yolox_nano model, and checks one detection message per photo.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("sensor_msgs.msg", reason="sensor_msgs not installed")
cv2 = pytest.importorskip("cv2", reason="OpenCV not installed")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from vrt_ros.errors import ConfigError  # noqa: E402
from vrt_ros.ros import dds
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.tools import publish_images  # noqa: E402
from vrt_ros.tools.publish_images import ImageSource  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[1]


def _photos(shared_dir: Path) -> list[Path]:
    return sorted(p for p in (shared_dir / "data" / "images").iterdir() if p.suffix.lower() in (".jpg", ".png"))


def test_a_folder_is_read_in_name_order_skipping_what_opencv_cannot_read(shared_dir, tmp_path):
    photos = _photos(shared_dir)[:3]
    for i, photo in enumerate(photos):
        shutil.copy(photo, tmp_path / f"{i:02d}_{photo.name}")
    (tmp_path / "05_broken.jpg").write_bytes(b"not a jpeg")
    (tmp_path / "notes.txt").write_text("not an image")
    warned: list[str] = []
    frames = list(ImageSource(tmp_path).frames(warned.append))
    assert [name for name, _ in frames] == [f"{i:02d}_{p.name}" for i, p in enumerate(photos)]
    for (_, bgr), photo in zip(frames, photos):
        assert np.array_equal(bgr, cv2.imread(str(photo)))  # source pixels, BGR
    assert len(warned) == 1 and "05_broken.jpg" in warned[0] and "skipped" in warned[0]


def test_a_video_file_gives_its_frames(shared_dir, tmp_path):
    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5.0, (320, 240))
    assert writer.isOpened(), "OpenCV cannot write MJPG here"
    photos = _photos(shared_dir)[:4]
    for photo in photos:
        writer.write(cv2.resize(cv2.imread(str(photo)), (320, 240)))
    writer.release()
    source = ImageSource(video)
    frames = list(source.frames())
    assert source.kind == "video" and [n for n, _ in frames] == [f"clip.avi#{i}" for i in range(len(photos))]
    assert all(bgr.shape == (240, 320, 3) and bgr.dtype == np.uint8 for _, bgr in frames)


def test_sources_that_hold_no_picture_are_refused_naming_them(tmp_path, capsys):
    with pytest.raises(ConfigError, match="does not exist"):
        ImageSource(tmp_path / "missing")
    with pytest.raises(ConfigError, match="no image files in this folder"):
        ImageSource(tmp_path)
    (tmp_path / "x.mp4").write_bytes(b"no video")
    with pytest.raises(ConfigError, match="OpenCV reads no frame of this file"):
        ImageSource(tmp_path / "x.mp4")
    assert publish_images.main(["publish_images", str(tmp_path / "missing"), "--no-wait"]) == 2
    assert f"publish_images: {tmp_path / 'missing'} does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "compressed"])
def test_a_folder_of_photos_gets_detections_for_each_from_a_running_node(shared_dir, compressed):
    photos = _photos(shared_dir)
    ns = unique_namespace()
    got: list[Detection2DArray] = []
    lock = threading.Lock()
    params = {"backend": "cpu", "model.path": str(shared_dir / "models" / "yolox_nano.onnx"),
              "model.labels": str(shared_dir / "models" / "coco80.names"), "input.compressed": compressed}
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for var in (*dds.PROFILE_VARS, *dds.TRANSPORT_VARS):  # a user's shell: the tool must load the profile itself
        env.pop(var, None)
    cmd = [sys.executable, "-m", "vrt_ros.tools.publish_images", str(shared_dir / "data" / "images"),
           "--topic", f"{ns}/camera/image_raw", "--rate", "2", "--frame-id", "my_camera_optical_frame",
           "--wait-timeout", "60"] + (["--compressed"] if compressed else [])
    with private_context() as ctx:
        node = DetectorNode("images_det", context=ctx, namespace=ns,
                            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        sink = Node("dets_sink", context=ctx, namespace=ns)

        def on_dets(msg: Detection2DArray) -> None:
            with lock:
                got.append(msg)

        sink.create_subscription(Detection2DArray, f"{ns}/camera/detections", on_dets, make_qos("reliable", 50))
        with spinning(ctx, node, sink):
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and node.counters()["camera"].processed < len(photos):
                time.sleep(0.05)
            time.sleep(0.5)  # the last detections on their way to the sink
        counters = node.counters()["camera"]
        sink.destroy_node()
        node.destroy_node()
    assert proc.returncode == 0, proc.stderr
    topic = f"{ns}/camera/image_raw" + ("/compressed" if compressed else "")
    assert f"published {len(photos)} frames from {shared_dir / 'data' / 'images'} on {topic}" in proc.stdout
    assert f"Fast DDS profile {dds.PROFILE} (shared-memory segment" in proc.stderr, proc.stderr  # loaded for itself
    assert counters.received == len(photos) and counters.processed == len(photos), (counters, proc.stderr)
    stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in got]
    assert len(got) == len(photos) and len(set(stamps)) == len(photos) and stamps == sorted(stamps)
    assert all(m.header.frame_id == "my_camera_optical_frame" for m in got)
    assert all(len(m.detections) >= 1 for m in got), [len(m.detections) for m in got]
