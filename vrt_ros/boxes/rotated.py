"""Oriented boxes: the published angle convention, probabilistic IoU and greedy rotated NMS (numpy reference).

**Convention of** ``theta`` (``vision_msgs/BoundingBox2D.center.theta``, radians): image axes as in the optical
frame (REP-103: x right, y down, z into the scene), so a positive ``theta`` turns the box from +x toward +y:
**clockwise as seen on the screen**. ``size_x`` is the box's extent along the direction
``(cos theta, sin theta)``, ``size_y`` across it, and the published box is always in the *long-side* form
``size_x >= size_y`` with ``theta`` in ``[-pi/2, pi/2)``: ``theta`` is the direction of the long side, which is
what a robot grasping or following a thin object wants, and it is continuous as the object turns except at the
range's wrap (-90° == +90°, the same rectangle). :func:`canonical` puts any ``(w, h, angle)`` into that form
without changing the physical rectangle (swap w and h and add pi/2 when w < h, then wrap into the range).

Ultralytics OBB models emit ``angle = (sigmoid(x) - 0.25) * pi`` in ``[-pi/4, 3pi/4)`` (``ultralytics/nn/modules/
head.py::OBB.forward``) with the same image-axis rotation (``ultralytics/utils/ops.py::xywhr2xyxyxyxy``: the w side
runs along ``(cos, sin)``); Ultralytics' own ``regularize_rboxes`` maps to ``[0, pi/2)`` by swapping w and h,
which makes a thin object's angle jump by 90° as it passes the image axes (HC-21); the long-side form does not.

**Overlap**: the probabilistic IoU of Ultralytics (``ultralytics/utils/metrics.py::batch_probiou``; Llerena et al.
2021, "Gaussian Bounding Boxes and Probabilistic Intersection-over-Union", arXiv:2106.06072): each box becomes a
Gaussian (covariance from ``w**2 / 12``, ``h**2 / 12`` and the angle), the Bhattacharyya distance ``B`` between the
two Gaussians gives ``1 - sqrt(1 - exp(-B))``. Chosen over the exact polygon IoU because it is what Ultralytics
NMS-es its OBB models with (so thresholds tuned there carry over), it is a closed form with no branches (one
thread per pair on the GPU, no polygon clipping), and it is smooth in the angle. It differs from the polygon IoU
(a 1:1 box against itself rotated 90° scores 1, since the Gaussians are the same).

**NMS**: greedy, exactly as :func:`vrt_ros.boxes.nms.nms` (scores descending, ties by index, a box is suppressed by an
already *kept* box of its class with probiou > threshold). Ultralytics' ``nms_rotated`` instead drops a box
overlapping any higher-scored box, kept or not ("fast NMS"); greedy keeps a box whose only overlaps are with
boxes that were themselves suppressed, as every other head's NMS here does.
"""

from __future__ import annotations

import math

import numpy as np

from vrt_ros.boxes.nms import score_order

#: The published ``theta`` range ``[THETA_MIN, THETA_MIN + pi)``.
THETA_MIN = -math.pi / 2
_EPS = 1e-7  # Ultralytics batch_probiou's eps


def canonical(w: np.ndarray, h: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The long-side form of oriented boxes: the same rectangles with ``w >= h`` and ``theta`` in [-pi/2, pi/2).

    Args:
        w, h, theta: (N,) sizes (any unit) and angles in radians, any range.

    Returns:
        ``(w, h, theta)`` new float32 arrays.
    """
    w = np.asarray(w, np.float32)
    h = np.asarray(h, np.float32)
    t = np.asarray(theta, np.float64)
    swap = w < h
    w2, h2 = np.where(swap, h, w), np.where(swap, w, h)
    t = np.where(swap, t + math.pi / 2, t)
    t = np.mod(t - THETA_MIN, math.pi) + THETA_MIN
    t = np.where(t >= THETA_MIN + math.pi, THETA_MIN, t)  # float rounding at the top of the range
    return w2.astype(np.float32), h2.astype(np.float32), t.astype(np.float32)


def _covariance(w: np.ndarray, h: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = w * w / 12.0, h * h / 12.0
    c, s = np.cos(theta), np.sin(theta)
    return a * c * c + b * s * s, a * s * s + b * c * c, (a - b) * c * s


def probiou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Probabilistic IoU of one oriented box with many (Ultralytics ``batch_probiou``, float32 as on the GPU).

    Args:
        box: (5,) cx, cy, w, h, theta (pixels, radians).
        boxes: (M, 5) the same.

    Returns:
        (M,) float32 in [0, 1].
    """
    return probiou_pairs(np.asarray(box, np.float32).reshape(5, 1), np.asarray(boxes, np.float32).reshape(-1, 5).T)


def probiou_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Probabilistic IoU of oriented boxes pair by pair (the one formula, module docstring; :func:`probiou` and the
    tracker's rotated association use it).

    Args:
        a: (5, K) float32 rows cx, cy, w, h, theta (pixels, radians); K = 1 broadcasts against ``b``.
        b: (5, K) float32, the same.

    Returns:
        (K,) float32 in [0, 1]: the probiou of ``a[:, k]`` and ``b[:, k]``.
    """
    a1, b1c, c1 = _covariance(a[2], a[3], a[4])
    a2, b2c, c2 = _covariance(b[2], b[3], b[4])
    dx, dy = a[0] - b[0], a[1] - b[1]
    sa, sb, sc = a1 + a2, b1c + b2c, c1 + c2
    den = sa * sb - sc * sc
    t1 = (sa * dy * dy + sb * dx * dx) / (den + _EPS) * 0.25
    t2 = (sc * (-dx) * dy) / (den + _EPS) * 0.5
    det1 = np.maximum(a1 * b1c - c1 * c1, 0.0)
    det2 = np.maximum(a2 * b2c - c2 * c2, 0.0)
    t3 = np.log(den / (4.0 * np.sqrt(det1 * det2) + _EPS) + _EPS) * 0.5
    bd = np.clip(t1 + t2 + t3, _EPS, 100.0)
    hd = np.sqrt(1.0 - np.exp(-bd) + _EPS)
    return (1.0 - hd).astype(np.float32)


def rotated_nms(rboxes: np.ndarray, scores: np.ndarray, iou_threshold: float,
                class_ids: np.ndarray | None = None) -> np.ndarray:
    """Greedy NMS of oriented boxes by probabilistic IoU.

    Args:
        rboxes: (N, 5) cx, cy, w, h, theta (engine-input pixels, radians), finite.
        scores: (N,) finite scores.
        iou_threshold: a box is suppressed by a kept box with probiou > this (compared in float32).
        class_ids: (N,) int; boxes suppress only their own class. None = class-agnostic.

    Returns:
        (K,) int64 indices of the kept boxes, by score descending then index ascending.
    """
    order = score_order(scores)
    b = np.asarray(rboxes, np.float32).reshape(-1, 5)[order]
    cls = None if class_ids is None else np.asarray(class_ids)[order]
    thr = np.float32(iou_threshold)
    suppressed = np.zeros(len(order), bool)
    keep: list[int] = []
    for p in range(len(order)):
        if suppressed[p]:
            continue
        keep.append(int(order[p]))
        hit = probiou(b[p], b[p + 1:]) > thr
        if cls is not None:
            hit &= cls[p + 1:] == cls[p]
        suppressed[p + 1:] |= hit
    return np.asarray(keep, np.int64)


def corners(cx: float, cy: float, w: float, h: float, theta: float) -> np.ndarray:
    """(4, 2) float32 corners of an oriented box (for drawing and tests), in the order of its outline."""
    c, s = math.cos(theta), math.sin(theta)
    ux, uy, vx, vy = 0.5 * w * c, 0.5 * w * s, -0.5 * h * s, 0.5 * h * c
    return np.array([[cx + ux + vx, cy + uy + vy], [cx - ux + vx, cy - uy + vy],
                     [cx - ux - vx, cy - uy - vy], [cx + ux - vx, cy + uy - vy]], np.float32)


def rboxes(boxes: np.ndarray, theta: np.ndarray | None) -> np.ndarray | None:
    """The oriented boxes of a frame's detections, or None when they are axis-aligned: the one place code (the
    rotated NMS's input, and :mod:`vrt_ros.boxes.kinds`, which ``Detections`` and its consumers ask) turns own-axis boxes
    into rotated ones.

    Args:
        boxes: (N, 4) x1, y1, x2, y2; for oriented detections the rectangle in its own axes
            (:class:`vrt_ros.types.Detections`).
        theta: (N,) radians (``Detections.theta``), or None for axis-aligned detections.

    Returns:
        (N, 5) float32 cx, cy, w, h, theta (w along the direction ``theta``, h across it), or None.
    """
    if theta is None:
        return None
    b = np.asarray(boxes, np.float32).reshape(-1, 4)
    return np.stack([(b[:, 0] + b[:, 2]) * np.float32(0.5), (b[:, 1] + b[:, 3]) * np.float32(0.5), b[:, 2] - b[:, 0],
                     b[:, 3] - b[:, 1], np.asarray(theta, np.float32).reshape(-1)], axis=1)


def corners_of(rb: np.ndarray) -> np.ndarray:
    """(N, 4, 2) float32 corners of oriented boxes ((N, 5) cx, cy, w, h, theta, e.g. :func:`rboxes`), each in the
    order of its outline (:func:`corners`)."""
    return np.stack([corners(*r) for r in np.asarray(rb, np.float64).reshape(-1, 5)]) if len(rb) else \
        np.zeros((0, 4, 2), np.float32)


def extent(rb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half the width and height of the axis-aligned rectangle enclosing each oriented box ((N, 5) as
    :func:`rboxes`): ``(|w cos| + |h sin|) / 2`` and ``(|w sin| + |h cos|) / 2``, float64 (N,) each."""
    rb = np.asarray(rb, np.float64).reshape(-1, 5)
    c, s = np.abs(np.cos(rb[:, 4])), np.abs(np.sin(rb[:, 4]))
    return 0.5 * (rb[:, 2] * c + rb[:, 3] * s), 0.5 * (rb[:, 2] * s + rb[:, 3] * c)
