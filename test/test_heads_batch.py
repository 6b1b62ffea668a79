"""The new heads in batches (issue 23 x issue 21).

CPU path: each slot of a batch through the segmentation, oriented-box and DETR heads equals that frame processed
alone (boxes, scores, classes, ``theta``, extras and the label image; tolerance: exact, the slots of the stacked
model compute the same graph), and the label image is made only for the slots that ask (``masks``).

GPU path on the recording CUDA stand-in (test/fake_cuda.py): the mask stages run per slot, inside the batch's one
sync, on the slot's own result region and prototype slot, into the slot's own label image; the slots that do not
ask launch no mask kernel and read back no label image (also when the slot asked in the previous batch); the rows
with ``theta`` of an oriented head are read per slot. Steady batches allocate nothing.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from synthetic_heads import blob_detr, blob_seg, moment_obb, stacked
from synthetic_models import ramp_rectangle
from test_heads_obb import _bar
from vrt_ros.heads.base import grid_cells
from vrt_ros.heads.yolov8 import STRIDES
from vrt_ros.inference.backends.cpu import CpuPipeline
from vrt_ros.settings import config
from vrt_ros.types import BgrFrame, ImageSpec, PostprocessParams, RawFrame, TensorInfo

S = 320
CELLS = grid_cells(S, S, STRIDES)
# three frames of different sizes, one bright object each at a different place
SIZES = [(480, 320), (640, 480), (400, 400)]
BOXES = [(100.0, 60.0, 260.0, 200.0), (300.0, 100.0, 520.0, 400.0), (40.0, 220.0, 200.0, 380.0)]


def _cpu(model, **values) -> CpuPipeline:
    return CpuPipeline(config.validate({**config.defaults(), "backend": "cpu", "model.path": str(model),
                                        "model.pad_value": 0.0, **values}), log=lambda m: None)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("heads_batch")
    out = {}
    for name, make in (("seg", lambda p: blob_seg(p, S, S, CELLS)), ("obb", lambda p: moment_obb(p, S, S, CELLS)),
                       ("detr", lambda p: blob_detr(p, S, S))):
        one = make(d / f"{name}.onnx")
        out[name] = (one, stacked(one, d / f"{name}_x3.onnx", 3))
    return out


def _frames(kind: str) -> list[np.ndarray]:
    if kind == "obb":
        return [_bar(w, h, (b[0] + b[2]) / 2, (b[1] + b[3]) / 2, 150.0, 20.0, math.radians(a))
                for (w, h), b, a in zip(SIZES, BOXES, (-60, 20, 75))]
    return [ramp_rectangle(w, h, b, ramp=4.0) for (w, h), b in zip(SIZES, BOXES)]


@pytest.mark.parametrize("kind,head", [("seg", "yolov8_seg"), ("obb", "yolov8_obb"), ("detr", "detr")])
def test_cpu_batch_slots_equal_the_frames_alone(models, kind, head):
    one, batched = models[kind]
    alone, pipe = _cpu(one, **{"model.head": head}), _cpu(batched, **{"model.head": head})
    assert pipe.max_batch == 3 and pipe.head.name == head
    params = PostprocessParams(score_threshold=0.5, want_masks=True)
    alone.set_postprocess(params)
    pipe.set_postprocess(params)
    images = _frames(kind)
    reference = []
    for img in images:
        d = alone.process_bgr(img)
        reference.append((d, None if d.label_mask is None else d.label_mask.copy()))
    frames = [BgrFrame(images[0]),
              RawFrame(ImageSpec(SIZES[1][0], SIZES[1][1], "bgr8", SIZES[1][0] * 3), images[1].tobytes()),
              BgrFrame(images[2])]
    results = pipe.process_batch(frames)
    assert pipe.last_timings["batch_size"] == 3
    for j, (got, (want, labels)) in enumerate(zip(results, reference)):
        assert len(got) == len(want) == 1, j
        np.testing.assert_array_equal(got.boxes, want.boxes)
        np.testing.assert_array_equal(got.scores, want.scores)
        np.testing.assert_array_equal(got.class_ids, want.class_ids)
        if kind == "obb":
            assert got.theta is not None
            np.testing.assert_array_equal(got.theta, want.theta)
        if kind == "seg":
            np.testing.assert_array_equal(got.extras, want.extras)
            assert got.label_mask.shape == (SIZES[j][1], SIZES[j][0])
            np.testing.assert_array_equal(got.label_mask, labels)
            ys, xs = np.nonzero(got.label_mask == 1)  # the slot's own object, not another slot's
            np.testing.assert_allclose((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1), BOXES[j], atol=2.0)
        else:
            assert got.label_mask is None
    if kind == "seg":
        assert "masks" in pipe.last_timings


def test_cpu_batch_masks_only_for_the_slots_that_ask(models):
    _, batched = models["seg"]
    pipe = _cpu(batched)
    pipe.set_postprocess(PostprocessParams(score_threshold=0.5))  # want_masks False: the batch's masks decide
    images = _frames("seg")
    results = pipe.process_batch([BgrFrame(i) for i in images], masks=[False, True, False])
    assert [r.label_mask is not None for r in results] == [False, True, False]
    assert results[1].label_mask.shape == (SIZES[1][1], SIZES[1][0]) and (results[1].label_mask == 1).sum() > 1000
    assert [len(r) for r in results] == [1, 1, 1]  # the detections do not depend on the masks
    results = pipe.process_batch([BgrFrame(i) for i in images])  # masks None: want_masks (off)
    assert all(r.label_mask is None for r in results) and "masks" not in pipe.last_timings


# ------------------------------------------------------------------------------------------- GPU: the stand-in
W = H = 640
N = 8400
DYN_IN = TensorInfo("images", (-1, 3, H, W), "float32")
SEG = [TensorInfo("output0", (-1, 4 + 2 + 32, N)), TensorInfo("output1", (-1, 32, H // 4, W // 4))]
OBB = [TensorInfo("output0", (-1, 4 + 3 + 1, N))]
PROTO_SLOT = 32 * (H // 4) * (W // 4) * 4


def _gpu(outputs, head: str, **extra):
    from vrt_ros.inference.backends.cuda import CudaPipeline

    v = config.defaults()
    v.update({"model.path": "model.onnx", "backend": "cuda", "model.head": head, "engine.max_batch": 3, **extra})
    engine = FakeEngine([DYN_IN], outputs)
    return CudaPipeline(v, log=lambda m: None, engine=engine), engine


def _raw(w: int, h: int) -> RawFrame:
    return RawFrame(ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), np.zeros((h, w, 3), np.uint8))


def _finalize_one_row(post, theta_of=lambda src_w: 0.0):
    """finalize_extras emulator: one row per slot, its box the slot's source size, theta from it."""

    def run(args):
        a = dict(zip([p.name for p in post._sig_final.params], args))
        (ctypes.c_int32 * 2).from_address(int(a["result"]))[:] = [1, 1]
        row = np.zeros(post.out_stride, np.float32)
        row[:7] = [0, 0, a["src_w"] - 1, a["src_h"] - 1, 0.9, 1, theta_of(int(a["src_w"]))]
        ctypes.memmove(int(a["result"]) + 16, row.ctypes.data, row.nbytes)

    return run


def test_gpu_batch_masks_per_slot_inside_the_one_sync(fake_cuda):  # noqa: F811
    pipe, engine = _gpu(SEG, "yolov8_seg")
    post = pipe._post
    fake_cuda.emulators["finalize_extras"] = _finalize_one_row(post)
    frames = [_raw(w, h) for w, h in SIZES]
    rt = pipe.runtime
    pipe.process_batch(frames, masks=[True, True, True])  # warm-up: every slot's label image of its size
    live = len(fake_cuda.live())
    for _ in range(2):
        mark, syncs, d2h = len(fake_cuda.launches), rt.counters.syncs, fake_cuda.copies["d2h"]
        results = pipe.process_batch(frames, masks=[True, False, True])
        launches = fake_cuda.launches[mark:]
        assert rt.counters.syncs - syncs == 1  # one sync for the batch, masks included
        assert fake_cuda.copies["d2h"] - d2h == 1 + 2  # every slot's rows in one copy + each asking slot's labels
        finals = [x for x in launches if x.entry == "finalize_extras"]
        logits = [x for x in launches if x.entry == "mask_logits"]
        labels = [x for x in launches if x.entry == "mask_labels"]
        assert len(finals) == 3 and len(logits) == len(labels) == 2
        sig_f = [p.name for p in post._sig_final.params]
        sig_l = [p.name for p in post._masks._sig_logits.params]
        sig_m = [p.name for p in post._masks._sig_labels.params]
        region = [dict(zip(sig_f, f.args))["result"] for f in finals]
        outs = engine.enqueued[-1][1]
        for k, j in enumerate((0, 2)):  # each asking slot: its own rows, its own prototypes, its own size
            lg, lb = dict(zip(sig_l, logits[k].args)), dict(zip(sig_m, labels[k].args))
            assert lg["result"] == lb["result"] == region[j]
            assert lg["protos"] == outs[1] + j * PROTO_SLOT
            assert (lb["src_w"], lb["src_h"]) == SIZES[j]
        assert labels[0].args != labels[1].args
        assert launches.index(logits[0]) > launches.index(finals[0])  # after its slot's finalize
        assert [r.label_mask is not None for r in results] == [True, False, True]
        for j in (0, 2):
            assert results[j].label_mask.shape == (SIZES[j][1], SIZES[j][0])
            np.testing.assert_allclose(results[j].boxes[0], [0, 0, SIZES[j][0] - 1, SIZES[j][1] - 1])
        assert results[1].extras.shape == (1, 32)
    results = pipe.process_batch(frames, masks=[False, True, False])  # slot 0 asked last time: not any more
    assert [r.label_mask is not None for r in results] == [False, True, False]
    assert len(fake_cuda.live()) == live  # steady batches allocate nothing
    assert fake_cuda.hazards == []
    pipe.close()


def test_gpu_batch_of_an_oriented_head_reads_each_slots_theta(fake_cuda):  # noqa: F811
    pipe, _ = _gpu(OBB, "yolov8_obb")
    fake_cuda.emulators["finalize_extras"] = _finalize_one_row(pipe._post, theta_of=lambda w: w / 1000.0)
    results = pipe.process_batch([_raw(w, h) for w, h in SIZES])
    assert any(x.entry == "nms_mask_rotated" for x in fake_cuda.launches)
    for (w, _), r in zip(SIZES, results):
        np.testing.assert_allclose(r.theta, [w / 1000.0], rtol=1e-6)
        assert r.label_mask is None
    assert fake_cuda.hazards == []
    pipe.close()
