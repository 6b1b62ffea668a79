"""The batched GPU path on the recording CUDA stand-in (test/fake_cuda.py), issue 21 item 2: one engine call with an
[N, ...] input, one sync and one D2H per N-frame batch, each slot's letterbox in its slot of the input and its
decode/NMS/finalize on its slot of the outputs and of the result buffer, per-slot input faults, zero allocations
after warm-up for every batch size <= max_batch.

The stand-in computes nothing; "each slot equals that frame processed alone" is checked on what reaches the
kernels (every launch argument of a slot equals the single-frame launch's, but for the slot's own input, output and
result addresses) and, through a finalize emulator that writes a detection made of the slot's own letterbox
arguments, on the Detections read back. The numbers of a real batch are checked on the CPU reference
(test_cpu_batch.py) and, on a GPU, by test_gpu_batch_device.py (marked gpu).
"""

from __future__ import annotations

import ctypes
import logging

import numpy as np
import pytest

from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from vrt_ros.errors import ConfigError, FrameError
from vrt_ros.settings.config import defaults
from vrt_ros.types import BgrFrame, ImageSpec, RawFrame, TensorInfo

S = 640
CELLS = 8400
DYN_IN = TensorInfo("images", (-1, 3, S, S), "float32")
DYN_OUT = [TensorInfo("output0", (-1, 84, CELLS), "float32")]
SLOT_IN = 3 * S * S * 4
SLOT_OUT = 84 * CELLS * 4


def values(**extra):
    v = defaults()
    v.update({"model.path": "model.onnx", "backend": "cuda", "model.head": "yolov8", **extra})
    return v


def pipeline(engine=None, **params):
    from vrt_ros.inference.backends.cuda import CudaPipeline

    engine = engine or FakeEngine([DYN_IN], DYN_OUT)
    return CudaPipeline(values(**params), log=lambda m: None, engine=engine)


def frame(w: int, h: int, seed: int) -> RawFrame:
    img = np.random.default_rng(seed).integers(0, 256, (h, w, 3), np.uint8)
    return RawFrame(ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), img)


SIZES = [(1920, 1080), (640, 480), (1280, 720), (480, 640)]


def finalize_emulator(args):
    """A detection made of the slot's own letterbox arguments: (pad_x, pad_y, src_w - 1, src_h - 1), score 0.5."""
    pad_x, pad_y, _, _, src_w, src_h, _, result = args[7:]
    ints = (ctypes.c_int32 * 2).from_address(int(result))
    ints[0], ints[1] = 1, 1
    (ctypes.c_float * 6).from_address(int(result) + 16)[:] = [pad_x, pad_y, src_w - 1, src_h - 1, 0.5, 3.0]


def test_one_enqueue_one_sync_one_copy_per_batch_each_slot_its_own(fake_cuda):  # noqa: F811
    fake_cuda.emulators["finalize"] = finalize_emulator
    engine = FakeEngine([DYN_IN], DYN_OUT)
    pipe = pipeline(engine, **{"engine.max_batch": 4})
    assert pipe.max_batch == 4 and pipe.batch_sizes == (1, 4)
    assert [e[2] for e in engine.enqueued] == [1, 4]  # each prepared size run once at start-up
    frames = [frame(w, h, i) for i, (w, h) in enumerate(SIZES)]
    alone = []
    for f in frames:  # each frame processed alone: the reference for its slot
        mark = len(fake_cuda.launches)
        alone.append((pipe.process(f.spec, f.data), fake_cuda.launches[mark:]))
    rt = pipe.runtime
    syncs, d2h, calls = rt.counters.syncs, fake_cuda.copies["d2h"], engine.calls
    results = pipe.process_batch(frames)
    assert rt.counters.syncs - syncs == 1 and fake_cuda.copies["d2h"] - d2h == 1 and engine.calls - calls == 1
    inp, outs, batch = engine.enqueued[-1]
    assert batch == 4 and outs == pipe._output_ptrs
    assert pipe.last_timings["batch_size"] == 4
    batch_launches = fake_cuda.launches[-(4 * 6):]
    letterboxes = batch_launches[:4]
    per_slot = [batch_launches[4 + 5 * j: 4 + 5 * (j + 1)] for j in range(4)]
    offsets = []
    for j, (dets, single) in enumerate(alone):
        lb = letterboxes[j]
        sig = lb.args
        assert lb.entry == "letterbox_u8" and int(sig[8]) == inp + j * SLOT_IN  # dst: slot j of the input
        assert sig[1:8] == single[0].args[1:8] and sig[9:] == single[0].args[9:]  # same geometry and constants
        decode = per_slot[j][0]
        assert decode.entry == "decode_yolov8" and int(decode.args[0]) == outs[0] + j * SLOT_OUT
        assert decode.args[1:] == single[1].args[1:]
        final = per_slot[j][-1]
        assert final.entry == "finalize" and final.args[:-1] == single[-1].args[:-1]
        offsets.append(int(final.args[-1]) - int(single[-1].args[-1]))  # slot j's result region
        got = results[j]
        assert np.array_equal(got.boxes, dets.boxes) and np.array_equal(got.scores, dets.scores) and len(got) == 1
    stride = offsets[1]
    assert offsets == [0, stride, 2 * stride, 3 * stride] and stride > 0 and stride % 256 == 0
    assert len({tuple(r.boxes[0]) for r in results}) == 4  # four different letterboxes came back, in slot order
    assert fake_cuda.hazards == [] and fake_cuda.pending() == 0
    pipe.close()
    assert fake_cuda.live() == [] and fake_cuda.hazards == []


def test_batch_sizes_are_padded_to_a_prepared_size(fake_cuda):  # noqa: F811
    engine = FakeEngine([DYN_IN], DYN_OUT)
    pipe = pipeline(engine, **{"engine.max_batch": 4})
    for n, run in ((1, 1), (2, 4), (3, 4), (4, 4)):
        mark = len(fake_cuda.launches)
        pipe.process_batch([frame(640, 480, k) for k in range(n)])
        assert engine.enqueued[-1][2] == run
        assert [e.entry for e in fake_cuda.launches[mark:]].count("finalize") == n  # only the frames are decoded
    with pytest.raises(ValueError, match="at most 4"):
        pipe.process_batch([frame(64, 48, k) for k in range(5)])
    pipe.close()


def test_zero_allocations_after_warm_up_for_every_batch_size(fake_cuda, caplog):  # noqa: F811
    pipe = pipeline(**{"engine.max_batch": 4})
    rt = pipe.runtime
    geometries = [(1920, 1080), (640, 480)]
    with caplog.at_level(logging.INFO, logger="vrt_ros.gpu.upload"):
        for w, h in geometries:  # warm-up: every (slot, geometry) seen once
            pipe.process_batch([frame(w, h, k) for k in range(4)])
    assert pipe._upload.reallocations == 8 and sum("staging buffers for" in r.getMessage() for r in caplog.records) == 8
    before = rt.counters.snapshot()
    builds = (pipe._pre._launches.builds, pipe._post._launches.builds)
    rng = np.random.default_rng(0)
    batches = 0
    for _ in range(60):
        n = int(rng.integers(1, 5))
        pipe.process_batch([frame(*geometries[int(rng.integers(0, 2))], k) for k in range(n)])
        batches += 1
    after = rt.counters.snapshot()
    assert (after["device_allocs"], after["pinned_allocs"]) == (before["device_allocs"], before["pinned_allocs"])
    assert after["syncs"] - before["syncs"] == batches
    assert (pipe._pre._launches.builds, pipe._post._launches.builds) == builds  # argument tuples reused
    assert fake_cuda.hazards == []
    pipe.close()


def test_staging_sets_are_bounded_by_max_batch_times_geometries(fake_cuda, caplog):  # noqa: F811
    from vrt_ros.gpu.upload import MAX_GEOMETRIES

    pipe = pipeline(**{"engine.max_batch": 2})
    assert pipe._upload.max_sets == 2 * MAX_GEOMETRIES
    with caplog.at_level(logging.INFO, logger="vrt_ros.gpu.upload"):
        for k in range(MAX_GEOMETRIES + 2):  # 10 geometries x 2 slots: 20 sets, the bound is 16
            pipe.process_batch([frame(64 + 8 * k, 48, 0), frame(64 + 8 * k, 48, 1)])
    assert len(pipe._upload._staging) == 2 * MAX_GEOMETRIES
    assert sum("freed (more than 16 staging sets" in r.getMessage() for r in caplog.records) == 4
    assert fake_cuda.hazards == []  # an evicted set is never one of the running batch's (LRU, bound >= max_batch)
    pipe.close()


def test_an_input_fault_drops_its_slot_only(fake_cuda):  # noqa: F811
    fake_cuda.emulators["finalize"] = finalize_emulator
    engine = FakeEngine([DYN_IN], DYN_OUT)
    pipe = pipeline(engine, **{"engine.max_batch": 4})
    good = [frame(640, 480, 0), frame(1280, 720, 1), frame(320, 240, 2)]
    bad = RawFrame(ImageSpec(width=640, height=480, encoding="bgr8", step=100), bytes(100 * 480))
    unknown = RawFrame(ImageSpec(width=8, height=8, encoding="nv12", step=8), bytes(64))
    results = pipe.process_batch([good[0], bad, good[1], unknown])
    assert isinstance(results[1], FrameError) and results[1].reason == "bad_step"
    assert isinstance(results[3], FrameError) and results[3].reason == "unknown_encoding"
    assert engine.enqueued[-1][2] == 4 and pipe.last_timings["batch_size"] == 2  # two frames in slots 0 and 1
    assert [tuple(r.boxes[0]) for r in (results[0], results[2])] == [
        tuple(pipe.process(f.spec, f.data).boxes[0]) for f in good[:2]]
    assert fake_cuda.pending() == 0
    syncs = pipe.runtime.counters.syncs
    assert pipe.process_batch([bad])[0].reason == "bad_step"  # a batch of faults only: no work, no sync
    assert pipe.runtime.counters.syncs == syncs
    assert [op.kind for st in fake_cuda.streams.values() for op in st.pending] == ["event"]  # its start mark only
    assert fake_cuda.hazards == []
    pipe.close()


def test_an_engine_failure_fails_the_batch_and_leaves_nothing_in_flight(fake_cuda):  # noqa: F811
    engine = FakeEngine([DYN_IN], DYN_OUT)
    pipe = pipeline(engine, **{"engine.max_batch": 3})
    engine.fail_with = RuntimeError("engine exploded")
    with pytest.raises(RuntimeError, match="exploded"):
        pipe.process_batch([frame(640, 480, k) for k in range(3)])  # uploads and letterboxes were queued first
    assert fake_cuda.pending() == 0
    engine.fail_with = None
    assert len(pipe.process_batch([frame(640, 480, 0), BgrFrame(np.zeros((10, 20, 3), np.uint8))])) == 2
    assert fake_cuda.hazards == []
    pipe.close()


def test_fixed_batch_n_model(fake_cuda):  # noqa: F811
    fixed_in = TensorInfo("images", (4, 3, S, S), "float32")
    fixed_out = [TensorInfo("output0", (4, 84, CELLS), "float32")]
    engine = FakeEngine([fixed_in], fixed_out)
    pipe = pipeline(engine)  # engine.max_batch 0: the model's batch
    assert pipe.max_batch == 4 and pipe.batch_sizes == (4,)
    pipe.process_batch([frame(640, 480, 0), frame(640, 480, 1)])
    pipe.process(*frame(640, 480, 2).__dict__.values())
    assert [e[2] for e in engine.enqueued] == [None, None, None]  # always the model's batch 4
    assert fake_cuda.hazards == []
    pipe.close()
    with pytest.raises(ConfigError, match="engine.max_batch = 8 exceeds the model's fixed batch 4"):
        pipeline(FakeEngine([fixed_in], fixed_out), **{"engine.max_batch": 8})
    assert fake_cuda.live() == []


def test_a_model_fixed_at_batch_1_runs_frame_by_frame_with_one_line(fake_cuda):  # noqa: F811
    from vrt_ros.inference.backends.cuda import CudaPipeline

    lines = []
    engine = FakeEngine([TensorInfo("images", (1, 3, S, S), "float32")], [TensorInfo("output0", (1, 84, CELLS))])
    pipe = CudaPipeline(values(**{"engine.max_batch": 8}), log=lines.append, engine=engine)
    assert pipe.max_batch == 1
    assert sum("fixed at batch 1" in line and "one at a time" in line for line in lines) == 1
    pipe.close()


def test_jpeg_frames_of_one_batch_decode_into_different_images():
    """Two same-size JPEGs in one batch: the router passes each frame's slot to the GPU decoder, which keeps one
    image per (slot, size) (here the host stand-in of test/jpeg_standin.py), so the second decode cannot overwrite
    the first before the batch's preprocess reads it."""
    import cv2

    from jpeg_standin import HostJpegDecoder
    from vrt_ros.intake.compressed_route import CompressedRouter

    router = CompressedRouter(HostJpegDecoder(), log=lambda m: None)
    a = cv2.imencode(".jpg", np.full((48, 64, 3), 40, np.uint8))[1].tobytes()
    b = cv2.imencode(".jpg", np.full((48, 64, 3), 200, np.uint8))[1].tobytes()
    img0, _ = router.decode("jpeg", a, None, slot=0)
    img1, _ = router.decode("jpeg", b, None, slot=1)
    assert img0.ptr != img1.ptr
    dec = router.decoder
    p0, p1 = dec.pixels(img0), dec.pixels(img1)
    assert abs(int(p0[0]) - 40) <= 2 and abs(int(p1[0]) - 200) <= 2  # slot 0 still holds its own frame
    again, _ = router.decode("jpeg", a, None, slot=0)
    assert again.ptr == img0.ptr  # reused per slot: no allocation for the next batch
