"""The node's 3D output (issue 25) end to end on the CPU path: a synthetic RGB-D bag (colour + registered depth +
camera_info, one rosbag2) replayed into a running DetectorNode, and HC-20 (units, K all zeros, depth at twice the
colour resolution) published directly.

The scenes (test/depth_scenes.py): boxes at known distances before a background plane, seen through a distorted
camera (plumb_bob K and D). The colour frame shows the object as a bright rectangle the synthetic blob detector finds
(its box edges within 0.01 px of the drawn ones); the node's 3D centre is checked against the object's true centre
within :data:`CENTRE_TOL_M` = 1 mm, as the core geometry in test_depth.py (0.01 px at 2.25 m and f = 520 px is
0.04 mm).
"""

from __future__ import annotations

from pathlib import Path

import time

import cv2
import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, CompressedImage, Image  # noqa: E402
from vision_msgs.msg import Detection2DArray, Detection3DArray  # noqa: E402

import depth_scenes as ds  # noqa: E402
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end, ramp_rectangle  # noqa: E402
from test_node import Collector, wait_until  # noqa: E402
from vrt_ros.depth import reasons  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.tools.replay import BagPlayer  # noqa: E402

pytestmark = pytest.mark.ros

CENTRE_TOL_M = 1e-3
FRAME = "cam_optical"
T0_NS = 1_700_000_000_000_000_000


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", ds.W, ds.H)


def depth_node(ctx, ns: str, model: Path, pipeline=None, **params) -> DetectorNode:
    base = {"backend": "cpu", "model.path": str(model), "model.pad_value": 0.0, "input.qos": "reliable",
            "input.depth": 10, "cameras": ["cam"], "depth.enabled": True, "depth.wait_ms": 1000.0,
            "depth.max_skew_ms": 5.0}
    base.update(params)
    return DetectorNode(context=ctx, namespace=ns, pipeline=pipeline,
                        parameter_overrides=[Parameter(k, value=v) for k, v in base.items()])


def info_fields(model: str = "plumb_bob", k=ds.K, width: int = ds.W, height: int = ds.H) -> dict:
    i = ds.info(model, FRAME, width, height)
    return dict(width=width, height=height, distortion_model=i.distortion_model, d=list(i.d), k=list(k), p=list(i.p),
                r=[1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0])


def depth_fields(depth_m: np.ndarray, encoding: str) -> dict:
    data = ds.to_mm(depth_m) if encoding == "16UC1" else depth_m.astype(np.float32)
    h, w = data.shape
    return dict(height=h, width=w, encoding=encoding, is_bigendian=0, step=w * data.itemsize,
                data=np.frombuffer(data.tobytes(), np.uint8))


def colour_fields(o: ds.Obj) -> dict:
    bgr = ramp_rectangle(ds.W, ds.H, tuple(float(v) for v in ds.box("plumb_bob", o)), ramp=6.0)
    return dict(height=ds.H, width=ds.W, encoding="bgr8", is_bigendian=0, step=ds.W * 3, data=bgr.reshape(-1))


def write_rgbd_bag(path: Path, encoding: str = "16UC1", skew_ns: int = 3_000_000) -> list[int]:
    """One object per frame (ds.OBJECTS), 10 Hz: camera_info and depth (stamped ``skew_ns`` before the colour, as
    a driver with separate sensors does) first in bag time, then the colour frame. Returns the colour stamps."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    T = store.types
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    stamps = []
    try:
        conns = {name: writer.add_connection(f"/cam/{name}", f"sensor_msgs/msg/{kind}", typestore=store)
                 for name, kind in (("camera_info", "CameraInfo"), ("depth/image_raw", "Image"), ("image_raw", "Image"))}

        def header(t_ns: int):
            return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=t_ns // 10**9, nanosec=t_ns % 10**9),
                                            frame_id=FRAME)

        roi = T["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
        for i, o in enumerate(ds.OBJECTS):
            t = T0_NS + i * 100_000_000
            stamps.append(t)
            _, depth = ds.scene("plumb_bob", objects=(o,))
            f = info_fields()
            msgs = [
                ("camera_info", "CameraInfo", T["sensor_msgs/msg/CameraInfo"](
                    header=header(t), height=f["height"], width=f["width"], distortion_model=f["distortion_model"],
                    d=np.array(f["d"]), k=np.array(f["k"]), r=np.array(f["r"]), p=np.array(f["p"]),
                    binning_x=0, binning_y=0, roi=roi)),
                ("depth/image_raw", "Image", T["sensor_msgs/msg/Image"](header=header(t - skew_ns), **depth_fields(depth, encoding))),
                ("image_raw", "Image", T["sensor_msgs/msg/Image"](header=header(t), **colour_fields(o))),
            ]
            for j, (name, kind, msg) in enumerate(msgs):
                writer.write(conns[name], t - 30_000_000 + j * 10_000_000, store.serialize_cdr(msg, f"sensor_msgs/msg/{kind}"))
    finally:
        writer.close()
    return stamps


def test_node_publishes_3d_detections_from_a_replayed_rgbd_bag(blob_model, tmp_path):
    bag = tmp_path / "rgbd"
    stamps = write_rgbd_bag(bag, "16UC1")
    ns = unique_namespace()
    with private_context() as ctx:
        node = depth_node(ctx, ns, blob_model)
        client = Node("client", context=ctx, namespace=ns)
        d2 = Collector(client, Detection2DArray, "cam/detections")
        d3 = Collector(client, Detection3DArray, "cam/detections_3d")
        with spinning(ctx, node, client):
            topics = ["/cam/camera_info", "/cam/depth/image_raw", "/cam/image_raw"]
            with BagPlayer(client, bag, qos="reliable", remap={t: ns + t for t in topics}) as player:
                assert sorted(player.topics) == [ns + t for t in topics]  # three topics from one bag
                assert player.wait_for_subscribers(1, 20.0)
                sent = [0]

                def lock_step(topic, stamp_ns, raw) -> None:
                    # the node keeps only the newest colour frame: on a loaded machine a paced replay could see one
                    # superseded, so each colour frame waits for its 2D answer
                    if topic.endswith("/cam/image_raw"):  # the colour frame, not depth/image_raw (which has no answer of its own)
                        sent[0] += 1
                        d2.wait(sent[0], 30.0)

                player.play(rate=1.0, on_message=lock_step)
            got3, got2 = d3.wait(3, 30.0), d2.wait(3, 30.0)
            counters = node.counters()["cam"]
            diag = {kv.key: kv.value for kv in node.diagnostics().status[0].values}
        client.destroy_node()
        node.destroy_node()
    assert len(got3) == 3 and len(got2) == 3
    assert [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in got3] == stamps
    for m3, m2, o in zip(got3, got2, ds.OBJECTS):
        assert m3.header == m2.header and m3.header.frame_id == FRAME  # the colour frame's header, optical frame
        assert len(m3.detections) == 1 == len(m2.detections)
        a, b = m3.detections[0], m2.detections[0]
        assert a.id == b.id and a.header == m3.header
        assert a.results[0].hypothesis.class_id == b.results[0].hypothesis.class_id
        assert a.results[0].hypothesis.score == pytest.approx(b.results[0].hypothesis.score)
        p = a.bbox.center.position
        np.testing.assert_allclose([p.x, p.y, p.z], [o.x, o.y, o.z], atol=CENTRE_TOL_M, rtol=0)
        assert a.results[0].pose.pose.position == p and a.bbox.center.orientation.w == 1.0
        assert a.bbox.size.x == pytest.approx(o.w, rel=0.03) and a.bbox.size.y == pytest.approx(o.h, rel=0.03)
        assert a.bbox.size.z == pytest.approx(0.0, abs=1e-6)  # a flat object: no depth spread
    assert counters.depth["published"] == 3 and not counters.dropped
    assert diag["depth.published"] == "3"


class Rig:
    """A node fed by hand in lock-step: camera_info (awaited until the node holds it), depth, then colour."""

    def __init__(self, ctx, ns: str, model: Path, pipeline=None, **params) -> None:
        self.node = depth_node(ctx, ns, model, pipeline, **params)
        self.client = Node("client", context=ctx, namespace=ns)
        self.d3 = Collector(self.client, Detection3DArray, "cam/detections_3d")
        self.d2 = Collector(self.client, Detection2DArray, "cam/detections")
        q = make_qos("reliable", 10)
        self.compressed = bool(params.get("input.compressed", False))
        colour = ("image_raw/compressed", CompressedImage) if self.compressed else ("image_raw", Image)
        self.pubs = {t: self.client.create_publisher(m, f"cam/{t}", q)
                     for t, m in (("camera_info", CameraInfo), ("depth/image_raw", Image), colour)}
        self.sent = 0

    def wait_matched(self) -> None:
        assert wait_until(lambda: all(p.get_subscription_count() >= 1 for p in self.pubs.values()), 30.0)

    def frame(self, o: ds.Obj, depth_m: np.ndarray | None, encoding: str = "32FC1", k=ds.K,
              info_size=(ds.W, ds.H), frame_id: str = FRAME) -> None:
        t = T0_NS + self.sent * 100_000_000
        info = CameraInfo(**{key: v for key, v in info_fields(k=k, width=info_size[0], height=info_size[1]).items()})
        info.header.frame_id = FRAME
        info.header.stamp.sec, info.header.stamp.nanosec = divmod(t, 10**9)
        cd = self.node._depth.cameras["cam"]
        self.pubs["camera_info"].publish(info)
        assert wait_until(lambda: cd._info_msg is not None and list(cd._info_msg.k) == list(k)
                          and cd._info_msg.header.stamp == info.header.stamp, 30.0)
        if depth_m is not None:
            d = Image(**{key: (v.tobytes() if key == "data" else v) for key, v in depth_fields(depth_m, encoding).items()})
            d.header.frame_id = frame_id
            d.header.stamp = info.header.stamp
            self.pubs["depth/image_raw"].publish(d)
        fields = colour_fields(o)
        if self.compressed:  # PNG: lossless, so the detector's box is as exact as on raw frames
            bgr = fields["data"].reshape(ds.H, ds.W, 3)
            c = CompressedImage(format="png", data=cv2.imencode(".png", bgr)[1].tobytes())
        else:
            c = Image(**{key: (v.tobytes() if key == "data" else v) for key, v in fields.items()})
        c.header = info.header
        self.pubs["image_raw/compressed" if self.compressed else "image_raw"].publish(c)
        self.sent += 1
        assert wait_until(lambda: self.node.counters()["cam"].processed == self.sent, 30.0)
        assert len(self.d2.wait(self.sent, 30.0)) == self.sent  # the 2D detections go out whatever happens to depth


def test_HC_20_units_k_all_zeros_and_twice_the_resolution(blob_model):
    o = ds.OBJECTS[1]
    _, depth = ds.scene("plumb_bob", objects=(o,))
    _, depth2 = ds.scene("plumb_bob", objects=(o,), scale=2)
    ns = unique_namespace()
    with private_context() as ctx:
        rig = Rig(ctx, ns, blob_model, **{"depth.wait_ms": 300.0})
        with spinning(ctx, rig.node, rig.client):
            rig.wait_matched()
            rig.frame(o, depth, "32FC1")                        # metres
            rig.frame(o, depth, "16UC1")                        # the same scene in millimetres
            rig.frame(o, depth2, "16UC1")                       # depth at twice the colour resolution: scaled
            rig.frame(o, depth, "32FC1", k=(0.0,) * 9)          # K all zeros: refused, counted, nothing published
            rig.frame(o, depth[:, : ds.W // 2], "32FC1")        # half the width only: refused
            rig.frame(o, depth, "32FC1", frame_id="other")      # not registered to this camera: refused
            rig.frame(o, None)                                  # no depth at all: unpaired after depth.wait_ms
            rig.frame(o, depth, "32FC1")                        # and back to normal
            got = rig.d3.wait(4, 30.0)
            counters = rig.node.counters()["cam"]
            diag = {kv.key: kv.value for kv in rig.node.diagnostics().status[0].values}
        rig.client.destroy_node()
        rig.node.destroy_node()
    assert len(got) == 4
    pos = [tuple((d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.center.position.z)) for m in got
           for d in m.detections]
    assert pos[0] == pos[1] == pos[3]  # mm and m: the same float positions
    np.testing.assert_allclose(pos[2], pos[0], atol=1e-6)
    np.testing.assert_allclose(pos[0], (o.x, o.y, o.z), atol=CENTRE_TOL_M)
    for m in got:
        for d in m.detections:
            assert all(np.isfinite([d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.center.position.z]))
    assert counters.depth == {"published": 4, reasons.CAMERA_INFO_K: 1, reasons.SIZE_MISMATCH: 1,
                              reasons.FRAME_MISMATCH: 1, reasons.UNPAIRED: 1}
    assert counters.processed == 8 and not counters.dropped
    assert diag[f"depth.{reasons.CAMERA_INFO_K}"] == "1" and "camera_info" in reasons.CAMERA_INFO_K


class GpuDepthStandin:
    """The CPU pipeline with the GPU pipeline's depth interface (``takes_depth``: ``process(..., depth=job)`` returns
    the statistic as ``Detections.depth_stats``): the statistic it returns is the reference's with the centre moved
    1 m further, so the test sees which one the node published."""

    takes_depth = True

    def __init__(self, inner) -> None:
        self._inner = inner
        self.name, self.input_spec, self.head = "cuda (depth stand-in)", inner.input_spec, inner.head
        self.last_timings: dict[str, float] = {}
        self.jobs = 0

    def process(self, spec, data, depth=None):
        from vrt_ros.depth.stats import box_stats

        dets = self._inner.process(spec, data)
        self.last_timings = dict(self._inner.last_timings)
        if depth is not None:
            self.jobs += 1
            img = depth.image
            dets.depth_stats = box_stats(img.array(), img.units_per_m, dets.boxes, depth.scale, depth.range_m,
                                         depth.percentile)
            dets.depth_stats[:, 2] += 1.0
        return dets

    def process_bgr(self, image):
        return self._inner.process_bgr(image)

    def process_batch(self, frames, masks=None, depth=None):
        """The GPU pipeline's batch interface: per frame its detections, and its statistic with its depth job."""
        return [self.process(f.spec, f.data, depth=None if depth is None else depth[i]) for i, f in enumerate(frames)]

    def set_postprocess(self, params):
        self._inner.set_postprocess(params)

    def close(self):
        self._inner.close()


@pytest.mark.parametrize("params", [{"input.compressed": True}, {"input.raw_subscription": True}],
                         ids=["compressed", "raw_subscription"])
def test_3d_detections_with_compressed_and_raw_bytes_input(blob_model, params):
    o = ds.OBJECTS[2]
    _, depth = ds.scene("plumb_bob", objects=(o,))
    ns = unique_namespace()
    with private_context() as ctx:
        rig = Rig(ctx, ns, blob_model, **{"depth.wait_ms": 500.0, **params})
        with spinning(ctx, rig.node, rig.client):
            rig.wait_matched()
            rig.frame(o, depth, "16UC1")
            got = rig.d3.wait(1, 30.0)
            counters = rig.node.counters()["cam"]
        rig.client.destroy_node()
        rig.node.destroy_node()
    assert len(got) == 1 and got[0].header.frame_id == FRAME, counters
    p = got[0].detections[0].bbox.center.position
    np.testing.assert_allclose([p.x, p.y, p.z], [o.x, o.y, o.z], atol=CENTRE_TOL_M)


def test_a_gpu_pipeline_computes_the_statistic_with_the_frame(blob_model):
    """The worker hands the paired depth to a pipeline that takes it (the GPU path) and publishes its statistic."""
    from vrt_ros.settings.config import defaults
    from vrt_ros.inference.pipeline import make_pipeline

    o = ds.OBJECTS[0]
    _, depth = ds.scene("plumb_bob", objects=(o,))
    values = defaults()
    values.update({"backend": "cpu", "model.path": str(blob_model), "model.pad_value": 0.0})
    pipe = GpuDepthStandin(make_pipeline(values, log=lambda m: None))
    ns = unique_namespace()
    with private_context() as ctx:
        rig = Rig(ctx, ns, blob_model, pipe, **{"depth.wait_ms": 500.0})
        with spinning(ctx, rig.node, rig.client):
            rig.wait_matched()
            rig.frame(o, depth, "16UC1")
            got = rig.d3.wait(1, 30.0)
        rig.client.destroy_node()
        rig.node.destroy_node()
    pipe.close()
    assert pipe.jobs == 1 and len(got) == 1
    p = got[0].detections[0].bbox.center.position
    assert p.z == pytest.approx(o.z + 1.0, abs=CENTRE_TOL_M)  # the pipeline's statistic, not the CPU's


def test_depth_cameras_must_be_cameras_of_the_node(blob_model):
    from vrt_ros.errors import ConfigError

    with private_context() as ctx:
        with pytest.raises(ConfigError, match="depth.cameras.*'rear'"):
            depth_node(ctx, unique_namespace(), blob_model, **{"depth.cameras": ["rear"]})


def test_managed_node_subscribes_to_depth_only_while_active(blob_model):
    from vrt_ros.ros.lifecycle_node import LifecycleDetectorNode

    ns = unique_namespace()
    base = {"backend": "cpu", "model.path": str(blob_model), "cameras": ["cam"], "depth.enabled": True}
    with private_context() as ctx:
        node = LifecycleDetectorNode(context=ctx, namespace=ns,
                                     parameter_overrides=[Parameter(k, value=v) for k, v in base.items()])
        client = Node("client", context=ctx, namespace=ns)

        def graph():
            pubs = {t for t, _ in client.get_publisher_names_and_types_by_node("vrt_detector", ns)}
            subs = {t for t, _ in client.get_subscriber_names_and_types_by_node("vrt_detector", ns)}
            return pubs, subs

        depth_subs = {f"{ns}/cam/depth/image_raw", f"{ns}/cam/camera_info"}
        with spinning(ctx, node, client):
            node.trigger_configure()
            assert wait_until(lambda: f"{ns}/cam/detections_3d" in graph()[0], 20.0)
            assert not depth_subs & graph()[1]
            node.trigger_activate()
            assert wait_until(lambda: depth_subs <= graph()[1], 20.0)
            node.trigger_deactivate()
            assert wait_until(lambda: not depth_subs & graph()[1], 20.0)
            node.trigger_cleanup()
            assert wait_until(lambda: f"{ns}/cam/detections_3d" not in graph()[0], 20.0)
        client.destroy_node()
        node.destroy_node()


def test_an_unexpected_error_in_the_3d_step_is_counted_and_the_node_keeps_running(blob_model, monkeypatch):
    from vrt_ros.ros import depth_input

    o = ds.OBJECTS[0]
    _, depth = ds.scene("plumb_bob", objects=(o,))
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise IndexError("boom")
        return real(*args, **kwargs)

    real = depth_input.boxes_3d
    monkeypatch.setattr(depth_input, "boxes_3d", broken)
    ns = unique_namespace()
    with private_context() as ctx:
        rig = Rig(ctx, ns, blob_model, **{"depth.wait_ms": 500.0})
        with spinning(ctx, rig.node, rig.client):
            rig.wait_matched()
            rig.frame(o, depth, "16UC1")  # the 3D step fails: counted, the 2D detections still published
            rig.frame(o, depth, "16UC1")
            got = rig.d3.wait(1, 30.0)
            counters = rig.node.counters()["cam"]
        rig.client.destroy_node()
        rig.node.destroy_node()
    assert len(got) == 1 and counters.processed == 2 and not counters.dropped
    assert counters.depth == {reasons.INTERNAL: 1, "published": 1}


def test_batched_cameras_get_their_own_3d_detections(tmp_path):
    """Two cameras on the batching worker (issue 21, engine.max_batch 2): each frame's 3D output comes from its own
    paired depth (a plane at 1.5 m and one at 3.0 m), with the CPU statistic after the batch."""
    from synthetic_models import brightness_end2end

    w, h, box = 320, 240, (10.0, 20.0, 100.0, 120.0)
    model = brightness_end2end(tmp_path / "brightness.onnx", w, w, box)
    k = (300.0, 0.0, 160.0, 0.0, 300.0, 120.0, 0.0, 0.0, 1.0)
    ns = unique_namespace()
    base = {"backend": "cpu", "model.path": str(model), "model.pad_value": 0.0, "input.qos": "reliable",
            "input.depth": 10, "cameras": ["a", "b"], "engine.max_batch": 2, "input.batch_wait_ms": 1000.0,
            "depth.enabled": True, "depth.wait_ms": 1000.0}
    planes = {"a": 1.5, "b": 3.0}
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, parameter_overrides=[Parameter(n, value=v) for n, v in base.items()])
        client = Node("client", context=ctx, namespace=ns)
        got = {c: Collector(client, Detection3DArray, f"{c}/detections_3d") for c in planes}
        got2 = {c: Collector(client, Detection2DArray, f"{c}/detections") for c in planes}
        q = make_qos("reliable", 10)
        pubs = {(c, t): client.create_publisher(m, f"{c}/{t}", q) for c in planes
                for t, m in (("camera_info", CameraInfo), ("depth/image_raw", Image), ("image_raw", Image))}
        with spinning(ctx, node, client):
            assert wait_until(lambda: all(p.get_subscription_count() >= 1 for p in pubs.values()), 30.0)
            for c, z in planes.items():
                info = CameraInfo(width=w, height=h, distortion_model="plumb_bob", d=[0.0] * 5, k=list(k),
                                  p=list(k[:3]) + [0.0] + list(k[3:6]) + [0.0] + list(k[6:]) + [0.0])
                info.header.frame_id = f"{c}_optical"
                info.header.stamp.sec = 100
                pubs[(c, "camera_info")].publish(info)
                d = Image(width=w, height=h, encoding="32FC1", step=w * 4,
                          data=np.full((h, w), z, np.float32).tobytes())
                d.header = info.header
                pubs[(c, "depth/image_raw")].publish(d)
            time.sleep(0.5)
            for c in planes:
                img = Image(width=w, height=h, encoding="bgr8", step=w * 3,
                            data=np.full((h, w, 3), 200, np.uint8).tobytes())
                img.header.frame_id, img.header.stamp.sec = f"{c}_optical", 100
                pubs[(c, "image_raw")].publish(img)
            msgs = {c: got[c].wait(1, 30.0) for c in planes}
            msgs2 = {c: got2[c].wait(1, 30.0) for c in planes}
            counters = node.counters()
        client.destroy_node()
        node.destroy_node()
    for c, z in planes.items():
        assert len(msgs[c]) == 1 and msgs[c][0].header.frame_id == f"{c}_optical", counters[c]
        p = msgs[c][0].detections[0].bbox.center.position
        c2 = msgs2[c][0].detections[0].bbox.center.position  # the 2D box centre, source pixels
        u, v = c2.x - 0.5, c2.y - 0.5
        np.testing.assert_allclose([p.x, p.y, p.z], [(u - k[2]) / k[0] * z, (v - k[5]) / k[4] * z, z], atol=1e-3)
    # through the batching worker (engine.max_batch 2): batch sizes are counted; whether the two frames shared a
    # batch depends on their arrival (before the merge of issue 21's final version they did: {2: 1})
    assert sum(counters["a"].batch_sizes.values()) == 1 == sum(counters["b"].batch_sizes.values())
