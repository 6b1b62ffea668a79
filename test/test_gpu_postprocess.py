"""GPU decode + NMS + finalize vs the numpy references (head.decode + vrt_ros.boxes.postprocess.finish).

The same raw engine outputs go into both paths: real YOLOX-nano outputs (ONNX Runtime on the CPU for the engine
step, outputs uploaded) on the shared photos, and synthetic outputs for the heads without weights here
(yolov8, yolov8_pose, end2end, centerface), with NaN/Inf rows. Same detections: classes equal, boxes and
keypoints within 0.5 px, scores within 1e-3.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from gpu_support import requires_gpu, to_device
from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.postprocess import finish
from vrt_ros.heads import HEADS
from vrt_ros.types import InputSpec, PostprocessParams, TensorInfo

pytestmark = requires_gpu


@pytest.fixture(scope="module")
def gpu():
    from vrt_ros.gpu.library import KernelLibrary
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    return rt, KernelLibrary.shared(rt.arch), rt.create_stream()


def gpu_finish(gpu, head, outputs, lb, params):
    from vrt_ros.gpu.postprocess import GpuPostprocessor

    rt, lib, stream = gpu
    post = GpuPostprocessor(rt, lib, head, stream)
    bufs = [to_device(rt, stream, np.ascontiguousarray(o, np.float32)) for o in outputs]
    post.enqueue(stream, [b.ptr for b in bufs], lb, params)
    rt.sync(stream)
    dets = post.read()
    post.close(stream)
    for b in bufs:
        b.close(stream)
    return dets


def assert_same(gpu_dets, cpu_dets, what: str):
    assert len(gpu_dets) == len(cpu_dets), f"{what}: {len(gpu_dets)} GPU vs {len(cpu_dets)} CPU detections"
    np.testing.assert_array_equal(gpu_dets.class_ids, cpu_dets.class_ids, err_msg=what)
    if len(cpu_dets):
        box_err = np.abs(gpu_dets.boxes - cpu_dets.boxes).max()
        score_err = np.abs(gpu_dets.scores - cpu_dets.scores).max()
        kp_err = np.abs(gpu_dets.keypoints - cpu_dets.keypoints).max() if gpu_dets.keypoints.size else 0.0
        print(f"{what}: {len(cpu_dets)} detections, max box err {box_err:.2e} px, score err {score_err:.2e}, keypoint err {kp_err:.2e}")
        assert box_err <= 0.5 and score_err <= 1e-3 and kp_err <= 0.5, what
    assert gpu_dets.keypoints.shape == cpu_dets.keypoints.shape


def compare(gpu, head, outputs, lb, params, what):
    cpu = finish(head.decode(outputs, params.score_threshold), lb, params, head.applies_nms)
    got = gpu_finish(gpu, head, outputs, lb, params)
    assert_same(got, cpu, what)
    return got


def test_yolox_real_outputs(gpu, shared_dir):
    from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine
    from vrt_ros.intake.preprocess import CpuPreprocessor

    engine = OnnxRuntimeEngine(shared_dir / "models" / "yolox_nano.onnx")
    spec = InputSpec(416, 416)
    head = HEADS["yolox"](engine.outputs, spec)
    pre = CpuPreprocessor(spec)
    images = sorted((shared_dir / "data" / "images").glob("*.jpg"))
    assert images
    total = 0
    for path in images:
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        tensor, lb = pre(bgr)
        outs = engine.run(tensor)
        for params in (
            PostprocessParams(),
            PostprocessParams(score_threshold=0.05, class_agnostic=True, max_detections=30),
            PostprocessParams(score_threshold=0.01, nms_iou=0.3),
        ):
            total += len(compare(gpu, head, outs, lb, params, f"yolox {path.name} {params}"))
    assert total > 0


def _lb(w=1280, h=720, spec=InputSpec(640, 640)):
    return letterbox(w, h, spec.width, spec.height, spec.align)


@pytest.mark.parametrize("agnostic", [False, True])
def test_yolov8_synthetic(gpu, agnostic):
    rng = np.random.default_rng(8)
    spec = InputSpec(640, 640, align="center")
    n = (80 * 80 + 40 * 40 + 20 * 20)
    nc = 5
    out = np.zeros((1, 4 + nc, n), np.float32)
    out[0, 0] = rng.uniform(0, 640, n)
    out[0, 1] = rng.uniform(0, 640, n)
    out[0, 2] = rng.uniform(4, 120, n)
    out[0, 3] = rng.uniform(4, 120, n)
    out[0, 4:] = rng.uniform(0, 1, (nc, n)) ** 40  # mostly low scores: ~1200 candidates above 0.3
    out[0, 0, :50] = np.nan  # HC-10: broken rows never come out
    out[0, 2, 50:100] = np.inf
    head = HEADS["yolov8"]([TensorInfo("output0", out.shape)], spec)
    lb = _lb(1280, 720, spec)
    dets = compare(gpu, head, [out], lb, PostprocessParams(score_threshold=0.3, class_agnostic=agnostic), f"yolov8 agnostic={agnostic}")
    assert np.isfinite(dets.boxes).all()


def test_yolov8_pose_synthetic(gpu):
    rng = np.random.default_rng(17)
    spec = InputSpec(640, 384, align="center")
    n = 80 * 48 + 40 * 24 + 20 * 12
    k = 17
    out = np.zeros((1, 5 + 3 * k, n), np.float32)
    out[0, 0] = rng.uniform(0, 640, n)
    out[0, 1] = rng.uniform(0, 384, n)
    out[0, 2:4] = rng.uniform(8, 100, (2, n))
    out[0, 4] = rng.uniform(0, 1, n) ** 6
    out[0, 5::3] = rng.uniform(-20, 660, (k, n))
    out[0, 6::3] = rng.uniform(-20, 400, (k, n))
    out[0, 7::3] = rng.uniform(0, 1, (k, n))
    head = HEADS["yolov8_pose"]([TensorInfo("output0", out.shape)], spec)
    compare(gpu, head, [out], _lb(720, 1280, spec), PostprocessParams(score_threshold=0.25), "yolov8_pose")


def test_end2end_synthetic(gpu):
    rng = np.random.default_rng(5)
    spec = InputSpec(640, 640)
    m = 300
    out = np.zeros((1, m, 6), np.float32)
    xy = rng.uniform(-50, 600, (m, 2))
    out[0, :, 0:2] = xy
    out[0, :, 2:4] = xy + rng.uniform(-5, 200, (m, 2))  # some empty/negative boxes
    out[0, :, 4] = rng.uniform(0, 1, m)
    out[0, :, 5] = rng.integers(0, 80, m)
    out[0, :5, 4] = 0.5  # ties: broken by row index on both paths
    out[0, 10, 5] = np.nan
    out[0, 11, 5] = -3
    head = HEADS["end2end"]([TensorInfo("output0", out.shape)], spec)
    compare(gpu, head, [out], _lb(641, 481, spec), PostprocessParams(score_threshold=0.2, max_detections=50), "end2end")


def test_centerface_synthetic(gpu):
    rng = np.random.default_rng(11)
    spec = InputSpec(800, 480, channel_order="rgb", pad_value=0.0)
    h, w = 480 // 4, 800 // 4
    heat = cv2.GaussianBlur(rng.uniform(0, 1, (h, w)).astype(np.float32), (0, 0), 1.5)
    heat = (heat - heat.min()) / (heat.max() - heat.min())
    heat[3, 3] = np.nan
    outs = [
        heat[None, None].astype(np.float32),
        rng.uniform(0.5, 3.0, (1, 2, h, w)).astype(np.float32),
        rng.uniform(0, 1, (1, 2, h, w)).astype(np.float32),
        rng.uniform(-0.5, 1.5, (1, 10, h, w)).astype(np.float32),
    ]
    infos = [TensorInfo(n, o.shape) for n, o in zip(("537", "538", "539", "540"), outs)]
    head = HEADS["centerface"](infos, spec)
    compare(gpu, head, outs, _lb(1024, 681, spec), PostprocessParams(score_threshold=0.5, nms_iou=0.3), "centerface")


def test_nothing_above_threshold(gpu):
    """HC-11: score_threshold above 1 gives an empty result."""
    spec = InputSpec(640, 640)
    out = np.random.default_rng(1).uniform(0, 1, (1, 300, 6)).astype(np.float32)
    head = HEADS["end2end"]([TensorInfo("o", out.shape)], spec)
    dets = gpu_finish(gpu, head, [out], _lb(640, 480, spec), PostprocessParams(score_threshold=1.01))
    assert len(dets) == 0 and dets.boxes.shape == (0, 4)
