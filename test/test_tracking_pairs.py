"""The tracker's pair-based IoU and matching (issue 24, cost) give what the full matrix gives: iou_pairs the same
float32 numbers as iou_matrix at every pair with IoU > 0, match_pairs the same assignment as match. No ROS."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy", reason="scipy not installed (runtime dependency of tracking: requirements/runtime.txt)")

from vrt_ros.tracking.association import iou_matrix, iou_pairs, match, match_pairs  # noqa: E402


def _boxes(rng: np.random.Generator, n: int, spread: float) -> np.ndarray:
    """(n, 4) float32 boxes, some of zero or negative width, on three classes (the tracker's x offset)."""
    xy = rng.uniform(0, spread, (n, 2))
    wh = rng.uniform(-5, 80, (n, 2))
    boxes = np.concatenate([xy, xy + wh], axis=1)
    boxes[:, ::2] += rng.integers(0, 3, (n, 1)) * 1e5
    return boxes.astype(np.float32)


def test_iou_pairs_are_the_matrix_entries_bit_for_bit():
    rng = np.random.default_rng(3)
    for n, m in [(0, 0), (0, 5), (5, 0), (1, 1), (30, 25), (100, 95)]:
        a, b = _boxes(rng, n, 300.0), _boxes(rng, m, 300.0)
        full = iou_matrix(a, b)
        rows, cols, iou = iou_pairs(np.concatenate([a.T, b.T], axis=1), n)
        assert np.array_equal(full[rows, cols], iou)  # the same float32 values
        assert np.all(np.diff(cols) >= 0) and len(set(zip(rows.tolist(), cols.tolist()))) == len(rows)
        left = np.ones_like(full, bool)
        left[rows, cols] = False
        assert not np.any(full[left] > 0)  # no overlapping pair is missed


@pytest.mark.parametrize("min_iou", [0.2, 0.5])
def test_match_pairs_gives_the_matrix_assignment(min_iou):
    """Crowded boxes (many tracks competing for a detection) and sparse ones, small matrices (the solver on the
    whole) and large ones (lone pairs apart, the solver on the rest)."""
    rng = np.random.default_rng(4)
    for trial in range(300):
        n, m = rng.integers(1, 40, 2)
        spread = 100.0 if trial % 2 else 600.0
        iou = iou_matrix(_boxes(rng, n, spread), _boxes(rng, m, spread))
        want = sorted(zip(*(x.tolist() for x in match(iou, min_iou))))
        rows, cols = (iou >= min_iou).nonzero()
        got = match_pairs(rows, cols, iou[rows, cols], np.arange(n), np.arange(m))
        assert sorted(zip(*(x.tolist() for x in got))) == want, trial
