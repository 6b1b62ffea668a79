"""Property-based fuzzing of compressed headers (issue 26, item 1): JPEG frame headers (SOF sizes, components,
precision), JPEG Huffman tables (DHT) and PNG headers (IHDR), through the CPU decode and through the GPU path's
routing (stand-in GPU decoder, test/jpeg_standin.py).

Whatever a header declares, the only exception that may escape is :class:`vrt_ros.errors.FrameError` with a
documented reason (the fault table's input row: never an engine failure), a declared size over
``vrt_ros.intake.compressed.MAX_PIXELS`` is refused before any decoder runs, and an accepted payload gives an image of the
declared size. Case counts: 250 SOF, 250 DHT, 250 IHDR, 150 through the router (900 in all).
"""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis drives the fuzz tests; installed by `make test`")
from hypothesis import HealthCheck, given, settings, strategies as st

from jpeg_standin import HostJpegDecoder
from test_fuzz_frames import REASONS
from vrt_ros.errors import FrameError
from vrt_ros.faults import DECODE, INPUT, classify
from vrt_ros.intake import compressed
from vrt_ros.intake.compressed import MAX_PIXELS, MAX_SIDE, decode_compressed
from vrt_ros.intake.compressed_route import CompressedRouter

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _jpeg(h: int = 24, w: int = 32, grey: bool = False) -> bytes:
    img = np.random.default_rng(h * w).integers(0, 255, (h, w) if grey else (h, w, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    return buf.tobytes()


def _png(h: int = 24, w: int = 32) -> bytes:
    ok, buf = cv2.imencode(".png", np.random.default_rng(h + w).integers(0, 255, (h, w, 3), dtype=np.uint8))
    assert ok
    return buf.tobytes()


JPEG, GREY_JPEG, PNG = _jpeg(), _jpeg(grey=True), _png()


def _declared(width: int, height: int) -> str:
    """What the header check must say about a declared size: ``ok``, ``corrupt`` (zero) or ``oversized``."""
    if width == 0 or height == 0:
        return "corrupt"
    return "oversized" if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS else "ok"


def _verdict(fmt: str, data: bytes) -> tuple[str, np.ndarray | None]:
    """``(reason or "", image)``: decode, allowing only a FrameError of a documented reason."""
    try:
        return "", decode_compressed(fmt, data)
    except FrameError as e:
        assert e.reason in REASONS, e.reason
        assert classify(e, DECODE).kind == INPUT
        return e.reason, None


def _sof_at(jpeg: bytes) -> int:
    return jpeg.index(b"\xff\xc0")


@settings(max_examples=250, **SETTINGS)
@given(width=st.integers(0, 65535), height=st.integers(0, 65535), comps=st.integers(0, 255),
       bits=st.sampled_from([0, 1, 8, 12, 16, 255]), grey=st.booleans())
def test_fuzz_jpeg_sof_sizes(width, height, comps, bits, grey):
    data = bytearray(GREY_JPEG if grey else JPEG)
    i = _sof_at(data)
    data[i + 4] = bits
    data[i + 5:i + 9] = struct.pack(">HH", height, width)
    if comps != (1 if grey else 3):
        data[i + 9] = comps
    reason, out = _verdict("jpeg", bytes(data))
    declared = _declared(width, height)
    if declared == "oversized":
        assert reason == "oversized_image"
    elif declared == "corrupt":
        assert reason == "corrupt_compressed"
    if out is not None:
        assert out.shape == (height, width, 3) and out.dtype == np.uint8


@st.composite
def huffman_tables(draw):
    """A JPEG whose first DHT segment is rewritten: class/id byte, the 16 code counts, the symbols, and the
    segment length (consistent or not)."""
    data = bytearray(JPEG)
    i = data.index(b"\xff\xc4")
    length = struct.unpack(">H", data[i + 2:i + 4])[0]
    tc_th = draw(st.one_of(st.sampled_from([0x00, 0x01, 0x10, 0x11]), st.integers(0, 255)))
    counts = draw(st.lists(st.integers(0, 255), min_size=16, max_size=16))
    n_symbols = draw(st.one_of(st.just(sum(counts)), st.integers(0, 300)))
    symbols = draw(st.binary(min_size=n_symbols, max_size=n_symbols))
    body = bytes([tc_th, *counts]) + symbols
    seg_len = draw(st.one_of(st.just(len(body) + 2), st.integers(0, 65535)))
    return bytes(data[:i]) + b"\xff\xc4" + struct.pack(">H", seg_len) + body + bytes(data[i + 2 + length:])


@settings(max_examples=250, **SETTINGS)
@given(huffman_tables())
def test_fuzz_jpeg_huffman_tables(data):
    reason, out = _verdict("jpeg", data)
    if out is not None:
        assert out.shape == (24, 32, 3)


def _chunk(kind: bytes, body: bytes, crc_ok: bool = True) -> bytes:
    crc = zlib.crc32(kind + body) if crc_ok else 0
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


@st.composite
def png_headers(draw):
    width, height = draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**32 - 1))
    if draw(st.booleans()):  # small sizes often, so that some decode
        width, height = draw(st.integers(0, 40)), draw(st.integers(0, 40))
    bits = draw(st.sampled_from([1, 2, 4, 8, 16, 0, 3, 255]))
    colour = draw(st.sampled_from([0, 2, 3, 4, 6, 1, 7, 255]))
    tail = draw(st.binary(min_size=3, max_size=3))  # compression, filter, interlace
    ihdr = struct.pack(">IIBB", width, height, bits, colour) + tail
    idat_at = PNG.index(b"IDAT") - 4
    head = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr, crc_ok=draw(st.booleans()))
    return width, height, bits, head + PNG[idat_at:]


@settings(max_examples=250, **SETTINGS)
@given(png_headers())
def test_fuzz_png_ihdr(header):
    width, height, bits, data = header
    reason, out = _verdict("png", data)
    declared = _declared(width, height)
    if declared == "oversized":
        assert reason == "oversized_image"
    elif declared == "corrupt":
        assert reason == "corrupt_compressed"
    elif bits == 16:
        assert reason == "unsupported_format"
    if out is not None:
        assert out.shape == (height, width, 3)


@settings(max_examples=150, **SETTINGS)
@given(st.one_of(huffman_tables(), png_headers().map(lambda h: h[3]),
                 st.tuples(st.integers(0, 65535), st.integers(0, 65535)).map(
                     lambda wh: JPEG[:_sof_at(JPEG) + 5] + struct.pack(">HH", *wh) + JPEG[_sof_at(JPEG) + 9:])))
def test_fuzz_headers_through_the_gpu_route(data):
    """The GPU path's router: the stand-in GPU decoder parses the header and decodes; refusals go to the CPU
    decode. Only FrameErrors escape, and an oversized header reaches neither decoder."""
    dec = HostJpegDecoder()
    router = CompressedRouter(dec, log=lambda m: None)
    try:
        router.decode("jpeg", data, stream=None)
    except FrameError as e:
        assert e.reason in REASONS
        if e.reason == "oversized_image":
            assert dec.decoded == 0 and router.stats() == {"gpu": 0}


@pytest.mark.parametrize("codec, width, height", [("jpeg", 30000, 30000), ("png", 30000, 30000),
                                                  ("jpeg", MAX_SIDE + 1, 1), ("png", 1, MAX_SIDE + 1)])
def test_absurd_declared_sizes_are_refused_before_decoding(monkeypatch, codec, width, height):
    """30000 x 30000 is under OpenCV's own limit (2**30 px): without the header check it allocates 2.5 GiB."""
    calls = []
    monkeypatch.setattr(compressed.cv2, "imdecode", lambda *a: calls.append(a))
    if codec == "jpeg":
        data = bytearray(JPEG)
        data[_sof_at(data) + 5:_sof_at(data) + 9] = struct.pack(">HH", height, width)
    else:
        data = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    with pytest.raises(FrameError, match=f"declares a {width}x{height} image") as e:
        decode_compressed(codec, bytes(data))
    assert e.value.reason == "oversized_image" and not calls


def test_opencv_errors_become_frame_faults(monkeypatch):
    """Any exception of the CPU decode (here OpenCV's own cv2.error) is a FrameError with the cause chained."""
    def imdecode(*_):
        raise cv2.error("OpenCV(5.0.0) loadsave.cpp:79: error: (-215:Assertion failed) in validateInputImageSize")

    monkeypatch.setattr(compressed.cv2, "imdecode", imdecode)
    with pytest.raises(FrameError, match="could not be decoded: error: OpenCV") as e:
        decode_compressed("jpeg", JPEG)
    assert e.value.reason == "corrupt_compressed" and isinstance(e.value.__cause__, cv2.error)
