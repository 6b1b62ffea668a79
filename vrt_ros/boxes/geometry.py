"""Letterbox geometry and its inverse: the only place this maths lives.

Convention: coordinates are continuous, pixel ``i`` covers ``[i, i + 1)`` and its centre is ``i + 0.5``
(the half-pixel convention of OpenCV's ``resize`` and of the bilinear kernels in ``kernels/``). Forward:
``x_in = x_src * scale_x + pad_x``; inverse: ``x_src = (x_in - pad_x) / scale_x`` (same for y).
The bilinear sample for input pixel ``u`` reads source position ``(u - pad_x + 0.5) / scale_x - 0.5``.
"""

from __future__ import annotations

import numpy as np

from vrt_ros.errors import FrameError
from vrt_ros.types import Letterbox

ALIGNMENTS = ("top_left", "center")
#: ``model.resize`` values: keep the aspect ratio and pad, or fill the input with each axis scaled on its own.
RESIZES = ("letterbox", "stretch")


def letterbox(src_width: int, src_height: int, dst_width: int, dst_height: int, align: str = "top_left",
              resize: str = "letterbox") -> Letterbox:
    """Fit a source image into the engine input, keeping its aspect ratio (or stretching it).

    ``letterbox``: ``r = min(dst_w / src_w, dst_h / src_h)``; the content is resized to
    ``(round(src_w * r), round(src_h * r))`` (YOLOX ``preproc``, Ultralytics ``LetterBox``) and placed top-left or
    centred (integer padding). ``stretch``: the content is the whole input (``scale_x = dst_w / src_w``,
    ``scale_y = dst_h / src_h``, no padding; ``align`` is irrelevant), as RT-DETR (``torchvision Resize`` to a
    square), D-FINE, RF-DETR and Ultralytics ``LetterBox(scale_fill=True)`` for RT-DETR prepare their input. The
    same :class:`~vrt_ros.types.Letterbox` describes both, so every mapping below and the preprocess kernels
    (which take both scales and the pads as arguments) serve both.

    Args:
        src_width, src_height: source size in pixels (>= 1).
        dst_width, dst_height: engine input size in pixels (>= 1).
        align: "top_left" or "center".
        resize: "letterbox" or "stretch".

    Returns:
        The :class:`~vrt_ros.types.Letterbox` for this pair of sizes.

    Raises:
        FrameError: a source size below 1 pixel.
        ValueError: a bad input size, alignment or resize (a configuration fault, caught at start-up).
    """
    if src_width < 1 or src_height < 1:
        raise FrameError(f"image size {src_width}x{src_height} is empty", reason="bad_size")
    if dst_width < 1 or dst_height < 1:
        raise ValueError(f"engine input size {dst_width}x{dst_height} must be positive")
    if align not in ALIGNMENTS:
        raise ValueError(f"letterbox align {align!r} is not one of {ALIGNMENTS}")
    if resize not in RESIZES:
        raise ValueError(f"model.resize {resize!r} is not one of {RESIZES}")
    r = min(dst_width / src_width, dst_height / src_height)
    rw = min(dst_width, max(1, int(round(src_width * r))))
    rh = min(dst_height, max(1, int(round(src_height * r))))
    if resize == "stretch":
        rw, rh, align = dst_width, dst_height, "top_left"
    if align == "center":
        pad_x, pad_y = (dst_width - rw) // 2, (dst_height - rh) // 2
    else:
        pad_x = pad_y = 0
    return Letterbox(
        src_width=src_width,
        src_height=src_height,
        dst_width=dst_width,
        dst_height=dst_height,
        resized_width=rw,
        resized_height=rh,
        pad_x=pad_x,
        pad_y=pad_y,
        scale_x=rw / src_width,
        scale_y=rh / src_height,
    )


def to_source(xy: np.ndarray, lb: Letterbox) -> np.ndarray:
    """Map points from engine-input pixels to source pixels, in place.

    Args:
        xy: float32 array whose last axis holds x, y pairs: shape (..., 2) or (..., 2k) (boxes as x1 y1 x2 y2).
        lb: the frame's letterbox.

    Returns:
        ``xy`` itself, now in source pixels (not clipped).
    """
    xy[..., 0::2] -= lb.pad_x
    xy[..., 0::2] /= lb.scale_x
    xy[..., 1::2] -= lb.pad_y
    xy[..., 1::2] /= lb.scale_y
    return xy


def to_input(xy: np.ndarray, lb: Letterbox) -> np.ndarray:
    """Inverse of :func:`to_source`: source pixels to engine-input pixels, in place (same shapes)."""
    xy[..., 0::2] *= lb.scale_x
    xy[..., 0::2] += lb.pad_x
    xy[..., 1::2] *= lb.scale_y
    xy[..., 1::2] += lb.pad_y
    return xy


def clip_boxes(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
    """Clip (N, 4) xyxy boxes to ``[0, width] x [0, height]`` in place and return them."""
    np.clip(boxes[:, 0::2], 0.0, float(width), out=boxes[:, 0::2])
    np.clip(boxes[:, 1::2], 0.0, float(height), out=boxes[:, 1::2])
    return boxes
