"""A batch's compressed frames through :meth:`CompressedRouter.decode_batch` (issue 35): the JPEGs the GPU decoder
takes in ONE decoder call, each into its slot's reused image and equal to the frame decoded alone; the others on
the CPU, counted per reason; a corrupt JPEG failing its own slot only; a decoder call failing as a whole retried one
stream at a time. With the host stand-in of the GPU decoder (test/jpeg_standin.py) and, for
:class:`vrt_ros.gpu.jpeg.NvImageCodecDecoder`'s batching of reused images, a recording stand-in of nvImageCodec's
``Decoder``: no GPU needed. The real decoder is tested in test_gpu_jpeg_batch.py.
"""

from __future__ import annotations

import sys
import types

import cv2
import numpy as np
import pytest

from jpeg_standin import HostJpegDecoder, undefined_quant_table
from synthetic_models import ramp_rectangle
from test_compressed_route import patch_sof
from vrt_ros.errors import FrameError
from vrt_ros.intake.compressed_route import CompressedRouter, DeviceImage


def frame(k: int, width: int = 320, height: int = 240) -> np.ndarray:
    """A distinct BGR frame per ``k``: a ramp-edged rectangle at its own place, each channel scaled differently."""
    box = (20.0 + 9 * k, 15.0 + 7 * k, 150.0 + 11 * k, 130.0 + 5 * k)
    grey = ramp_rectangle(width, height, box).astype(np.float32)
    scale = np.array([1.0, 0.4 + 0.07 * k, 0.9 - 0.1 * (k % 4)], np.float32)
    return np.clip(grey * scale, 0, 255).astype(np.uint8)


def jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return data.tobytes()


def rgb(dec: HostJpegDecoder, image: DeviceImage) -> np.ndarray:
    """The (H, W, 3) RGB pixels a device image of the stand-in describes (read through its pitch)."""
    rows = dec.pixels(image).reshape(image.height, image.pitch)
    return rows[:, : image.width * 3].reshape(image.height, image.width, 3).copy()


def alone(data: bytes) -> np.ndarray:
    """The frame decoded alone, by its own router and decoder: the reference of each batch slot."""
    dec = HostJpegDecoder()
    image, _ = CompressedRouter(dec, log=lambda m: None).decode("jpeg", data, stream=None)
    assert isinstance(image, DeviceImage)
    return rgb(dec, image)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_a_batch_of_jpegs_is_one_decoder_call_each_slot_equal_to_the_frame_alone(n):
    dec = HostJpegDecoder()
    logs: list[str] = []
    router = CompressedRouter(dec, log=logs.append)
    datas = [jpeg(frame(k)) for k in range(n)]
    out = router.decode_batch([("jpeg", d) for d in datas], stream=None, slots=range(n))
    assert dec.batch_calls == 1 and dec.batch_sizes == [n]  # one call for the batch, every JPEG in it
    assert all(isinstance(r, tuple) and isinstance(r[0], DeviceImage) for r in out), out
    assert len({r[0].ptr for r in out}) == n  # each slot its own image: all valid together until the sync
    for k, (image, info) in enumerate(out):
        assert info.codec == "jpeg" and (image.width, image.height) == (320, 240)
        np.testing.assert_array_equal(rgb(dec, image), alone(datas[k]), err_msg=f"slot {k}")
    assert router.stats() == {"gpu": n} and not logs


def test_a_corrupt_jpeg_in_the_batch_fails_its_own_slot_only():
    dec = HostJpegDecoder()
    router = CompressedRouter(dec, log=lambda m: None)
    datas = [jpeg(frame(k)) for k in range(4)]
    datas[2] = undefined_quant_table(datas[2])
    out = router.decode_batch([("jpeg", d) for d in datas], stream=None, slots=[0, 1, 2, 3])
    assert dec.batch_sizes == [4]  # its header reads: it went to the decoder with the others, which refused it
    assert isinstance(out[2], FrameError) and out[2].reason == "corrupt_compressed"  # the CPU decode's verdict
    for k in (0, 1, 3):
        np.testing.assert_array_equal(rgb(dec, out[k][0]), alone(datas[k]), err_msg=f"slot {k}")
    assert router.stats() == {"gpu": 3, "gpu.batch_retried": 1, "cpu.gpu_refused": 1}


def test_a_hardware_batch_one_bad_stream_fails_as_a_whole_still_decodes_the_good_ones_on_the_gpu():
    """nvJPEG's hardware batch answers None for EVERY stream when one is bad (H200, nvImageCodec 0.9): the refused
    streams are tried again one by one, so the good frames are still GPU-decoded and only the bad one fails."""
    dec = HostJpegDecoder(hw_batch=True)
    router = CompressedRouter(dec, log=lambda m: None)
    datas = [jpeg(frame(k)) for k in range(4)]
    datas[2] = undefined_quant_table(datas[2])
    out = router.decode_batch([("jpeg", d) for d in datas], stream=None, slots=[0, 1, 2, 3])
    assert isinstance(out[2], FrameError) and out[2].reason == "corrupt_compressed"
    for k in (0, 1, 3):
        assert isinstance(out[k][0], DeviceImage), (k, out[k])  # on the GPU, not the CPU fallback
        np.testing.assert_array_equal(rgb(dec, out[k][0]), alone(datas[k]), err_msg=f"slot {k}")
    assert router.stats() == {"gpu": 3, "gpu.batch_retried": 1, "cpu.gpu_refused": 1}


def test_a_batch_call_that_fails_as_a_whole_is_retried_frame_by_frame():
    """nvImageCodec may raise for the whole list: the good frames are then decoded one by one, still on the GPU."""
    dec = HostJpegDecoder(fail_batch=True)
    logs: list[str] = []
    router = CompressedRouter(dec, log=logs.append)
    datas = [jpeg(frame(k)) for k in range(4)]
    datas[1] = undefined_quant_table(datas[1])
    for batch in range(2):
        out = router.decode_batch([("jpeg", d) for d in datas], stream=None, slots=[0, 1, 2, 3])
        assert isinstance(out[1], FrameError) and out[1].reason == "corrupt_compressed"
        for k in (0, 2, 3):
            assert isinstance(out[k][0], DeviceImage), (batch, k, out[k])
            np.testing.assert_array_equal(rgb(dec, out[k][0]), alone(datas[k]), err_msg=f"slot {k}")
    assert dec.batch_calls == 2
    assert router.stats() == {"gpu": 6, "gpu.batch_retried": 2, "cpu.gpu_refused": 2}
    assert sum("batch call failed" in m for m in logs) == 1  # logged once, then counted


def test_png_12_bit_and_bad_payloads_mixed_in_fall_back_per_frame():
    dec = HostJpegDecoder()
    router = CompressedRouter(dec, log=lambda m: None)
    photo = frame(3)
    png16 = cv2.imencode(".png", photo.astype(np.uint16) * 257)[1].tobytes()
    items = [("jpeg", jpeg(frame(0))), ("png", cv2.imencode(".png", photo)[1].tobytes()),
             ("jpeg", patch_sof(jpeg(frame(1)), 0, 12)), ("png", png16), ("jpeg", jpeg(frame(2))), ("jpeg", b"")]
    out = router.decode_batch(items, stream=None, slots=range(6))
    assert dec.batch_sizes == [2]  # only the two 8-bit JPEGs went to the GPU decoder, in one call
    for k, ref in ((0, 0), (4, 2)):
        np.testing.assert_array_equal(rgb(dec, out[k][0]), alone(jpeg(frame(ref))))
    png, info = out[1]
    np.testing.assert_array_equal(png, photo)  # lossless PNG, decoded on the CPU (BGR)
    assert info is None
    assert isinstance(out[2], FrameError) or isinstance(out[2][0], np.ndarray)  # CPU's verdict on a patched stream
    assert isinstance(out[3], FrameError) and out[3].reason == "unsupported_format"  # 16-bit PNG
    assert isinstance(out[5], FrameError) and out[5].reason == "empty_data"
    assert router.stats() == {"gpu": 2, "cpu.bit_depth": 1, "cpu.png": 1}


def test_slot_images_are_reused_batch_after_batch():
    dec = HostJpegDecoder()
    router = CompressedRouter(dec, log=lambda m: None)
    ptrs = None
    for batch in range(5):
        datas = [jpeg(frame((batch + k) % 8)) for k in range(4)]
        out = router.decode_batch([("jpeg", d) for d in datas], stream=None, slots=[0, 1, 2, 3])
        now = [r[0].ptr for r in out]
        assert ptrs is None or now == ptrs  # the same image per slot
        ptrs = now
        for k in range(4):
            np.testing.assert_array_equal(rgb(dec, out[k][0]), alone(datas[k]))
    assert dec.allocations == 4 and dec.batch_calls == 5  # one image per slot, allocated by the first batch only


def test_without_a_gpu_decoder_the_batch_is_decoded_on_the_cpu():
    router = CompressedRouter(None, log=lambda m: None)
    out = router.decode_batch([("jpeg", jpeg(frame(k))) for k in range(3)], stream=None, slots=[0, 1, 2])
    for k, (image, info) in enumerate(out):
        assert info is None and image.shape == (240, 320, 3)
        np.testing.assert_array_equal(image, cv2.imdecode(np.frombuffer(jpeg(frame(k)), np.uint8), cv2.IMREAD_COLOR))
    assert router.stats() == {"gpu": 0, "cpu.no_gpu_decoder": 3}


# NvImageCodecDecoder's batching, against a recording stand-in of nvImageCodec's Decoder.


class _Image:
    """An nvimgcodec.Image as far as the decoder reads it: its __cuda_array_interface__."""

    next_ptr = 1 << 20

    def __init__(self, width: int, height: int) -> None:
        _Image.next_ptr += 1 << 24
        self.__cuda_array_interface__ = {"shape": (height, width, 3), "strides": None, "typestr": "|u1",
                                         "data": (_Image.next_ptr, False), "version": 3}


class _Decoder:
    """Records each decode call; a stream whose ``bad`` is set answers None at its position (nvImageCodec 0.9)."""

    def __init__(self, **kwargs) -> None:
        self.calls: list[tuple[int, int]] = []  # (streams, images given)

    def decode(self, src, *, params=None, cuda_stream=0, image=None, images=None):
        many = isinstance(src, list)
        if (many and image is not None) or (not many and images is not None):  # nvImageCodec 0.9's two overloads
            raise TypeError("decode(): incompatible function arguments (single form: image=, list form: images=)")
        streams = src if many else [src]
        if not many:
            images = None if image is None else [image]
        self.calls.append((len(streams) if many else 0, 0 if images is None else len(images)))
        out = []
        for k, cs in enumerate(streams):
            if cs.bad:
                out.append(None)
            else:
                out.append(images[k] if images is not None else _Image(cs.width, cs.height))
        return out if many else out[0]


@pytest.fixture
def nvimgcodec(monkeypatch):
    """A stand-in ``nvidia.nvimgcodec`` module (CodeStream parses with the CPU header reader)."""
    from vrt_ros.intake.compressed import jpeg_header

    class CodeStream:
        def __init__(self, buf) -> None:
            self.width, self.height, self.num_channels, self.precision = jpeg_header(buf)
            self.codec_name, self.bad = "jpeg", False

    mod = types.SimpleNamespace(
        __version__="stand-in", Decoder=_Decoder, CodeStream=CodeStream, DecodeParams=lambda **kw: kw,
        Backend=lambda kind: kind, BackendKind=types.SimpleNamespace(HW_GPU_ONLY="HW_GPU_ONLY", GPU_ONLY="GPU_ONLY"), ColorSpec=types.SimpleNamespace(SRGB=1),
        SampleFormat=types.SimpleNamespace(I_RGB=1))
    pkg = types.ModuleType("nvidia")
    pkg.nvimgcodec = mod
    monkeypatch.setitem(sys.modules, "nvidia", pkg)
    monkeypatch.setitem(sys.modules, "nvidia.nvimgcodec", mod)
    return mod


def test_nvimagecodec_decoder_decodes_a_batch_in_one_call_into_the_slots_kept_images(nvimgcodec):
    from vrt_ros.gpu.jpeg import NvImageCodecDecoder

    dec = NvImageCodecDecoder(0, max_sizes=32)
    infos = [dec.parse(np.frombuffer(jpeg(frame(k, 320 + 32 * (k % 2))), np.uint8)) for k in range(4)]
    first = dec.decode_batch(infos, stream=7, slots=[0, 1, 2, 3])
    assert dec._decoder.calls == [(4, 0)] and dec.allocations == 4  # first batch: nvImageCodec allocates each
    for _ in range(3):
        again = dec.decode_batch(infos, stream=7, slots=[0, 1, 2, 3])
        assert [a.ptr for a in again] == [f.ptr for f in first]  # decoded into the images kept per slot
    assert dec._decoder.calls == [(4, 0)] + [(4, 4)] * 3 and dec.allocations == 4 and dec.batch_calls == 4
    assert [(a.width, a.height, a.pitch) for a in again] == [(320, 240, 960), (352, 240, 1056)] * 2
    # a new size in slot 1 and a stream the decoder refuses in slot 3: one call for the kept, one for the new size
    infos[1] = dec.parse(np.frombuffer(jpeg(frame(1, 640, 480)), np.uint8))
    infos[3].handle.bad = True
    out = dec.decode_batch(infos, stream=7, slots=[0, 1, 2, 3])
    assert dec._decoder.calls[-2:] == [(3, 3), (0, 0)] and dec.allocations == 5
    assert out[3] is None and (out[1].width, out[1].height) == (640, 480)
    assert [o.ptr for o in (out[0], out[2])] == [first[0].ptr, first[2].ptr]
    assert dec.decode(infos[0], stream=7, slot=0).ptr == first[0].ptr and dec._decoder.calls[-1] == (0, 1)


# The measurement command (vrt_ros.bench.stages.jpeg_batch): its loop with the host stand-in; the GPU run is the lead's.


def test_jpeg_batch_bench_times_one_list_call_against_single_calls_per_batch_size():
    from vrt_ros.bench.stages.jpeg_batch import measure

    class Stream:
        syncs = 0

        def sync(self):
            Stream.syncs += 1

    dec = HostJpegDecoder()
    jpegs = [np.frombuffer(jpeg(frame(k)), np.uint8) for k in range(4)]
    rows = measure(dec, Stream(), jpegs, [1, 2, 4], repeats=3, warmup=1)
    assert [r["batch"] for r in rows] == [1, 2, 4]
    assert dec.batch_sizes == [1] * 4 + [2] * 4 + [4] * 4  # the list way: one call per batch of N
    assert dec.decoded == 2 * 4 * (1 + 2 + 4) and Stream.syncs == 2 * 4 * 3  # both ways, one sync per batch
    for r in rows:
        assert 0 < r["list_ms"]["min"] <= r["list_ms"]["median"] <= r["list_ms"]["p90"]
        assert r["speedup"] == pytest.approx(r["single_ms"]["median"] / r["list_ms"]["median"])


def test_jpeg_batch_bench_says_why_it_measures_nothing_without_a_gpu(tmp_path):
    import subprocess

    from vrt_ros.gpu import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        pytest.skip("a CUDA device is present: the command measures there")
    proc = subprocess.run([sys.executable, "-m", "vrt_ros.bench.stages.jpeg_batch", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "SKIPPED, nothing measured" in proc.stdout, proc.stdout + proc.stderr
    assert cuda_unavailable_reason() in proc.stdout and not (tmp_path / "out").exists()


def test_nvimagecodec_decoder_images_are_bounded_by_bytes_with_the_pipelines_budget(nvimgcodec):
    """engine.frame_buffers_mb bounds the decoded images too: the least recently used are released for a new
    size, and a frame whose new image does not fit beside those its call holds is dropped (frame_too_large) while
    the others of the batch are decoded."""
    from vrt_ros.pools.buffer_budget import ByteBudget
    from vrt_ros.gpu.jpeg import NvImageCodecDecoder

    one = 320 * 240 * 3
    budget = ByteBudget(3 * one + one // 2, "engine.frame_buffers_mb")
    dec = NvImageCodecDecoder(0, max_sizes=32, budget=budget)
    router = CompressedRouter(dec, log=lambda m: None)
    datas = [jpeg(frame(k)) for k in range(4)]
    budget.begin()
    out = router.decode_batch([("jpeg", d) for d in datas], stream=7, slots=[0, 1, 2, 3])
    assert [isinstance(r, tuple) for r in out] == [True, True, True, False]  # three fit, the fourth is dropped
    assert isinstance(out[3], FrameError) and out[3].reason == "frame_too_large"
    assert "engine.frame_buffers_mb" in str(out[3]) and dec._decoder.calls == [(3, 0)]
    assert budget.used == 3 * one and dec.allocations == 3 and router.stats() == {"gpu": 3}
    for size in ((352, 240), (384, 240), (416, 240)):  # new sizes in slot 0: the images of past calls make room
        budget.begin()
        (image, _), = router.decode_batch([("jpeg", jpeg(frame(0, *size)))], stream=7, slots=[0])
        assert (image.width, image.height) == size and budget.used <= budget.limit
    assert budget.peak <= budget.limit and dec.allocations == 6
    budget.begin()  # alone, one that never fits: dropped, nothing allocated
    with pytest.raises(FrameError) as e:
        router.decode("jpeg", jpeg(frame(0, 1280, 720)), stream=7, slot=0)
    assert e.value.reason == "frame_too_large" and dec.allocations == 6
