"""Raw frames: validation, zero-copy views honouring step, CPU conversion to BGR (HC-01, HC-02, HC-03)."""

from __future__ import annotations

import numpy as np
import pytest

from vrt_ros.errors import FrameError
from vrt_ros.intake import frames
from vrt_ros.intake.encodings import BGR_INDEX, ENCODINGS, lookup
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


DIRECT = sorted(e for e, row in ENCODINGS.items() if row.order in BGR_INDEX)


def test_every_table_row_is_covered():
    covered = set(DIRECT) | {"yuv422", "uyvy", "yuv422_yuy2", "yuyv", "mono16"} | set(BAYER)
    assert covered == set(ENCODINGS)


@pytest.mark.parametrize("encoding", DIRECT)
def test_every_encoding_converts_to_bgr(encoding):
    bgr = RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    spec, data = pack(bgr, encoding, step=53 * ENCODINGS[encoding].bytes_per_pixel + 5)
    out = frames.to_bgr(spec, data)
    if ENCODINGS[encoding].order == "mono":
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
    with pytest.raises(FrameError, match=r"supported: .*bgr8.*yuv422"):
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


# --- 4:2:2 YUV, mono16, Bayer, aliases ---------------------------------------------------------------------

def _bt601_video_yuv(bgr: np.ndarray) -> np.ndarray:
    """Y, U, V (BT.601 video range) of each pixel, float (the inverse of OpenCV's YUV2BGR_UYVY)."""
    b, g, r = (bgr[..., i].astype(np.float64) for i in range(3))
    y = 16 + 0.257 * r + 0.504 * g + 0.098 * b
    u = 128 - 0.148 * r - 0.291 * g + 0.439 * b
    v = 128 + 0.439 * r - 0.368 * g - 0.071 * b
    return np.stack([y, u, v], axis=-1)


def pack_422(bgr: np.ndarray, order: str) -> bytes:
    """Pack a BGR image (even width) as UYVY or YUYV, U and V from the left pixel of each pair."""
    yuv = np.clip(np.rint(_bt601_video_yuv(bgr)), 0, 255).astype(np.uint8)
    h, w = bgr.shape[:2]
    out = np.empty((h, w // 2, 4), np.uint8)
    y0, y1 = yuv[:, 0::2, 0], yuv[:, 1::2, 0]
    u, v = yuv[:, 0::2, 1], yuv[:, 0::2, 2]
    if order == "uyvy":
        out[..., 0], out[..., 1], out[..., 2], out[..., 3] = u, y0, v, y1
    else:
        out[..., 0], out[..., 1], out[..., 2], out[..., 3] = y0, u, y1, v
    return out.tobytes()


@pytest.mark.parametrize("encoding, order", [("yuv422", "uyvy"), ("uyvy", "uyvy"), ("yuv422_yuy2", "yuyv"), ("yuyv", "yuyv")])
def test_HC_04_solid_red_422_decodes_to_red(encoding, order):
    red = np.zeros((2, 4, 3), np.uint8)
    red[..., 2] = 255
    out = frames.to_bgr(ImageSpec(4, 2, encoding, 8), pack_422(red, order))
    assert np.abs(out.astype(int) - [0, 0, 255]).max() <= 3, out[0, 0]


@pytest.mark.parametrize("encoding", ["yuv422", "yuv422_yuy2"])
def test_HC_04_odd_width_rejected(encoding):
    with pytest.raises(FrameError, match="even") as e:
        frames.to_bgr(ImageSpec(5, 2, encoding, 10), bytes(20))
    assert e.value.reason == "bad_size"


def test_422_byte_orders_differ_only_in_layout():
    bgr = RNG.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    a = frames.to_bgr(ImageSpec(8, 6, "yuv422", 16), pack_422(bgr, "uyvy"))
    b = frames.to_bgr(ImageSpec(8, 6, "yuv422_yuy2", 16), pack_422(bgr, "yuyv"))
    assert np.array_equal(a, b)


@pytest.mark.parametrize("bigendian", [False, True])
def test_mono16_scaled_to_8_bits_and_endianness(bigendian):
    grey = RNG.integers(0, 65536, (5, 7), dtype=np.uint16)
    data = grey.astype(">u2" if bigendian else "<u2").tobytes()
    out = frames.to_bgr(ImageSpec(7, 5, "mono16", 14, bigendian), data)
    assert np.array_equal(out[..., 0], (grey >> 8).astype(np.uint8))
    assert np.array_equal(out[..., 0], out[..., 2])


def test_mono16_honours_step():
    grey = RNG.integers(0, 65536, (3, 4), dtype=np.uint16)
    buf = np.zeros((3, 11), np.uint8)  # odd step: rows start at odd addresses
    buf[:, :8] = grey.astype("<u2").view(np.uint8).reshape(3, 8)
    out = frames.to_bgr(ImageSpec(4, 3, "mono16", 11), buf.tobytes())
    assert np.array_equal(out[..., 1], (grey >> 8).astype(np.uint8))


BAYER = {"bayer_rggb8": "RGGB", "bayer_bggr8": "BGGR", "bayer_gbrg8": "GBRG", "bayer_grbg8": "GRBG"}


@pytest.mark.parametrize("encoding", sorted(BAYER))
def test_bayer_solid_colour_and_pattern_orientation(encoding):
    # Mosaic of a solid colour: demosaicing must give that colour back (interior pixels), which only happens
    # when the pattern's orientation is read right.
    pattern = BAYER[encoding]
    colour = {"B": 40, "G": 120, "R": 220}
    mosaic = np.empty((8, 10), np.uint8)
    for dy in range(2):
        for dx in range(2):
            mosaic[dy::2, dx::2] = colour[pattern[2 * dy + dx]]
    out = frames.to_bgr(ImageSpec(10, 8, encoding, 10), mosaic.tobytes())
    assert (np.abs(out[2:-2, 2:-2].astype(int) - [40, 120, 220]) <= 1).all(), out[3, 3]


def test_aliases_8uc3_and_8uc1():
    bgr = RNG.integers(0, 256, (3, 4, 3), dtype=np.uint8)
    assert np.array_equal(frames.to_bgr(ImageSpec(4, 3, "8UC3", 12), bgr.tobytes()), bgr)
    g = frames.to_bgr(ImageSpec(4, 3, "8UC1", 4), bgr[..., 0].tobytes())
    assert np.array_equal(g[..., 1], bgr[..., 0])
