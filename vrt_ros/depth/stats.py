"""The robust statistic of the valid depth inside each box (the CPU reference of ``kernels/depth.cu``).

For each box, the pixels whose centres lie inside it (:func:`pixel_span`) are read as float32 metres
(``float32(value) / units_per_m``, correctly rounded); a pixel is valid when its depth is finite, > 0 and inside
``depth.range_m = [near, far]`` (0, NaN and out-of-range pixels are ignored). Of the ``n`` valid values the
**nearest-rank percentile** ``p`` is the ``k``-th smallest, ``k = max(1, ceil(p * n / 100))`` (Hyndman and Fan's
definition 1, numpy's ``method="inverted_cdf"``): always one of the measured depths, never an interpolation. Three
are computed per box: ``depth.percentile`` (default 50, the median: the centre's depth) and the 10th and 90th
(:data:`SPREAD_PERCENTILES`: the box's depth extent, ``size.z = z90 - z10``).

**Oriented boxes** (``yolov8_obb``: ``theta`` given, the box the rectangle in its own axes, :mod:`vrt_ros.rotated`):
a depth pixel counts when its centre is inside the *rotated* rectangle (:func:`rotated_cover`), so a thin tilted
object in front of a far wall is measured on the object, not on the wall its image-aligned rectangle would hold.

The GPU kernel computes the same ``k``-th value by a radix select over the float32 bit patterns (which order
positive floats as their values), so both paths return the same float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the percentiles whose difference is a box's depth extent (``size.z``).
SPREAD_PERCENTILES = (10.0, 90.0)
#: columns of :func:`box_stats`' result.
N_VALID, Z_LO, Z_CENTRE, Z_HI = range(4)

_HALF = np.float32(0.5)


@dataclass(frozen=True)
class DepthJob:
    """What a pipeline needs to compute the statistic on the GPU with a frame (``CudaPipeline.process(...,
    depth=job)``).

    Attributes:
        image: the paired, checked depth frame.
        scale: depth pixels per colour pixel.
        range_m: (near, far) valid depth, metres.
        percentile: the centre's nearest-rank percentile.
    """

    image: Any
    scale: float
    range_m: tuple[float, float]
    percentile: float


def pixel_span(a: float, b: float, scale: float, size: int) -> tuple[int, int]:
    """The pixels ``[lo, hi)`` of a depth image row (or column) of ``size`` pixels whose centres lie in the colour
    interval ``[a, b)`` scaled by ``scale`` (depth pixels per colour pixel), in float32 as the kernel computes it:
    ``lo = ceil(a * scale - 0.5)``, ``hi = ceil(b * scale - 0.5)``, clipped to the image; a span thinner than a pixel
    takes the pixel holding its centre."""
    s = np.float32(scale)
    a_s, b_s = np.float32(a) * s, np.float32(b) * s
    lo = min(max(int(np.ceil(a_s - _HALF)), 0), size)
    hi = min(max(int(np.ceil(b_s - _HALF)), 0), size)
    if hi <= lo:
        mid = (a_s + b_s) * _HALF
        lo = min(max(int(np.floor(mid)), 0), size - 1)
        hi = lo + 1
    return lo, hi


def rotated_cover(box: np.ndarray, theta: float, scale: float, width: int, height: int
                  ) -> tuple[int, int, int, int, np.ndarray]:
    """The depth pixels an oriented box covers, computed in float32 exactly as ``kernels/depth.cu`` does.

    In depth pixels (the colour box scaled by ``scale``): centre ``c = (x1 + x2) / 2 * scale`` (and y), half sizes
    ``hw = (x2 - x1) / 2 * scale`` along ``(cos theta, sin theta)`` and ``hh = (y2 - y1) / 2 * scale`` across it. The
    pixel ``(i, j)`` (centre ``p = (i + 0.5, j + 0.5)``, ``d = p - c``) counts when ``u = d.x cos + d.y sin`` is in
    ``[-hw, hw)`` and ``v = d.y cos - d.x sin`` in ``[-hh, hh)`` (half-open, as :func:`pixel_span`), or when it is the
    pixel holding the centre (so a box thinner than a pixel still has one). ``cos`` and ``sin`` are the float32
    roundings of the double-precision values; every other step is one float32 operation (the kernel uses ``__f*_rn``
    intrinsics, so no fused multiply-add changes a rounding).

    Args:
        box: (4,) x1, y1, x2, y2, colour pixels, the rectangle in its own axes.
        theta: its rotation, radians (:mod:`vrt_ros.rotated`).
        scale: depth pixels per colour pixel.
        width, height: the depth image's size.

    Returns:
        ``(x0, x1, y0, y1, mask)``: the span searched (enclosing rectangle plus one pixel, clipped, always holding
        the centre pixel) and the (y1 - y0, x1 - x0) bool mask of the covered pixels in it.
    """
    x1, y1, x2, y2 = (np.float32(v) for v in box)
    s = np.float32(scale)
    cx, cy = (x1 + x2) * _HALF * s, (y1 + y2) * _HALF * s
    hw, hh = (x2 - x1) * _HALF * s, (y2 - y1) * _HALF * s
    c, sn = np.float32(math.cos(float(theta))), np.float32(math.sin(float(theta)))
    ex, ey = abs(hw * c) + abs(hh * sn), abs(hw * sn) + abs(hh * c)
    ci, cj = min(max(int(math.floor(cx)), 0), width - 1), min(max(int(math.floor(cy)), 0), height - 1)
    a0 = min(max(int(math.floor(cx - ex)) - 1, 0), width, ci)
    a1 = max(min(max(int(math.ceil(cx + ex)) + 1, 0), width), ci + 1)
    b0 = min(max(int(math.floor(cy - ey)) - 1, 0), height, cj)
    b1 = max(min(max(int(math.ceil(cy + ey)) + 1, 0), height), cj + 1)
    dx = (np.arange(a0, a1, dtype=np.float32) + _HALF - cx)[None, :]
    dy = (np.arange(b0, b1, dtype=np.float32) + _HALF - cy)[:, None]
    u = dx * c + dy * sn
    v = dy * c - dx * sn
    mask = (u >= -hw) & (u < hw) & (v >= -hh) & (v < hh)
    mask[cj - b0, ci - a0] = True
    return a0, a1, b0, b1, mask


def nearest_rank(p: float, n: int) -> int:
    """``k = max(1, ceil(p * n / 100))``, the 1-based rank of the nearest-rank percentile ``p`` of ``n`` values
    (computed in double, as the kernel does)."""
    return max(1, math.ceil(float(p) * float(n) / 100.0))


def box_stats(depth: np.ndarray, units_per_m: float, boxes: np.ndarray, scale: float, range_m: tuple[float, float],
              percentile: float = 50.0, theta: np.ndarray | None = None) -> np.ndarray:
    """The statistic of the valid depth inside each box.

    Args:
        depth: (H, W) uint16 (``units_per_m`` 1000: millimetres) or float32 (``units_per_m`` 1: metres) depth image.
        units_per_m: stored units per metre.
        boxes: (N, 4) x1, y1, x2, y2 in colour pixels.
        scale: depth pixels per colour pixel (:func:`vrt_ros.depth.image.depth_scale`).
        range_m: (near, far) valid depth, metres.
        percentile: the centre's percentile, in (0, 100].
        theta: (N,) radians when the boxes are oriented (``Detections.theta``; boxes then in their own axes): the
            pixels inside each rotated rectangle (:func:`rotated_cover`); None: axis-aligned boxes.

    Returns:
        (N, 4) float32: the number of valid pixels, the 10th percentile, ``percentile`` and the 90th, metres
        (columns :data:`N_VALID`, :data:`Z_LO`, :data:`Z_CENTRE`, :data:`Z_HI`); a box without a valid pixel has
        0 and NaN.
    """
    h, w = depth.shape
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    out = np.full((boxes.shape[0], 4), np.nan, np.float32)
    near, far = np.float32(range_m[0]), np.float32(range_m[1])
    unit = np.float32(units_per_m)
    for i, (x1, y1, x2, y2) in enumerate(boxes):
        if theta is None:
            c0, c1 = pixel_span(x1, x2, scale, w)
            r0, r1 = pixel_span(y1, y2, scale, h)
            z = depth[r0:r1, c0:c1].astype(np.float32) / unit
        else:
            c0, c1, r0, r1, inside = rotated_cover(boxes[i], float(theta[i]), scale, w, h)
            z = depth[r0:r1, c0:c1][inside].astype(np.float32) / unit
        z = z[np.isfinite(z) & (z > 0) & (z >= near) & (z <= far)]
        n = int(z.size)
        out[i, N_VALID] = n
        if n == 0:
            continue
        ranks = [nearest_rank(p, n) - 1 for p in (SPREAD_PERCENTILES[0], percentile, SPREAD_PERCENTILES[1])]
        part = np.partition(z, sorted(set(ranks)))
        out[i, 1:] = part[ranks]
    return out
