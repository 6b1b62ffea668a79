"""More than 8 frame geometries on one pipeline (issue 26): the staging buffers (gpu/upload.py, on the recording CUDA
stand-in test/fake_cuda.py) and the GPU decoder's decoded images (gpu/jpeg.py, on a stand-in nvImageCodec) must not
reallocate every frame: the pool grows once an evicted geometry comes back, and says so in the log."""

from __future__ import annotations

import logging
import sys
import types

import numpy as np
import pytest

from fake_cuda import fake_cuda  # noqa: F401  (fixture)
from vrt_ros.intake.compressed_route import StreamInfo
from vrt_ros.pools.keyed_cache import LruPool
from vrt_ros.types import ImageSpec

N = 11  # cameras of 11 different sizes, in turn: more than the 8 geometries kept at first


# ----------------------------------------------------------------------------------------- the pool (pure)
def test_pool_evicts_the_least_recently_used_and_grows_when_an_evicted_key_returns():
    lines, released = [], []
    pool = LruPool(2, 4, lines.append, "buffers")
    build = lambda k: (lambda: f"value {k}")  # noqa: E731
    for key in "ab":
        pool.add(key, build(key), lambda k, v: released.append(k))
    assert pool.get("a") == "value a"  # now the most recently used: b goes first
    pool.add("c", build("c"), lambda k, v: released.append(k))
    assert released == ["b"] and pool.capacity == 2 and pool.reallocations == 0
    pool.add("b", build("b"), lambda k, v: released.append(k))  # b is back: the working set is larger than 2
    assert pool.reallocations == 1 and pool.capacity == 4 and released == ["b"]
    assert lines == ["buffers: more frame geometries alternate than were kept; keeping up to 4 (limit 4)"]
    for key in "abcdabcd":  # four keys in turn now fit: nothing more is built or released
        if pool.get(key) is None:
            pool.add(key, build(key), lambda k, v: released.append(k))
    assert pool.allocations == 5 and released == ["b"] and len(pool) == 4
    assert sorted(pool.pop_all()) == ["value a", "value b", "value c", "value d"] and len(pool) == 0
    with pytest.raises(ValueError):
        LruPool(4, 2)


# ----------------------------------------------------------------------------------------- staging (CUDA stand-in)
def _frames() -> list[tuple[ImageSpec, np.ndarray]]:
    out = []
    for i in range(N):
        w, h = 64 + 16 * i, 48 + 8 * i
        out.append((ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), np.full((h, w, 3), i, np.uint8)))
    return out


def test_eleven_alternating_geometries_do_not_reallocate_staging_every_frame(fake_cuda, caplog):  # noqa: F811
    from vrt_ros.gpu.runtime import GpuRuntime
    from vrt_ros.gpu.upload import MAX_GEOMETRIES, Uploader

    assert N > MAX_GEOMETRIES
    rt = GpuRuntime(0)
    stream = rt.create_stream()
    up = Uploader(rt, "cams")
    frames = _frames()
    with caplog.at_level(logging.INFO, logger="vrt_ros.gpu.upload"):
        for spec, img in frames * 2:  # warm-up: every geometry, then the first evicted one comes back
            up.upload(spec, img, stream)
            rt.sync(stream)
        before = rt.counters.snapshot()
        for spec, img in frames * 10:  # 110 frames of 11 cameras in turn
            up.upload(spec, img, stream)
            rt.sync(stream)
        after = rt.counters.snapshot()
    assert after["pinned_allocs"] == before["pinned_allocs"] and after["device_allocs"] == before["device_allocs"]
    assert up.reallocations <= N + MAX_GEOMETRIES  # once each, plus the evictions before the pool grew
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("more frame geometries alternate than were kept; keeping up to 16" in m for m in warnings), warnings
    assert any("re-allocated" in m for m in warnings), warnings
    assert fake_cuda.hazards == []
    up.close(stream)
    rt.sync(stream)  # the device buffers' frees are stream-ordered
    assert fake_cuda.live() == [] and fake_cuda.hazards == []


# ----------------------------------------------------------------------------------------- decoded images
class _Image:
    """A decoded image as nvImageCodec returns it (what the decoder reads: ``__cuda_array_interface__``)."""

    def __init__(self, w: int, h: int) -> None:
        self.__cuda_array_interface__ = {"shape": (h, w, 3), "strides": None, "data": (id(self), False)}


def _fake_nvimgcodec(monkeypatch) -> types.SimpleNamespace:
    made = types.SimpleNamespace(images=0)

    class Decoder:
        def __init__(self, device_id, backends):
            pass

        def decode(self, stream, image=None, params=None, cuda_stream=0):
            if image is None:  # nvImageCodec allocates when it is not given an image to reuse
                made.images += 1
                return _Image(stream.width, stream.height)
            return image

    mod = types.SimpleNamespace(Decoder=Decoder, Backend=lambda kind: kind, BackendKind=types.SimpleNamespace(HW_GPU_ONLY="HW_GPU_ONLY", GPU_ONLY="GPU_ONLY"),
                                DecodeParams=lambda **kw: kw, ColorSpec=types.SimpleNamespace(SRGB=0),
                                SampleFormat=types.SimpleNamespace(I_RGB=0), __version__="stand-in")
    nvidia = types.ModuleType("nvidia")
    nvidia.nvimgcodec = mod
    monkeypatch.setitem(sys.modules, "nvidia", nvidia)
    monkeypatch.setitem(sys.modules, "nvidia.nvimgcodec", mod)
    return made


def test_eleven_alternating_jpeg_sizes_do_not_reallocate_decoded_images_every_frame(monkeypatch, caplog):
    from vrt_ros.gpu.jpeg import MAX_SIZES, NvImageCodecDecoder

    made = _fake_nvimgcodec(monkeypatch)
    dec = NvImageCodecDecoder(0)
    infos = [StreamInfo("jpeg", 64 + 16 * i, 48 + 8 * i, 3, 8, handle=types.SimpleNamespace(
        width=64 + 16 * i, height=48 + 8 * i)) for i in range(N)]
    with caplog.at_level(logging.INFO, logger="vrt_ros.gpu.jpeg"):
        for info in infos * 2:
            dec.decode(info, stream=0)
        warm = made.images
        for info in infos * 10:
            image = dec.decode(info, stream=0)
            assert (image.width, image.height) == (info.width, info.height)
    assert made.images == warm and dec.allocations == warm <= N + MAX_SIZES
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("keeping up to 16" in m for m in warnings) and any("re-allocated" in m for m in warnings), warnings
    dec.close()
