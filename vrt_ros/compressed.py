"""Decoding of ``sensor_msgs/CompressedImage`` payloads (JPEG, PNG) with OpenCV, to packed BGR uint8.

Only 8-bit colour or grey images are accepted: depth images (``compressedDepth``) and 16-bit PNGs are rejected
with a clear error instead of being silently scaled. A JPEG must end with its EOI marker, so a truncated file is
dropped rather than decoded into grey rows.
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
        FrameError: reason ``empty_data`` (no bytes), ``unsupported_format`` (depth images, or neither JPEG nor
            PNG), ``corrupt_compressed`` (a JPEG without its end-of-image marker: truncated).
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
        return "jpeg", buf
    if head.startswith(_PNG_MAGIC):
        return "png", buf
    raise FrameError(
        f"compressed image (format {fmt!r}) is neither JPEG nor PNG (first bytes {head[:4].hex()})",
        reason="unsupported_format",
    )


def decode_compressed(fmt: str, data) -> np.ndarray:
    """Decode a compressed image to BGR on the CPU (OpenCV).

    Args:
        fmt: the message's ``format`` field, e.g. ``"jpeg"``, ``"png"``, ``"bgr8; jpeg compressed bgr8"``.
        data: the payload (buffer protocol).

    Returns:
        (height, width, 3) uint8 BGR array; grey images are expanded to three channels, alpha is dropped.

    Raises:
        FrameError: reason ``empty_data`` (no bytes), ``unsupported_format`` (depth or 16-bit images, or neither
            JPEG nor PNG), ``corrupt_compressed`` (truncated or undecodable payload).
    """
    _, buf = sniff(fmt, data)
    img = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
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
