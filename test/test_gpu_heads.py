"""GPU path of the yolov8_seg, yolov8_obb and detr heads.

CI (the recording CUDA stand-in, test/fake_cuda.py): each head starts on the CUDA pipeline, its decode launch is
its kernel with its arguments by name, oriented heads launch the rotated NMS mask, heads with extras finalize with
``finalize_extras``, and the mask stage runs only when the frame asks for masks, reading the prototype output and
the frame's result rows and copying the label image back (checked against the numpy reference with emulated
kernels: the glue, not the kernels' arithmetic).

GPU (``-m gpu``, scripts/gpu_check.sh): the real kernels against the numpy references: classes equal, boxes within
0.5 px, scores within 1e-3, theta within 1e-4 rad, and every mask of at least 1000 pixels with IoU >= 0.99.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math

import numpy as np
import pytest

from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from gpu_support import requires_gpu, to_device
from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.masks import label_image
from vrt_ros.boxes.postprocess import finish
from vrt_ros.heads import select_head
from vrt_ros.settings.config import defaults
from vrt_ros.types import Detections, ImageSpec, InputSpec, PostprocessParams, TensorInfo

W = H = 640
N = 8400
IMAGES = TensorInfo("images", (1, 3, H, W), "float32")
SEG = [TensorInfo("output0", (1, 4 + 2 + 32, N)), TensorInfo("output1", (1, 32, H // 4, W // 4))]
OBB = [TensorInfo("output0", (1, 4 + 3 + 1, N))]
DETR = [TensorInfo("pred_logits", (1, 300, 5)), TensorInfo("pred_boxes", (1, 300, 4))]


def _values(head: str, **extra):
    v = defaults()
    v.update({"model.path": "model.onnx", "backend": "cuda", "model.head": head, **extra})
    return v


def _pipeline(head: str, outputs, data=None, **extra):
    from vrt_ros.inference.backends.cuda import CudaPipeline

    engine = FakeEngine([IMAGES], outputs, outputs_data=data)
    return CudaPipeline(_values(head, **extra), log=lambda m: None, engine=engine), engine


def _frame(w: int = 800, h: int = 600):
    return ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), np.zeros((h, w, 3), np.uint8)


def _named(fake, entry: str):
    """The last launch of ``entry`` as {parameter name: value}."""
    from vrt_ros.gpu.signatures import load_signatures
    from pathlib import Path

    sigs = {e: s for (_, e), s in load_signatures(Path(__file__).resolve().parents[1] / "kernels").items()}
    launch = [x for x in fake.launches if x.entry == entry][-1]
    return dict(zip([p.name for p in sigs[entry].params], launch.args))


def seg_outputs(seed: int = 0) -> list[np.ndarray]:
    """YOLOv8-seg-layout outputs: a few strong overlapping boxes among noise, random prototypes and coefficients."""
    rng = np.random.default_rng(seed)
    out = np.zeros((1, 38, N), np.float32)
    out[0, 0:2] = rng.uniform(100, 540, (2, N))
    out[0, 2:4] = rng.uniform(40, 260, (2, N))
    out[0, 4:6] = rng.uniform(0, 0.2, (2, N))
    hot = rng.choice(N, 12, replace=False)
    out[0, 4 + rng.integers(0, 2, 12), hot] = rng.uniform(0.5, 0.99, 12)
    out[0, 6:] = rng.normal(0, 1, (32, N))
    protos = rng.normal(0, 1, (1, 32, H // 4, W // 4)).astype(np.float32)
    protos[0, 0] = np.linspace(-3, 3, W // 4)[None, :] + np.linspace(-2, 2, H // 4)[:, None]  # smooth shapes
    out[0, 6, hot] = 4.0
    return [out, protos]


def obb_outputs(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = np.zeros((1, 8, N), np.float32)
    out[0, 0:2] = rng.uniform(100, 540, (2, N))
    out[0, 2] = rng.uniform(20, 200, N)
    out[0, 3] = rng.uniform(5, 60, N)
    out[0, 4:7] = rng.uniform(0, 0.2, (3, N))
    hot = rng.choice(N, 30, replace=False)
    out[0, 4 + rng.integers(0, 3, 30), hot] = rng.uniform(0.5, 0.99, 30)
    out[0, :2, hot[:10]] = out[0, :2, hot[10:20]] + 2
    out[0, 7] = rng.uniform(-math.pi / 4, 3 * math.pi / 4, N)
    return [out]


def detr_outputs(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(-4, 2, (1, 300, 5)).astype(np.float32)
    boxes = np.concatenate([rng.uniform(0.2, 0.8, (1, 300, 2)), rng.uniform(0.05, 0.3, (1, 300, 2))], 2)
    return [logits, boxes.astype(np.float32)]


# ------------------------------------------------------------------------------------------- CI: the stand-in
def test_seg_head_on_the_stand_in_masks_only_when_asked(fake_cuda):  # noqa: F811
    pipe, engine = _pipeline("yolov8_seg", SEG)
    assert pipe.head.name == "yolov8_seg" and pipe._post.cand_stride == 8 + 32 and pipe._post.out_stride == 7 + 32
    spec, img = _frame()
    pipe.process(spec, img)
    outs = engine.enqueued[-1][1]
    dec = _named(fake_cuda, "decode_yolov8_seg")
    assert (dec["out"], dec["cells"], dec["num_classes"], dec["num_masks"]) == (outs[0], N, 2, 32)
    fin = _named(fake_cuda, "finalize_extras")
    assert (fin["num_extras"], fin["oriented"]) == (32, 0)
    assert not any(x.entry.startswith("mask_") for x in fake_cuda.launches)  # nobody asked: no mask work
    pipe.set_postprocess(PostprocessParams(want_masks=True))
    allocations = len(fake_cuda.live())
    dets = pipe.process(spec, img)
    logits, labels = _named(fake_cuda, "mask_logits"), _named(fake_cuda, "mask_labels")
    assert logits["protos"] == outs[1] and logits["result"] == fin["result"] == labels["result"]
    assert (logits["proto_w"], logits["proto_h"], logits["coef_offset"], logits["out_stride"]) == (160, 160, 7, 39)
    assert (labels["src_w"], labels["src_h"], labels["label_bytes"], labels["max_labels"]) == (800, 600, 1, 255)
    assert dets.label_mask is not None and dets.label_mask.shape == (600, 800) and dets.label_mask.dtype == np.uint8
    assert len(fake_cuda.live()) == allocations + 2  # the label image of this size: device + pinned, once
    pipe.process(spec, img)
    assert len(fake_cuda.live()) == allocations + 2  # steady frames allocate nothing
    assert fake_cuda.hazards == []
    pipe.close()


@pytest.mark.parametrize("scale_error", [1.0, 1.02], ids=["as_launched", "wrong_scale"])
def test_seg_mask_glue_feeds_the_kernels_the_frames_rows_and_prototypes(fake_cuda, scale_error):  # noqa: F811
    """With finalize_extras and the two mask kernels emulated (numpy, from their parameter lists), the label image
    read back equals the reference for the same detections, so pointers, strides, sizes, scales and the D2H are
    right; mono16 when max_detections exceeds 254. The ``mask_labels`` emulator maps pixels with the scales and pads
    it is given (issue 33: it used to recompute the letterbox and ignore ``scale_x``/``scale_y``), so a launch with a
    scale 2 % off (``wrong_scale``: the launch's scales multiplied before the emulator reads them) gives another
    label image."""
    outputs = seg_outputs()
    pipe, _ = _pipeline("yolov8_seg", SEG, outputs, max_detections=300)
    row = np.zeros(7 + 32, np.float32)
    row[:7] = [700.5, 80.0, 1200.0, 430.25, 0.9, 1, 0.0]
    row[7] = 1.0  # coefficients pick prototype 0 (the smooth ramp)
    post = pipe._post

    def finalize_extras(args):
        a = dict(zip([p.name for p in post._sig_final.params], args))
        (ctypes.c_int32 * 2).from_address(int(a["result"]))[:] = [1, 1]
        ctypes.memmove(int(a["result"]) + 16, row.ctypes.data, row.nbytes)

    def arr(ptr, shape, dtype=np.float32):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.frombuffer((ctypes.c_char * n).from_address(int(ptr)), dtype).reshape(shape)

    def mask_logits(args):
        a = dict(zip([p.name for p in post._masks._sig_logits.params], args))
        n = int(arr(a["result"], (1,), np.int32)[0])
        rows = arr(int(a["result"]) + 16, (n, int(a["out_stride"])))
        protos = arr(a["protos"], (int(a["num_masks"]), int(a["proto_h"]), int(a["proto_w"])))
        out = np.frombuffer((ctypes.c_char * (n * protos[0].size * 4)).from_address(int(a["logits"])), np.float32)
        coef = rows[:, int(a["coef_offset"]) : int(a["coef_offset"]) + int(a["num_masks"])]
        out[:] = (coef @ protos.reshape(len(protos), -1)).ravel()

    def mask_labels(args):
        a = dict(zip([p.name for p in post._masks._sig_labels.params], args))
        a["scale_x"], a["scale_y"] = a["scale_x"] * scale_error, a["scale_y"] * scale_error
        n = int(arr(a["result"], (1,), np.int32)[0])
        rows = arr(int(a["result"]) + 16, (n, int(a["out_stride"])))
        # the kernel's mapping from its arguments: source pixel centre * (scale_x, scale_y) + (pad_x, pad_y)
        lb = dataclasses.replace(letterbox(int(a["src_w"]), int(a["src_h"]), int(a["input_w"]), int(a["input_h"])),
                                 pad_x=float(a["pad_x"]), pad_y=float(a["pad_y"]),
                                 scale_x=float(a["scale_x"]), scale_y=float(a["scale_y"]))
        ph, pw = int(a["proto_h"]), int(a["proto_w"])
        dets = Detections(boxes=rows[:, :4].copy(), scores=rows[:, 4].copy(), class_ids=rows[:, 5].astype(np.int32),
                          extras=np.eye(n, 1, dtype=np.float32))
        logits = arr(a["logits"], (n, ph, pw))
        dtype = np.uint8 if int(a["label_bytes"]) == 1 else np.dtype("<u2")
        thr = 1 / (1 + math.exp(-float(a["threshold_logit"])))
        got = label_image(dets, logits[:, None][0], lb, thr, dtype)  # logits as one-coefficient prototypes
        arr(a["labels"], got.shape, dtype)[:] = got

    fake_cuda.emulators.update({"finalize_extras": finalize_extras, "mask_logits": mask_logits,
                                "mask_labels": mask_labels})
    pipe.set_postprocess(PostprocessParams(want_masks=True))
    spec, img = _frame(1280, 720)
    dets = pipe.process(spec, img)
    assert dets.label_mask.dtype == np.uint16 and dets.label_mask.shape == (720, 1280)
    want = label_image(Detections(boxes=row[None, :4], scores=row[None, 4], class_ids=np.ones(1, np.int32),
                                  extras=row[None, 7:]), outputs[1], letterbox(1280, 720, W, H, "center"), 0.5,
                       np.uint16)
    assert want.sum() > 1000
    if scale_error != 1.0:
        assert np.count_nonzero(dets.label_mask != want) > 1000  # the emulator saw the wrong scale
        pipe.close()
        return
    np.testing.assert_array_equal(dets.label_mask, want)
    np.testing.assert_allclose(dets.boxes, row[None, :4])
    assert fake_cuda.hazards == []
    pipe.close()


def test_obb_head_on_the_stand_in_uses_rotated_nms_and_reads_theta(fake_cuda):  # noqa: F811
    pipe, engine = _pipeline("yolov8_obb", OBB)

    def finalize_extras(args):
        a = dict(zip([p.name for p in pipe._post._sig_final.params], args))
        (ctypes.c_int32 * 2).from_address(int(a["result"]))[:] = [1, 5]
        row = np.array([10, 20, 110, 40, 0.8, 2, -0.5, 0.3], np.float32)
        ctypes.memmove(int(a["result"]) + 16, row.ctypes.data, row.nbytes)

    fake_cuda.emulators["finalize_extras"] = finalize_extras
    spec, img = _frame()
    dets = pipe.process(spec, img)
    dec, nms, fin = (_named(fake_cuda, e) for e in ("decode_yolov8_obb", "nms_mask_rotated", "finalize_extras"))
    assert (dec["out"], dec["cells"], dec["num_classes"]) == (engine.enqueued[-1][1][0], N, 3)
    assert nms["angle_offset"] == 8 and pipe._post.cand_stride == 9
    assert (fin["num_extras"], fin["oriented"]) == (1, 1)
    assert not any(x.entry == "nms_mask" for x in fake_cuda.launches)
    np.testing.assert_allclose(dets.theta, [-0.5])
    np.testing.assert_allclose(dets.boxes, [[10, 20, 110, 40]])
    assert dets.class_ids.tolist() == [2] and fake_cuda.hazards == []
    pipe.close()


@pytest.mark.parametrize("activation,threads,code", [("", 300 * 5, 1), ("softmax", 300 * 4, 2), ("none", 300 * 5, 0)])
def test_detr_head_on_the_stand_in_top_k_without_nms(fake_cuda, activation, threads, code):  # noqa: F811
    pipe, engine = _pipeline("detr", DETR, **{"model.score_activation": activation})
    assert pipe.input_spec.resize == "stretch"
    spec, img = _frame(1920, 1080)
    pipe.process(spec, img)
    dec = _named(fake_cuda, "decode_detr")
    outs = engine.enqueued[-1][1]
    assert (dec["boxes"], dec["logits"], dec["queries"], dec["activation"]) == (outs[1], outs[0], 300, code)
    assert dec["num_classes"] * dec["queries"] == threads == pipe._post.capacity
    assert (dec["input_w"], dec["input_h"], dec["logit_offset"], dec["box_stride"]) == (640, 640, 0, 4)
    assert not any(x.entry in ("nms_mask", "nms_mask_rotated") for x in fake_cuda.launches)
    assert _named(fake_cuda, "nms_reduce")["apply_nms"] == 0
    fin = _named(fake_cuda, "finalize")
    assert (fin["pad_x"], fin["pad_y"], fin["scale_x"]) == (0, 0, np.float32(640 / 1920))  # stretched
    pre = _named(fake_cuda, "letterbox_u8")  # the stretch: no padding, each axis its own scale
    assert (pre["pad_x"], pre["pad_y"], pre["resized_w"], pre["resized_h"]) == (0, 0, 640, 640)
    assert (pre["inv_scale_x"], pre["inv_scale_y"]) == (1920 / 640, 1080 / 640)
    assert fake_cuda.hazards == []
    pipe.close()


# ------------------------------------------------------------------------------------------- GPU: real kernels
def _gpu():
    from vrt_ros.gpu.library import KernelLibrary
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    return rt, KernelLibrary.shared(rt.arch), rt.create_stream()


def _gpu_run(head, outputs, lb, params, mask_dtype=np.uint8):
    from vrt_ros.gpu.postprocess import GpuPostprocessor

    rt, lib, stream = _gpu()
    post = GpuPostprocessor(rt, lib, head, stream, mask_dtype=mask_dtype)
    bufs = [to_device(rt, stream, np.ascontiguousarray(o, np.float32)) for o in outputs]
    post.enqueue(stream, [b.ptr for b in bufs], lb, params)
    rt.sync(stream)
    dets = post.read()
    if dets.label_mask is not None:
        dets.label_mask = dets.label_mask.copy()
    post.close(stream)
    for b in bufs:
        b.close(stream)
    return dets


def assert_same(got: Detections, want: Detections, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} GPU vs {len(want)} CPU detections"
    np.testing.assert_array_equal(got.class_ids, want.class_ids, err_msg=what)
    if len(want):
        box_err, score_err = np.abs(got.boxes - want.boxes).max(), np.abs(got.scores - want.scores).max()
        print(f"{what}: {len(want)} detections, box err {box_err:.2e} px, score err {score_err:.2e}")
        assert box_err <= 0.5 and score_err <= 1e-3, what
    if want.theta is not None:
        d = np.abs(got.theta - want.theta)
        assert np.minimum(d, math.pi - d).max() <= 1e-4, what  # -pi/2 and pi/2 are the same angle


def assert_masks(got: np.ndarray, want: np.ndarray, n: int, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    for k in range(1, n + 1):
        g, w = got == k, want == k
        if w.sum() >= 1000:
            iou = (g & w).sum() / (g | w).sum()
            print(f"{what}: mask {k}: {w.sum()} px, IoU {iou:.5f}")
            assert iou >= 0.99, f"{what}: mask {k} IoU {iou}"


@requires_gpu[0]
@requires_gpu[1]
@pytest.mark.parametrize("size", [(1920, 1080), (1080, 1920), (640, 480)], ids=str)
@pytest.mark.parametrize("max_det", [100, 300])
def test_seg_gpu_matches_the_reference(size, max_det):
    head = select_head("yolov8_seg", SEG, InputSpec(W, H))
    outputs, lb = seg_outputs(1), letterbox(*size, W, H, "center")
    params = PostprocessParams(score_threshold=0.4, max_detections=max_det, want_masks=True)
    dtype = np.uint8 if max_det <= 254 else np.uint16
    got = _gpu_run(head, outputs, lb, params, dtype)
    want = finish(head.decode(outputs, 0.4), lb, params, head.applies_nms)
    assert_same(got, want, f"seg {size}")
    np.testing.assert_allclose(got.extras, want.extras, atol=1e-5)
    assert_masks(got.label_mask, head.label_mask(want, outputs, lb, params, dtype), len(want), f"seg {size}")


@requires_gpu[0]
@requires_gpu[1]
def test_seg_gpu_on_the_real_model_matches_the_reference(shared_dir):
    cv2 = pytest.importorskip("cv2")
    pytest.importorskip("onnxruntime", reason="the real model's outputs come from ONNX Runtime")

    from vrt_ros.inference.backends.cpu import CpuPipeline
    from vrt_ros.settings import config

    seg = shared_dir / "models" / "seg"
    cpu = CpuPipeline(config.validate({**config.defaults(), "backend": "cpu", "model.path": str(seg / "idcard_yolov8seg.onnx")}))
    params = PostprocessParams(score_threshold=0.6, nms_iou=0.5, class_agnostic=True, want_masks=True)
    for photo in ("three_ids", "us_card_rotated"):
        bgr = cv2.imread(str(seg / "photos" / f"{photo}.png"))
        tensor, lb = cpu._pre(bgr)
        outputs = cpu.engine.run(tensor)
        want = finish(cpu.head.decode(outputs, 0.6), lb, params, True)
        got = _gpu_run(cpu.head, outputs, lb, params)
        assert_same(got, want, photo)
        assert_masks(got.label_mask, cpu.head.label_mask(want, outputs, lb, params, np.uint8), len(want), photo)


@requires_gpu[0]
@requires_gpu[1]
def test_seg_gpu_crops_masks_by_pixel_index_as_ultralytics():
    """``mask_labels`` keeps pixel (x, y) where ``x1 <= x < x2``, ``y1 <= y < y2`` (Ultralytics' ``crop_mask``, as
    :func:`vrt_ros.boxes.masks.pixel_span`): one box with edges either side of the half pixel, a mask on everywhere."""
    head = select_head("yolov8_seg", SEG, InputSpec(W, H))
    out = np.zeros((1, 38, N), np.float32)
    out[0, :5, 1000] = [200.25, 125.3, 200.1, 149.4, 0.9]  # x 100.2 .. 300.3, y 50.6 .. 200.0
    out[0, 6, 1000] = 1.0
    protos = np.zeros((1, 32, H // 4, W // 4), np.float32)
    protos[0, 0] = 5.0
    params = PostprocessParams(score_threshold=0.5, want_masks=True)
    got = _gpu_run(head, [out, protos], letterbox(W, H, W, H, "center"), params)
    assert len(got) == 1
    x1, y1, x2, y2 = got.boxes[0]
    r, c = np.arange(W)[None, :], np.arange(H)[:, None]
    np.testing.assert_array_equal(got.label_mask == 1, (r >= x1) & (r < x2) & (c >= y1) & (c < y2))


@requires_gpu[0]
@requires_gpu[1]
@pytest.mark.parametrize("agnostic", [False, True])
def test_obb_gpu_matches_the_reference(agnostic):
    head = select_head("yolov8_obb", OBB, InputSpec(W, H))
    outputs, lb = obb_outputs(2), letterbox(1280, 720, W, H, "center")
    params = PostprocessParams(score_threshold=0.4, nms_iou=0.3, class_agnostic=agnostic)
    want = finish(head.decode(outputs, 0.4), lb, params, head.applies_nms, head.oriented)
    assert 0 < len(want) < 30
    assert_same(_gpu_run(head, outputs, lb, params), want, f"obb agnostic={agnostic}")


@requires_gpu[0]
@requires_gpu[1]
@pytest.mark.parametrize("activation", ["sigmoid", "softmax", "none"])
def test_detr_gpu_matches_the_reference(activation):
    head = select_head("detr", DETR, InputSpec(W, H))
    head.set_score_activation(activation)
    outputs = detr_outputs(3)
    if activation == "none":
        outputs[0] = 1 / (1 + np.exp(-outputs[0]))
    lb = letterbox(1920, 1080, W, H, resize="stretch")
    params = PostprocessParams(score_threshold=0.3, max_detections=50)
    want = finish(head.decode(outputs, 0.3), lb, params, head.applies_nms)
    assert len(want) > 0
    assert_same(_gpu_run(head, outputs, lb, params), want, f"detr {activation}")
