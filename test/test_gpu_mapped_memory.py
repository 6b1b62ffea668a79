"""Mapped pinned memory on integrated GPUs (issue 28, item 4): with ``input.mapped_memory`` on a device that reports
integrated memory (Jetson Orin/Thor share the CPU's memory), the frame is copied once into mapped pinned memory and
the kernels read it in place: no device staging buffer, no H2D copy. Anywhere else the option is ignored (logged).

Run on the recording CUDA stand-in (test/fake_cuda.py), with the device's integrated-memory attribute set as a
Jetson reports it: the bytes the preprocess kernel reads are the same in both modes, per frame and per geometry.
What the stand-in cannot show: that a real integrated GPU gives the same detections (the equality test on real
hardware); this session had no GPU and no Jetson, so that has not run.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from test_gpu_glue import HEAD_OUTPUTS, IMAGES, bgr, values


def _pipeline(lines: list[str], **extra):
    from vrt_ros.inference.backends.cuda import CudaPipeline

    return CudaPipeline(values("yolov8", **extra), log=lines.append, engine=FakeEngine([IMAGES], HEAD_OUTPUTS["yolov8"]))


def _read_by_kernel(fake, spec) -> bytes:
    """The frame bytes the last letterbox launch reads: ``src_h`` rows of ``src_step`` bytes at its ``src``."""
    launch = next(l for l in reversed(fake.launches) if l.entry == "letterbox_u8")
    src, _w, h, step = (int(a) for a in launch.args[:4])
    assert fake.find(src, h * step, "device") is not None  # readable by the device
    return ctypes.string_at(src, h * step)


def _run(fake, mapped: bool, integrated: bool):
    fake.integrated = integrated
    lines: list[str] = []
    pipe = _pipeline(lines, **{"input.mapped_memory": mapped})
    frames = [bgr(640, 480, 0), bgr(1280, 720, 1), bgr(640, 480, 2)]
    read = []
    h2d0, dev0 = fake.copies["h2d"], pipe.runtime.counters.snapshot()["device_bytes"]
    for spec, img in frames:
        pipe.process(spec, img)  # synchronises once: the stand-in executes the queued copies then
        read.append(_read_by_kernel(fake, spec))
    kinds = sorted({a.kind for a in fake.live()})
    result = dict(read=read, h2d=fake.copies["h2d"] - h2d0, kinds=kinds, lines=lines, frames=frames,
                  integrated=pipe.runtime.integrated,
                  staging_device_bytes=pipe.runtime.counters.snapshot()["device_bytes"] - dev0)
    pipe.close()
    assert fake.live() == [] and fake.hazards == []
    return result


def test_integrated_gpu_reads_the_frame_in_place_with_no_h2d_copy(fake_cuda):  # noqa: F811
    staged = _run(fake_cuda, mapped=False, integrated=True)
    mapped = _run(fake_cuda, mapped=True, integrated=True)
    assert mapped["integrated"] and mapped["h2d"] == 0 and staged["h2d"] == 3
    assert "mapped" in mapped["kinds"] and "mapped" not in staged["kinds"]
    for (spec, img), a, b in zip(staged["frames"], staged["read"], mapped["read"]):
        assert a == b  # the kernel reads the same bytes either way
        # the frame itself; 2 MiB and more: channel-swapped by the host copy (vrt_ros.gpu.host_copy), in both modes
        assert a == (img[..., ::-1] if img.nbytes >= 2 << 20 else img).tobytes()
    assert any("input.mapped_memory: frames go to mapped pinned memory" in l for l in mapped["lines"])
    assert mapped["staging_device_bytes"] == 0 < staged["staging_device_bytes"]  # no device staging buffers


def test_discrete_gpu_ignores_the_option(fake_cuda):  # noqa: F811
    got = _run(fake_cuda, mapped=True, integrated=False)
    assert not got["integrated"] and got["h2d"] == 3 and "mapped" not in got["kinds"]
    assert any("input.mapped_memory: ignored" in l and "discrete GPU" in l for l in got["lines"])


def test_mapped_staging_allocates_nothing_after_warm_up(fake_cuda):  # noqa: F811
    fake_cuda.integrated = True
    pipe = _pipeline([], **{"input.mapped_memory": True})
    big, small = bgr(1920, 1080, 0), bgr(640, 480, 1)
    for spec, img in (big, small):
        pipe.process(spec, img)
    before = pipe.runtime.counters.snapshot()
    for i in range(50):
        spec, img = (big, small)[i % 2]
        pipe.process(spec, img)
    after = pipe.runtime.counters.snapshot()
    assert (after["pinned_allocs"], after["device_allocs"]) == (before["pinned_allocs"], before["device_allocs"])
    assert fake_cuda.copies["h2d"] == 0 and fake_cuda.hazards == []
    pipe.close()
    assert fake_cuda.live() == []


def test_mapped_memory_failure_is_a_clear_start_up_error(fake_cuda):  # noqa: F811
    from vrt_ros.gpu.errors import GpuError

    fake_cuda.integrated = True
    pipe = _pipeline([], **{"input.mapped_memory": True})
    fake_cuda.fail_next("allocate", "CUDA_ERROR_OUT_OF_MEMORY")
    with pytest.raises(GpuError, match="cuMemHostAlloc failed: CUDA_ERROR_OUT_OF_MEMORY"):
        pipe._upload.upload(*bgr(64, 48, 0), pipe.stream)
    pipe.close()
    assert fake_cuda.live() == []


def test_a_batch_reads_each_slots_frame_in_place(fake_cuda):  # noqa: F811
    """Batched inference (engine.max_batch) with mapped staging: each slot's frame has its own mapped buffer, the
    letterbox of slot j reads frame j's bytes there, and the batch needs no H2D copy."""
    from test_gpu_batch import DYN_IN, DYN_OUT, frame

    from vrt_ros.inference.backends.cuda import CudaPipeline

    fake_cuda.integrated = True
    pipe = CudaPipeline(values("yolov8", **{"engine.max_batch": 3, "input.mapped_memory": True}), log=lambda m: None,
                        engine=FakeEngine([DYN_IN], DYN_OUT))
    frames = [frame(640, 480, 0), frame(320, 240, 1), frame(640, 480, 2)]
    h2d = fake_cuda.copies["h2d"]
    pipe.process_batch(frames)
    assert fake_cuda.copies["h2d"] == h2d
    letterboxes = [l for l in fake_cuda.launches if l.entry == "letterbox_u8"][-3:]
    for f, lb in zip(frames, letterboxes):
        src, _w, h, step = (int(a) for a in lb.args[:4])
        assert fake_cuda.find(src, h * step, "mapped") is not None
        assert ctypes.string_at(src, h * step) == np.asarray(f.data).tobytes()
    assert len({int(lb.args[0]) for lb in letterboxes}) == 3  # one buffer per slot
    pipe.close()
    assert fake_cuda.live() == [] and fake_cuda.hazards == []
