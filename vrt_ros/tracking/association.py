"""IoU between track and detection boxes, and the gated one-to-one assignment of ByteTrack's association steps.

The assignment is SciPy's ``linear_sum_assignment`` (Jonker-Volgenant, SciPy >= 1.4) on the cost ``1 - IoU``.
Pairs whose IoU is below the step's minimum are not allowed: they cost 2, more than any allowed pair (at most 1),
and are dropped from the solution, as Ultralytics' ``matching.linear_assignment`` filters SciPy's solution when
``lap`` is absent. ByteTrack itself calls ``lap.lapjv(cost, extend_cost=True, cost_limit=1 - min_iou)``, which may
leave a pair unmatched to lower the total; the two agree wherever each track overlaps at most one detection beyond
the gate, and differ only in which of several competing pairs wins. A track and a detection that allow only each
other (the common case) are matched without the solver: such a pair is a component of its own in the bipartite
graph, so every optimal assignment contains it.

The tracker works on *pairs* rather than on the full track x detection matrix (:func:`iou_pairs`,
:func:`match_pairs`): only the pairs whose boxes overlap in x get an IoU, the rest are 0 and never allowed. With the
tracker's class offset (boxes of two classes never overlap) that is a few pairs per track, so past one pass over the
N x M pairs (the x test) the per-frame cost is numpy calls on short arrays, instead of a dozen passes over the
matrix; the cost of a frame is mostly the number of numpy calls, not their size. Oriented boxes
(:func:`rotated_pairs`) take the probabilistic IoU of :mod:`vrt_ros.rotated` on the pairs that can pass a gate. The pairs give the same numbers
bit for bit (the same float32 operations in the same order) and the same assignment as :func:`iou_matrix` +
:func:`match` on the matrix.

SciPy, not ``lap``/``lapx``: it is a rosdep key on every ROS distribution (``python3-scipy``; Ubuntu 22.04 ships 1.8,
which has this function), wheels exist for every Python we support, and TrackEval (the metrics of the tests) needs
it anyway.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from vrt_ros.rotated import extent, probiou_pairs

_EMPTY = np.zeros(0, np.intp)


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU.

    Args:
        a: (N, 4) x1, y1, x2, y2.
        b: (M, 4) x1, y1, x2, y2, in the same pixel frame.

    Returns:
        (N, M) float32 IoU in [0, 1]; area = ``(x2 - x1) * (y2 - y1)`` as :func:`vrt_ros.nms.box_iou`, 0 for a pair
        of empty boxes.
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


def match(iou: np.ndarray, min_iou: float) -> tuple[np.ndarray, np.ndarray]:
    """A one-to-one assignment of rows (tracks) to columns (detections) among the pairs with IoU >= ``min_iou``,
    minimising the summed ``1 - IoU`` (see the module docstring for how not-allowed pairs are priced).

    Args:
        iou: (N, M) IoU (pairs that must never match, e.g. of another class, set to 0).
        min_iou: the step's gate, in (0, 1].

    Returns:
        ``(rows, cols)``, two (K,) intp arrays of matched pairs, K <= min(N, M).
    """
    if not iou.size:
        return _EMPTY, _EMPTY
    if iou.size <= _SMALL:  # a few pairs: the solver at once costs fewer numpy calls than looking for lone pairs
        return _solve(iou, min_iou)
    allowed = iou >= min_iou
    per_row = allowed.sum(axis=1)
    per_col = allowed.sum(axis=0)
    if per_row.max() <= 1 and per_col.max() <= 1:  # every allowed pair stands alone (or there is none)
        rows = per_row.nonzero()[0]
        return rows, allowed[rows].argmax(axis=1)
    col_of = allowed.argmax(axis=1)
    alone = (per_row == 1) & (per_col[col_of] == 1)
    rows = alone.nonzero()[0]
    cols = col_of[rows]
    rest_rows = ((per_row > 0) & ~alone).nonzero()[0]
    per_col[cols] = 0
    rest_cols = per_col.nonzero()[0]
    r, c = _solve(iou[np.ix_(rest_rows, rest_cols)], min_iou)
    return np.concatenate([rows, rest_rows[r]]), np.concatenate([cols, rest_cols[c]])


#: Matrices with at most this many entries go to the solver directly.
_SMALL = 64


def _solve(iou: np.ndarray, min_iou: float) -> tuple[np.ndarray, np.ndarray]:
    """SciPy's assignment on ``1 - IoU`` with the not-allowed pairs at cost 2, those dropped from the answer."""
    cost = 1.0 - iou
    cost[iou < min_iou] = 2.0
    r, c = linear_sum_assignment(cost)
    ok = cost[r, c] <= 1.0
    return r[ok], c[ok]


def iou_pairs(boxes: np.ndarray, n: int, keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The IoU of the pairs of boxes ``a`` x ``b`` that overlap in x: a superset of the pairs with IoU > 0 (every
    other pair has IoU 0).

    Args:
        boxes: (4, N + M) float32 rows x1, y1, x2, y2: the N boxes ``a`` then the M boxes ``b``, in one pixel frame
            (one array: their areas take one pass).
        n: N.
        keys: (2, N + M) float64 rows x1, x2 for the overlap test instead of the boxes' (the tracker's: x plus
            :func:`class_offsets`, so boxes of two classes never overlap there); the IoU is always the boxes'.

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


#: Class id x this is added to x in the overlap test (:func:`class_offsets`): 2**20 px apart, classes never overlap.
CLASS_STRIDE = float(2**20)


def class_offsets(classes: np.ndarray) -> np.ndarray:
    """What moves boxes apart by class in the overlap test (the trick of torchvision's ``batched_nms``), added to
    their x extents in float64: exact separation for any class id below 2**32 with coordinates within +-2**19 px,
    and x kept within 2e-6 px for class ids up to 10 000 (float32, as before issue 34, rounded x to 64 px at class
    10 000 and the IoU came out wrong). Only the overlap test uses them; the IoU is computed on the boxes themselves.

    Args:
        classes: (K,) class ids (int, or float64 holding integers).

    Returns:
        (K,) float64 ``classes * CLASS_STRIDE``.
    """
    return np.multiply(classes, CLASS_STRIDE, dtype=np.float64)


#: Pairs of oriented boxes whose centres are further apart, in x or in y, than this times the sum of their enclosing
#: half sizes are not taken (:func:`rotated_pairs`).
ROTATED_GATE = 2.5


def rotated_pairs(rb: np.ndarray, n: int, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The probabilistic IoU (:func:`vrt_ros.rotated.probiou_pairs`, the rotated NMS's overlap) of the pairs of
    oriented boxes ``a`` x ``b`` of one class that can reach 0.01 (the lowest gate the tracker allows): every other
    pair's is below it, so leaving them out changes no association.

    Why the gate is safe: with ``e_x`` a box's enclosing half width, its Gaussian's x variance is at most
    ``e_x**2 / 3``, so two boxes whose centres are ``|dx| >= k (e_x1 + e_x2)`` apart have a Bhattacharyya distance
    of at least ``0.75 k**2`` (the log-determinant term is >= 0), and at ``k =`` :data:`ROTATED_GATE` (2.5) the
    probiou ``1 - sqrt(1 - exp(-B))`` is below 0.005; the same in y.

    Args:
        rb: (5, N + M) float32 rows cx, cy, w, h, theta: the N boxes ``a`` then the M boxes ``b``.
        n: N.
        offsets: (N + M,) float64 :func:`class_offsets` of the boxes' classes; only pairs of one class are taken.

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


def match_pairs(rows: np.ndarray, cols: np.ndarray, iou: np.ndarray, row_ids: np.ndarray,
                col_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`match` on a matrix given by its allowed pairs: the same assignment as ``match(m, min_iou)`` where
    ``m`` is the ``row_ids`` x ``col_ids`` matrix holding ``iou`` at the pairs and less than ``min_iou`` elsewhere.

    Args:
        rows: (K,) int row indices of the allowed pairs (IoU >= the step's gate), each in ``row_ids``; no pair twice.
        cols: (K,) int column indices, each in ``col_ids``.
        iou: (K,) float32 their IoU.
        row_ids: (R,) int, ascending: every row of the matrix (those without a pair count for its size).
        col_ids: (C,) int, ascending: every column.

    Returns:
        ``(rows, cols)``, two (L,) int arrays of matched pairs, as indices (values of ``row_ids`` / ``col_ids``).
    """
    size = row_ids.shape[0] * col_ids.shape[0]
    k = rows.shape[0]
    if not size or not k:
        return _EMPTY, _EMPTY
    if size <= _SMALL:  # as match(): the solver on the whole small matrix
        cost = np.full((row_ids.shape[0], col_ids.shape[0]), 2.0, np.float32)
        cost[row_ids.searchsorted(rows), col_ids.searchsorted(cols)] = 1.0 - iou
        return _assign(cost, row_ids, col_ids)
    per_row = np.bincount(rows)
    per_col = np.bincount(cols)
    if np.count_nonzero(per_row) == k == np.count_nonzero(per_col):  # every allowed pair stands alone
        return rows, cols
    together = per_row[rows] + per_col[cols]  # 2: the pair stands alone (its row and column have no other)
    alone = together == 2
    rest = (together > 2).nonzero()[0]
    r, c = _solve_pairs(rows[rest].tolist(), cols[rest].tolist(), iou[rest].tolist())
    return np.concatenate([rows[alone], r]), np.concatenate([cols[alone], c])


def _solve_pairs(rows: list, cols: list, iou: list) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_solve` on the matrix of the rows and columns these pairs name (ascending), built in Python (a few
    pairs: cheaper than numpy calls at this size); returns the matched ``(rows, cols)`` as (L,) intp indices. The
    cost ``1 - IoU`` is rounded to float32 as in :func:`_solve` (``1 - v`` is exact in float64 for a float32 ``v``,
    so it is the same single rounding)."""
    row_set, col_set = sorted(set(rows)), sorted(set(cols))
    row_pos = {v: i for i, v in enumerate(row_set)}
    col_pos = {v: i for i, v in enumerate(col_set)}
    cost = [[2.0] * len(col_set) for _ in row_set]
    for r, c, v in zip(rows, cols, iou):
        cost[row_pos[r]][col_pos[c]] = 1.0 - v
    r, c = linear_sum_assignment(np.array(cost, np.float32))
    ok = [(i, j) for i, j in zip(r.tolist(), c.tolist()) if cost[i][j] <= 1.0]
    return np.array([row_set[i] for i, _ in ok], np.intp), np.array([col_set[j] for _, j in ok], np.intp)


def _assign(cost: np.ndarray, row_ids: np.ndarray, col_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SciPy's assignment on a cost matrix with the not-allowed pairs at 2, those dropped, as indices."""
    r, c = linear_sum_assignment(cost)
    ok = cost[r, c] <= 1.0
    return row_ids[r[ok]], col_ids[c[ok]]
