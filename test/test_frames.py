"""Raw frames: validation, zero-copy views honouring step, CPU conversion to BGR (HC-01, HC-02, HC-03)."""

from __future__ import annotations

import numpy as np
import pytest

from vrt_ros import frames
from vrt_ros.encodings import ENCODINGS, lookup
from vrt_ros.errors import FrameError
from vrt_ros.types import ImageSpec

RNG = np.random.default_rng(7)


def pack(bgr: np.ndarray, encoding: str, step: int | None = None, fill: int = 0xFF) -> tuple[ImageSpec, bytes]:
    """Encode a BGR test image as ``encoding`` with rows of ``step`` bytes (padding filled with ``fill``)."""
    h, w = bgr.shape[:2]
    order = lookup(encoding).order
    if order == "mono":
        px = bgr[..., 1:2]
    else:
        chans = {"b": bgr[..., 0], "g": bgr[..., 1], "r": bgr[..., 2], "a": np.zeros((h, w), np.uint8)}
        px = np.stack([chans[c] for c in order], axis=-1)
    row = w * px.shape[2]
    step = row if step is None else step
    buf = np.full((h, step), fill, np.uint8)
    buf[:, :row] = px.reshape(h, row)
    return ImageSpec(w, h, encoding, step), buf.tobytes()


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_every_encoding_converts_to_bgr(encoding):
    bgr = RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    spec, data = pack(bgr, encoding, step=53 * ENCODINGS[encoding].bytes_per_pixel + 5)
    out = frames.to_bgr(spec, data)
    if encoding == "mono8":
        assert np.array_equal(out, np.repeat(bgr[..., 1:2], 3, axis=2))
    else:
        assert np.array_equal(out, bgr)


def test_view_is_zero_copy():
    bgr = RNG.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    spec, data = pack(bgr, "bgr8", step=20)
    buf = bytearray(data)
    view = frames.image_view(spec, buf)
    buf[0] = 201
    assert view[0, 0, 0] == 201
    assert view.shape == (4, 5, 3)


def test_HC_01_row_padding_gives_identical_pixels():
    bgr = RNG.integers(0, 256, (481, 641, 3), dtype=np.uint8)
    packed = frames.to_bgr(*pack(bgr, "bgr8"))
    for step in (1924, 2048):
        assert np.array_equal(frames.to_bgr(*pack(bgr, "bgr8", step=step, fill=0xFF)), packed)


@pytest.mark.parametrize(
    "spec, nbytes, reason",
    [
        (ImageSpec(640, 480, "bgr8", 1920), 0, "short_data"),
        (ImageSpec(640, 480, "bgr8", 1920), 1920 * 479, "short_data"),
        (ImageSpec(0, 0, "bgr8", 0), 0, "bad_size"),
        (ImageSpec(640, 480, "bgr8", 1919), 1919 * 480, "bad_step"),
        (ImageSpec(640, 480, "bgr8", -3), 10, "bad_step"),
        (ImageSpec(64, 48, "yuv999", 192), 192 * 48, "unknown_encoding"),
        (ImageSpec(100000, 2, "mono8", 100000), 200000, "bad_size"),
    ],
)
def test_HC_02_bad_geometry_is_rejected_before_reading(spec, nbytes, reason):
    with pytest.raises(FrameError) as e:
        frames.image_view(spec, bytes(nbytes))
    assert e.value.reason == reason


def test_HC_02_oversize_data_with_consistent_step_is_accepted():
    # 308x410 bgr8: height*step = 378840 bytes, the message carries 399360 bytes.
    spec = ImageSpec(308, 410, "bgr8", 308 * 3)
    data = RNG.integers(0, 256, 399360, dtype=np.uint8).tobytes()
    out = frames.to_bgr(spec, data)
    assert np.array_equal(out, np.frombuffer(data, np.uint8)[:378840].reshape(410, 308, 3))


def test_unknown_encoding_lists_supported():
    with pytest.raises(FrameError, match="supported: bgr8"):
        lookup("32FC1")


def test_HC_03_alpha_ignored_and_channel_order_exact():
    b, g, r = 10, 20, 30
    bgr = np.empty((4, 4, 3), np.uint8)
    bgr[...] = (b, g, r)
    for enc in ("bgra8", "rgba8", "rgb8", "bgr8"):
        out = frames.to_bgr(*pack(bgr, enc))
        assert (out == (b, g, r)).all(), enc
    big = RNG.integers(0, 256, (360, 640, 3), dtype=np.uint8)
    ref = frames.to_bgr(*pack(big, "bgr8"))
    for enc in ("bgra8", "rgba8"):
        assert np.array_equal(frames.to_bgr(*pack(big, enc)), ref)
