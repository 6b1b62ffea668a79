"""Issue 37 item 4: ``Detections`` knows its box geometry. Each operation (corners, the pixels a box covers, IoU
between two sets, the BoundingBox2D fields) is checked against a computation of its own, for axis-aligned and
rotated sets, degenerate boxes included (zero size, angle +-pi/2): OpenCV's ``boxPoints`` and
``rotatedRectangleIntersection``, brute-force pixel centres in float64, and the Gaussians' Bhattacharyya distance
written out with 2x2 matrices."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from vrt_ros.boxes.kinds import AXIS_ALIGNED, ROTATED, geometry_of
from vrt_ros.types import Detections

W, H = 160, 120
HALF_PI = math.pi / 2


def _dets(boxes, theta=None) -> Detections:
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    n = len(boxes)
    return Detections(boxes=boxes, scores=np.full(n, 0.9, np.float32), class_ids=np.zeros(n, np.int32),
                      theta=None if theta is None else np.asarray(theta, np.float32).reshape(-1))


def _random_set(seed: int, n: int = 40, rotated: bool = True) -> Detections:
    rng = np.random.default_rng(seed)
    c = rng.uniform([10, 10], [W - 10, H - 10], (n, 2))
    wh = rng.uniform([0.2, 0.2], [70, 40], (n, 2))
    boxes = np.concatenate([c - wh / 2, c + wh / 2], axis=1)
    theta = rng.uniform(-HALF_PI, HALF_PI, n) if rotated else None
    return _dets(boxes, theta)


# Degenerate and edge cases: zero size, zero width, angles at +-pi/2 and 0, a box partly outside the image.
DEGENERATE = _dets([[40.3, 30.6, 40.3, 30.6], [20.2, 50.1, 20.2, 71.7], [60.4, 20.3, 101.9, 33.8],
                    [60.4, 20.3, 101.9, 33.8], [-12.3, 90.2, 30.1, 130.4], [80.1, 60.2, 80.6, 60.7]],
                   [0.0, 0.3, HALF_PI, -HALF_PI, 0.2, 1.0])


def test_the_kind_follows_theta():
    assert _dets([[0, 0, 1, 1]]).geometry is AXIS_ALIGNED and not _dets([[0, 0, 1, 1]]).rotated
    assert _dets([[0, 0, 1, 1]], [0.0]).geometry is ROTATED and _dets([[0, 0, 1, 1]], [0.0]).rotated
    assert geometry_of(None) is AXIS_ALIGNED and geometry_of(np.zeros(0)) is ROTATED
    empty = Detections.empty()
    assert empty.corners().shape == (0, 4, 2) and empty.bbox2d().shape == (0, 5) and empty.iou(empty).shape == (0, 0)


@pytest.mark.parametrize("dets", [_random_set(1), DEGENERATE, _random_set(2, rotated=False)],
                         ids=["rotated", "degenerate", "axis_aligned"])
def test_corners_are_opencvs_box_points(dets):
    """The corners of each box are OpenCV's RotatedRect points (``boxPoints``: centre, size, angle in degrees from +x
    toward +y, the same sense as ``theta``), in the order of the outline."""
    corners = dets.corners()
    assert corners.shape == (len(dets), 4, 2) and corners.dtype == np.float32
    for (cx, cy, w, h, theta), c in zip(dets.bbox2d(), corners):
        ref = cv2.boxPoints(((cx, cy), (w, h), math.degrees(theta)))
        dist = np.hypot(*(c[:, None, :] - ref[None, :, :]).transpose(2, 0, 1))  # (4, 4) ours x OpenCV's
        assert dist.min(axis=0).max() < 2e-3 and dist.min(axis=1).max() < 2e-3, (c, ref)  # the same four points
        edges = np.roll(c, -1, axis=0) - c  # consecutive corners are the box's sides: w, h, w, h long
        np.testing.assert_allclose(np.hypot(*edges.T), [w, h, w, h], atol=2e-3)
    if not dets.rotated:  # axis-aligned: exactly the box's own coordinates
        b = dets.boxes
        np.testing.assert_array_equal(corners[:, 2], b[:, :2])
        np.testing.assert_array_equal(corners[:, 0], b[:, 2:])


def _brute_force_cover(box, theta, scale, width, height, rotated):
    """Pixels whose centre is inside the box (float64), the pixels within 1e-3 px of an edge (either answer is
    right there), and the pixel(s) a box holding no centre must keep."""
    x1, y1, x2, y2 = (float(v) * scale for v in box)
    j, i = np.mgrid[0:height, 0:width]
    px, py = i + 0.5, j + 0.5
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    c, s = (math.cos(theta), math.sin(theta)) if rotated else (1.0, 0.0)
    u = (px - cx) * c + (py - cy) * s
    v = (py - cy) * c - (px - cx) * s
    hw, hh = (x2 - x1) / 2, (y2 - y1) / 2
    inside = (u >= -hw) & (u < hw) & (v >= -hh) & (v < hh)
    edge = (np.abs(np.abs(u) - hw) < 1e-3) | (np.abs(np.abs(v) - hh) < 1e-3)
    ci, cj = min(max(math.floor(cx), 0), width - 1), min(max(math.floor(cy), 0), height - 1)
    if rotated:
        inside[cj, ci] = True
        edge[cj, ci] = False
    else:  # per axis: no pixel centre in [x1, x2) keeps the column holding the middle (and the same for rows)
        cols = (px[0] >= x1) & (px[0] < x2)
        rows = (py[:, 0] >= y1) & (py[:, 0] < y2)
        if not cols.any():
            cols[ci] = True
        if not rows.any():
            rows[cj] = True
        inside = rows[:, None] & cols[None, :]
    return inside, edge


@pytest.mark.parametrize("scale", [1.0, 0.5])
@pytest.mark.parametrize("dets", [_random_set(3), DEGENERATE, _random_set(4, rotated=False),
                                  _dets(DEGENERATE.boxes)], ids=["rotated", "degenerate", "axis_aligned",
                                                                 "degenerate_axis_aligned"])
def test_pixels_are_those_whose_centre_is_inside(dets, scale):
    """A pixel counts when its centre is inside the box (half-open), brute force over the whole image; a box with
    no pixel centre inside keeps the pixel holding its centre (the depth kernel's rule)."""
    width, height = int(W * scale), int(H * scale)
    angles = dets.angles()
    for k in range(len(dets)):
        mask = dets.pixel_mask(k, width, height, scale)
        x0, x1, y0, y1, sub = dets.pixels(k, width, height, scale)
        assert mask[:y0].sum() + mask[y1:].sum() + mask[:, :x0].sum() + mask[:, x1:].sum() == 0  # the span holds it
        want, edge = _brute_force_cover(dets.boxes[k], float(angles[k]), scale, width, height, dets.rotated)
        assert mask.any(), f"box {k} covers no pixel"
        bad = (mask != want) & ~edge
        assert not bad.any(), f"box {k} ({dets.boxes[k]}, theta {angles[k]}): {np.argwhere(bad)[:5]}"


def test_a_zero_size_rotated_box_covers_the_pixel_holding_its_centre_and_pi_half_turns_the_box():
    d = _dets([[40.3, 30.6, 40.3, 30.6]], [0.7])
    assert np.argwhere(d.pixel_mask(0, W, H)).tolist() == [[30, 40]]
    # +-pi/2 turn a 40 x 10 box into a 10 x 40 one: the same pixels as the axis-aligned box of swapped size
    for t in (HALF_PI, -HALF_PI):
        turned = _dets([[60.0, 40.0, 100.0, 50.0]], [t]).pixel_mask(0, W, H)
        upright = _dets([[75.0, 25.0, 85.0, 65.0]]).pixel_mask(0, W, H)
        assert turned.sum() == 400 and np.array_equal(turned, upright)
    with pytest.raises(IndexError):
        d.pixels(1, W, H)


def _polygon_iou(a, b) -> float:
    """Area IoU of two boxes given as ((cx, cy), (w, h), degrees) by OpenCV's convex intersection."""
    kind, pts = cv2.rotatedRectangleIntersection(a, b)
    inter = 0.0 if kind == cv2.INTERSECT_NONE or pts is None else cv2.contourArea(cv2.convexHull(pts))
    union = a[1][0] * a[1][1] + b[1][0] * b[1][1] - inter
    return inter / union if union > 0 else 0.0


def test_axis_aligned_iou_is_the_polygon_iou():
    a, b = _random_set(5, 30, rotated=False), _random_set(6, 25, rotated=False)
    b = _dets(np.concatenate([b.boxes, a.boxes[:5] + 1.5, DEGENERATE.boxes]))  # overlaps and empty boxes
    iou = a.iou(b)
    assert iou.shape == (len(a), len(b)) and iou.dtype == np.float32
    rect = [((cx, cy), (w, h), 0.0) for cx, cy, w, h, _ in a.bbox2d()]
    other = [((cx, cy), (w, h), 0.0) for cx, cy, w, h, _ in b.bbox2d()]
    want = np.array([[_polygon_iou(p, q) for q in other] for p in rect])
    np.testing.assert_allclose(iou, want, atol=1e-4)
    assert (want > 0.05).sum() >= 5  # the sets overlap somewhere


def _probiou_reference(a, b) -> float:
    """Probabilistic IoU written out: each box a Gaussian with covariance R diag(w**2/12, h**2/12) R^T, the
    Bhattacharyya distance B = (1/8) d^T S^-1 d + (1/2) ln(det S / sqrt(det S1 det S2)), S = (S1 + S2) / 2, and
    1 - sqrt(1 - exp(-B)) (Llerena et al. 2021, arXiv:2106.06072)."""
    def cov(w, h, t):
        r = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
        return r @ np.diag([w * w / 12, h * h / 12]) @ r.T

    s1, s2 = cov(*a[2:]), cov(*b[2:])
    s = (s1 + s2) / 2
    d = np.array(a[:2]) - np.array(b[:2])
    det = np.linalg.det
    bd = d @ np.linalg.inv(s) @ d / 8 + 0.5 * math.log(det(s) / math.sqrt(det(s1) * det(s2)))
    return 1 - math.sqrt(1 - math.exp(-min(bd, 100.0)))


def test_rotated_iou_is_the_probabilistic_iou_and_an_axis_aligned_set_counts_as_turned_by_zero():
    a, b = _random_set(7, 20), _random_set(8, 15)
    b = _dets(np.concatenate([b.boxes, a.boxes[:4]]), np.concatenate([b.theta, a.theta[:4] + 0.05]))
    iou = a.iou(b)
    assert iou.shape == (20, 19) and iou.dtype == np.float32
    want = np.array([[_probiou_reference(p, q) for q in b.bbox2d()] for p in a.bbox2d()])
    np.testing.assert_allclose(iou, want, atol=2e-3)
    assert (want > 0.5).sum() >= 4
    # a box and itself turned by pi are the same rectangle; far apart is 0
    same = _dets([[10, 10, 50, 20], [10, 10, 50, 20], [110, 90, 150, 100]], [0.4, 0.4 + math.pi, 0.4])
    np.testing.assert_allclose(same.iou(same)[0], [1.0, 1.0, 0.0], atol=1e-3)
    # mixed: the axis-aligned set is compared as rotated by 0
    upright = _dets(a.boxes)
    np.testing.assert_array_equal(upright.iou(b), _dets(a.boxes, np.zeros(20)).iou(b))
    np.testing.assert_array_equal(b.iou(upright), b.iou(_dets(a.boxes, np.zeros(20))))
    # degenerate boxes give finite values in [0, 1]
    d = DEGENERATE.iou(DEGENERATE)
    assert np.isfinite(d).all() and (d >= 0).all() and (d <= 1).all()


@pytest.mark.parametrize("dets", [_random_set(9), _random_set(10, rotated=False)], ids=["rotated", "axis_aligned"])
def test_bbox2d_is_centre_size_and_theta(dets):
    b = dets.boxes.astype(np.float64)
    f = dets.bbox2d()
    assert f.dtype == np.float64 and f.shape == (len(dets), 5)
    np.testing.assert_array_equal(f[:, 0], (b[:, 0] + b[:, 2]) * 0.5)
    np.testing.assert_array_equal(f[:, 3], b[:, 3] - b[:, 1])
    np.testing.assert_array_equal(f[:, 4], 0.0 if dets.theta is None else dets.theta.astype(np.float64))
