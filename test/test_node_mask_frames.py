"""Each published instance mask belongs to its own frame (issue 34, item 1), also with two nodes composed on one
pipeline (a documented set-up: ``DetectorNode(pipeline=...)``, "several nodes sharing one engine"; DESIGN.md: "One pipeline
may serve several nodes or threads").

Two nodes share one pipeline of the real YOLOv8-seg model (``../shared/models/seg``); each is fed its own stream of
photos (two different ID-card photos, shifted a little every frame) and every ``instance_mask`` it publishes is
compared with the reference label image of that frame alone (the CPU reference decode, found by the header stamp).
A busy executor is emulated by holding each mask message back until the other node's next frame has gone through
the pipeline: a label image the pipeline reuses would by then hold the other camera's pixels (what was found: the
lock was per worker, not per pipeline). On the CPU path in CI; on the GPU (``-m gpu``) with the CUDA pipeline.
The CUDA stand-in's check of the same class (the label image a call returned outlives the next call) is in
test/test_gpu_frame_buffers.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")

from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from gpu_support import requires_gpu  # noqa: E402
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from test_node import Collector, image_msg, overrides, wait_matched, wait_until  # noqa: E402
from vrt_ros.inference.backends.cpu import CpuPipeline  # noqa: E402
from vrt_ros.inference.pipeline import make_pipeline  # noqa: E402
from vrt_ros.ros import worker as worker_module  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.settings import config  # noqa: E402
from vrt_ros.types import PostprocessParams  # noqa: E402

pytestmark = pytest.mark.ros

W, H = 640, 480  # both streams the same size: the frames would share any per-size buffer
FRAMES = 4  # per stream
PHOTOS = {"a": "two_ids", "b": "us_card_rotated"}
PARAMS = dict(score_threshold=0.6, nms_iou=0.5, class_agnostic_nms=True)


@pytest.fixture(scope="module")
def seg_model(shared_dir) -> Path:
    path = shared_dir / "models" / "seg" / "idcard_yolov8seg.onnx"
    if not path.exists():
        pytest.skip(f"the YOLOv8-seg model is not in {path.parent}")
    return path


def _values(model: Path, backend: str) -> dict:
    return config.validate({**config.defaults(), "model.path": str(model), "backend": backend,
                            **PARAMS})


def _streams(model: Path) -> dict[str, list[np.ndarray]]:
    photos = model.parent / "photos"
    out = {}
    for cam, name in PHOTOS.items():
        img = cv2.resize(cv2.imread(str(photos / f"{name}.png")), (W, H), interpolation=cv2.INTER_AREA)
        out[cam] = [np.ascontiguousarray(np.roll(img, 12 * i, axis=1)) for i in range(FRAMES)]
    return out


def _references(model: Path, streams) -> dict[str, list[np.ndarray]]:
    """Each frame's label image, decoded alone by the CPU reference."""
    ref = CpuPipeline(_values(model, "cpu"), log=lambda m: None)
    ref.set_postprocess(PostprocessParams(score_threshold=0.6, nms_iou=0.5, class_agnostic=True, want_masks=True))
    return {cam: [ref.process_bgr(f).label_mask.copy() for f in frames] for cam, frames in streams.items()}


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


def _same_masks(got: np.ndarray, want: np.ndarray, exact: bool) -> bool:
    if exact:
        return bool(np.array_equal(got, want))
    labels = [v for v in np.unique(want) if v and (want == v).sum() >= 1000]
    return bool(labels) and all(_iou(got == v, want == v) >= 0.9 for v in labels)


def _hold_masks_until_the_other_frame(monkeypatch, pipe) -> None:
    """Each worker's mask message is built only after another frame went through the pipeline since its own (or
    after 3 s, for the last frames): what a slow executor can do, made certain."""
    calls = [0]
    cond = threading.Condition()
    mine = threading.local()
    process = pipe.process

    def counted(*args, **kwargs):
        try:
            return process(*args, **kwargs)
        finally:
            with cond:
                calls[0] += 1
                mine.call = calls[0]
                cond.notify_all()

    build = worker_module.instance_mask_msg

    def held(labels, header, encoding):
        with cond:
            cond.wait_for(lambda: calls[0] > getattr(mine, "call", 0), timeout=3.0)
        return build(labels, header, encoding)

    monkeypatch.setattr(pipe, "process", counted)
    monkeypatch.setattr(worker_module, "instance_mask_msg", held)


def _run_two_nodes(pipe, streams, monkeypatch) -> dict[str, list[Image]]:
    _hold_masks_until_the_other_frame(monkeypatch, pipe)
    ns = unique_namespace()
    with private_context() as ctx:
        nodes = {c: DetectorNode(f"seg_{c}", context=ctx, namespace=f"{ns}/{c}", pipeline=pipe,
                                 parameter_overrides=overrides(input__qos="reliable", input__depth=10, **PARAMS))
                 for c in streams}
        client = Node("client", context=ctx, namespace=ns)
        dets = {c: Collector(client, Detection2DArray, f"{c}/camera/detections") for c in streams}
        masks = {c: Collector(client, Image, f"{c}/camera/instance_mask") for c in streams}
        pubs = {c: client.create_publisher(Image, f"{c}/camera/image_raw", make_qos("reliable", 10)) for c in streams}
        with spinning(ctx, *nodes.values(), client):
            for p in pubs.values():
                wait_matched(p)
            assert wait_until(lambda: all(any(p.topic_name.endswith("instance_mask") and p.get_subscription_count()
                                                  for p in n.publishers) for n in nodes.values()), 20.0)

            def send(cam: str) -> None:  # lock-step per stream: the next frame once this one is answered
                for i, frame in enumerate(streams[cam]):
                    pubs[cam].publish(image_msg(frame, i + 1, f"{cam}_optical"))
                    wait_until(lambda: len(dets[cam].msgs) > i, 60.0)

            threads = [threading.Thread(target=send, args=(c,)) for c in streams]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert wait_until(lambda: all(len(masks[c].msgs) == len(dets[c].msgs) for c in streams), 30.0)
        for n in nodes.values():
            n.destroy_node()
        client.destroy_node()
    return {c: list(masks[c].msgs) for c in streams}


def _check(got: dict[str, list[Image]], refs, exact: bool) -> None:
    # the two streams' masks differ, so a mask of the other camera cannot pass for this one's
    assert not _same_masks(refs["a"][0], refs["b"][0], exact=False)
    for cam, msgs in got.items():
        assert len(msgs) >= FRAMES - 1, (cam, len(msgs))
        for msg in msgs:
            assert msg.header.frame_id == f"{cam}_optical" and (msg.width, msg.height) == (W, H)
            labels = np.frombuffer(bytes(msg.data), np.uint8).reshape(H, W)
            want = refs[cam][msg.header.stamp.sec - 1]
            assert _same_masks(labels, want, exact), (cam, msg.header.stamp.sec, np.unique(labels), np.unique(want))


def _two_nodes_on_one_pipeline(seg_model: Path, monkeypatch, backend: str) -> None:
    streams = _streams(seg_model)
    refs = _references(seg_model, streams)
    pipe = make_pipeline(_values(seg_model, backend), log=lambda m: None)
    try:
        got = _run_two_nodes(pipe, streams, monkeypatch)
    finally:
        pipe.close()
    # the CPU path is the reference: the same label image, pixel for pixel; the GPU's: every mask of >= 1000 px
    # with IoU >= 0.9 against its own frame's reference
    _check(got, refs, exact=backend == "cpu")


def test_two_nodes_on_one_cpu_pipeline_publish_each_frames_own_mask(seg_model, monkeypatch):
    _two_nodes_on_one_pipeline(seg_model, monkeypatch, "cpu")


@requires_gpu[0]
@requires_gpu[1]
def test_gpu_two_nodes_on_one_cuda_pipeline_publish_each_frames_own_mask(seg_model, monkeypatch):
    _two_nodes_on_one_pipeline(seg_model, monkeypatch, "cuda")
