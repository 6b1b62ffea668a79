"""Frames: validation of raw image buffers, zero-copy views that honour ``step``, and CPU conversion to BGR.

All validation of what a message claims happens in :func:`validate`, before any byte is read; a kernel or a view
never reads outside the buffer, whatever the message says.
"""

from __future__ import annotations

import numpy as np

from vrt_ros.errors import FrameError
from vrt_ros.intake.encodings import BGR_INDEX, Encoding, lookup
from vrt_ros.types import ImageSpec

# Largest accepted side, pixels (a corrupt header must not make us allocate gigabytes).
MAX_SIDE = 16384


def validate(spec: ImageSpec, nbytes: int) -> Encoding:
    """Check that a raw buffer of ``nbytes`` bytes can hold the image ``spec`` describes.

    Accepted: ``1 <= width, height <= 16384`` (even width for 4:2:2), a known encoding,
    ``step >= width * bytes_per_pixel`` and ``nbytes >= height * step`` (extra bytes after the last row are
    ignored).

    Returns:
        The encoding's table row.

    Raises:
        FrameError: with ``reason`` one of ``unknown_encoding``, ``bad_size``, ``bad_step``, ``short_data``;
            the message names the field and the values.
    """
    enc = lookup(spec.encoding)
    if not (1 <= spec.width <= MAX_SIDE and 1 <= spec.height <= MAX_SIDE):
        raise FrameError(
            f"image size {spec.width}x{spec.height} is outside 1..{MAX_SIDE} pixels (fields width, height)",
            reason="bad_size",
        )
    if enc.even_width and spec.width % 2:
        raise FrameError(
            f"{spec.encoding} packs pixel pairs: width {spec.width} must be even", reason="bad_size"
        )
    row = spec.width * enc.bytes_per_pixel
    if spec.step < row:
        raise FrameError(
            f"step {spec.step} bytes is smaller than width {spec.width} x {enc.bytes_per_pixel} bytes per pixel "
            f"({spec.encoding}) = {row} bytes",
            reason="bad_step",
        )
    need = spec.height * spec.step
    if nbytes < need:
        raise FrameError(
            f"data holds {nbytes} bytes but height {spec.height} x step {spec.step} needs {need} bytes",
            reason="short_data",
        )
    return enc


def image_view(spec: ImageSpec, data) -> np.ndarray:
    """Zero-copy view of a raw image buffer as an array, honouring ``step``.

    Args:
        spec: the image's geometry and encoding.
        data: any object with the buffer protocol (``bytes``, ``memoryview``, ``array.array``, numpy array).

    Returns:
        Array of shape (height, width, channels) viewing ``data`` (rows may be strided), uint8, or uint16 in
        native byte order for 16-bit encodings (a copy only when ``is_bigendian`` differs from this machine);
        read-only when ``data`` is.

    Raises:
        FrameError: as :func:`validate`.
    """
    buf = memoryview(data).cast("B")
    enc = validate(spec, buf.nbytes)
    if enc.bytes_per_pixel == 2 * enc.channels:  # 16-bit samples
        # Strided view built directly: numpy < 1.23 (Humble's 1.21) refuses .view('<u2') on padded uint8 rows.
        dtype = np.dtype(">u2" if spec.is_bigendian else "<u2")
        px = np.ndarray((spec.height, spec.width * enc.channels), dtype=dtype, buffer=buf, strides=(spec.step, 2))
        if not px.dtype.isnative:
            px = px.astype(np.uint16)
        return px.reshape(spec.height, spec.width, enc.channels)
    rows = np.frombuffer(buf, dtype=np.uint8, count=spec.height * spec.step).reshape(spec.height, spec.step)
    px = rows[:, : spec.width * enc.bytes_per_pixel]
    return px.reshape(spec.height, spec.width, enc.channels)


def to_bgr(spec: ImageSpec, data, out: np.ndarray | None = None) -> np.ndarray:
    """Convert a raw image to a packed BGR uint8 array (the CPU reference conversion).

    Alpha is ignored; mono is replicated into three channels; mono16 is scaled to 8 bits by ``>> 8``
    (``is_bigendian`` honoured); 4:2:2 YUV (BT.601 video range) and Bayer (bilinear demosaic) use OpenCV's
    ``cvtColor``, the reference the GPU kernels are checked against.

    Args:
        spec: geometry and encoding.
        data: the buffer (buffer protocol).
        out: optional (height, width, 3) uint8 array to write into (reused between frames).

    Returns:
        (height, width, 3) uint8 BGR array (``out`` when given).

    Raises:
        FrameError: as :func:`validate`.
    """
    view = image_view(spec, data)
    enc = lookup(spec.encoding)
    if out is None or out.shape != (spec.height, spec.width, 3):
        out = np.empty((spec.height, spec.width, 3), np.uint8)
    if enc.cv_code:
        import cv2

        src = view[..., 0] if enc.channels == 1 else view
        cv2.cvtColor(np.ascontiguousarray(src), getattr(cv2, enc.cv_code), dst=out)
        return out
    if enc.order == "mono16":
        np.right_shift(view[..., 0], 8, out=out[..., 0], casting="unsafe")
        out[..., 1] = out[..., 0]
        out[..., 2] = out[..., 0]
        return out
    b, g, r = BGR_INDEX[enc.order]
    out[..., 0] = view[..., b]
    out[..., 1] = view[..., g]
    out[..., 2] = view[..., r]
    return out
