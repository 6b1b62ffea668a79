"""HC-24 through the node (issue 34): an oriented-box model (``yolov8_obb``, the synthetic moment model of
test/synthetic_heads.py), a registered depth camera and tracking, CPU path. A thin stick tilted 45 deg at 1 m before
a wall at 5 m: ``detections_3d`` places it on the stick (within 2 %), turned by its angle about the optical axis,
as long as it is, and each 3D detection carries its 2D detection's track id."""

from __future__ import annotations

import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")
pytest.importorskip("scipy", reason="scipy not installed (runtime dependency of tracking)")

from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402
from vision_msgs.msg import Detection2DArray, Detection3DArray  # noqa: E402

import depth_scenes as ds  # noqa: E402
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_heads import moment_obb  # noqa: E402
from test_node import Collector, wait_until  # noqa: E402
from test_node_depth import FRAME, T0_NS, depth_fields, depth_node  # noqa: E402
from vrt_ros.heads.base import grid_cells  # noqa: E402
from vrt_ros.heads.yolov8 import STRIDES  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402

pytestmark = pytest.mark.ros


def stick_image() -> np.ndarray:
    """The colour frame: the HC-24 stick white on black (pixels whose centres are inside its image rectangle)."""
    box, theta = ds.stick_obb(ds.HC24_STICK)
    j, i = np.mgrid[0:ds.H, 0:ds.W] + 0.5
    cx, cy, hw, hh = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2, (box[2] - box[0]) / 2, (box[3] - box[1]) / 2
    u = (i - cx) * math.cos(theta) + (j - cy) * math.sin(theta)
    v = (j - cy) * math.cos(theta) - (i - cx) * math.sin(theta)
    bgr = np.zeros((ds.H, ds.W, 3), np.uint8)
    bgr[(np.abs(u) < hw) & (np.abs(v) < hh)] = 255
    return bgr


def test_HC_24_oriented_box_model_with_depth_and_tracking_through_the_node(tmp_path):
    model = moment_obb(tmp_path / "obb.onnx", ds.W, ds.H, grid_cells(ds.W, ds.H, STRIDES))
    ns = unique_namespace()
    depth = ds.stick_scene()
    bgr = stick_image()
    with private_context() as ctx:
        node = depth_node(ctx, ns, model, **{"model.head": "yolov8_obb", "tracking.enabled": True,
                                             "tracking.min_hits": 2, "score_threshold": 0.5})
        client = Node("client", context=ctx, namespace=ns)
        d3 = Collector(client, Detection3DArray, "cam/detections_3d")
        d2 = Collector(client, Detection2DArray, "cam/detections")
        q = make_qos("reliable", 10)
        pubs = {t: client.create_publisher(m, f"cam/{t}", q)
                for t, m in (("camera_info", CameraInfo), ("depth/image_raw", Image), ("image_raw", Image))}
        with spinning(ctx, node, client):
            assert wait_until(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values()), 30.0)
            for k in range(3):
                t = T0_NS + k * 100_000_000
                info = CameraInfo(width=ds.W, height=ds.H, distortion_model="plumb_bob", d=[0.0] * 5,
                                  k=list(ds.K_SQUARE), p=list(ds.square_info().p))
                info.header.frame_id = FRAME
                info.header.stamp.sec, info.header.stamp.nanosec = divmod(t, 10**9)
                pubs["camera_info"].publish(info)
                cd = node._depth.cameras["cam"]
                assert wait_until(lambda: cd._info_msg is not None and cd._info_msg.header.stamp == info.header.stamp,
                                  30.0)
                d = Image(**{key: (v.tobytes() if key == "data" else v) for key, v in depth_fields(depth, "32FC1").items()})
                d.header = info.header
                pubs["depth/image_raw"].publish(d)
                c = Image(height=ds.H, width=ds.W, encoding="bgr8", is_bigendian=0, step=ds.W * 3, data=bgr.tobytes())
                c.header = info.header
                pubs["image_raw"].publish(c)
                assert wait_until(lambda: node.counters()["cam"].processed == k + 1, 30.0)
            got3, got2 = d3.wait(3, 30.0), d2.wait(3, 30.0)
        client.destroy_node()
        node.destroy_node()
    s = ds.HC24_STICK
    assert [len(m.detections) for m in got3] == [1, 1, 1]
    for m3, m2 in zip(got3, got2):
        det = m3.detections[0]
        p = det.bbox.center.position
        assert np.linalg.norm(np.subtract((p.x, p.y, p.z), (s.x, s.y, s.z))) <= 0.02 * np.linalg.norm((s.x, s.y, s.z))
        o = det.bbox.center.orientation
        assert 2 * math.atan2(o.z, o.w) == pytest.approx(s.angle, abs=math.radians(1.0))
        assert det.bbox.size.x == pytest.approx(s.length, rel=0.02) and det.bbox.size.y == pytest.approx(s.thickness, rel=0.1)
        assert det.id == m2.detections[0].id  # the track id (empty in the first frame: not confirmed yet)
    assert got3[0].detections[0].id == "" and got3[2].detections[0].id != ""
