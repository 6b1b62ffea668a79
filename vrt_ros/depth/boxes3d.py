"""A frame's 3D boxes from its 2D boxes, the depth statistic of each and the camera model.

For a box ``(x1, y1, x2, y2)`` (colour pixels) with centre ``(u, v)`` and centre depth ``z`` (the
``depth.percentile`` of its valid depth, :mod:`vrt_ros.depth.stats`), with ``ray(p) = (x, y)`` the normalised
coordinates of image point ``p`` (:meth:`~vrt_ros.depth.camera_model.CameraModel.rays`):

- centre = ``z * (x, y, 1)`` of ``ray(u, v)``: the visible surface's depth on the ray through the box centre;
- size.x = ``z * |x(x2, v) - x(x1, v)|`` and size.y = ``z * |y(u, y2) - y(u, y1)|``: the box's edge midpoints
  back-projected at ``z`` (exact for a pinhole camera; under distortion the box's edges are not straight lines);
- size.z = ``z90 - z10``: the spread of the valid depth inside the box (its 10th to 90th percentile range).

All in metres, in the colour camera's optical frame (REP-103), orientation identity.

**Oriented boxes** (``theta`` given; the box is the rectangle in its own axes, :mod:`vrt_ros.boxes.rotated`): the same
centre; the rotated rectangle's edge midpoints ``c +- (w / 2)(cos theta, sin theta)`` and
``c +- (h / 2)(-sin theta, cos theta)`` are back-projected at ``z``, size.x = the 3D distance between the first
pair (the long side, as published in 2D), size.y between the second, size.z as above, and the box is turned about the
optical axis by ``yaw`` = the direction of the back-projected long side in the optical x-y plane (``atan2`` of its
y and x; equal to ``theta`` for a pinhole camera with ``fx == fy``, positive from +x toward +y).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vrt_ros.depth.camera_model import CameraModel
from vrt_ros.depth.stats import N_VALID, Z_CENTRE, Z_HI, Z_LO


@dataclass
class Boxes3D:
    """The 3D boxes of one frame.

    Attributes:
        index: (M,) int, the 2D detection each belongs to (boxes without valid depth have none).
        centres: (M, 3) float64 x, y, z in metres, optical frame.
        sizes: (M, 3) float64 metres, along the box's own axes.
        no_depth: how many 2D boxes had no valid depth pixel (no 3D entry).
        yaw: (M,) float64 radians, the box's rotation about the optical axis (z); zeros for axis-aligned boxes.
    """

    index: np.ndarray
    centres: np.ndarray
    sizes: np.ndarray
    no_depth: int = 0
    yaw: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.yaw is None:
            self.yaw = np.zeros(self.index.shape[0])

    def __len__(self) -> int:
        return int(self.index.shape[0])


def boxes_3d(boxes: np.ndarray, stats: np.ndarray, model: CameraModel, theta: np.ndarray | None = None) -> Boxes3D:
    """The 3D boxes (module docstring).

    Args:
        boxes: (N, 4) x1, y1, x2, y2, colour pixels (oriented boxes: the rectangle in its own axes).
        stats: (N, 4) per box: valid pixel count, z10, z centre, z90 (:func:`vrt_ros.depth.stats.box_stats`, or the
            GPU kernel's result).
        model: the colour camera's model.
        theta: (N,) radians for oriented boxes (``Detections.theta``), else None.

    Returns:
        One entry per box with at least one valid depth pixel and finite results (never NaN).
    """
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    stats = np.asarray(stats, np.float64).reshape(-1, 4)
    keep = np.flatnonzero((stats[:, N_VALID] > 0) & np.all(np.isfinite(stats[:, 1:]), axis=1))
    b, z = boxes[keep], stats[keep, Z_CENTRE]
    u, v = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
    yaw = np.zeros(keep.shape[0])
    if theta is None:
        pts = np.concatenate([np.stack(p, axis=1) for p in ((u, v), (b[:, 0], v), (b[:, 2], v), (u, b[:, 1]),
                                                                (u, b[:, 3]))])
        rays = model.rays(pts).reshape(5, -1, 2)
        size_x, size_y = z * np.abs(rays[2, :, 0] - rays[1, :, 0]), z * np.abs(rays[4, :, 1] - rays[3, :, 1])
    else:
        t = np.asarray(theta, np.float64).reshape(-1)[keep]
        ax = np.stack([np.cos(t), np.sin(t)], axis=1) * ((b[:, 2] - b[:, 0]) / 2)[:, None]  # half the long side
        ay = np.stack([-np.sin(t), np.cos(t)], axis=1) * ((b[:, 3] - b[:, 1]) / 2)[:, None]  # half across it
        c = np.stack([u, v], axis=1)
        rays = model.rays(np.concatenate([c, c - ax, c + ax, c - ay, c + ay])).reshape(5, -1, 2)
        long_side, across = rays[2] - rays[1], rays[4] - rays[3]
        size_x, size_y = z * np.hypot(*long_side.T), z * np.hypot(*across.T)
        yaw = np.arctan2(long_side[:, 1], long_side[:, 0])
    centres = np.stack([rays[0, :, 0] * z, rays[0, :, 1] * z, z], axis=1)
    sizes = np.stack([size_x, size_y, stats[keep, Z_HI] - stats[keep, Z_LO]], axis=1)
    finite = np.all(np.isfinite(centres), axis=1) & np.all(np.isfinite(sizes), axis=1) & np.isfinite(yaw)
    return Boxes3D(keep[finite], centres[finite], sizes[finite], no_depth=int(boxes.shape[0] - finite.sum()),
                   yaw=yaw[finite])
