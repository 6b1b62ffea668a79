"""CompressedImage decoding (HC-05): colour and mono JPEG/PNG decode; 16-bit, depth, truncated and empty are rejected."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vrt_ros.errors import FrameError
from vrt_ros.intake.compressed import decode_compressed


@pytest.fixture(scope="module")
def photo(shared_dir):
    img = cv2.imread(str(shared_dir / "data/images/darknet_dog.jpg"), cv2.IMREAD_COLOR)
    assert img is not None
    return img


def encode(ext: str, img: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(ext, img)
    assert ok
    return buf.tobytes()


def test_HC_05_colour_jpeg_and_png(photo):
    jpg = decode_compressed("jpeg", encode(".jpg", photo))
    assert jpg.shape == photo.shape and np.abs(jpg.astype(int) - photo).mean() < 3
    png = decode_compressed("png", encode(".png", photo))
    assert np.array_equal(png, photo)


def test_HC_05_mono_jpeg_expanded_to_three_channels(photo):
    grey = cv2.cvtColor(photo, cv2.COLOR_BGR2GRAY)
    out = decode_compressed("jpeg", encode(".jpg", grey))
    assert out.shape == photo.shape
    assert np.array_equal(out[..., 0], out[..., 2])


def test_HC_05_sixteen_bit_png_rejected(photo):
    deep = (cv2.cvtColor(photo, cv2.COLOR_BGR2GRAY).astype(np.uint16) * 257)
    with pytest.raises(FrameError, match="only 8-bit") as e:
        decode_compressed("png", encode(".png", deep))
    assert e.value.reason == "unsupported_format"


def test_HC_05_compressed_depth_rejected():
    with pytest.raises(FrameError, match="depth"):
        decode_compressed("16UC1; compressedDepth png", b"\x89PNG\r\n\x1a\n" + bytes(20))


@pytest.mark.parametrize("cut", [0.5, 0.9, 0.999])
def test_HC_05_truncated_jpeg_rejected(photo, cut):
    data = encode(".jpg", photo)
    with pytest.raises(FrameError) as e:
        decode_compressed("jpeg", data[: int(len(data) * cut)])
    assert e.value.reason == "corrupt_compressed"


def test_HC_05_truncated_png_rejected(photo):
    data = encode(".png", photo)
    with pytest.raises(FrameError):
        decode_compressed("png", data[: len(data) // 2])


def test_HC_05_empty_and_garbage():
    with pytest.raises(FrameError) as e:
        decode_compressed("jpeg", b"")
    assert e.value.reason == "empty_data"
    with pytest.raises(FrameError) as e:
        decode_compressed("jpeg", np.random.default_rng(1).integers(0, 256, 1024, dtype=np.uint8).tobytes())
    assert e.value.reason in ("unsupported_format", "corrupt_compressed")
