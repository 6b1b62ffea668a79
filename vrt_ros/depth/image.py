"""A registered depth image: its pixels as a numpy view, its unit, and its checks against the colour frame.

Encodings (REP-118, "Depth images"): ``16UC1`` is millimetres (0 = no data), ``32FC1`` is metres (NaN or 0 = no
data). Both become the same float32 metres: ``float32(mm) / 1000`` (correctly rounded, as the GPU kernel computes it), which
is bitwise the float32 a ``32FC1`` image stores for the same whole-millimetre depth.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from vrt_ros.depth import reasons
from vrt_ros.errors import FrameError

#: encoding -> (numpy dtype, stored units per metre).
DEPTH_ENCODINGS: dict[str, tuple[np.dtype, float]] = {
    "16UC1": (np.dtype(np.uint16), 1000.0),
    "32FC1": (np.dtype(np.float32), 1.0),
}


@dataclass(frozen=True)
class DepthImage:
    """One depth frame (no copy of its pixels).

    Attributes:
        width, height: pixels.
        encoding: ``16UC1`` or ``32FC1``.
        step: bytes per row (>= width * bytes per pixel).
        data: the pixel bytes (buffer protocol).
        is_bigendian: byte order of the pixels.
        frame_id: the optical frame it is in.
        stamp_ns: header stamp, ns since the epoch.
    """

    width: int
    height: int
    encoding: str
    step: int
    data: Any
    is_bigendian: bool = False
    frame_id: str = ""
    stamp_ns: int = 0

    @property
    def units_per_m(self) -> float:
        """Stored units per metre (1000 for ``16UC1``, 1 for ``32FC1``)."""
        return DEPTH_ENCODINGS[self.encoding][1]

    def array(self) -> np.ndarray:
        """The pixels as an (height, width) view in native byte order (a copy only for a foreign byte order).

        Raises:
            FrameError: ``depth_encoding`` for another encoding, ``depth_bad_image`` for short data or a short step.
        """
        if self.encoding not in DEPTH_ENCODINGS:
            raise reasons.refuse(reasons.ENCODING, f"depth encoding {self.encoding!r} (supported: "
                                 f"{', '.join(DEPTH_ENCODINGS)})")
        dtype = DEPTH_ENCODINGS[self.encoding][0]
        w, h, step = int(self.width), int(self.height), int(self.step)
        buf = np.frombuffer(self.data, np.uint8)
        if w < 1 or h < 1 or step < w * dtype.itemsize or buf.size < step * (h - 1) + w * dtype.itemsize:
            raise reasons.refuse(reasons.BAD_IMAGE, f"depth image {w}x{h} step {step} with {buf.size} bytes")
        order = ">" if self.is_bigendian else "<"
        # rows `step` bytes apart (numpy < 1.23 cannot .view() padded rows as a wider dtype; this works on all)
        view = np.ndarray((h, w), dtype.newbyteorder(order), buf, 0, (step, dtype.itemsize))
        if (order == ">") != (sys.byteorder == "big"):
            view = view.astype(dtype)  # foreign byte order: one converted copy
        return view


def depth_scale(depth: DepthImage, colour_width: int, colour_height: int, colour_frame: str) -> float:
    """Check a depth frame against its colour frame; return depth pixels per colour pixel.

    A registered depth image shows the colour camera's view, so its frame id must be the colour's and its size the
    colour's times one uniform scale (``depth_w * colour_h == depth_h * colour_w``; e.g. twice the colour size, HC-20,
    or half). With a scale ``s``, the colour box ``[x1, x2)`` covers depth pixels ``[s x1, s x2)``.

    Returns:
        ``s = depth_w / colour_w`` (1.0 for the usual same-size registered depth).

    Raises:
        FrameError: ``depth_frame_mismatch``, ``depth_size_mismatch`` (the message names both values).
    """
    if depth.frame_id != colour_frame:
        raise reasons.refuse(reasons.FRAME_MISMATCH, f"depth frame_id {depth.frame_id!r}, colour {colour_frame!r}")
    if depth.width * colour_height != depth.height * colour_width:
        raise reasons.refuse(reasons.SIZE_MISMATCH, f"depth {depth.width}x{depth.height}, colour "
                             f"{colour_width}x{colour_height}")
    return depth.width / colour_width
