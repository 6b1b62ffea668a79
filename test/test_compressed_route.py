"""The routing of compressed frames on the GPU path (GPU JPEG decode, or the CPU decode counted per reason), with a
stand-in decoder (test/jpeg_standin.py): no GPU needed. The real decoder is tested in test_gpu_jpeg.py."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from jpeg_standin import HostJpegDecoder
from vrt_ros.intake.compressed import jpeg_header
from synthetic_models import ramp_rectangle
from vrt_ros.errors import FrameError
from vrt_ros.intake.compressed_route import FALLBACK_REASONS, CompressedRouter, DeviceImage

BOX = (50.0, 60.0, 200.0, 180.0)


def encode(ext: str, image: np.ndarray, *params: int) -> bytes:
    ok, data = cv2.imencode(ext, image, list(params))
    assert ok
    return data.tobytes()


def patch_sof(jpeg: bytes, offset: int, value: int) -> bytes:
    """The JPEG with byte ``offset`` of its SOF segment's payload set (0: bits per sample, 5: components)."""
    i = jpeg.index(b"\xff\xc0")
    out = bytearray(jpeg)
    out[i + 4 + offset] = value
    return bytes(out)


@pytest.fixture
def photo() -> np.ndarray:
    return ramp_rectangle(320, 240, BOX)


def test_jpeg_goes_to_the_gpu_decoder_with_its_pitch(photo):
    logs: list[str] = []
    dec = HostJpegDecoder()
    router = CompressedRouter(dec, log=logs.append)
    data = encode(".jpg", photo, cv2.IMWRITE_JPEG_QUALITY, 90)
    image, info = router.decode("jpeg", data, stream=None)
    assert isinstance(image, DeviceImage) and (image.width, image.height, image.channels) == (320, 240, 3)
    assert image.pitch == 1024 and image.encoding == "rgb8" and info.codec == "jpeg"
    rgb = dec.pixels(image).reshape(240, 1024)[:, :960].reshape(240, 320, 3)
    np.testing.assert_array_equal(rgb[..., ::-1], cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR))
    assert router.stats() == {"gpu": 1} and not logs


@pytest.mark.parametrize("fmt", ["jpeg", "rgb8; jpeg compressed bgr8", "png"])  # the bytes decide, not the format
def test_png_is_decoded_on_the_cpu_and_counted(photo, fmt):
    logs: list[str] = []
    router = CompressedRouter(HostJpegDecoder(), log=logs.append)
    for _ in range(3):
        image, info = router.decode(fmt, encode(".png", photo), stream=None)
        np.testing.assert_array_equal(image, photo)  # PNG is lossless: the CPU decode gives the frame back
        assert info is None
    assert router.stats() == {"gpu": 0, "cpu.png": 3}
    assert len(logs) == 1 and "png" in logs[0]  # logged once, then only counted


def test_12_bit_and_cmyk_jpegs_fall_back_counted_per_reason(photo):
    router = CompressedRouter(HostJpegDecoder(), log=lambda m: None)
    jpeg = encode(".jpg", photo)
    assert jpeg_header(np.frombuffer(jpeg, np.uint8)) == (320, 240, 3, 8)
    for patched, reason in ((patch_sof(jpeg, 0, 12), "bit_depth"), (patch_sof(jpeg, 5, 4), "channels")):
        try:  # the CPU decode gives the verdict on such a (patched, inconsistent) stream: an image or a FrameError
            router.decode("jpeg", patched, stream=None)
        except FrameError as exc:
            assert exc.reason == "corrupt_compressed"
        assert router.fallbacks[reason] == 1, router.stats()
    assert router.gpu_frames == 0


@pytest.mark.parametrize("mode", ["refuse", "fail"])
def test_a_stream_the_gpu_decoder_refuses_is_decoded_on_the_cpu(photo, mode):
    logs: list[str] = []
    router = CompressedRouter(HostJpegDecoder(**{mode: True}), log=logs.append)
    data = encode(".jpg", photo)
    image, info = router.decode("jpeg", data, stream=None)
    np.testing.assert_array_equal(image, cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR))
    assert info is None and router.stats() == {"gpu": 0, "cpu.gpu_refused": 1}
    assert "gpu_refused" in logs[0] and ("stand-in decoder failure" in logs[0]) == (mode == "fail")


def test_unreadable_header_is_refused_before_any_decoder():
    """No frame header (SOF) to read: refused by the CPU header check, so neither decoder sees it (issue 26)."""
    dec = HostJpegDecoder()
    router = CompressedRouter(dec, log=lambda m: None)
    junk = b"\xff\xd8" + bytes(range(7, 200)) + b"\xff\xd9"  # JPEG magic and end marker, no readable segment
    with pytest.raises(FrameError) as e:
        router.decode("jpeg", junk, stream=None)
    assert e.value.reason == "corrupt_compressed" and dec.decoded == 0 and router.stats() == {"gpu": 0}


def test_without_a_gpu_decoder_every_frame_is_decoded_on_the_cpu(photo):
    router = CompressedRouter(None, log=lambda m: None)
    image, _ = router.decode("jpeg", encode(".jpg", photo), stream=None)
    assert image.shape == photo.shape and router.stats() == {"gpu": 0, "cpu.no_gpu_decoder": 1}
    assert set(router.fallbacks) <= set(FALLBACK_REASONS)


@pytest.mark.parametrize("data, reason", [(b"", "empty_data"), (b"GIF89a" + bytes(64), "unsupported_format")])
def test_bad_payloads_are_refused_before_any_decoder(data, reason):
    """Bad frames are the CPU checks' verdict (FrameError), not a fallback: nothing is counted."""
    router = CompressedRouter(HostJpegDecoder(), log=lambda m: None)
    with pytest.raises(FrameError) as e:
        router.decode("jpeg", data, stream=None)
    assert e.value.reason == reason and router.stats() == {"gpu": 0}


def test_truncated_jpeg_is_dropped_before_the_gpu_decoder(photo):
    dec = HostJpegDecoder()
    router = CompressedRouter(dec, log=lambda m: None)
    data = encode(".jpg", photo)
    with pytest.raises(FrameError) as e:
        router.decode("jpeg", data[: len(data) // 2], stream=None)
    assert e.value.reason == "corrupt_compressed" and dec.decoded == 0 and router.stats() == {"gpu": 0}


def test_grey_jpeg_goes_to_the_gpu_decoder(photo):
    grey = encode(".jpg", cv2.cvtColor(photo, cv2.COLOR_BGR2GRAY))
    assert jpeg_header(np.frombuffer(grey, np.uint8))[2] == 1
    router = CompressedRouter(HostJpegDecoder(), log=lambda m: None)
    image, _ = router.decode("jpeg", grey, stream=None)
    assert isinstance(image, DeviceImage) and router.stats() == {"gpu": 1}
    assert DeviceImage(0, 4, 4, 4, 1).encoding == "mono8" and image.encoding == "rgb8"
