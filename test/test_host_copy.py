"""The GPU path's host copy (vrt_ros.gpu.host_copy): what is staged in pinned memory is the same image.

The copy of 3- and 4-channel 8-bit frames swaps their channels (a multi-threaded OpenCV conversion) and the
kernel is told the swapped encoding; every other layout is copied byte for byte. Either way, the staged bytes read
with the staged encoding must give exactly the BGR image the message gives (the CPU reference
:func:`vrt_ros.intake.frames.to_bgr`, tolerance 0). Frames are random, with padded rows and odd widths where the layout
allows them. The uploader's part runs on the CUDA stand-in (test/fake_cuda.py), where device memory is host memory.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from fake_cuda import fake_cuda  # noqa: F401  (fixture)
from vrt_ros.gpu import host_copy
from vrt_ros.gpu.host_copy import SWAPS, copy_frame, image_nbytes, plan_copy
from vrt_ros.intake.encodings import ENCODINGS
from vrt_ros.intake.frames import to_bgr
from vrt_ros.types import ImageSpec

GPU_ENCODINGS = sorted(n for n, e in ENCODINGS.items() if e.kernel)


def frame(encoding: str, width: int, height: int, pad: int, seed: int) -> tuple[ImageSpec, bytes]:
    """A random frame with ``pad`` bytes of padding after each row."""
    enc = ENCODINGS[encoding]
    width += width % 2 if enc.even_width else 0
    step = width * enc.bytes_per_pixel + pad
    data = np.random.default_rng(seed).integers(0, 256, height * step, dtype=np.uint8).tobytes()
    return ImageSpec(width=width, height=height, encoding=encoding, step=step), data


@pytest.fixture
def swap_small(monkeypatch):
    """Swap even tiny frames (the swap is used from PARALLEL_MIN_BYTES on)."""
    monkeypatch.setattr(host_copy, "PARALLEL_MIN_BYTES", 0)


@pytest.mark.parametrize("encoding", GPU_ENCODINGS)
@pytest.mark.parametrize("pad", [0, 13])
def test_staged_frame_is_the_same_image(swap_small, encoding, pad):
    spec, data = frame(encoding, 67, 41, pad, seed=len(encoding) + pad)
    enc = ENCODINGS[encoding]
    plan = plan_copy(spec, enc)
    staged_spec, staged_enc = plan.spec, plan.enc
    dst = np.zeros(image_nbytes(staged_spec, staged_enc), np.uint8)
    copy_frame(plan, spec, memoryview(data), dst)
    # to_bgr needs whole rows of `step` bytes; the staged image ends after the last row's pixels
    padded = np.zeros(staged_spec.height * staged_spec.step, np.uint8)
    padded[: dst.size] = dst
    np.testing.assert_array_equal(to_bgr(staged_spec, padded), to_bgr(spec, data))
    if encoding in SWAPS:
        assert staged_enc.name == SWAPS[encoding][1] != encoding
        assert staged_spec.step == spec.width * enc.bytes_per_pixel  # row padding dropped
    else:
        assert (staged_spec, staged_enc) == (spec, enc)


def test_full_hd_is_swapped_and_vga_copied_as_is():
    spec, data = frame("bgr8", 1920, 1080, 0, seed=3)
    dst = np.empty(1920 * 1080 * 3, np.uint8)
    copy_frame(plan_copy(spec, ENCODINGS["bgr8"]), spec, memoryview(data), dst)
    src = np.frombuffer(data, np.uint8).reshape(1080, 1920, 3)
    np.testing.assert_array_equal(dst.reshape(1080, 1920, 3), src[..., ::-1])
    vga, _ = frame("bgr8", 640, 480, 0, seed=4)  # 0.9 MB: below PARALLEL_MIN_BYTES, one np.copyto, no swap
    plan = plan_copy(vga, ENCODINGS["bgr8"])
    assert (plan.spec, plan.enc) == (vga, ENCODINGS["bgr8"])


def test_wrong_staging_size_is_refused():
    for encoding in ("bgr8", "mono8"):
        spec, data = frame(encoding, 32, 8, 0, seed=1)
        enc = ENCODINGS[encoding]
        with pytest.raises(ValueError, match="staging holds"):
            copy_frame(plan_copy(spec, enc), spec, memoryview(data), np.zeros(len(data) + 1, np.uint8))


@pytest.mark.parametrize("encoding", ["bgr8", "rgba8", "mono16", "yuv422"])
def test_uploader_stages_the_same_image_on_the_device(fake_cuda, swap_small, encoding):  # noqa: F811
    from vrt_ros.gpu.runtime import GpuRuntime
    from vrt_ros.gpu.upload import Uploader

    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    up = Uploader(rt, "test")
    spec, data = frame(encoding, 64, 30, 6, seed=7)
    ptr, enc, staged_spec = up.upload(spec, data, stream)
    rt.sync(stream)
    n = image_nbytes(staged_spec, enc)
    device = np.zeros(staged_spec.height * staged_spec.step, np.uint8)
    device[:n] = np.frombuffer(ctypes.string_at(ptr, n), np.uint8)  # the stand-in's device memory is host memory
    np.testing.assert_array_equal(to_bgr(staged_spec, device), to_bgr(spec, data))
    assert (enc.name != encoding) == (encoding in SWAPS)
    assert fake_cuda.copies["h2d"] == 1
    up.close(stream)
    rt.sync(stream)
    assert fake_cuda.hazards == []
