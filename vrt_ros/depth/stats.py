"""The robust statistic of the valid depth inside each box (the CPU reference of ``kernels/depth.cu``).

For each box, the pixels whose centres lie inside it (its kind's :meth:`~vrt_ros.boxes.kinds.BoxGeometry.cover`:
:func:`~vrt_ros.boxes.kinds.pixel_span` per axis, :func:`~vrt_ros.boxes.kinds.rotated_cover` for oriented boxes) are read as float32 metres
(``float32(value) / units_per_m``, correctly rounded); a pixel is valid when its depth is finite, > 0 and inside
``depth.range_m = [near, far]`` (0, NaN and out-of-range pixels are ignored). Of the ``n`` valid values the
**nearest-rank percentile** ``p`` is the ``k``-th smallest, ``k = max(1, ceil(p * n / 100))`` (Hyndman and Fan's
definition 1, numpy's ``method="inverted_cdf"``): always one of the measured depths, never an interpolation. Three
are computed per box: ``depth.percentile`` (default 50, the median: the centre's depth) and the 10th and 90th
(:data:`SPREAD_PERCENTILES`: the box's depth extent, ``size.z = z90 - z10``).

**Oriented boxes** (``yolov8_obb``: ``theta`` given, the box the rectangle in its own axes, :mod:`vrt_ros.boxes.rotated`):
a depth pixel counts when its centre is inside the *rotated* rectangle (:func:`~vrt_ros.boxes.kinds.rotated_cover`), so a thin tilted
object in front of a far wall is measured on the object, not on the wall its image-aligned rectangle would hold.

The GPU kernel computes the same ``k``-th value by a radix select over the float32 bit patterns (which order
positive floats as their values), so both paths return the same float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from vrt_ros.boxes.kinds import geometry_of, pixel_span, rotated_cover  # noqa: F401 - the cover rule lives in vrt_ros.boxes.kinds

#: the percentiles whose difference is a box's depth extent (``size.z``).
SPREAD_PERCENTILES = (10.0, 90.0)
#: columns of :func:`box_stats`' result.
N_VALID, Z_LO, Z_CENTRE, Z_HI = range(4)

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
        theta: (N,) radians when the boxes are oriented (``Detections.theta``; boxes then in their own axes), None
            for axis-aligned boxes: the kind (:func:`vrt_ros.boxes.kinds.geometry_of`) whose pixels each box covers.

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
    geometry = geometry_of(theta)
    angles = geometry.angles(boxes.shape[0], theta).tolist()
    for i, box in enumerate(boxes):
        c0, c1, r0, r1, inside = geometry.cover(box, angles[i], scale, w, h)
        z = depth[r0:r1, c0:c1] if inside is None else depth[r0:r1, c0:c1][inside]
        z = z.astype(np.float32) / unit
        z = z[np.isfinite(z) & (z > 0) & (z >= near) & (z <= far)]
        n = int(z.size)
        out[i, N_VALID] = n
        if n == 0:
            continue
        ranks = [nearest_rank(p, n) - 1 for p in (SPREAD_PERCENTILES[0], percentile, SPREAD_PERCENTILES[1])]
        part = np.partition(z, sorted(set(ranks)))
        out[i, 1:] = part[ranks]
    return out
