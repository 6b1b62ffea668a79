"""Two nodes composed on one GPU pipeline (issue 34, item 1: "shared buffers leave their lock"; a documented set-up:
``DetectorNode(pipeline=...)``): each node's 3D detections and stage times are its own frame's, never the frame
that last ran through the shared pipeline.

The pipeline is the real :class:`~vrt_ros.inference.backends.cuda.CudaPipeline` on the recording CUDA stand-in
(test/fake_cuda.py), its postprocess writing one fixed box and its depth kernel emulated step by step
(test_gpu_depth.py). Each node gets its own depth stream: a flat plane at a distance that differs per stream and per
frame (stream ``a`` 1.0 m + 0.1 m a frame, ``b`` 3.0 m + 0.1 m a frame), so the 3D centre of the box is the plane's
distance and tells the frames apart. Beside the nodes, a third user calls the pipeline directly (a plane at 9 m),
and each node's call returns only once a call of that user has gone through after it (what a preempted worker
thread can see, made certain): a result read from the pipeline object after its lock is released (the depth
statistic, the stage times) or a view of a buffer the pipeline reuses would then be that user's. The nodes
themselves hold one lock per pipeline around their calls (:func:`vrt_ros.inference.pipeline.call_lock`): the postprocess
parameters, also pipeline state, are each node's own for its calls (the CPU test below, where a held
``set_postprocess`` would otherwise let the other node's parameters in). The mask case is
test_node_mask_frames.py. The batch path (``process_batch``) likewise, on the CPU with a dynamic-batch model.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

import depth_scenes as ds  # noqa: E402
from fake_cuda import FakeEngine, fake_cuda  # noqa: E402,F401  (fixture)
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end, brightness_end2end, ramp_rectangle  # noqa: E402
from test_gpu_depth import emulate_depth_box_stats, finalize_with  # noqa: E402
from test_gpu_glue import HEAD_OUTPUTS, IMAGES, values  # noqa: E402
from test_node import Collector, image_msg, overrides, wait_matched  # noqa: E402
from test_node_depth import T0_NS, Rig  # noqa: E402
from vrt_ros.depth.image import DepthImage  # noqa: E402
from vrt_ros.depth.stats import DepthJob  # noqa: E402
from vrt_ros.inference.pipeline import make_pipeline  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.settings import config  # noqa: E402
from vrt_ros.types import ImageSpec, RawFrame  # noqa: E402

pytestmark = pytest.mark.ros

FRAMES = 3  # per stream
BOX = np.float32([[200.0, 150.0, 330.0, 260.0]])  # the one detection of every frame, source pixels
PLANE_M = {"a": 1.0, "b": 3.0}  # stream's distance at its first frame; + 0.1 m a frame
THIRD_M = 9.0  # the third user's plane


def plane_m(cam: str, i: int) -> float:
    return PLANE_M[cam] + 0.1 * i


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", ds.W, ds.H)


class ThirdUser:
    """A third user of the pipeline beside the two nodes (DESIGN.md: one pipeline may serve several nodes or
    threads), as a context manager: a thread calling ``method`` directly with its own frame (``direct_args``) every
    20 ms; and every node's call of ``method`` returns only once one of this thread's calls has gone through after
    it (at most 3 s), as a preempted worker thread can see. Whatever a node read from the pipeline object after its
    call (rather than from the call's result) would then be this thread's frame's. The nodes' own calls cannot
    interleave so: each node holds the pipeline's call lock around its call.

    Attributes:
        timings: what each node call returned as its stage times (a batch: its first frame's), by
            ``key(args, kwargs)`` (calls whose key is None are not kept).
        calls: this thread's calls so far.
    """

    def __init__(self, monkeypatch, pipe, method: str, direct_args: tuple, direct_kwargs: dict, key) -> None:
        self.timings: dict = {}
        self.calls = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        inner = getattr(pipe, method)

        def loop() -> None:
            while not self._stop.wait(0.02):
                inner(*direct_args, **direct_kwargs)
                with self._cond:
                    self.calls += 1
                    self._cond.notify_all()

        def held(*args, **kwargs):
            result = inner(*args, **kwargs)
            first = result[0] if isinstance(result, list) else result
            with self._cond:
                k = key(args, kwargs)
                if k is not None:
                    self.timings[k] = dict(first.timings)
                mine = self.calls
                self._cond.wait_for(lambda: self.calls > mine, timeout=3.0)
            return result

        monkeypatch.setattr(pipe, method, held)
        self._thread = threading.Thread(target=loop, name="third_user", daemon=True)

    def __enter__(self) -> "ThirdUser":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10.0)


def _plane_of(args, kwargs) -> float | None:
    depth = (kwargs.get("depth") or [None])[0]  # a batch of one (each node has one camera)
    return None if depth is None else round(float(np.median(depth.image.array())), 3)


def _run_two_nodes_on_one_gpu_pipeline(fake_cuda, monkeypatch, model: Path):  # noqa: F811
    """Returns ({cam: 3D messages}, {cam: the node's last stage times}, {distance: each call's stage times})."""
    from vrt_ros.inference.backends.cuda import CudaPipeline

    fake_cuda.emulators.update({"finalize": finalize_with(BOX), "depth_box_stats": emulate_depth_box_stats})
    pipe = CudaPipeline(values("yolov8"), log=lambda m: None, engine=FakeEngine([IMAGES], HEAD_OUTPUTS["yolov8"]))
    spec = ImageSpec(width=ds.W, height=ds.H, encoding="bgr8", step=ds.W * 3)
    far = np.full((ds.H, ds.W), THIRD_M, np.float32)
    job = DepthJob(DepthImage(ds.W, ds.H, "32FC1", ds.W * 4, far.tobytes()), 1.0, (0.1, 10.0), 50.0)
    third = ThirdUser(monkeypatch, pipe, "process_batch", ([RawFrame(spec, np.zeros((ds.H, ds.W, 3), np.uint8))],),
                      {"depth": [job]}, _plane_of)
    ns = unique_namespace()
    with private_context() as ctx, third:
        rigs = {c: Rig(ctx, f"{ns}/{c}", model, pipe, **{"depth.wait_ms": 1000.0}) for c in PLANE_M}
        nodes = [n for r in rigs.values() for n in (r.node, r.client)]
        with spinning(ctx, *nodes):
            for r in rigs.values():
                r.wait_matched()

            def send(cam: str) -> None:  # lock-step per stream (Rig.frame waits for the frame's detections)
                for i in range(FRAMES):
                    rigs[cam].frame(ds.OBJECTS[0], np.full((ds.H, ds.W), plane_m(cam, i), np.float32))

            in_parallel(send, rigs)
            got = {c: r.d3.wait(FRAMES, 30.0) for c, r in rigs.items()}
            last = {c: dict(r.node.counters()["cam"].last_timings) for c, r in rigs.items()}
        for n in nodes:
            n.destroy_node()
    pipe.close()
    assert fake_cuda.hazards == [] and third.calls > 0
    return got, last, third.timings


def in_parallel(fn, cams) -> None:
    """``fn(cam)`` for every camera at once, one thread each; their errors are raised here."""
    errors: list[str] = []

    def run(cam: str) -> None:
        try:
            fn(cam)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(f"{cam}: {exc!r}")

    threads = [threading.Thread(target=run, args=(c,)) for c in cams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_two_nodes_on_one_gpu_pipeline_publish_each_frames_own_3d(fake_cuda, monkeypatch, blob_model):  # noqa: F811
    got, _, calls = _run_two_nodes_on_one_gpu_pipeline(fake_cuda, monkeypatch, blob_model)
    assert len(calls) == 2 * FRAMES  # every frame's statistic computed by the pipeline with the frame
    for cam, msgs in got.items():
        assert len(msgs) == FRAMES, (cam, len(msgs))
        for msg in msgs:
            i = (msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec - T0_NS) // 100_000_000
            (det,) = msg.detections
            z = det.bbox.center.position.z
            assert z == pytest.approx(plane_m(cam, i), abs=1e-6), (cam, i, z)  # its own frame's plane


def test_two_nodes_on_one_gpu_pipeline_report_each_frames_own_stage_times(fake_cuda, monkeypatch,  # noqa: F811
                                                                          blob_model):
    _, last, calls = _run_two_nodes_on_one_gpu_pipeline(fake_cuda, monkeypatch, blob_model)
    assert len({v["total"] for v in calls.values()}) == len(calls)  # every call's times tell it apart
    for cam in PLANE_M:
        own = calls[round(plane_m(cam, FRAMES - 1), 3)]  # the stage times of the node's own last frame
        assert set(own) == {"upload", "preprocess", "inference", "postprocess", "total", "batch_size"}
        own = {k: v for k, v in own.items() if k != "batch_size"}  # the worker's batch histogram, not a stage
        assert {k: v for k, v in last[cam].items() if k != "batch_wait"} == own, cam


def _hold_each_parameter_change(monkeypatch, pipe) -> None:
    """After each ``set_postprocess``, wait until another one was made (at most 1 s): without one lock around a
    node's parameters and its call, the other node's parameters would then be the ones its call runs with."""
    calls = [0]
    cond = threading.Condition()
    set_postprocess = pipe.set_postprocess

    def held(params):
        set_postprocess(params)
        with cond:
            calls[0] += 1
            mine = calls[0]
            cond.notify_all()
            cond.wait_for(lambda: calls[0] > mine, timeout=1.0)

    monkeypatch.setattr(pipe, "set_postprocess", held)


def test_two_nodes_on_one_pipeline_each_apply_their_own_postprocess_parameters(blob_model, monkeypatch):
    """The postprocess parameters are pipeline state: node ``a`` (``score_threshold`` 1.5: nothing published) and
    node ``b`` (0.35: the blob, score 1) on one CPU pipeline, each round one frame to each at once: each node's
    detections are its own parameters' (before, every frame ran with the parameters of the node configured last;
    with parameters applied per call but no lock shared by the nodes, with the other node's when it set them in
    between, which the held ``set_postprocess`` makes certain)."""
    thresholds = {"a": 1.5, "b": 0.35}
    values = config.validate({**config.defaults(), "backend": "cpu", "model.path": str(blob_model),
                              "model.pad_value": 0.0})
    pipe = make_pipeline(values, log=lambda m: None)
    frame = ramp_rectangle(ds.W, ds.H, (200.0, 150.0, 330.0, 260.0))
    ns = unique_namespace()
    with private_context() as ctx:
        nodes = {c: DetectorNode(f"det_{c}", context=ctx, namespace=f"{ns}/{c}", pipeline=pipe,
                                 parameter_overrides=overrides(input__qos="reliable", input__depth=10,
                                                               model__path=str(blob_model), model__pad_value=0.0,
                                                               score_threshold=t))
                 for c, t in thresholds.items()}
        client = Node("client", context=ctx, namespace=ns)
        got = {c: Collector(client, Detection2DArray, f"{c}/camera/detections") for c in thresholds}
        pubs = {c: client.create_publisher(Image, f"{c}/camera/image_raw", make_qos("reliable", 10)) for c in thresholds}
        _hold_each_parameter_change(monkeypatch, pipe)
        with spinning(ctx, *nodes.values(), client):
            for p in pubs.values():
                wait_matched(p)
            for i in range(2):
                for c in thresholds:
                    pubs[c].publish(image_msg(frame, i + 1, f"{c}_optical"))
                for c in thresholds:
                    assert len(got[c].wait(i + 1, 30.0)) == i + 1
        for n in nodes.values():
            n.destroy_node()
        client.destroy_node()
    pipe.close()
    assert [len(m.detections) for m in got["b"].msgs] == [1, 1]  # the blob is found
    assert [len(m.detections) for m in got["a"].msgs] == [0, 0]  # above 1: nothing published


def test_two_nodes_on_one_batching_pipeline_report_each_batchs_own_stage_times(monkeypatch, tmp_path):
    """The batch path (``process_batch``, CPU, dynamic-batch model, ``engine.max_batch`` 2): each node's stage times
    are its own batch's. Frames are flat grey, a level per node and frame, which keys each call."""
    w, h = 320, 240
    levels = {"a": 60, "b": 160}  # + 10 a frame
    model = brightness_end2end(tmp_path / "brightness.onnx", w, w, (10.0, 20.0, 100.0, 120.0))
    values = config.validate({**config.defaults(), "backend": "cpu", "model.path": str(model),
                              "model.pad_value": 0.0, "engine.max_batch": 2, "engine.threads": 1})
    pipe = make_pipeline(values, log=lambda m: None)
    assert pipe.max_batch == 2
    grey = np.full((h, w, 3), 250, np.uint8)
    third = ThirdUser(monkeypatch, pipe, "process_batch", ([RawFrame(ImageSpec(w, h, "bgr8", w * 3), grey)],), {},
                      key=lambda args, kwargs: bytes(memoryview(args[0][0].data)[:1])[0])
    calls = third.timings
    ns = unique_namespace()
    with private_context() as ctx, third:
        nodes = {c: DetectorNode(f"det_{c}", context=ctx, namespace=f"{ns}/{c}", pipeline=pipe,
                                 parameter_overrides=overrides(input__qos="reliable", input__depth=10,
                                                               model__path=str(model), model__pad_value=0.0,
                                                               score_threshold=0.05, engine__max_batch=2))
                 for c in levels}
        client = Node("client", context=ctx, namespace=ns)
        got = {c: Collector(client, Detection2DArray, f"{c}/camera/detections") for c in levels}
        pubs = {c: client.create_publisher(Image, f"{c}/camera/image_raw", make_qos("reliable", 10))
                for c in levels}
        with spinning(ctx, *nodes.values(), client):
            for p in pubs.values():
                wait_matched(p)

            def send(cam: str) -> None:  # lock-step per stream
                for i in range(FRAMES):
                    grey = np.full((h, w, 3), levels[cam] + 10 * i, np.uint8)
                    pubs[cam].publish(image_msg(grey, i + 1, f"{cam}_optical"))
                    assert len(got[cam].wait(i + 1, 30.0)) == i + 1

            in_parallel(send, levels)
            last = {c: dict(n.counters()["camera"].last_timings) for c, n in nodes.items()}
        for n in nodes.values():
            n.destroy_node()
        client.destroy_node()
    pipe.close()
    assert len(calls) == 2 * FRAMES and len({v["inference"] for v in calls.values()}) == len(calls)
    for cam, level in levels.items():
        own = {k: v for k, v in calls[level + 10 * (FRAMES - 1)].items() if k != "batch_size"}
        assert {k: v for k, v in last[cam].items() if k != "batch_wait"} == own, cam
