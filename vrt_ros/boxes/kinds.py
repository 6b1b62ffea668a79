"""The geometry of a frame's boxes, axis-aligned or rotated: the one place that tells the two apart.

A frame's boxes are of one kind, given by :func:`geometry_of` (``Detections.geometry``):

- :data:`AXIS_ALIGNED` (``theta`` None): ``(x1, y1, x2, y2)`` along the image axes, source pixels;
- :data:`ROTATED` (``theta`` (N,) radians, the OBB heads): the same four numbers are the rectangle in its own axes,
  centre ``((x1 + x2) / 2, (y1 + y2) / 2)``, size ``x2 - x1`` along ``(cos theta, sin theta)`` and ``y2 - y1``
  across it (the convention of :mod:`vrt_ros.boxes.rotated`: image axes of the optical frame, REP-103, positive
  ``theta`` from +x toward +y, clockwise on the screen).

Each kind implements the operations its consumers need, so none of them asks which kind it has: the
``BoundingBox2D`` fields (:meth:`BoxGeometry.bbox2d`), corners (:meth:`BoxGeometry.corners`), the pixels a box
covers (:meth:`BoxGeometry.cover`: a pixel counts when its centre is inside, the rule of ``kernels/depth.cu``),
the IoU of two sets (:meth:`BoxGeometry.iou`) and its sparse form for the tracker (:meth:`BoxGeometry.pairs`).
A new kind of box is one more :class:`BoxGeometry` here; depth, tracking, drawing and the message writers then
take it unchanged.

Pixels: pixel ``(i, j)`` covers ``[i, i + 1) x [j, j + 1)`` and its centre is ``(i + 0.5, j + 0.5)``
(:mod:`vrt_ros.boxes.geometry`). Pure numpy: no SciPy, OpenCV, ROS or GPU.
"""

from __future__ import annotations

import math

import numpy as np

from vrt_ros.boxes.rotated import corners_of, extent, probiou_pairs, rboxes

_HALF = np.float32(0.5)


# --- the pixels a box covers (the CPU reference of kernels/depth.cu) -------------------------------------------
def pixel_span(a: float, b: float, scale: float, size: int) -> tuple[int, int]:
    """The pixels ``[lo, hi)`` of a row (or column) of ``size`` pixels whose centres lie in the interval ``[a, b)``
    scaled by ``scale`` (target pixels per source pixel), in float32 as ``kernels/depth.cu`` computes it:
    ``lo = ceil(a * scale - 0.5)``, ``hi = ceil(b * scale - 0.5)``, clipped to ``[0, size]``; a span holding no
    pixel centre (thinner than a pixel, or empty) takes the one pixel holding its middle ``(a + b) / 2 * scale``.

    Returns:
        ``(lo, hi)`` ints, ``0 <= lo < hi <= size`` (``size`` >= 1)."""
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
    """The pixels an oriented box covers, computed in float32 exactly as ``kernels/depth.cu`` (``theta_col``) does.

    In target pixels (the box scaled by ``scale``): centre ``c = (x1 + x2) / 2 * scale`` (and y), half sizes
    ``hw = (x2 - x1) / 2 * scale`` along ``(cos theta, sin theta)`` and ``hh = (y2 - y1) / 2 * scale`` across it. The
    pixel ``(i, j)`` (centre ``p = (i + 0.5, j + 0.5)``, ``d = p - c``) counts when ``u = d.x cos + d.y sin`` is in
    ``[-hw, hw)`` and ``v = d.y cos - d.x sin`` in ``[-hh, hh)`` (half-open, as :func:`pixel_span`), or when it is the
    pixel holding the centre (so a box thinner than a pixel still has one). ``cos`` and ``sin`` are the float32
    roundings of the double-precision values; every other step is one float32 operation (the kernel uses ``__f*_rn``
    intrinsics, so no fused multiply-add changes a rounding).

    Args:
        box: (4,) x1, y1, x2, y2, source pixels, the rectangle in its own axes.
        theta: its rotation, radians (:mod:`vrt_ros.boxes.rotated`).
        scale: target pixels per source pixel (depth: depth pixels per colour pixel).
        width, height: the target image's size, pixels (>= 1).

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


# --- IoU ------------------------------------------------------------------------------------------------------
def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of axis-aligned boxes (area of the intersection over area of the union).

    Args:
        a: (N, 4) x1, y1, x2, y2.
        b: (M, 4) x1, y1, x2, y2, in the same pixel frame.

    Returns:
        (N, M) float32 IoU in [0, 1]; area = ``(x2 - x1) * (y2 - y1)`` as :func:`vrt_ros.boxes.nms.box_iou`, 0 for a pair
        of empty boxes (the union gets 1e-9 added).
    """
    a = np.asarray(a, np.float32).T
    b = np.asarray(b, np.float32).T
    inter = np.minimum(a[2][:, None], b[2])
    inter -= np.maximum(a[0][:, None], b[0])
    np.maximum(inter, 0.0, out=inter)
    ih = np.minimum(a[3][:, None], b[3])
    ih -= np.maximum(a[1][:, None], b[1])
    np.maximum(ih, 0.0, out=ih)
    inter *= ih
    area_a = np.maximum(a[2] - a[0], 0.0) * np.maximum(a[3] - a[1], 0.0)
    area_b = np.maximum(b[2] - b[0], 0.0) * np.maximum(b[3] - b[1], 0.0)
    area_b += np.float32(1e-9)
    np.add(area_a[:, None], area_b, out=ih)
    ih -= inter
    inter /= ih
    return inter


def iou_pairs(boxes: np.ndarray, n: int, keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The IoU of the pairs of axis-aligned boxes ``a`` x ``b`` that overlap in x: a superset of the pairs with
    IoU > 0 (every other pair has IoU 0).

    Args:
        boxes: (4, N + M) float32 rows x1, y1, x2, y2: the N boxes ``a`` then the M boxes ``b``, in one pixel frame
            (one array: their areas take one pass).
        n: N.
        keys: (2, N + M) float64 rows x1, x2 for the overlap test instead of the boxes' (the tracker's: x plus
            class offsets, :func:`vrt_ros.tracking.association.class_offsets`, so boxes of two classes never
            overlap there); the IoU is always the boxes'.

    Returns:
        ``(rows, cols, iou)``: (K,) intp indices into ``a`` and ``b`` (``cols`` ascending, then ``rows``; no pair
        twice) and (K,) float32 IoU in [0, 1], equal bit for bit to
        ``iou_matrix(boxes[:, :n].T, boxes[:, n:].T)[rows, cols]``.
    """
    a, b = boxes[:, :n], boxes[:, n:]
    wh = boxes[2:] - boxes[:2]
    np.maximum(wh, 0.0, out=wh)
    area = wh[0] * wh[1]
    area_b = area[n:]
    area_b += np.float32(1e-9)
    # A pair overlaps in x only if b.x1 < a.x2 and b.x2 > a.x1: one pass over the N x M pairs (a handful of numpy
    # calls; sorting b by x1 and searching takes fewer element operations but three times the calls at N, M ~ 100).
    x1, x2 = (boxes[0], boxes[2]) if keys is None else keys
    near = np.less.outer(x1[n:], x2[:n])  # (M, N): the pairs come out by column of b
    near &= np.greater.outer(x2[n:], x1[:n])
    cols, rows = np.divmod(near.ravel().nonzero()[0], n)
    pa = a.take(rows, axis=1)
    pb = b.take(cols, axis=1)
    inter = np.minimum(pa[2:], pb[2:])  # (2, K) the overlap in x and in y
    inter -= np.maximum(pa[:2], pb[:2])
    np.maximum(inter, 0.0, out=inter)
    out = inter[0] * inter[1]
    union = area_b.take(cols)
    union += area.take(rows)
    union -= out
    out /= union
    return rows, cols, out


#: Pairs of oriented boxes whose centres are further apart, in x or in y, than this times the sum of their enclosing
#: half sizes are not taken (:func:`rotated_pairs`).
ROTATED_GATE = 2.5


def rotated_pairs(rb: np.ndarray, n: int, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The probabilistic IoU (:func:`vrt_ros.boxes.rotated.probiou_pairs`, the rotated NMS's overlap) of the pairs of
    oriented boxes ``a`` x ``b`` of one class that can reach 0.01 (the lowest gate the tracker allows): every other
    pair's is below it, so leaving them out changes no association.

    Why the gate is safe: with ``e_x`` a box's enclosing half width, its Gaussian's x variance is at most
    ``e_x**2 / 3``, so two boxes whose centres are ``|dx| >= k (e_x1 + e_x2)`` apart have a Bhattacharyya distance
    of at least ``0.75 k**2`` (the log-determinant term is >= 0), and at ``k =`` :data:`ROTATED_GATE` (2.5) the
    probiou ``1 - sqrt(1 - exp(-B))`` is below 0.005; the same in y.

    Args:
        rb: (5, N + M) float32 rows cx, cy, w, h, theta: the N boxes ``a`` then the M boxes ``b``.
        n: N.
        offsets: (N + M,) float64 class offsets of the boxes (:func:`vrt_ros.tracking.association.class_offsets`);
            only pairs of one class are taken.

    Returns:
        ``(rows, cols, iou)`` as :func:`iou_pairs` (``cols`` ascending, then ``rows``).
    """
    ex, ey = extent(rb.T)
    ex *= ROTATED_GATE
    ey *= ROTATED_GATE
    lo_x, hi_x = rb[0] - ex + offsets, rb[0] + ex + offsets
    lo_y, hi_y = rb[1] - ey, rb[1] + ey
    near = np.less.outer(lo_x[n:], hi_x[:n])  # (M, N): the pairs come out by column of b
    near &= np.greater.outer(hi_x[n:], lo_x[:n])
    near &= np.less.outer(lo_y[n:], hi_y[:n])
    near &= np.greater.outer(hi_y[n:], lo_y[:n])
    cols, rows = np.divmod(near.ravel().nonzero()[0], n)
    return rows, cols, probiou_pairs(rb[:, :n].take(rows, axis=1), rb[:, n:].take(cols, axis=1))


# --- the kinds --------------------------------------------------------------------------------------------------
class BoxGeometry:
    """The operations of one kind of box. Every method takes a frame's ``boxes`` ((N, 4) x1, y1, x2, y2, source
    pixels, float32 or float64) and ``theta`` ((N,) radians, or None), as :class:`vrt_ros.types.Detections` holds
    them; a kind that has no angle ignores ``theta``.

    Attributes:
        name: ``"axis_aligned"`` or ``"rotated"``.
        rotated: whether ``theta`` turns the boxes.
    """

    name = ""
    rotated = False

    def angles(self, n: int, theta: np.ndarray | None) -> np.ndarray:
        """(n,) the boxes' angles, radians: ``theta`` as given (float32 in ``Detections``; not rounded here, so a
        float64 angle keeps its value) for rotated boxes, float32 zeros for axis-aligned ones."""
        raise NotImplementedError

    def bbox2d(self, boxes: np.ndarray, theta: np.ndarray | None) -> np.ndarray:
        """(N, 5) float64 ``vision_msgs/BoundingBox2D`` fields per box: centre x, centre y, ``size_x``, ``size_y``
        (source pixels) and ``center.theta`` (radians; 0 for axis-aligned boxes), computed in float64 as
        ``(x1 + x2) * 0.5``, ``(y1 + y2) * 0.5``, ``x2 - x1``, ``y2 - y1``."""
        b = np.asarray(boxes, np.float64).reshape(-1, 4)
        out = np.empty((b.shape[0], 5))
        np.multiply(b[:, 0] + b[:, 2], 0.5, out=out[:, 0])
        np.multiply(b[:, 1] + b[:, 3], 0.5, out=out[:, 1])
        np.subtract(b[:, 2], b[:, 0], out=out[:, 2])
        np.subtract(b[:, 3], b[:, 1], out=out[:, 3])
        out[:, 4] = self.angles(b.shape[0], theta)
        return out

    def corners(self, boxes: np.ndarray, theta: np.ndarray | None) -> np.ndarray:
        """(N, 4, 2) float32 corners (x, y), source pixels, each box's in the order of its outline: (+w/2, +h/2),
        (-w/2, +h/2), (-w/2, -h/2), (+w/2, -h/2) in its own axes (:func:`vrt_ros.boxes.rotated.corners`); for an
        axis-aligned box (x2, y2), (x1, y2), (x1, y1), (x2, y1), exactly its coordinates."""
        raise NotImplementedError

    def cover(self, box: np.ndarray, theta: float, scale: float, width: int, height: int
              ) -> tuple[int, int, int, int, np.ndarray | None]:
        """The pixels one box covers in an image of ``width`` x ``height`` pixels with ``scale`` of its pixels per
        source pixel (1 for the source image; depth: :func:`vrt_ros.depth.image.depth_scale`): a pixel counts when
        its centre is inside the box (half-open: ``[x1, x2) x [y1, y2)`` in the box's own axes), as
        ``kernels/depth.cu``. A box holding no pixel centre still covers one pixel: along an axis it is thinner than
        a pixel, an axis-aligned box takes the pixels holding its middle line (:func:`pixel_span`), a rotated box
        the one pixel holding its centre (:func:`rotated_cover`).

        Args:
            box: (4,) x1, y1, x2, y2 source pixels.
            theta: its angle, radians (ignored by axis-aligned boxes).
            scale: target pixels per source pixel.
            width, height: target image size, pixels (>= 1).

        Returns:
            ``(x0, x1, y0, y1, mask)``: the pixels ``[y0:y1, x0:x1]`` of the target image hold the box's; ``mask``
            ((y1 - y0, x1 - x0) bool) says which, None when every one of them counts.
        """
        raise NotImplementedError

    def iou(self, a: np.ndarray, theta_a: np.ndarray | None, b: np.ndarray, theta_b: np.ndarray | None
            ) -> np.ndarray:
        """(N, M) float32 overlap in [0, 1] of every box of ``a`` with every box of ``b`` (the kind's own IoU: see
        :class:`AxisAligned` and :class:`Rotated`)."""
        raise NotImplementedError

    def pairs(self, a: np.ndarray, theta_a: np.ndarray, offsets_a: np.ndarray, b: np.ndarray,
              theta_b: np.ndarray, offsets_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The tracker's sparse :meth:`iou`: the IoU of the pairs of ``a`` x ``b`` of one class that may pass a
        gate of at least 0.01 (every other pair's is below it).

        Args:
            a: (4, N) float64 rows centre x, centre y, w, h (the tracks' predicted boxes, source pixels).
            theta_a: (N,) radians.
            offsets_a: (N,) float64 class offsets (:func:`vrt_ros.tracking.association.class_offsets`).
            b: (M, 4) x1, y1, x2, y2 (the detections).
            theta_b: (M,) float32 radians.
            offsets_b: (M,) float64 class offsets.

        Returns:
            ``(rows, cols, iou)``: (K,) intp indices into ``a`` and ``b``, ``cols`` ascending then ``rows``, and (K,)
            float32 their IoU.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<box geometry {self.name}>"


class AxisAligned(BoxGeometry):
    """Boxes along the image axes. IoU: the area IoU (:func:`iou_matrix`; the tracker's pairs :func:`iou_pairs`,
    the same float32 operations, ByteTrack's ``matching.iou_distance``)."""

    name = "axis_aligned"
    rotated = False

    def angles(self, n: int, theta: np.ndarray | None) -> np.ndarray:
        return np.zeros(n, np.float32)

    def corners(self, boxes: np.ndarray, theta: np.ndarray | None) -> np.ndarray:
        b = np.asarray(boxes, np.float32).reshape(-1, 4)
        return b[:, [[2, 3], [0, 3], [0, 1], [2, 1]]]

    def cover(self, box: np.ndarray, theta: float, scale: float, width: int, height: int
              ) -> tuple[int, int, int, int, np.ndarray | None]:
        x0, x1 = pixel_span(box[0], box[2], scale, width)
        y0, y1 = pixel_span(box[1], box[3], scale, height)
        return x0, x1, y0, y1, None

    def iou(self, a: np.ndarray, theta_a: np.ndarray | None, b: np.ndarray, theta_b: np.ndarray | None
            ) -> np.ndarray:
        return iou_matrix(np.asarray(a).reshape(-1, 4), np.asarray(b).reshape(-1, 4))

    def pairs(self, a: np.ndarray, theta_a: np.ndarray, offsets_a: np.ndarray, b: np.ndarray,
              theta_b: np.ndarray, offsets_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        half = a[2:] * 0.5
        track_rows = np.concatenate((a[:2] - half, a[:2] + half))  # (4, N) float64 x1, y1, x2, y2
        det_rows = b.T
        keys = np.concatenate((track_rows[::2] + offsets_a, det_rows[::2] + offsets_b), axis=1)
        return iou_pairs(np.concatenate((track_rows, det_rows), axis=1, dtype=np.float32), a.shape[1], keys)


class Rotated(BoxGeometry):
    """Boxes turned by ``theta`` (the OBB heads). IoU: the probabilistic IoU (Llerena et al. 2021, arXiv:2106.06072;
    Ultralytics ``batch_probiou``), :func:`vrt_ros.boxes.rotated.probiou_pairs`, the overlap the rotated NMS and the
    tracker use; it is not the polygon IoU (a square and itself turned 90 degrees score 1; module docstring of
    :mod:`vrt_ros.boxes.rotated` says why it was chosen)."""

    name = "rotated"
    rotated = True

    def angles(self, n: int, theta: np.ndarray | None) -> np.ndarray:
        return np.asarray(theta).reshape(-1)

    def corners(self, boxes: np.ndarray, theta: np.ndarray | None) -> np.ndarray:
        return corners_of(_rboxes(boxes, theta))

    def cover(self, box: np.ndarray, theta: float, scale: float, width: int, height: int
              ) -> tuple[int, int, int, int, np.ndarray | None]:
        return rotated_cover(box, theta, scale, width, height)

    def iou(self, a: np.ndarray, theta_a: np.ndarray | None, b: np.ndarray, theta_b: np.ndarray | None
            ) -> np.ndarray:
        ra = _rboxes(a, theta_a)
        rb = _rboxes(b, theta_b)
        return probiou_pairs(ra.T[:, :, None], rb.T[:, None, :]).reshape(ra.shape[0], rb.shape[0])

    def pairs(self, a: np.ndarray, theta_a: np.ndarray, offsets_a: np.ndarray, b: np.ndarray,
              theta_b: np.ndarray, offsets_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tracks = np.concatenate((a, theta_a[None]))  # cx, cy, w, h, theta
        return rotated_pairs(np.concatenate((tracks, rboxes(b, theta_b).T), axis=1, dtype=np.float32), a.shape[1],
                             np.concatenate((offsets_a, offsets_b)))


def _rboxes(boxes: np.ndarray, theta: np.ndarray | None) -> np.ndarray:
    """(N, 5) float32 cx, cy, w, h, theta; an axis-aligned set (``theta`` None) at angle 0."""
    b = np.asarray(boxes, np.float32).reshape(-1, 4)
    return rboxes(b, np.zeros(b.shape[0], np.float32) if theta is None else theta)


#: The two kinds (one instance each; compare with ``is`` or by ``name``).
AXIS_ALIGNED = AxisAligned()
ROTATED = Rotated()


def geometry_of(theta: np.ndarray | None) -> BoxGeometry:
    """The kind of a frame's boxes: :data:`ROTATED` when ``theta`` is given ((N,) radians), else
    :data:`AXIS_ALIGNED`."""
    return AXIS_ALIGNED if theta is None else ROTATED


def common_geometry(theta_a: np.ndarray | None, theta_b: np.ndarray | None) -> BoxGeometry:
    """The kind two sets are compared in: :data:`ROTATED` when either is rotated (an axis-aligned set then counts
    as rotated by 0), else :data:`AXIS_ALIGNED`."""
    return AXIS_ALIGNED if theta_a is None and theta_b is None else ROTATED
