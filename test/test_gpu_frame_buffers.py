"""The GPU path's buffers per frame geometry (issue 34): what a call returns stays that frame's, and the staging sets
and label images stay within ``engine.frame_buffers_mb`` (device + pinned) for any sequence of frame sizes.

CI: the recording CUDA stand-in (test/fake_cuda.py), whose device and pinned allocations are real host memory it
accounts for; a segmentation model's outputs from :class:`~fake_cuda.FakeEngine` (the memory does not depend on
what the kernels compute). GPU (``-m gpu``): HC-26 with the real YOLOv8-seg model, device memory read from the
driver (``cuMemGetInfo``) and pinned memory from the process' resident set (page-locked pages are resident).
"""

from __future__ import annotations

import ctypes
import functools
import os
import time

import numpy as np
import pytest

from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from gpu_support import requires_gpu
from test_gpu_heads import IMAGES, SEG, _values
from vrt_ros.errors import FrameError
from vrt_ros.pools.buffer_budget import FRAME_TOO_LARGE, MIB, ByteBudget
from vrt_ros.pools.keyed_cache import LruPool
from vrt_ros.types import ImageSpec, PostprocessParams, RawFrame

SIDE = 4096  # the largest frame side of HC-26


# ----------------------------------------------------------------------------------------- the budget (pure)
def test_pools_sharing_a_budget_free_the_least_recently_used_and_never_what_the_call_holds():
    budget = ByteBudget(100, "engine.frame_buffers_mb")
    released: list[str] = []
    staging = LruPool(8, 64, what="staging", budget=budget)
    labels = LruPool(8, 64, what="label images", budget=budget)
    rel = lambda k, v: released.append(k)  # noqa: E731
    budget.begin()
    staging.add("s1", lambda: "s1", rel, 40)
    labels.add("l1", lambda: "l1", rel, 20)
    budget.begin()  # the next call: s1 and l1 may go now
    staging.add("s2", lambda: "s2", rel, 40)
    assert budget.used == 100 and released == []
    labels.add("l2", lambda: "l2", rel, 30)  # its own pool's least recently used first, then the other pool's
    assert released == ["l1", "s1"] and budget.used == 70 and budget.peak == 100
    with pytest.raises(FrameError) as err:  # s2 and l2 are held by this call: 40 more do not fit
        staging.add("s3", lambda: "s3", rel, 40)
    assert err.value.reason == FRAME_TOO_LARGE and "engine.frame_buffers_mb" in str(err.value)
    assert released == ["l1", "s1"] and len(staging) == 1 and budget.refused == 1
    budget.begin()
    staging.add("s3", lambda: "s3", rel, 40)  # a new call: s2 is freed for it
    assert released == ["l1", "s1", "s2"] and budget.used == 70
    assert sorted(staging.pop_all() + labels.pop_all()) == ["l2", "s3"] and budget.used == 0


# ----------------------------------------------------------------------------------------- the stand-in
def _pipeline(**extra):
    from vrt_ros.inference.backends.cuda import CudaPipeline

    engine = FakeEngine([IMAGES], SEG)
    pipe = CudaPipeline(_values("yolov8_seg", **extra), log=lambda m: None, engine=engine)
    pipe.set_postprocess(PostprocessParams(want_masks=True))
    return pipe


def _live(fake) -> int:
    """Device + pinned (+ mapped) bytes the stand-in holds now."""
    return sum(a.nbytes for a in fake.live())


@functools.cache
def _canvas() -> np.ndarray:
    """A 4096x4096 bgr8 canvas (made once, read-only); a frame of w x h is its top-left corner (the canvas' step)."""
    x, y = np.arange(SIDE)[None, :], np.arange(SIDE)[:, None]
    img = np.empty((SIDE, SIDE, 3), np.uint8)
    img[..., 0], img[..., 1], img[..., 2] = x % 251, y % 241, (x + y) % 239
    img.flags.writeable = False
    return img


def _frame(canvas: np.ndarray, w: int, h: int) -> tuple[ImageSpec, memoryview]:
    step = canvas.shape[1] * 3
    return ImageSpec(width=w, height=h, encoding="bgr8", step=step), memoryview(canvas.reshape(-1))[: h * step]


def _sizes(n: int, seed: int, lo: int = 64, hi: int = SIDE) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [(int(w), int(h)) for w, h in rng.integers(lo, hi + 1, (n, 2))]


def test_a_returned_label_image_is_the_calls_own_on_the_stand_in(fake_cuda):  # noqa: F811
    """Issue 34 item 1 on the GPU path: the label image a call returns is not the reused pinned image, so the next
    call (another node's frame on the same pipeline) cannot change it."""
    pipe = _pipeline()
    written = [0]

    def mask_labels(args):  # each frame's label image: its own value everywhere
        a = dict(zip([p.name for p in pipe._post._masks._sig_labels.params], args))
        written[0] += 1
        n = int(a["src_w"]) * int(a["src_h"])
        np.frombuffer((ctypes.c_char * n).from_address(int(a["labels"])), np.uint8)[:] = written[0]

    fake_cuda.emulators["mask_labels"] = mask_labels
    canvas = np.zeros((240, 320, 3), np.uint8)
    spec = ImageSpec(width=320, height=240, encoding="bgr8", step=960)
    first = pipe.process(spec, canvas)
    assert (first.label_mask == 1).all()
    second = pipe.process(spec, canvas)  # same size: the same reused label image on the device and in pinned memory
    assert (second.label_mask == 2).all()
    assert (first.label_mask == 1).all()  # still the first frame's
    (third,) = pipe.process_batch([RawFrame(spec, canvas)], [True])
    assert (third.label_mask == 3).all() and (second.label_mask == 2).all()
    assert fake_cuda.hazards == []
    pipe.close()


def test_a_batch_frame_over_the_bound_is_dropped_before_its_engine_call(fake_cuda):  # noqa: F811
    """A batch of a small frame and a 1600x1500 one with masks under ``engine.frame_buffers_mb`` 16: the large
    frame's staging (13.7 MiB) fits but not its label image (4.6 MiB more), which is taken with the staging, so that
    slot alone is dropped (``frame_too_large``, naming the parameter) and the small frame answered in the same
    engine call; the next batch of small frames is answered."""
    from test_heads_batch import SEG as BATCH_SEG, _gpu, _raw

    pipe, engine = _gpu(BATCH_SEG, "yolov8_seg", **{"engine.frame_buffers_mb": 16})
    small, big = _raw(64, 48), _raw(1600, 1500)
    results = pipe.process_batch([big, small], masks=[True, True])
    assert isinstance(results[0], FrameError) and results[0].reason == FRAME_TOO_LARGE
    assert "engine.frame_buffers_mb" in str(results[0])
    assert results[1].label_mask.shape == (48, 64) and engine.calls == len(pipe.batch_sizes) + 1
    again = pipe.process_batch([small, small], masks=[True, True])
    assert all(r.label_mask.shape == (48, 64) for r in again)
    assert pipe.frame_budget.peak <= 16 * MIB and fake_cuda.hazards == []
    pipe.close()


def _run_sizes(pipe, sizes, after_frame) -> dict[str, int]:
    """Every frame answered (its label image of its size) or refused with a reason, ``after_frame(w, h)`` called
    after each (the memory checks). Returns the answers and drops per reason."""
    canvas = _canvas()
    seen: dict[str, int] = {"answered": 0}
    for w, h in sizes:
        spec, data = _frame(canvas, w, h)
        try:
            dets = pipe.process(spec, data)
        except FrameError as exc:
            seen[exc.reason] = seen.get(exc.reason, 0) + 1
        else:
            assert dets.label_mask is not None and dets.label_mask.shape == (h, w)
            seen["answered"] += 1
        after_frame(w, h)
    return seen


def _run_on_the_stand_in(fake, pipe, sizes, bound: int) -> dict[str, int]:
    """:func:`_run_sizes` with the stand-in's device + pinned bytes within start-up + ``bound`` after every frame."""
    base = _live(fake)
    worst = [0]

    def check(w: int, h: int) -> None:
        # nothing of a frame left queued, answered or refused (a refused frame may leave stream-ordered frees of the
        # buffers evicted for it, and its start event: harmless, they run in order at the next sync)
        assert {op.kind for st in fake.streams.values() for op in st.pending} <= {"free", "event"}
        grown = _live(fake) - base
        worst[0] = max(worst[0], grown)
        assert grown <= bound, f"{grown / MIB:.0f} MiB over the start-up memory after {w}x{h}, bound {bound / MIB:.0f}"

    seen = _run_sizes(pipe, sizes, check)
    assert pipe.frame_budget.peak <= bound and fake.hazards == []
    seen["worst_mib"] = round(worst[0] / MIB)
    return seen


def test_two_hundred_frame_sizes_stay_within_the_frame_buffer_bound(fake_cuda):  # noqa: F811
    """200 frames of different sizes (64..4096 px a side) with masks, ``engine.frame_buffers_mb`` 64: staging sets
    and label images freed least recently used first, so the stand-in's memory never exceeds start-up + 64 MiB
    (without the bound: 8 staging sets of up to 96 MiB each, and one label image per size kept); frames whose
    buffers alone exceed 64 MiB are dropped as ``frame_too_large``; the rest answered."""
    pipe = _pipeline(**{"engine.frame_buffers_mb": 64})
    seen = _run_on_the_stand_in(fake_cuda, pipe, _sizes(200, seed=34), 64 * MIB)
    assert set(seen) == {"answered", FRAME_TOO_LARGE, "worst_mib"}, seen
    assert seen["answered"] >= 100 and seen[FRAME_TOO_LARGE] >= 10, seen
    pipe.close()
    assert fake_cuda.live() == [] and fake_cuda.hazards == []  # every buffer freed, none while still in use


def test_HC_26_frame_size_changing_every_frame_for_1000_frames_on_the_stand_in(fake_cuda):  # noqa: F811
    """HC-26 in CI: one camera, a new size (64..4096 px a side) on every one of 1000 frames, a segmentation model
    with masks, the default ``engine.frame_buffers_mb`` (1024 MiB, README "Memory"): device + pinned memory stay
    within start-up + the bound, every frame is answered (none needs more than the bound) or dropped with a reason."""
    pipe = _pipeline()
    assert pipe.frame_budget.limit == 1024 * MIB
    seen = _run_on_the_stand_in(fake_cuda, pipe, _sizes(1000, seed=26), 1024 * MIB)
    assert seen["answered"] == 1000, seen
    pipe.close()


# ----------------------------------------------------------------------------------------- the GPU
def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@requires_gpu[0]
@requires_gpu[1]
def test_gpu_HC_26_frame_size_changing_every_frame_with_the_real_seg_model(shared_dir):
    """HC-26 on the GPU with the real YOLOv8-seg model (``backend: cuda``): 1000 frames of new sizes (64..4096 px a
    side), masks on. Device memory from the driver (``cuMemGetInfo``: used = total - free) and pinned memory (the
    process' resident set: page-locked pages are resident) after every frame stay within their start-up values +
    the documented bound (``engine.frame_buffers_mb``, 1024 MiB) + 64 MiB of allocator slack each; every frame is
    answered or dropped with a reason. About 1-2 minutes on an H200."""
    from cuda.bindings import driver

    from vrt_ros.settings import config
    from vrt_ros.inference.pipeline import make_pipeline

    model = shared_dir / "models" / "seg" / "idcard_yolov8seg.onnx"
    if not model.exists():
        pytest.skip(f"the YOLOv8-seg model is not in {model.parent}")
    values = config.validate({**config.defaults(), "model.path": str(model), "backend": "cuda"})
    pipe = make_pipeline(values, log=print)
    pipe.set_postprocess(PostprocessParams(score_threshold=0.35, want_masks=True))

    def device_used() -> int:
        err, free, total = driver.cuMemGetInfo()
        assert err == driver.CUresult.CUDA_SUCCESS
        return int(total) - int(free)

    spec, data = _frame(_canvas(), 640, 480)  # the canvas is made before the baseline (48 MiB of frames)
    pipe.process(spec, data)  # warm: the first frame's lazy set-up (engine context, allocator) is start-up
    bound, slack = 1024 * MIB, 64 * MIB
    dev0, rss0 = device_used(), _rss()
    worst = [0, 0]

    def check(w: int, h: int) -> None:
        dev, rss = device_used() - dev0, _rss() - rss0
        worst[:] = [max(worst[0], dev), max(worst[1], rss)]
        assert dev <= bound + slack, f"device {dev / MIB:.0f} MiB over start-up after {w}x{h}"
        assert rss <= bound + slack, f"resident (pinned) {rss / MIB:.0f} MiB over start-up after {w}x{h}"

    t0 = time.monotonic()
    seen = _run_sizes(pipe, _sizes(1000, seed=26), check)
    print(f"HC-26 on the GPU: {seen}, worst growth device {worst[0] / MIB:.0f} MiB, resident {worst[1] / MIB:.0f} "
          f"MiB, budget peak {pipe.frame_budget.peak / MIB:.0f} MiB, {time.monotonic() - t0:.0f} s")
    assert sum(seen.values()) == 1000 and seen["answered"] == 1000 and pipe.frame_budget.peak <= bound, seen
    pipe.close()
