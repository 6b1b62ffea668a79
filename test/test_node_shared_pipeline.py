"""Two nodes composed on one GPU pipeline (issue 34, item 1: "shared buffers leave their lock"; a documented set-up:
``DetectorNode(pipeline=...)``): each node's 3D detections and stage times are its own frame's, never the frame
that last ran through the shared pipeline.

The pipeline is the real :class:`~vrt_ros.backends.cuda.CudaPipeline` on the recording CUDA stand-in
(test/fake_cuda.py), its postprocess writing one fixed box and its depth kernel emulated step by step
(test_gpu_depth.py). Each node gets its own depth stream: a flat plane at a distance that differs per stream and per
frame (stream ``a`` 1.0 m + 0.1 m a frame, ``b`` 3.0 m + 0.1 m a frame), so the 3D centre of the box is the plane's
distance and tells the frames apart. A busy executor is emulated by holding each call's return until the other
node's next call has gone through the pipeline (what a preempted worker thread can do, made certain): a result
read from the pipeline object after its lock is released (the depth statistic, the stage times) is then the other
node's. The mask case is test_node_mask_frames.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

import depth_scenes as ds  # noqa: E402
from fake_cuda import FakeEngine, fake_cuda  # noqa: E402,F401  (fixture)
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end  # noqa: E402
from test_gpu_depth import emulate_depth_box_stats, finalize_with  # noqa: E402
from test_gpu_glue import HEAD_OUTPUTS, IMAGES, values  # noqa: E402
from test_node_depth import T0_NS, Rig  # noqa: E402

pytestmark = pytest.mark.ros

FRAMES = 3  # per stream
BOX = np.float32([[200.0, 150.0, 330.0, 260.0]])  # the one detection of every frame, source pixels
PLANE_M = {"a": 1.0, "b": 3.0}  # stream's distance at its first frame; + 0.1 m a frame


def plane_m(cam: str, i: int) -> float:
    return PLANE_M[cam] + 0.1 * i


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", ds.W, ds.H)


def _hold_each_call_until_the_next(monkeypatch, pipe) -> dict[float, dict[str, float]]:
    """Each ``process`` call returns only once another call has gone through the pipeline (or after 3 s, for the
    last one). Returns what each call returned as its stage times, by its depth plane's distance (m)."""
    calls = [0]
    cond = threading.Condition()
    timings: dict[float, dict[str, float]] = {}
    process = pipe.process

    def held(spec, data, *args, **kwargs):
        dets = process(spec, data, *args, **kwargs)
        depth = kwargs.get("depth")
        with cond:
            calls[0] += 1
            mine = calls[0]
            if depth is not None:
                timings[round(float(np.median(depth.image.array())), 3)] = dict(dets.timings)
            cond.notify_all()
            cond.wait_for(lambda: calls[0] > mine, timeout=3.0)
        return dets

    monkeypatch.setattr(pipe, "process", held)
    return timings


def _run_two_nodes_on_one_gpu_pipeline(fake_cuda, monkeypatch, model: Path):  # noqa: F811
    """Returns ({cam: 3D messages}, {cam: the node's last stage times}, {distance: each call's stage times})."""
    from vrt_ros.backends.cuda import CudaPipeline

    fake_cuda.emulators.update({"finalize": finalize_with(BOX), "depth_box_stats": emulate_depth_box_stats})
    pipe = CudaPipeline(values("yolov8"), log=lambda m: None, engine=FakeEngine([IMAGES], HEAD_OUTPUTS["yolov8"]))
    calls = _hold_each_call_until_the_next(monkeypatch, pipe)
    ns = unique_namespace()
    with private_context() as ctx:
        rigs = {c: Rig(ctx, f"{ns}/{c}", model, pipe, **{"depth.wait_ms": 1000.0}) for c in PLANE_M}
        nodes = [n for r in rigs.values() for n in (r.node, r.client)]
        with spinning(ctx, *nodes):
            for r in rigs.values():
                r.wait_matched()

            def send(cam: str) -> None:  # lock-step per stream (Rig.frame waits for the frame's detections)
                for i in range(FRAMES):
                    rigs[cam].frame(ds.OBJECTS[0], np.full((ds.H, ds.W), plane_m(cam, i), np.float32))

            errors = []
            threads = [threading.Thread(target=lambda c=c: _record(errors, send, c)) for c in rigs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors
            got = {c: r.d3.wait(FRAMES, 30.0) for c, r in rigs.items()}
            last = {c: dict(r.node.counters()["cam"].last_timings) for c, r in rigs.items()}
        for n in nodes:
            n.destroy_node()
    pipe.close()
    assert fake_cuda.hazards == []
    return got, last, calls


def _record(errors: list, fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
        errors.append(repr(exc))


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
        assert set(own) == {"upload", "preprocess", "inference", "postprocess", "total"}
        assert last[cam] == own, cam
