"""``input.raw_subscription``: the node reads frames from their serialized bytes (vrt_ros.ros.cdr_read).

The same frames through a typed and a raw node give the same detections, headers and counters (raw and compressed
input, and the debug image); damaged or foreign-encapsulation bytes on the topic are dropped and counted under
``bad_cdr`` / ``unsupported_cdr`` while the node keeps answering good frames.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from rclpy.node import Node  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import ramp_rectangle  # noqa: E402
from test_node import BOX, Collector, blob_model, blob_node, image_msg, settled, wait_matched  # noqa: E402,F401
from vrt_ros.ros.qos import make_qos  # noqa: E402

pytestmark = pytest.mark.ros

FRAMES = [ramp_rectangle(320, 240, BOX), np.zeros((240, 320, 3), np.uint8), ramp_rectangle(320, 240, (10, 20, 90, 200))]


def compressed_msg(bgr: np.ndarray, sec: int) -> CompressedImage:
    msg = CompressedImage(format="jpeg")
    msg.header.stamp.sec, msg.header.frame_id = sec, "cam_optical"
    msg.data = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
    return msg


def run_node(model, raw: bool, compressed: bool, payloads: list) -> tuple[list, list, object]:
    """Publish ``payloads`` (messages or serialized bytes) one at a time; the detections, debug images, counters."""
    ns = unique_namespace()
    topic = "camera/image_raw/compressed" if compressed else "camera/image_raw"
    with private_context() as ctx:
        node = blob_node(ctx, ns, model, score_threshold=0.5, input__raw_subscription=raw,
                         input__compressed=compressed, debug_image=True)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        debug = Collector(client, Image, "camera/debug_image", make_qos("reliable", 10))
        pub = client.create_publisher(CompressedImage if compressed else Image, topic, make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            assert wait_until_matched_debug(node)
            for i, payload in enumerate(payloads):
                pub.publish(payload)
                assert settled(node, i + 1)
            n_ok = node.counters()["camera"].processed
            got, pics = dets.wait(n_ok), debug.wait(n_ok)
            counters = node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    return got, pics, counters


def wait_until_matched_debug(node, timeout_s: float = 10.0) -> bool:
    import time

    cam = node._cameras["camera"]
    deadline = time.monotonic() + timeout_s
    while cam.pub_debug.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    return cam.pub_debug.get_subscription_count() >= 1


def summary(dets_msgs: list) -> list:
    return [(m.header.stamp.sec, m.header.frame_id,
             [(round(d.bbox.center.position.x, 3), round(d.bbox.center.position.y, 3), round(d.bbox.size_x, 3),
               d.results[0].hypothesis.class_id, round(d.results[0].hypothesis.score, 5)) for d in m.detections])
            for m in dets_msgs]


@pytest.mark.parametrize("compressed", [False, True], ids=["raw_image", "compressed"])
def test_raw_subscription_gives_what_the_typed_one_gives(blob_model, compressed):
    msgs = [compressed_msg(f, 100 + i) if compressed else image_msg(f, 100 + i) for i, f in enumerate(FRAMES)]
    typed = run_node(blob_model, False, compressed, msgs)
    raw = run_node(blob_model, True, compressed, msgs)
    assert summary(raw[0]) == summary(typed[0]) and len(raw[0]) == 3
    assert [len(m.detections) for m in raw[0]] == [1, 0, 1]
    assert [(p.header, p.width, p.height, bytes(p.data)) for p in raw[1]] == [
        (p.header, p.width, p.height, bytes(p.data)) for p in typed[1]]
    assert raw[2].processed == typed[2].processed == 3 and not raw[2].dropped


def test_damaged_bytes_are_dropped_counted_and_the_node_keeps_running(blob_model):
    good = serialize_message(image_msg(FRAMES[0], 7))
    big_endian = b"\x00\x00" + good[2:]
    truncated = good[:40]  # ends inside the encoding string
    payloads = [truncated, good, big_endian, bytes(good[:3]), good]
    got, _, counters = run_node(blob_model, True, False, payloads)
    assert counters.received == 5 and counters.processed == 2
    assert counters.dropped == {"bad_cdr": 2, "unsupported_cdr": 1}
    assert [len(m.detections) for m in got] == [1, 1]
