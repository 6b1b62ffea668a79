"""IoU between track and detection boxes, and the gated one-to-one assignment of ByteTrack's association steps.

The assignment is SciPy's ``linear_sum_assignment`` (Jonker-Volgenant, SciPy >= 1.4) on the cost ``1 - IoU``.
Pairs whose IoU is below the step's minimum are not allowed: they cost 2, more than any allowed pair (at most 1),
and are dropped from the solution, as Ultralytics' ``matching.linear_assignment`` filters SciPy's solution when
``lap`` is absent. ByteTrack itself calls ``lap.lapjv(cost, extend_cost=True, cost_limit=1 - min_iou)``, which may
leave a pair unmatched to lower the total; the two agree wherever each track overlaps at most one detection beyond
the gate, and differ only in which of several competing pairs wins. A track and a detection that allow only each
other (the common case) are matched without the solver: such a pair is a component of its own in the bipartite
graph, so every optimal assignment contains it.

The IoU itself is the boxes' own (:mod:`vrt_ros.boxes.kinds`, whose :func:`~vrt_ros.boxes.kinds.iou_matrix`,
:func:`~vrt_ros.boxes.kinds.iou_pairs` and :func:`~vrt_ros.boxes.kinds.rotated_pairs` are re-exported here; the tracker asks the
detections' :class:`~vrt_ros.boxes.kinds.BoxGeometry` for its pairs, so it never tells box kinds apart itself).
The tracker works on *pairs* rather than on the full track x detection matrix (:func:`iou_pairs`,
:func:`match_pairs`): only the pairs whose boxes overlap in x get an IoU, the rest are 0 and never allowed. With the
tracker's class offset (boxes of two classes never overlap) that is a few pairs per track, so past one pass over the
N x M pairs (the x test) the per-frame cost is numpy calls on short arrays, instead of a dozen passes over the
matrix; the cost of a frame is mostly the number of numpy calls, not their size. Oriented boxes
(:func:`rotated_pairs`) take the probabilistic IoU of :mod:`vrt_ros.boxes.rotated` on the pairs that can pass a gate. The pairs give the same numbers
bit for bit (the same float32 operations in the same order) and the same assignment as :func:`iou_matrix` +
:func:`match` on the matrix.

SciPy, not ``lap``/``lapx``: it is a rosdep key on every ROS distribution (``python3-scipy``; Ubuntu 22.04 ships 1.8,
which has this function), wheels exist for every Python we support, and TrackEval (the metrics of the tests) needs
it anyway.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from vrt_ros.boxes.kinds import ROTATED_GATE, iou_matrix, iou_pairs, rotated_pairs  # noqa: F401 - the IoU: vrt_ros.boxes.kinds

_EMPTY = np.zeros(0, np.intp)


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
