"""What the fuzz campaign (:mod:`vrt_ros.bench.robustness.fuzz`) sends: hypothesis strategies of ``sensor_msgs/Image``,
``CompressedImage``, ``CameraInfo`` and depth images, byte-level mutations of a real serialized frame, and the good
frames between them.

Imports hypothesis (a test extra, ``requirements/test.txt``), so only the fuzz command imports this module.
Field values lean on what breaks parsers: sizes 0, 1, just under/over the data, 2^31 and 2^32-1; encodings and
formats from the encoding table, near misses, and every sticky CUDA error's name and text
(:data:`vrt_ros.faults.STICKY_ERRORS`: messages quote these fields, which must never make a fault fatal);
``frame_id`` up to 10 kB; floats with NaN and infinities.
"""

from __future__ import annotations

import cv2
import numpy as np
from hypothesis import strategies as st
from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from vrt_ros.faults import STICKY_ERRORS
from vrt_ros.intake.encodings import ENCODINGS

#: Texts that look like CUDA faults: every sticky error's driver name, runtime name and text, and one combined.
STICKY_TEXTS = tuple(t for e in STICKY_ERRORS for t in (e.name, e.runtime_name, e.text)) + (
    "jpeg; misaligned address", "CUDA error: an illegal memory access was encountered")
#: Good frames' and depth frames' size (pixels).
GOOD_W, GOOD_H = 64, 48
_SIZES = st.one_of(st.integers(0, 80), st.sampled_from([GOOD_W, GOOD_H, 2 ** 15, 2 ** 16 + 1, 2 ** 31 - 1, 2 ** 31,
                                                          2 ** 32 - 1]))
_TEXT = st.one_of(st.sampled_from(STICKY_TEXTS), st.text(max_size=40),
                  st.builds(lambda c, n: c * n, st.sampled_from("xA\u00e9"), st.sampled_from([10_000, 10_240])))
_FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)


def good_bgr(seq: int) -> np.ndarray:
    """A good frame's pixels: a ramp with a bright rectangle that moves with ``seq``, (GOOD_H, GOOD_W, 3) uint8."""
    y, x = np.mgrid[0:GOOD_H, 0:GOOD_W]
    img = np.dstack([x * 4, y * 5, np.full_like(x, 90)]).astype(np.uint8)
    x0 = 8 + seq % 24
    img[12:36, x0:x0 + 20] = 240
    return img


def stamp(msg, seq: int, frame_id: str | None = None):
    """Set ``msg``'s header: stamp ``seq`` s (the campaign's message id, matched in the answers), ``frame_id``."""
    msg.header.stamp.sec = int(seq)
    msg.header.stamp.nanosec = 0
    if frame_id is not None:
        msg.header.frame_id = frame_id
    return msg


def good_image(seq: int, frame_id: str = "camera_optical_frame") -> Image:
    """A good ``bgr8`` Image (:func:`good_bgr`)."""
    img = good_bgr(seq)
    msg = Image(height=GOOD_H, width=GOOD_W, encoding="bgr8", step=GOOD_W * 3)
    msg.data = img.tobytes()
    return stamp(msg, seq, frame_id)


def good_compressed(seq: int, fmt: str = "jpeg") -> CompressedImage:
    """A good JPEG (or PNG) CompressedImage of :func:`good_bgr`."""
    ok, buf = cv2.imencode(".png" if fmt == "png" else ".jpg", good_bgr(seq))
    assert ok
    msg = CompressedImage(format=fmt)
    msg.data = buf.tobytes()
    return stamp(msg, seq, "camera_optical_frame")


def good_depth(seq: int) -> Image:
    """A good registered depth image of the good frame's size: ``16UC1``, 2 m everywhere."""
    msg = Image(height=GOOD_H, width=GOOD_W, encoding="16UC1", step=GOOD_W * 2)
    msg.data = np.full((GOOD_H, GOOD_W), 2000, np.uint16).tobytes()
    return stamp(msg, seq, "camera_optical_frame")


def good_info(seq: int) -> CameraInfo:
    """A good CameraInfo of the good frame's size (pinhole, no distortion)."""
    f, cx, cy = 50.0, GOOD_W / 2, GOOD_H / 2
    msg = CameraInfo(width=GOOD_W, height=GOOD_H, distortion_model="plumb_bob")
    msg.d = [0.0] * 5
    msg.k = [f, 0.0, cx, 0.0, f, cy, 0.0, 0.0, 1.0]
    msg.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    msg.p = [f, 0.0, cx, 0.0, 0.0, f, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    return stamp(msg, seq, "camera_optical_frame")


@st.composite
def images(draw, depth: bool = False) -> Image:
    """A fuzzed Image (colour, or with ``depth`` a depth image: 16UC1/32FC1 and near misses); stamp not set."""
    names = (["16UC1", "32FC1", "mono16", "16SC1", "32FC3", "8UC1"] if depth else sorted(ENCODINGS))
    enc = draw(st.one_of(st.sampled_from(names), st.sampled_from(names), _TEXT,
                         st.sampled_from(["BGR8", "bgr8 ", "", "yuv999"])))  # a known name half the time
    w = draw(st.one_of(st.just(GOOD_W), st.just(GOOD_W), _SIZES))
    h = draw(st.one_of(st.just(GOOD_H), st.just(GOOD_H), _SIZES))
    bpp = ENCODINGS[enc].bytes_per_pixel if enc in ENCODINGS else (4 if enc == "32FC1" else 2 if depth else 3)
    step = draw(st.one_of(st.just(w * bpp), _SIZES, st.just(max(w * bpp - 1, 0))))
    step = min(step, 2 ** 32 - 1)
    exact = h * step if h * step < 1 << 20 else 0
    n = draw(st.one_of(st.just(exact), st.integers(0, 4096), st.sampled_from([max(exact - 1, 0), exact + 1])))
    if n <= 4096:
        data = draw(st.binary(min_size=n, max_size=n))
    else:
        data = (np.frombuffer(draw(st.binary(min_size=64, max_size=64)), np.uint8)[np.arange(n) % 64]).tobytes()
    msg = Image(height=h, width=w, encoding=enc, step=step, is_bigendian=draw(st.integers(0, 1)))
    msg.data = data
    msg.header.frame_id = draw(st.one_of(st.just("camera_optical_frame"), _TEXT))
    return msg


def _mutate(data: bytes, ops) -> bytes:
    b = bytearray(data)
    for op, pos, val in ops:
        if not b and op != "insert":
            continue
        i = pos % max(len(b), 1)
        if op == "flip":
            b[i] ^= 1 << (val % 8)
        elif op == "set":
            b[i] = val % 256
        elif op == "truncate":
            del b[i:]
        elif op == "insert":
            b[i:i] = bytes([val % 256]) * (1 + val % 7)
        elif op == "delete":
            del b[i:i + 1 + val % 7]
        elif op == "u32":  # an absurd length or size field
            b[i:i + 4] = (val * 0x01010101 & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(b)


_OPS = st.lists(st.tuples(st.sampled_from(["flip", "set", "truncate", "insert", "delete", "u32"]),
                          st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=6)


@st.composite
def compressed(draw) -> CompressedImage:
    """A fuzzed CompressedImage: a real JPEG/PNG, mutated or cut, or random bytes; formats with sticky texts."""
    fmt = draw(st.one_of(st.sampled_from(["jpeg", "png", "rgb8; jpeg compressed bgr8", "rgb8; png compressed bgr8",
                                          "jpeg; misaligned address", "16UC1; compressedDepth", "bmp", ""]), _TEXT))
    kind = draw(st.sampled_from(["jpeg", "png", "random", "empty"]))
    if kind in ("jpeg", "png"):
        ok, buf = cv2.imencode(".jpg" if kind == "jpeg" else ".png", good_bgr(draw(st.integers(0, 99))))
        data = _mutate(buf.tobytes(), draw(_OPS)) if draw(st.booleans()) else buf.tobytes()
    else:
        data = draw(st.binary(max_size=2048)) if kind == "random" else b""
    msg = CompressedImage(format=fmt)
    msg.data = data
    msg.header.frame_id = draw(st.one_of(st.just("camera_optical_frame"), _TEXT))
    return msg


@st.composite
def camera_infos(draw) -> CameraInfo:
    """A fuzzed CameraInfo: sizes, distortion models and coefficients (any count, NaN, inf), K/R/P with zeros."""
    def floats(n: int) -> list[float]:
        good = [float(v) for v in draw(st.lists(st.floats(-1e3, 1e3), min_size=n, max_size=n))]
        return draw(st.one_of(st.just(good), st.lists(_FLOATS, min_size=n, max_size=n), st.just([0.0] * n)))

    msg = good_info(0)
    msg.width = draw(st.one_of(st.just(GOOD_W), _SIZES))
    msg.height = draw(st.one_of(st.just(GOOD_H), _SIZES))
    msg.distortion_model = draw(st.one_of(st.sampled_from(["plumb_bob", "rational_polynomial", "equidistant", ""]),
                                          _TEXT))
    if draw(st.booleans()):
        msg.d = draw(st.lists(_FLOATS, max_size=16))
    if draw(st.booleans()):
        msg.k = floats(9)
    if draw(st.booleans()):
        msg.p = floats(12)
    if draw(st.booleans()):
        msg.r = floats(9)
    msg.binning_x, msg.binning_y = draw(st.integers(0, 2 ** 32 - 1)), draw(st.integers(0, 4))
    msg.header.frame_id = draw(st.one_of(st.just("camera_optical_frame"), _TEXT))
    return msg


@st.composite
def mutated_bytes(draw, serialized: bytes) -> bytes:
    """``serialized`` (a real frame's CDR bytes) with 1-6 byte-level mutations: bit flips, bytes set, cuts,
    insertions, deletions and 32-bit fields overwritten (lengths, sizes, step); at least 1 byte is left.

    Never empty: a 0-byte serialized message stalls the *publishing* writer's reliable stream in rmw_fastrtps
    (measured here between two processes: nothing that writer sends afterwards arrives), which the node cannot see
    or count; 1-3 bytes arrive padded to 4 and are read (and refused) by the node."""
    return _mutate(serialized, draw(_OPS)) or serialized[:1]
