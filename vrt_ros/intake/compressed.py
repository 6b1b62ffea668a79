"""Decoding of ``sensor_msgs/CompressedImage`` payloads (JPEG, PNG) with OpenCV, to packed BGR uint8.

Only 8-bit colour or grey images are accepted: depth images (``compressedDepth``) and 16-bit PNGs are rejected
with a clear error instead of being silently scaled. A JPEG must end with its EOI marker, so a truncated file is
dropped rather than decoded into grey rows. The size a payload declares (a JPEG's frame header, SOF; a PNG's IHDR)
is read before anything is decoded: a zero or absurd size (more than :data:`MAX_PIXELS`, or a side over
:data:`MAX_SIDE`) is refused, so a corrupt or hostile header never makes a decoder allocate gigabytes.
Every decoder failure is a :class:`~vrt_ros.errors.FrameError` (the node drops the frame; it is not an engine
failure): OpenCV's own exceptions (``cv2.error``) included.

Formats: JPEG, ITU-T T.81 (1992) B.1.1.3 and B.2.2 (markers, frame header); PNG, ISO/IEC 15948:2003 11.2.2 (IHDR).
"""

from __future__ import annotations

import cv2
import numpy as np

from vrt_ros.errors import FrameError

_JPEG_SOI = b"\xff\xd8"
_JPEG_EOI = b"\xff\xd9"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Bytes at the end of a JPEG searched for the EOI marker (some drivers pad the buffer).
_EOI_SEARCH = 64
#: Largest image a payload may declare, pixels (2**26 = 67 Mpx, twice an 8K frame's 33 Mpx; its BGR image is
#: 192 MiB), and largest side. OpenCV's own limit (2**30 px) would let a 30000x30000 header allocate 2.5 GiB.
MAX_PIXELS = 1 << 26
MAX_SIDE = 1 << 15
# JPEG frame header markers SOF0..SOF15 (T.81 Table B.1), except DHT (C4), JPG (C8) and DAC (CC).
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers without a length field (T.81 B.1.1.3): TEM, RST0..RST7 (SOI/EOI handled separately).
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})


def sniff(fmt: str, data) -> tuple[str, np.ndarray]:
    """Check a compressed payload without decoding it and name its codec.

    The checks every decoder relies on (CPU here, GPU in :mod:`vrt_ros.gpu.jpeg`): bytes present, not a depth
    image, JPEG or PNG magic, a JPEG's end-of-image marker.

    Args:
        fmt: the message's ``format`` field, e.g. ``"jpeg"``, ``"png"``, ``"bgr8; jpeg compressed bgr8"``.
        data: the payload (buffer protocol).

    Returns:
        ``(codec, buf)``: ``"jpeg"`` or ``"png"`` (from the bytes, not from ``fmt``), and a zero-copy uint8 view.

    Raises:
        FrameError: reason ``empty_data`` (no bytes), ``unsupported_format`` (depth images, 16-bit PNGs, or neither
            JPEG nor PNG), ``corrupt_compressed`` (a JPEG without its end-of-image marker, a header that is
            truncated, malformed or declares a zero size), ``oversized_image`` (a declared size over
            :data:`MAX_PIXELS` or :data:`MAX_SIDE`).
    """
    buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    if buf.size == 0:
        raise FrameError("compressed image has no data", reason="empty_data")
    if "compresseddepth" in fmt.lower().replace(" ", ""):
        raise FrameError(f"compressed depth images are not supported (format {fmt!r})", reason="unsupported_format")
    head = buf[:8].tobytes()
    if head.startswith(_JPEG_SOI):
        if _JPEG_EOI not in buf[-_EOI_SEARCH:].tobytes():
            raise FrameError(f"JPEG of {buf.size} bytes is truncated (no end-of-image marker)", reason="corrupt_compressed")
        _check_size("JPEG", *jpeg_header(buf)[:2])
        return "jpeg", buf
    if head.startswith(_PNG_MAGIC):
        width, height, bits = png_header(buf)
        _check_size("PNG", width, height)
        if bits == 16:
            raise FrameError("PNG has 16 bits per sample; only 8-bit colour or grey images are supported",
                             reason="unsupported_format")
        return "png", buf
    raise FrameError(
        f"compressed image (format {fmt!r}) is neither JPEG nor PNG (first bytes {head[:4].hex()})",
        reason="unsupported_format",
    )


def jpeg_header(buf: np.ndarray) -> tuple[int, int, int, int]:
    """``(width, height, components, bits per sample)`` from the frame header (SOF) of the JPEG in ``buf`` (uint8, starting with SOI), read by
    walking the marker segments before the first scan (T.81 B.2.2); nothing is decoded.

    Raises:
        FrameError: reason ``corrupt_compressed``: no SOF before the first scan or the end, a segment length that
            runs past the data, a byte that is not a marker where one must be.
    """
    data = memoryview(buf)
    n, i = len(data), 2
    while True:
        if i >= n or data[i] != 0xFF:
            where = "the data ends" if i >= n else f"byte {i} is 0x{data[i]:02x}, not a marker"
            raise FrameError(f"JPEG header is malformed: {where} before its frame header (SOF)",
                             reason="corrupt_compressed")
        while i < n and data[i] == 0xFF:  # fill bytes before a marker
            i += 1
        if i + 2 >= n:
            raise FrameError("JPEG header is truncated before its frame header (SOF)", reason="corrupt_compressed")
        marker, i = data[i], i + 1
        if marker in _JPEG_STANDALONE:
            continue
        if marker in (0xD8, 0xD9, 0xDA):  # SOI, EOI or a scan (SOS) before any frame header
            raise FrameError(f"JPEG has no frame header (SOF) before marker 0xff{marker:02x}",
                             reason="corrupt_compressed")
        length = (data[i] << 8) | data[i + 1]
        if length < 2 or i + length > n:
            raise FrameError(f"JPEG segment 0xff{marker:02x} at byte {i - 2} declares {length} bytes, beyond the "
                             f"{n}-byte payload", reason="corrupt_compressed")
        if marker in _JPEG_SOF:
            if length < 8:
                raise FrameError(f"JPEG frame header of {length} bytes is too short", reason="corrupt_compressed")
            return (data[i + 5] << 8) | data[i + 6], (data[i + 3] << 8) | data[i + 4], data[i + 7], data[i + 2]
        i += length


def png_header(buf: np.ndarray) -> tuple[int, int, int]:
    """``(width, height, bit depth)`` from the IHDR chunk of the PNG in ``buf`` (uint8, starting with the signature).

    Raises:
        FrameError: reason ``corrupt_compressed``: the data ends inside IHDR, or the first chunk is not a 13-byte IHDR.
    """
    if buf.size < 8 + 8 + 13:
        raise FrameError(f"PNG of {buf.size} bytes is truncated inside its header (IHDR)", reason="corrupt_compressed")
    ihdr = buf[8:29].tobytes()
    if ihdr[4:8] != b"IHDR" or int.from_bytes(ihdr[0:4], "big") != 13:
        raise FrameError("PNG's first chunk is not its 13-byte header (IHDR)", reason="corrupt_compressed")
    return int.from_bytes(ihdr[8:12], "big"), int.from_bytes(ihdr[12:16], "big"), ihdr[16]


def _check_size(codec: str, width: int, height: int) -> None:
    if width == 0 or height == 0:
        raise FrameError(f"{codec} header declares a {width}x{height} image", reason="corrupt_compressed")
    if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
        raise FrameError(f"{codec} header declares a {width}x{height} image, over the limit of {MAX_PIXELS} pixels "
                         f"and {MAX_SIDE} per side (refused before decoding)", reason="oversized_image")


def decode_compressed(fmt: str, data) -> np.ndarray:
    """Decode a compressed image to BGR on the CPU (OpenCV).

    Args:
        fmt: the message's ``format`` field, e.g. ``"jpeg"``, ``"png"``, ``"bgr8; jpeg compressed bgr8"``.
        data: the payload (buffer protocol).

    Returns:
        (height, width, 3) uint8 BGR array; grey images are expanded to three channels, alpha is dropped.

    Raises:
        FrameError: as :func:`sniff`, and ``corrupt_compressed`` for a payload OpenCV cannot decode (returns no
            image, or raises: ``cv2.error`` and any other exception of the decode, chained as the cause).
    """
    _, buf = sniff(fmt, data)
    try:
        img = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    except Exception as exc:  # cv2.error (an assertion in a codec), MemoryError: the bytes' fault, not the engine's
        raise FrameError(f"compressed image (format {fmt!r}, {buf.size} bytes) could not be decoded: "
                         f"{type(exc).__name__}: {str(exc).strip()}", reason="corrupt_compressed") from exc
    if img is None:
        raise FrameError(f"compressed image (format {fmt!r}, {buf.size} bytes) could not be decoded", reason="corrupt_compressed")
    if img.dtype != np.uint8:
        raise FrameError(
            f"compressed image is {img.dtype} (format {fmt!r}); only 8-bit colour or grey images are supported",
            reason="unsupported_format",
        )
    if img.ndim == 2:
        return cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    if img.shape[2] == 4:
        return cv2.cvtColor(img, cv2.COLOR_BGRA2BGR)
    return img
