"""IoU between track and detection boxes, and the gated one-to-one assignment of ByteTrack's association steps.

The assignment is SciPy's ``linear_sum_assignment`` (Jonker-Volgenant, SciPy >= 1.4) on the cost ``1 - IoU``.
Pairs whose IoU is below the step's minimum are not allowed: they cost 2, more than any allowed pair (at most 1),
and are dropped from the solution, as Ultralytics' ``matching.linear_assignment`` filters SciPy's solution when
``lap`` is absent. ByteTrack itself calls ``lap.lapjv(cost, extend_cost=True, cost_limit=1 - min_iou)``, which may
leave a pair unmatched to lower the total; the two agree wherever each track overlaps at most one detection beyond
the gate, and differ only in which of several competing pairs wins. A track and a detection that allow only each
other (the common case) are matched without the solver: such a pair is a component of its own in the bipartite
graph, so every optimal assignment contains it.

SciPy, not ``lap``/``lapx``: it is a rosdep key on every ROS distribution (``python3-scipy``; Ubuntu 22.04 ships 1.8,
which has this function), wheels exist for every Python we support, and TrackEval (the metrics of the tests) needs
it anyway.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

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
