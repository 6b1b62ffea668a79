"""The node's outputs of the new heads: ``<cam>/instance_mask`` (lazy, header and size of the frame, labels,
mono8/mono16, masks on the debug image, per camera in batches) and oriented boxes' ``bbox.center.theta``."""

from __future__ import annotations

import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")

from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_heads import blob_seg, moment_obb  # noqa: E402
from synthetic_models import ramp_rectangle  # noqa: E402
from test_heads_obb import _bar  # noqa: E402
from test_node import Collector, blob_node, image_msg, wait_matched, wait_until  # noqa: E402
from vrt_ros.heads.base import grid_cells  # noqa: E402
from vrt_ros.heads.yolov8 import STRIDES  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402

pytestmark = pytest.mark.ros

BOX = (100.0, 60.0, 260.0, 200.0)  # in the 480x320 test frames


@pytest.fixture(scope="module")
def seg_model(tmp_path_factory):
    return blob_seg(tmp_path_factory.mktemp("seg") / "seg.onnx", 320, 320, grid_cells(320, 320, STRIDES))


def _subscribed(node, suffix: str) -> bool:
    return any(p.topic_name.endswith(suffix) and p.get_subscription_count() > 0 for p in node.publishers)


@pytest.mark.parametrize("max_det,encoding", [(100, "mono8"), (300, "mono16")])
def test_instance_mask_is_lazy_and_labels_the_frame(seg_model, max_det, encoding):
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, seg_model, max_detections=max_det, debug_image=True)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        frame = ramp_rectangle(480, 320, BOX, ramp=4.0)
        with spinning(ctx, node, client):
            wait_matched(pub)
            pub.publish(image_msg(frame, 1))
            assert len(dets.wait(1)) == 1
            assert "masks" not in node.pipeline.last_timings  # nobody subscribed: no masks assembled
            masks = Collector(client, Image, "camera/instance_mask")
            debug = Collector(client, Image, "camera/debug_image")
            assert wait_until(lambda: _subscribed(node, "instance_mask") and _subscribed(node, "debug_image"))
            sent = image_msg(frame, 2, "seg_cam")
            pub.publish(sent)
            got, drawn = masks.wait(1), debug.wait(1)
            assert "masks" in node.pipeline.last_timings
        client.destroy_node()
        node.destroy_node()
    msg = got[0]
    assert msg.header == sent.header and msg.encoding == encoding and (msg.width, msg.height) == (480, 320)
    dtype = np.uint8 if encoding == "mono8" else np.dtype("<u2")
    assert msg.step == 480 * np.dtype(dtype).itemsize and msg.is_bigendian == 0
    labels = np.frombuffer(bytes(msg.data), dtype).reshape(320, 480)
    assert set(np.unique(labels)) == {0, 1}
    ys, xs = np.nonzero(labels == 1)
    np.testing.assert_allclose((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1), BOX, atol=2.0)
    pixels = np.frombuffer(bytes(drawn[0].data), np.uint8).reshape(320, 480, 3)
    inside = pixels[120:140, 150:200].astype(int)
    assert (np.abs(inside - 255).max(axis=2) > 30).all()  # the white card is tinted by the mask colour


def test_oriented_boxes_publish_theta(tmp_path):
    model = moment_obb(tmp_path / "obb.onnx", 320, 320, grid_cells(320, 320, STRIDES))
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, model, model__head="yolov8_obb")
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            pub.publish(image_msg(_bar(480, 320, 240.0, 160.0, 200.0, 24.0, math.radians(-60)), 1))
            got = dets.wait(1)
        client.destroy_node()
        node.destroy_node()
    (d,) = got[0].detections
    assert d.bbox.center.theta == pytest.approx(math.radians(-60), abs=math.radians(2))
    assert d.bbox.size_x == pytest.approx(200.0, rel=0.05) and d.bbox.size_y == pytest.approx(24.0, rel=0.15)
    assert (d.bbox.center.position.x, d.bbox.center.position.y) == pytest.approx((240.0, 160.0), abs=1.5)


def test_batched_cameras_each_get_their_own_lazy_instance_mask(tmp_path, seg_model):
    """engine.max_batch 2 (a batch-2 model): every frame goes through process_batch; the label image is assembled
    only for camera a, whose instance_mask is watched (``masks`` per frame; b's has no subscriber), and a's mask
    is its own frame's (its size, header and object)."""
    from synthetic_heads import stacked

    model = stacked(seg_model, tmp_path / "seg_x2.onnx", 2)
    boxes = {"a": BOX, "b": (20.0, 30.0, 140.0, 150.0)}
    sizes = {"a": (480, 320), "b": (320, 240)}
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, model, cameras=["a", "b"], engine__max_batch=2)
        worker = node._worker
        assert worker.max_batch == 2
        asked: list[tuple[str, bool]] = []
        inner = worker.pipeline.process_batch

        def process_batch(frames, masks=None):
            asked.extend(zip([f.spec.width for f in frames], masks))
            return inner(frames, masks)

        worker.pipeline.process_batch = process_batch
        client = Node("client", context=ctx, namespace=ns)
        got = {c: Collector(client, Detection2DArray, f"{c}/detections") for c in "ab"}
        mask_a = Collector(client, Image, "a/instance_mask")
        pubs = {c: client.create_publisher(Image, f"{c}/image_raw", make_qos("reliable", 10)) for c in "ab"}
        with spinning(ctx, node, client):
            for p in pubs.values():
                wait_matched(p)
            assert wait_until(lambda: _subscribed(node, "a/instance_mask"))
            sent = {}
            for k, c in enumerate("ab"):
                w, h = sizes[c]
                sent[c] = image_msg(ramp_rectangle(w, h, boxes[c], ramp=4.0), k + 1, f"{c}_optical")
                pubs[c].publish(sent[c])
            assert all(len(got[c].wait(1)) == 1 for c in "ab")
            masks = mask_a.wait(1)
        client.destroy_node()
        node.destroy_node()
    assert sorted(asked) == [(320, False), (480, True)]  # b's frame assembled no label image
    (msg,) = masks
    assert msg.header == sent["a"].header and (msg.width, msg.height) == sizes["a"]
    labels = np.frombuffer(bytes(msg.data), np.uint8).reshape(sizes["a"][1], sizes["a"][0])
    ys, xs = np.nonzero(labels == 1)
    np.testing.assert_allclose((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1), boxes["a"], atol=2.0)
