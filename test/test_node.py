"""DetectorNode on real DDS with private contexts: message contract, bad frames, parameters, QoS, several nodes.

Models: a synthetic blob detector built in the test (its output box is where the test drew the object, so absolute
positions are checked without shared data), a constant yolov8-pose model (keypoints), and the real YOLOX-nano on the
real bags from ../shared (acceptance of issue 2; skipped without shared data).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402
from vision_msgs.msg import Detection2DArray, LabelInfo  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end, constant_yolov8, ramp_rectangle  # noqa: E402
from vrt_ros.errors import ConfigError, ModelError  # noqa: E402
from vrt_ros.inference.batch_serial import process_serially  # noqa: E402
from vrt_ros.ros import node as node_module  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import latched_qos, make_qos  # noqa: E402
from vrt_ros.tools.replay import BagPlayer  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[1]
BOX = (50.0, 60.0, 200.0, 180.0)  # x1, y1, x2, y2 in source pixels of the 320x240 test frames


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", 320, 320)


def overrides(**params) -> list[Parameter]:
    """``model__path=...`` → Parameter("model.path", ...)."""
    return [Parameter(k.replace("__", "."), value=v) for k, v in params.items()]


def blob_node(ctx, ns: str, model: Path, **params) -> DetectorNode:
    base = dict(backend="cpu", model__path=str(model), model__pad_value=0.0, input__qos="reliable", input__depth=10)
    base.update(params)
    return DetectorNode(context=ctx, namespace=ns, parameter_overrides=overrides(**base))


def image_msg(bgr: np.ndarray, sec: int, frame_id: str = "cam_optical", encoding: str = "bgr8") -> Image:
    msg = Image()
    msg.header.stamp.sec = sec
    msg.header.stamp.nanosec = 123
    msg.header.frame_id = frame_id
    msg.height, msg.width = bgr.shape[:2]
    msg.encoding = encoding
    msg.step = bgr.shape[1] * 3
    msg.data = bgr.tobytes()
    return msg


class Collector:
    """Keeps every message of one topic (reliable, deep queue)."""

    def __init__(self, node: Node, msg_type, topic: str, qos=None) -> None:
        self.msgs: list = []
        self._lock = threading.Lock()
        node.create_subscription(msg_type, topic, self._on, qos or make_qos("reliable", 100))

    def _on(self, msg) -> None:
        with self._lock:
            self.msgs.append(msg)

    def wait(self, n: int, timeout_s: float = 10.0) -> list:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.msgs) >= n:
                    break
            time.sleep(0.02)
        with self._lock:
            return list(self.msgs)


def wait_matched(pub, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pub.get_subscription_count() >= 1, "no subscriber matched"


def settled(node: DetectorNode, n: int, camera: str = "camera", timeout_s: float = 10.0) -> bool:
    """Wait until ``n`` frames were received and each was processed or dropped (so the next cannot supersede it)."""

    def done() -> bool:
        c = node.counters()[camera]
        return c.received >= n and c.processed + sum(c.dropped.values()) >= n

    return wait_until(done, timeout_s)


def wait_until(pred, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


# ------------------------------------------------------------------------------------------- message contract
def test_detections_follow_the_message_contract(blob_model):
    ns = unique_namespace()
    frames = [ramp_rectangle(320, 240, BOX), np.zeros((240, 320, 3), np.uint8), ramp_rectangle(320, 240, BOX)]
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, score_threshold=0.5)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        labels = Collector(client, LabelInfo, "camera/label_info", latched_qos())
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            sent = []
            for i, bgr in enumerate(frames):
                sent.append(image_msg(bgr, 1_000 + i, f"frame_{i}"))
                pub.publish(sent[-1])
                assert settled(node, i + 1)
            got = dets.wait(3)
            info = labels.wait(1)
            counters = node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    assert len(got) == 3
    for msg, src in zip(got, sent):
        assert msg.header == src.header  # stamp and frame_id unchanged
    assert [len(m.detections) for m in got] == [1, 0, 1]  # empty array for the black frame
    d = got[0].detections[0]
    assert d.id == "0" and d.header == sent[0].header
    assert d.results[0].hypothesis.class_id == "0"  # no labels file: the decimal class index
    assert 0.0 <= d.results[0].hypothesis.score <= 1.0
    x1, y1, x2, y2 = BOX
    assert d.bbox.center.position.x == pytest.approx((x1 + x2) / 2, abs=1.0)
    assert d.bbox.center.position.y == pytest.approx((y1 + y2) / 2, abs=1.0)
    assert d.bbox.size_x == pytest.approx(x2 - x1, abs=1.0)
    assert d.bbox.size_y == pytest.approx(y2 - y1, abs=1.0)
    assert len(info) >= 1 and info[0].threshold == pytest.approx(0.5)
    assert counters.received == 3 and counters.processed == 3 and not counters.dropped


def test_labels_name_classes(blob_model, tmp_path):
    labels = tmp_path / "labels.names"
    labels.write_text("blob\nother\n")
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, model__labels=str(labels), cameras=["front"])
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "front/detections")
        info = Collector(client, LabelInfo, "front/label_info", latched_qos())
        pub = client.create_publisher(Image, "front/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            pub.publish(image_msg(ramp_rectangle(320, 240, BOX), 5))
            got = dets.wait(1)
            label_msgs = info.wait(1)
        client.destroy_node()
        node.destroy_node()
    assert got[0].detections[0].results[0].hypothesis.class_id == "blob"
    assert [(c.class_id, c.class_name) for c in label_msgs[0].class_map] == [(0, "blob"), (1, "other")]


def test_keypoints_topic_for_pose_heads(tmp_path):
    """yolov8_pose (17 COCO keypoints): one Detection2D per keypoint, id = parent id, size 0, named keypoints."""
    n_anchors = 4
    out = np.zeros((1, 5 + 3 * 17, n_anchors), np.float32)
    out[0, :5, 0] = [320, 320, 100, 200, 0.9]  # one person, box in engine pixels (640x640 input)
    kx = 280 + 5 * np.arange(17)
    out[0, 5::3, 0] = kx
    out[0, 6::3, 0] = 250.0
    out[0, 7::3, 0] = np.linspace(0.1, 0.9, 17)
    model = constant_yolov8(tmp_path / "pose.onnx", 640, 640, out)
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(
            context=ctx, namespace=ns,
            parameter_overrides=overrides(backend="cpu", model__path=str(model), model__head="yolov8_pose",
                                          input__qos="reliable"),
        )
        client = Node("client", context=ctx, namespace=ns)
        kps = Collector(client, Detection2DArray, "camera/keypoints")
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            sent = image_msg(np.zeros((640, 640, 3), np.uint8), 7)
            pub.publish(sent)
            got = kps.wait(1)
            det = dets.wait(1)
        client.destroy_node()
        node.destroy_node()
    assert len(det[0].detections) == 1
    msg = got[0]
    assert msg.header == sent.header
    assert len(msg.detections) == 17
    names = [d.results[0].hypothesis.class_id for d in msg.detections]
    assert names[:3] == ["nose", "left_eye", "right_eye"]
    assert all(d.id == "0" and d.bbox.size_x == 0 and d.bbox.size_y == 0 for d in msg.detections)
    np.testing.assert_allclose([d.bbox.center.position.x for d in msg.detections], kx, atol=1e-3)
    np.testing.assert_allclose([d.results[0].hypothesis.score for d in msg.detections], out[0, 7::3, 0], atol=1e-6)


def test_no_keypoints_topic_for_plain_detectors(blob_model):
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model)
        topics = {name for name, _ in node.get_topic_names_and_types()}
        published = {p.topic_name for p in node.publishers}
        node.destroy_node()
    assert f"{ns}/camera/detections" in published and f"{ns}/camera/label_info" in published
    assert f"{ns}/camera/keypoints" not in published and f"{ns}/camera/debug_image" not in published
    assert topics is not None


# ------------------------------------------------------------------------------------------- bad frames
def test_bad_frames_are_dropped_counted_and_the_node_keeps_running(blob_model, capfd):
    ns = unique_namespace()
    good = ramp_rectangle(320, 240, BOX)
    short = image_msg(good, 1)
    short.data = bytes(short.data)[:-100]
    unknown = image_msg(good, 2, encoding="bgr32_weird")
    bad_step = image_msg(good, 3)
    bad_step.step = 10
    empty = image_msg(good, 4)
    empty.data = b""
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            for i, msg in enumerate((short, unknown, bad_step, empty)):
                pub.publish(msg)
                assert settled(node, i + 1)
            pub.publish(image_msg(good, 9, "after"))
            got = dets.wait(1)
            assert wait_until(lambda: node.counters()["camera"].received == 5)
            counters = node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    assert len(got) == 1 and got[0].header.frame_id == "after" and len(got[0].detections) == 1
    assert counters.processed == 1
    assert counters.dropped["short_data"] == 2  # one row short, and empty data
    assert counters.dropped["unknown_encoding"] == 1
    assert counters.dropped["bad_step"] == 1
    err = capfd.readouterr().err
    # one warning per camera and reason (throttled), naming the fault and the field
    assert err.count("frame dropped (short_data)") == 1 and "height 240 x step 960" in err
    assert err.count("frame dropped (unknown_encoding)") == 1 and "bgr32_weird" in err
    assert err.count("frame dropped (bad_step)") == 1 and "step 10" in err


def test_corrupt_compressed_frames_are_dropped(blob_model):
    import cv2

    ns = unique_namespace()
    ok, jpeg = cv2.imencode(".jpg", ramp_rectangle(320, 240, BOX))
    assert ok
    jpeg = jpeg.tobytes()

    def compressed(data: bytes, sec: int) -> CompressedImage:
        msg = CompressedImage()
        msg.header.stamp.sec = sec
        msg.header.frame_id = f"c{sec}"
        msg.format = "jpeg"
        msg.data = data
        return msg

    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, input__compressed=True)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(CompressedImage, "camera/image_raw/compressed", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            for i, msg in enumerate((compressed(jpeg[: len(jpeg) // 2], 1), compressed(b"", 2), compressed(jpeg, 3))):
                pub.publish(msg)
                assert settled(node, i + 1)
            got = dets.wait(1)
            assert wait_until(lambda: node.counters()["camera"].received == 3)
            counters = node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    assert [m.header.frame_id for m in got] == ["c3"]
    assert got[0].detections[0].bbox.size_x == pytest.approx(BOX[2] - BOX[0], abs=2.0)  # jpeg: a little looser
    assert counters.dropped["corrupt_compressed"] == 1 and counters.dropped["empty_data"] == 1


def test_stale_frames_are_dropped_by_age(blob_model):
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, input__max_age_ms=500.0)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            now = client.get_clock().now().to_msg()
            old = image_msg(ramp_rectangle(320, 240, BOX), now.sec - 10, "old")
            fresh = image_msg(ramp_rectangle(320, 240, BOX), now.sec, "fresh")
            fresh.header.stamp = now
            pub.publish(old)
            assert settled(node, 1)
            pub.publish(fresh)
            got = dets.wait(1)
            assert wait_until(lambda: node.counters()["camera"].received == 2)
            counters = node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    assert [m.header.frame_id for m in got] == ["fresh"]
    assert counters.dropped["stale"] == 1 and counters.processed == 1
    assert 0 <= counters.last_age_ms < 5000


class _SlowPipeline:
    """Wraps a pipeline and sleeps before each frame (to make frames pile up)."""

    def __init__(self, inner, delay_s: float) -> None:
        self._inner, self._delay = inner, delay_s
        self.name, self.input_spec, self.head = inner.name, inner.input_spec, inner.head
        self.last_timings: dict[str, float] = {}

    def process(self, spec, data):
        time.sleep(self._delay)
        return self._inner.process(spec, data)

    def process_bgr(self, image):
        time.sleep(self._delay)
        return self._inner.process_bgr(image)

    def process_batch(self, frames, masks=None):  # the worker's one route: each frame through process()
        return process_serially(self, frames)

    def set_postprocess(self, params):
        self._inner.set_postprocess(params)

    def close(self):
        self._inner.close()


def test_only_the_newest_frame_is_processed_and_drops_are_counted(blob_model):
    """Frames arriving while the camera is busy replace the waiting one; every frame is processed or counted."""
    from vrt_ros.settings import config
    from vrt_ros.inference.pipeline import make_pipeline

    inner = make_pipeline(
        config.validate({"backend": "cpu", "model.path": str(blob_model), "model.pad_value": 0.0}), log=lambda m: None
    )
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(
            context=ctx, namespace=ns, pipeline=_SlowPipeline(inner, 0.2),
            parameter_overrides=overrides(model__path=str(blob_model), input__qos="reliable", input__depth=50),
        )
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 50))
        with spinning(ctx, node, client, executor=MultiThreadedExecutor(num_threads=4, context=ctx)):
            wait_matched(pub)
            for i in range(10):
                pub.publish(image_msg(ramp_rectangle(320, 240, BOX), i, f"f{i}"))
                time.sleep(0.02)
            assert wait_until(lambda: node.counters()["camera"].received == 10)
            assert wait_until(
                lambda: (c := node.counters()["camera"]).processed + sum(c.dropped.values()) == 10, 10.0
            )
            got = dets.wait(node.counters()["camera"].processed, 5.0)
            counters = node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    assert counters.dropped["superseded"] >= 1
    assert counters.processed < 10
    assert len(got) == counters.processed
    assert got[-1].header.frame_id == "f9"  # the newest frame is always processed


# ------------------------------------------------------------------------------------------- parameters
def test_runtime_parameter_changes(blob_model):
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        info = Collector(client, LabelInfo, "camera/label_info", latched_qos())
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            pub.publish(image_msg(ramp_rectangle(320, 240, BOX), 1, "before"))
            dets.wait(1)
            # read-only: refused by rclpy with a reason
            r = node.set_parameters([Parameter("model.path", value="/other.onnx")])[0]
            assert not r.successful and "read-only" in r.reason
            # out of range and wrong type: refused, the reason names the parameter
            r = node.set_parameters([Parameter("nms_iou", value=1.5)])[0]
            assert not r.successful and "nms_iou" in r.reason
            r = node.set_parameters([Parameter("nms_iou", value="0.5")])[0]
            assert not r.successful and "nms_iou" in r.reason
            # an int where a double is meant is accepted (HC-13); score 1 is above the blob's score? no: equal
            r = node.set_parameters([Parameter("score_threshold", value=2)])[0]
            assert r.successful, r.reason
            assert node.get_parameter("score_threshold").value == 2.0
            pub.publish(image_msg(ramp_rectangle(320, 240, BOX), 2, "after"))
            got = dets.wait(2)
            label_msgs = info.wait(2)
        client.destroy_node()
        node.destroy_node()
    assert [len(m.detections) for m in got] == [1, 0]  # threshold 2 > any score: next frame empty
    assert label_msgs[-1].threshold == pytest.approx(2.0)


def test_every_bad_override_reported_at_once(blob_model):
    with private_context() as ctx:
        with pytest.raises(ConfigError) as e:
            DetectorNode(context=ctx, parameter_overrides=overrides(
                model__path=str(blob_model), score_treshold=0.3, nms_iou="high", cameras="front", max_detections=0))
    lines = str(e.value).splitlines()
    assert len(lines) == 4, lines
    assert "did you mean 'score_threshold'" in lines[-1] or any("did you mean 'score_threshold'" in x for x in lines)
    assert any("'cameras' must be string_array" in x for x in lines) and any("'max_detections' = 0" in x for x in lines)


def test_bad_configuration_fails_at_construction(blob_model, tmp_path):
    with private_context() as ctx:
        with pytest.raises(ConfigError, match="queue_depth"):
            DetectorNode(context=ctx, parameter_overrides=overrides(model__path=str(blob_model), queue_depth=1))
        with pytest.raises(ConfigError, match="score_threshold"):
            DetectorNode(context=ctx, parameter_overrides=overrides(model__path=str(blob_model), score_threshold=5.0))
        with pytest.raises(ConfigError, match="input.qos"):
            DetectorNode(context=ctx, parameter_overrides=overrides(model__path=str(blob_model), input__qos="fast"))
        with pytest.raises(ConfigError, match="model.labels"):
            DetectorNode(context=ctx, parameter_overrides=overrides(model__path=str(blob_model),
                                                                    model__labels=str(tmp_path / "none.names")))
        missing = tmp_path / "missing.onnx"
        with pytest.raises(ModelError, match="missing.onnx"):
            DetectorNode(context=ctx, parameter_overrides=overrides(backend="cpu", model__path=str(missing)))
        # ints for doubles in overrides (as a YAML 'score_threshold: 1' gives) are accepted
        node = DetectorNode(context=ctx, parameter_overrides=overrides(backend="cpu", model__path=str(blob_model),
                                                                       score_threshold=1, model__mean=[0, 0, 0]))
        assert node.get_parameter("score_threshold").value == 1.0
        assert list(node.get_parameter("model.mean").value) == [0.0, 0.0, 0.0]
        node.destroy_node()


def test_params_file_and_cli_args_pass_through(blob_model, tmp_path):
    """Composable: cli_args (params file, remapping) and namespace reach the rclpy Node."""
    yaml_file = tmp_path / "robot.yaml"
    yaml_file.write_text(
        "/**:\n  ros__parameters:\n"
        f"    backend: cpu\n    model:\n      path: {blob_model}\n      pad_value: 0\n"
        "    cameras: [left, right]\n    score_threshold: 1\n"
    )
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(
            "renamed_later", context=ctx, namespace=ns,
            cli_args=["--ros-args", "--params-file", str(yaml_file), "-r", "__node:=my_detector"],
        )
        assert node.get_name() == "my_detector" and node.get_namespace() == ns
        assert node.cameras == ("left", "right")
        assert node.get_parameter("model.pad_value").value == 0.0
        assert node.describe_parameter("model.path").read_only
        assert node.describe_parameter("score_threshold").floating_point_range[0].to_value == 2.0
        node.destroy_node()


# ------------------------------------------------------------------------------------------- QoS, debug image
def test_HC_06_best_effort_camera_with_default_parameters(blob_model):
    """A BEST_EFFORT depth-1 camera at 10 Hz: the default sensor_data QoS matches it and sees most frames."""
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, parameter_overrides=overrides(
            backend="cpu", model__path=str(blob_model), model__pad_value=0.0))
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("best_effort", 1))
        with spinning(ctx, node, client):
            wait_matched(pub)
            time.sleep(0.2)
            for i in range(10):
                pub.publish(image_msg(ramp_rectangle(320, 240, BOX), i))
                time.sleep(0.1)
            got = dets.wait(10, 3.0)
        client.destroy_node()
        node.destroy_node()
    assert len(got) >= 8


def test_HC_06_forced_reliable_warns_naming_both_sides(blob_model, capfd):
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, input__qos="reliable")
        client = Node("camera_driver", context=ctx, namespace=ns)
        client.create_publisher(Image, "camera/image_raw", make_qos("best_effort", 1))
        text = ""
        with spinning(ctx, node, client):
            deadline = time.monotonic() + 10
            while "incompatible QoS" not in text and time.monotonic() < deadline:
                time.sleep(0.1)
                text += capfd.readouterr().err
        client.destroy_node()
        node.destroy_node()
    assert f"incompatible QoS on {ns}/camera/image_raw" in text
    assert "reliability=reliable" in text and "camera_driver" in text and "reliability=best_effort" in text
    assert "input.qos" in text


def test_debug_image_is_lazy(blob_model, monkeypatch):
    calls = []
    from vrt_ros.boxes import draw as draw_module  # the debug image is drawn by it (imported by convert when first used)

    real_draw = draw_module.draw_detections

    def counting_draw(*args, **kwargs):
        calls.append(1)
        return real_draw(*args, **kwargs)

    monkeypatch.setattr(draw_module, "draw_detections", counting_draw)
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, debug_image=True)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            pub.publish(image_msg(ramp_rectangle(320, 240, BOX), 1))
            dets.wait(1)
            assert calls == []  # nobody subscribes: nothing drawn
            debug = Collector(client, Image, "camera/debug_image")
            assert wait_until(lambda: node.publishers and any(
                p.topic_name.endswith("debug_image") and p.get_subscription_count() > 0 for p in node.publishers))
            sent = image_msg(ramp_rectangle(320, 240, BOX), 2, "dbg")
            pub.publish(sent)
            got = debug.wait(1)
        client.destroy_node()
        node.destroy_node()
    assert len(calls) == 1
    img = got[0]
    assert img.header == sent.header and img.encoding == "bgr8" and (img.width, img.height) == (320, 240)
    pixels = np.frombuffer(bytes(img.data), np.uint8).reshape(240, 320, 3)
    assert not np.array_equal(pixels, ramp_rectangle(320, 240, BOX))  # something was drawn


# ------------------------------------------------------------------------------------------- real model, real bags
def _bag_frames(path: Path):
    with Reader(path) as reader:
        conn = reader.connections[0]
        msg_type = CompressedImage if conn.msgtype.endswith("CompressedImage") else Image
        return conn.topic, msg_type, [deserialize_message(raw, msg_type) for _, _, raw in reader.messages()]


def _lock_step(collector: Collector, timeout_s: float = 20.0):
    """``on_message`` hook for BagPlayer.play: after publishing frame n, wait for the n-th result.

    The node keeps only the newest frame, so on a loaded machine a paced replay may legitimately see frames
    superseded; waiting per frame makes "one result per input frame" independent of machine load.
    """
    sent = [0]

    def on_message(topic, stamp_ns, raw) -> None:
        sent[0] += 1
        collector.wait(sent[0], timeout_s)

    return on_message


def _inside(d, width: int, height: int) -> bool:
    c, sx, sy = d.bbox.center.position, d.bbox.size_x, d.bbox.size_y
    eps = 1e-3
    return (c.x - sx / 2 >= -eps and c.y - sy / 2 >= -eps and c.x + sx / 2 <= width + eps
            and c.y + sy / 2 <= height + eps and sx > 0 and sy > 0)


@pytest.mark.slow
@pytest.mark.parametrize("bag", ["vtest_raw_sqlite3", "vtest_compressed_mcap"])
def test_yolox_on_real_bags_one_result_per_frame(shared_dir, bag):
    """Issue 2 acceptance: every frame → one Detection2DArray with its exact header, >= 3 persons, boxes inside."""
    path = shared_dir / "data" / "bags" / bag
    topic, msg_type, frames_in = _bag_frames(path)
    compressed = msg_type is CompressedImage
    if compressed:
        import cv2

        first = cv2.imdecode(np.frombuffer(bytes(frames_in[0].data), np.uint8), cv2.IMREAD_COLOR)
        height, width = first.shape[:2]
    else:
        width, height = frames_in[0].width, frames_in[0].height
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, parameter_overrides=overrides(
            backend="cpu", model__path=str(shared_dir / "models" / "yolox_nano.onnx"),
            model__labels=str(shared_dir / "models" / "coco80.names"),
            input__qos="reliable", input__depth=10, input__compressed=compressed))
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        with spinning(ctx, node, client):
            with BagPlayer(client, path, remap={topic: f"{ns}{topic}"}) as player:
                assert player.wait_for_subscribers(1, 20.0)
                player.play(rate=1.0, on_message=_lock_step(dets))
            got = dets.wait(len(frames_in), 30.0)
            counters = node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    assert counters.received == len(frames_in) and not counters.dropped, counters
    assert len(got) == len(frames_in)
    assert [m.header for m in got] == [f.header for f in frames_in]
    for m in got:
        persons = [d for d in m.detections if d.results[0].hypothesis.class_id == "person"]
        assert len(persons) >= 3, [d.results[0].hypothesis.class_id for d in m.detections]
        assert all(_inside(d, width, height) for d in m.detections)
        assert [d.id for d in m.detections] == [str(i) for i in range(len(m.detections))]


@pytest.mark.slow
def test_two_nodes_in_one_process_one_executor(shared_dir):
    """Two DetectorNode instances (different cameras) under one MultiThreadedExecutor, fed the real raw bag."""
    path = shared_dir / "data" / "bags" / "vtest_raw_sqlite3"
    topic, _, frames_in = _bag_frames(path)
    model = dict(backend="cpu", model__path=str(shared_dir / "models" / "yolox_nano.onnx"),
                 model__labels=str(shared_dir / "models" / "coco80.names"), input__qos="reliable", input__depth=10)
    ns = unique_namespace()
    with private_context() as ctx:
        a = DetectorNode("det_a", context=ctx, namespace=ns, parameter_overrides=overrides(cameras=["front"], **model))
        b = DetectorNode("det_b", context=ctx, namespace=ns, parameter_overrides=overrides(cameras=["rear"], **model))
        client = Node("client", context=ctx, namespace=ns)
        front = Collector(client, Detection2DArray, "front/detections")
        rear = Collector(client, Detection2DArray, "rear/detections")
        with spinning(ctx, a, b, client, executor=MultiThreadedExecutor(num_threads=4, context=ctx)):
            players = [BagPlayer(client, path, remap={topic: f"{ns}/{cam}/image_raw"}) for cam in ("front", "rear")]
            for p in players:
                assert p.wait_for_subscribers(1, 20.0)
            threads = [
                threading.Thread(target=p.play, kwargs={"rate": 1.0, "on_message": _lock_step(c)})
                for p, c in zip(players, (front, rear))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            got_front = front.wait(len(frames_in), 30.0)
            got_rear = rear.wait(len(frames_in), 30.0)
            for p in players:
                p.close()
        client.destroy_node()
        a.destroy_node()
        b.destroy_node()
    for got in (got_front, got_rear):
        assert [m.header for m in got] == [f.header for f in frames_in]
        assert all(sum(d.results[0].hypothesis.class_id == "person" for d in m.detections) >= 3 for m in got)


# ------------------------------------------------------------------------------------------- main()
def test_main_executor_is_the_events_executor_unless_asked_otherwise():
    """Issue 22: rclpy's EventsExecutor by default (less CPU and lower p99 on the H200); ``--executor single`` the
    SingleThreadedExecutor (issue 5: never a MultiThreadedExecutor unasked); ``--threads N > 1`` alone still a
    MultiThreadedExecutor."""
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    from vrt_ros.ros import main as node_main

    parse = node_main.build_parser().parse_args
    assert parse([]).threads == 1 and parse([]).executor is None
    # fewer than one thread is refused before rclpy starts, with the option named
    assert node_main.main(["detector_node", "--threads", "0"]) == 2
    with private_context() as ctx:
        made = {
            "default": node_main.make_executor(parse([]).threads, ctx, parse([]).executor),
            "single": node_main.make_executor(1, ctx, parse(["--executor", "single"]).executor),
            "threads": node_main.make_executor(parse(["--threads", "3"]).threads, ctx, parse(["--threads", "3"]).executor),
            "multi": node_main.make_executor(1, ctx, "multi"),
        }
        try:
            assert type(made["default"]).__name__ == "EventsExecutor"
            assert type(made["single"]) is SingleThreadedExecutor
            assert type(made["threads"]) is MultiThreadedExecutor and type(made["multi"]) is MultiThreadedExecutor
        finally:
            for ex in made.values():
                ex.shutdown()
    with pytest.raises(ValueError, match="--executor must be one of single, multi, events"):
        node_main.make_executor(1, kind="asyncio")
    with pytest.raises(SystemExit) as refused:  # argparse: one line naming the choices, status 2
        node_main.main(["detector_node", "--executor", "asyncio"])
    assert refused.value.code == 2


@pytest.mark.slow
def test_main_runs_two_named_nodes_and_shuts_down_cleanly(blob_model, tmp_path):
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text(f"/**:\n  ros__parameters:\n    backend: cpu\n    model:\n      path: {blob_model}\n")
    ns = unique_namespace()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrt_ros.ros.main", "--names", "left_det", "right_det",
         "--ros-args", "--params-file", str(yaml_file), "-r", f"__ns:={ns}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        with private_context() as ctx:
            probe = Node("probe", context=ctx)
            def both_ready() -> bool:  # publishers exist once the pipeline is built (nodes appear earlier)
                try:
                    return all(
                        any(t.endswith("/detections") for t, _ in probe.get_publisher_names_and_types_by_node(n, ns))
                        for n in ("left_det", "right_det")
                    )
                except Exception:  # node not yet discovered
                    return False

            ok = wait_until(both_ready, 60.0)
            probe.destroy_node()
        assert ok, "nodes did not come up"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out


def test_main_reports_bad_configuration(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "vrt_ros.ros.main", "--ros-args", "-p", f"model.path:={tmp_path / 'nope.onnx'}",
         "-p", "backend:=cpu"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "nope.onnx" in proc.stderr


def test_main_refuses_a_camera_name_that_is_no_topic_name(blob_model):
    """``cameras: ['cam 1']`` (issue 26): one line naming the parameter, exit 2, no traceback (was exit 1 with rclpy's
    InvalidTopicNameException)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "vrt_ros.ros.main", "--ros-args", "-p", f"model.path:={blob_model}", "-p", "backend:=cpu",
         "-p", "cameras:=['front', 'cam 1']"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "parameter 'cameras'" in proc.stderr and "'cam 1' is not a valid relative ROS name" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


# ------------------------------------------------------------------------------------------- diagnostics
def _values(status) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def test_camera_status_levels():
    from diagnostic_msgs.msg import DiagnosticStatus

    from vrt_ros.ros.diagnostics import LatencyWindow, PeriodSnapshot, camera_status

    lat = LatencyWindow()
    for ms in range(1, 101):
        lat.add("inference", float(ms))
    lat.add("age", float("nan"))  # ignored
    prev = PeriodSnapshot()
    ok = camera_status("n: cam", "cpu", 10, 10, {}, prev, 1.0, 0.1, lat)
    assert ok.level == DiagnosticStatus.OK and ok.hardware_id == "cpu"
    v = _values(ok)
    assert v["input_rate_hz"] == "10.00" and v["processed"] == "10" and v["dropped"] == "0"
    assert float(v["inference_ms_p50"]) == pytest.approx(50.5) and float(v["inference_ms_p99"]) == pytest.approx(99.01)
    assert "age_ms_p50" not in v
    # next period: 10 more received, 5 dropped as short_data -> WARN naming the reason
    warn = camera_status("n: cam", "cpu", 20, 15, {"short_data": 5}, prev, 1.0, 0.1, lat)
    assert warn.level == DiagnosticStatus.WARN and "short_data: 5" in warn.message
    assert _values(warn)["dropped.short_data"] == "5"
    # nothing arrives for a while -> WARN
    idle = camera_status("n: cam", "cpu", 20, 15, {"short_data": 5}, prev, 1.0, 6.0, lat)
    assert idle.level == DiagnosticStatus.WARN and "no frames" in idle.message
    # the engine failed -> ERROR with the message
    err = camera_status("n: cam", "cpu", 21, 15, {"short_data": 5, "engine_error": 1}, prev, 1.0, 0.1, lat, "boom")
    assert err.level == DiagnosticStatus.ERROR and "boom" in err.message


class _FailingPipeline(_SlowPipeline):
    def process(self, spec, data):
        raise RuntimeError("engine exploded")


def test_diagnostics_published_per_camera(blob_model):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    from vrt_ros.settings import config
    from vrt_ros.inference.pipeline import make_pipeline

    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, cameras=["front", "rear"], diagnostics_period_s=0.2)
        client = Node("client", context=ctx, namespace=ns)
        diags = Collector(client, DiagnosticArray, "/diagnostics")
        pub = client.create_publisher(Image, "front/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            for i in range(3):
                pub.publish(image_msg(ramp_rectangle(320, 240, BOX), i))
                assert settled(node, i + 1, "front")

            def front_status():
                for msg in reversed(diags.wait(0, 0)):
                    for st in msg.status:
                        if st.name == f"{ns}/vrt_detector: front" and _values(st).get("processed") == "3":
                            return st
                return None

            assert wait_until(lambda: front_status() is not None, 5.0)
            status = front_status()
            names = {st.name for msg in diags.wait(0, 0) for st in msg.status}
        client.destroy_node()
        node.destroy_node()
    assert f"{ns}/vrt_detector: rear" in names
    v = _values(status)
    assert status.level == DiagnosticStatus.OK and v["received"] == "3" and v["dropped"] == "0"
    assert v["backend"].startswith("cpu")
    for key in ("preprocess_ms_p50", "inference_ms_p99", "postprocess_ms_p50", "callback_ms_p99", "age_ms_p50"):
        assert float(v[key]) >= 0.0

    # an engine failure: the frame is dropped as engine_error, the node keeps running, diagnostics say ERROR
    inner = make_pipeline(
        config.validate({"backend": "cpu", "model.path": str(blob_model), "model.pad_value": 0.0}), log=lambda m: None
    )
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, pipeline=_FailingPipeline(inner, 0.0),
                            parameter_overrides=overrides(model__path=str(blob_model), input__qos="reliable"))
        client = Node("client", context=ctx, namespace=ns)
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            pub.publish(image_msg(ramp_rectangle(320, 240, BOX), 1))
            assert settled(node, 1)
            array = node.diagnostics()
        client.destroy_node()
        node.destroy_node()
    (st,) = array.status
    assert st.level == DiagnosticStatus.ERROR and "engine exploded" in st.message
    assert _values(st)["dropped.engine_error"] == "1"


# ------------------------------------------------------------------------------------------- handed cases: load
def _box(cam: int, i: int) -> tuple[float, float, float, float]:
    """A different box per camera and frame, so results of one camera/frame cannot pass for another's."""
    return (20.0 + i + 30 * cam, 30.0 + 0.5 * i, 120.0 + i + 40 * cam, 150.0 + 0.25 * i)


@pytest.mark.slow
def test_HC_12_two_cameras_four_threads_match_single_threaded_run(blob_model):
    from vrt_ros.settings import config
    from vrt_ros.inference.pipeline import make_pipeline

    n = 100
    reference = make_pipeline(
        config.validate({"backend": "cpu", "model.path": str(blob_model), "model.pad_value": 0.0}), log=lambda m: None
    )
    images = {cam: [ramp_rectangle(320, 240, _box(c, i)) for i in range(n)] for c, cam in enumerate(("front", "rear"))}
    expected = {cam: [reference.process_bgr(img).boxes for img in imgs] for cam, imgs in images.items()}
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, cameras=["front", "rear"], input__depth=100)
        client = Node("client", context=ctx, namespace=ns)
        got = {cam: Collector(client, Detection2DArray, f"{cam}/detections") for cam in images}
        pubs = {cam: client.create_publisher(Image, f"{cam}/image_raw", make_qos("reliable", 100)) for cam in images}

        def feed(cam: str) -> None:
            for i, img in enumerate(images[cam]):
                pubs[cam].publish(image_msg(img, i, f"{cam}_{i}"))
                time.sleep(0.002)

        with spinning(ctx, node, client, executor=MultiThreadedExecutor(num_threads=4, context=ctx)):
            for pub in pubs.values():
                wait_matched(pub)
            threads = [threading.Thread(target=feed, args=(cam,)) for cam in images]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for cam in images:
                assert settled(node, n, cam, timeout_s=60.0), node.counters()[cam]
            counters = node.counters()
            results = {cam: c.wait(counters[cam].processed, 10.0) for cam, c in got.items()}
        client.destroy_node()
        node.destroy_node()
    for cam in images:
        c = counters[cam]
        assert c.received == n and c.processed + sum(c.dropped.values()) == n, c
        assert set(c.dropped) <= {"superseded"}, c.dropped
        assert len(results[cam]) == c.processed
        for msg in results[cam]:
            prefix, index = msg.header.frame_id.rsplit("_", 1)
            assert prefix == cam
            (d,) = msg.detections
            x1, y1, x2, y2 = expected[cam][int(index)][0]
            assert d.bbox.center.position.x == pytest.approx((x1 + x2) / 2, abs=1e-3)
            assert d.bbox.center.position.y == pytest.approx((y1 + y2) / 2, abs=1e-3)
            assert d.bbox.size_x == pytest.approx(x2 - x1, abs=1e-3)
            assert d.bbox.size_y == pytest.approx(y2 - y1, abs=1e-3)


@pytest.mark.slow
def test_HC_15_slow_inference_keeps_results_fresh(blob_model):
    """30 Hz camera, 100 ms inference, default QoS: results stay about 2x processing time old and do not age."""
    from vrt_ros.settings import config
    from vrt_ros.inference.pipeline import make_pipeline

    processing_s, rate_hz, duration_s = 0.1, 30.0, 4.0
    inner = make_pipeline(
        config.validate({"backend": "cpu", "model.path": str(blob_model), "model.pad_value": 0.0}), log=lambda m: None
    )
    ages_ms: list[float] = []
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, pipeline=_SlowPipeline(inner, processing_s),
                            parameter_overrides=overrides(model__path=str(blob_model)))  # default input QoS
        client = Node("client", context=ctx, namespace=ns)

        def on_result(msg) -> None:
            now = client.get_clock().now().nanoseconds
            ages_ms.append((now - (msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)) / 1e6)

        client.create_subscription(Detection2DArray, "camera/detections", on_result, make_qos("reliable", 100))
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("sensor_data", 1))
        image = ramp_rectangle(320, 240, BOX)
        stall_s = [0.0, 0.0]  # a canary thread's worst oversleep, and the sum of its oversleeps over 20 ms
        done = threading.Event()

        def canary() -> None:
            while not done.is_set():
                t0 = time.monotonic()
                time.sleep(0.005)
                over = time.monotonic() - t0 - 0.005
                stall_s[0] = max(stall_s[0], over)
                if over > 0.02:
                    stall_s[1] += over

        canary_thread = threading.Thread(target=canary, daemon=True)
        with spinning(ctx, node, client, executor=MultiThreadedExecutor(num_threads=4, context=ctx)):
            wait_matched(pub)
            canary_thread.start()
            start = time.monotonic()
            sent = 0
            while time.monotonic() - start < duration_s:
                msg = image_msg(image, 0)
                msg.header.stamp = client.get_clock().now().to_msg()
                pub.publish(msg)
                sent += 1
                time.sleep(max(0.0, start + sent / rate_hz - time.monotonic()))
            def drained() -> bool:  # every frame received was processed or dropped, and every result arrived
                c = node.counters()["camera"]
                return c.processed + sum(c.dropped.values()) == c.received and len(ages_ms) == c.processed

            wait_until(drained, 10.0)
            done.set()
            canary_thread.join()
            counters = node.counters()["camera"]
            node_latency = {kv.key: float(kv.value) for kv in node.diagnostics().status[0].values
                            if kv.key.startswith("callback_ms")}
        client.destroy_node()
        node.destroy_node()
    # it kept working (how many frames best-effort DDS delivers, and in what bursts, depends on the machine)
    assert counters.processed >= 5 and len(ages_ms) == counters.processed
    assert counters.processed + sum(counters.dropped.values()) == counters.received
    assert counters.dropped["superseded"] > 0  # the backlog is dropped, and counted
    # The node itself: a frame waits for at most one frame in processing, so arrival -> publish stays within about
    # 2x the processing time, for the median frame and for the worst (p99): nothing queues up inside the node.
    # Allowance: the longest time this process was not scheduled at all (canary), since on a shared 2-core machine
    # other jobs can starve it for a second or more (measured).
    allowance_ms = 2.0 * processing_s * 1e3 + stall_s[0] * 1e3
    assert node_latency["callback_ms_p50"] <= allowance_ms, (node_latency, stall_s[0])
    # The p99 of ~40 frames is about the worst frame, which can sit through several stalls in a row (seen: two
    # 0.6 s stalls back to back under a loaded full suite): allow all the time the process was starved.
    assert node_latency["callback_ms_p99"] <= allowance_ms + stall_s[1] * 1e3, (node_latency, stall_s)
    # End to end (header stamp -> result received), median over the run. Not every result: when the process is
    # starved, frames queue in the DDS transport (outside the node) and arrive late, then drain (measured: 1.9 s).
    steady = ages_ms[3:]
    assert np.median(steady) <= allowance_ms, (np.round(steady), stall_s[0])


# ------------------------------------------------------------------------------------------- conversion
def test_image_view_is_zero_copy():
    from vrt_ros.ros.convert import image_view

    msg = image_msg(ramp_rectangle(7, 5, (1, 1, 5, 4)), 1)
    msg.step = 24  # 21 bytes of pixels + 3 bytes of row padding
    msg.data = bytes(range(120))
    spec, view = image_view(msg)
    assert (spec.width, spec.height, spec.encoding, spec.step, spec.is_bigendian) == (7, 5, "bgr8", 24, False)
    assert view.readonly and view.nbytes == 120
    assert np.shares_memory(np.frombuffer(view, np.uint8), np.frombuffer(msg.data, np.uint8))


def test_detection_conversion_follows_the_contract():
    from std_msgs.msg import Header

    from vrt_ros.ros.convert import detections_to_msg, keypoints_to_msg, label_info_msg
    from vrt_ros.types import Detections

    header = Header(frame_id="f")
    header.stamp.sec, header.stamp.nanosec = 12, 34
    dets = Detections(
        boxes=np.array([[10, 20, 30, 60], [0, 0, 1.5, 2.5]], np.float32),
        scores=np.array([0.9, 0.25], np.float32),
        class_ids=np.array([1, 7], np.int32),
        keypoints=np.array([[[11, 21, 0.5], [12, 22, 0.75]], [[1, 1, 0.1], [2, 2, 0.2]]], np.float32),
    )
    msg = detections_to_msg(dets, header, ("a", "b"))
    assert msg.header == header and [d.id for d in msg.detections] == ["0", "1"]
    assert [d.results[0].hypothesis.class_id for d in msg.detections] == ["b", "7"]  # no name for 7: its index
    d0 = msg.detections[0]
    assert (d0.bbox.center.position.x, d0.bbox.center.position.y, d0.bbox.size_x, d0.bbox.size_y) == (20, 40, 20, 40)
    assert d0.results[0].hypothesis.score == pytest.approx(0.9)
    kp = keypoints_to_msg(dets, header, ("left_eye",))
    assert [(d.id, d.results[0].hypothesis.class_id) for d in kp.detections] == [
        ("0", "left_eye"), ("0", "1"), ("1", "left_eye"), ("1", "1")]
    assert kp.detections[1].bbox.center.position.x == 12 and kp.detections[1].results[0].hypothesis.score == 0.75
    empty = detections_to_msg(Detections.empty(), header)
    assert empty.header == header and list(empty.detections) == []
    info = label_info_msg(("a", "b"), 0.4)
    assert [(c.class_id, c.class_name) for c in info.class_map] == [(0, "a"), (1, "b")]
    assert info.threshold == pytest.approx(0.4)
