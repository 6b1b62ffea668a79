"""NMS reference (vrt_ros.boxes.nms): IoU formula, greedy suppression, per-class vs agnostic, stable order."""

from __future__ import annotations

import numpy as np
import pytest

from vrt_ros.boxes.nms import box_iou, nms, score_order


def test_iou_of_known_boxes():
    box = np.array([0, 0, 10, 10], np.float32)
    others = np.array(
        [
            [0, 0, 10, 10],  # same box
            [5, 0, 15, 10],  # half overlap: 50 / 150
            [10, 0, 20, 10],  # touching edge: no area in common
            [2, 2, 4, 4],  # inside: 4 / 100
            [3, 3, 3, 8],  # zero width: no area
        ],
        np.float32,
    )
    np.testing.assert_allclose(box_iou(box, others), [1.0, 1 / 3, 0.0, 0.04, 0.0], rtol=1e-6)


def test_iou_degenerate_pair_is_zero_not_nan():
    pts = np.array([[1, 1, 1, 1]], np.float32)
    assert box_iou(pts[0], pts)[0] == 0.0


def test_overlapping_lower_score_is_suppressed():
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]], np.float32)
    scores = np.array([0.6, 0.9, 0.5], np.float32)
    keep = nms(boxes, scores, 0.5)
    assert keep.tolist() == [1, 2]


def test_threshold_is_strict():
    # IoU exactly 1/3: kept at threshold 1/3 (suppression needs IoU > threshold), suppressed just below it.
    boxes = np.array([[0, 0, 10, 10], [5, 0, 15, 10]], np.float32)
    scores = np.array([0.9, 0.8], np.float32)
    iou = float(box_iou(boxes[0], boxes[1:])[0])
    assert nms(boxes, scores, iou).tolist() == [0, 1]
    assert nms(boxes, scores, iou - 1e-6).tolist() == [0]


def test_per_class_keeps_other_classes_and_agnostic_does_not():
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    classes = np.array([3, 5, 3], np.int32)
    assert nms(boxes, scores, 0.5, classes).tolist() == [0, 1]
    assert nms(boxes, scores, 0.5, None).tolist() == [0]


def test_equal_scores_ordered_by_index():
    boxes = np.array([[20, 20, 30, 30], [0, 0, 10, 10], [0, 0, 10, 10], [40, 40, 50, 50]], np.float32)
    scores = np.full(4, 0.5, np.float32)
    assert score_order(scores).tolist() == [0, 1, 2, 3]
    # Box 1 comes before its twin 2, so 2 is the one suppressed.
    assert nms(boxes, scores, 0.5).tolist() == [0, 1, 3]


def test_max_output_stops_early():
    boxes = np.array([[i * 20, 0, i * 20 + 10, 10] for i in range(6)], np.float32)
    scores = np.linspace(0.1, 0.6, 6).astype(np.float32)
    assert nms(boxes, scores, 0.5, max_output=2).tolist() == [5, 4]


def test_empty_input():
    keep = nms(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), 0.5)
    assert keep.shape == (0,) and keep.dtype == np.int64


@pytest.mark.parametrize("agnostic", [False, True])
def test_random_boxes_satisfy_the_nms_contract(agnostic):
    """On random clustered boxes: kept boxes never overlap above the threshold within a class, and every
    dropped box is overlapped above the threshold by a kept box of its class that comes before it."""
    rng = np.random.default_rng(7)
    n = 300
    centres = rng.uniform(0, 200, (n, 2)).round(-1)  # clustered, so many overlaps and exact ties of position
    sizes = rng.uniform(5, 40, (n, 2))
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=1).astype(np.float32)
    scores = rng.choice(np.linspace(0.1, 1.0, 20), n).astype(np.float32)  # repeated scores: ties matter
    classes = rng.integers(0, 3, n).astype(np.int32)
    thr = 0.45
    keep = nms(boxes, scores, thr, None if agnostic else classes)
    order = score_order(scores)
    rank = np.empty(n, int)
    rank[order] = np.arange(n)
    assert np.all(np.diff(rank[keep]) > 0), "kept boxes must come out in score order"
    same = np.ones((n, n), bool) if agnostic else classes[:, None] == classes[None, :]
    kept = set(keep.tolist())
    for i in keep:
        others = [j for j in keep if j != i and same[i, j]]
        if others:
            assert np.all(box_iou(boxes[i], boxes[others]) <= thr)
    for j in range(n):
        if j in kept:
            continue
        earlier = [i for i in keep if rank[i] < rank[j] and same[i, j]]
        assert earlier and np.any(box_iou(boxes[j], boxes[earlier]) > thr), f"box {j} dropped without cause"
