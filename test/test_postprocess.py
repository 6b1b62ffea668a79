"""postprocess.finish: filtering, NMS, top-k and the mapping back to source pixels (HC-07, HC-10, HC-11)."""

from __future__ import annotations

import numpy as np
import pytest

from vrt_ros.boxes.geometry import letterbox, to_input
from vrt_ros.boxes.postprocess import finish
from vrt_ros.heads.base import Candidates
from vrt_ros.types import PostprocessParams


def cands(boxes, scores, class_ids=None, keypoints=None) -> Candidates:
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    n = len(boxes)
    return Candidates(
        boxes=boxes,
        scores=np.asarray(scores, np.float32).reshape(n),
        class_ids=np.zeros(n, np.int32) if class_ids is None else np.asarray(class_ids, np.int32),
        keypoints=np.zeros((n, 0, 3), np.float32) if keypoints is None else np.asarray(keypoints, np.float32),
    )


IDENTITY = letterbox(640, 640, 640, 640)  # source = engine input: coordinates unchanged
P = PostprocessParams(score_threshold=0.3, nms_iou=0.45, max_detections=100)


def test_nan_and_inf_rows_never_come_out():  # HC-10
    c = cands(
        [[10, 10, 50, 50], [np.nan, 10, 50, 50], [100, 100, np.inf, 150], [200, 200, 250, 250], [300, 300, 350, 350]],
        [0.9, 0.9, 0.9, np.nan, 0.8],
        keypoints=[[[20, 20, 1.0]], [[1, 1, 1]], [[1, 1, 1]], [[1, 1, 1]], [[np.inf, 310, 0.5]]],
    )
    d = finish(c, IDENTITY, P, True)
    assert len(d) == 1
    np.testing.assert_allclose(d.boxes[0], [10, 10, 50, 50])
    assert np.isfinite(d.boxes).all() and np.isfinite(d.scores).all() and np.isfinite(d.keypoints).all()


def test_boxes_without_area_are_dropped():  # HC-11: none with size <= 0
    c = cands([[10, 10, 10, 50], [10, 10, 50, 10], [50, 50, 40, 60], [10, 10, 11, 11]], [0.9, 0.9, 0.9, 0.9])
    d = finish(c, IDENTITY, P, True)
    assert len(d) == 1
    assert np.all(d.boxes[:, 2] > d.boxes[:, 0]) and np.all(d.boxes[:, 3] > d.boxes[:, 1])


def test_score_threshold_inclusive_and_above_one_keeps_nothing():  # HC-11
    c = cands([[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10]], [0.3, 0.29, 1.0])
    d = finish(c, IDENTITY, P, True)
    np.testing.assert_allclose(d.scores, [1.0, 0.3])
    empty = finish(c, IDENTITY, PostprocessParams(score_threshold=1.01), True)
    assert len(empty) == 0 and empty.boxes.shape == (0, 4) and empty.keypoints.shape == (0, 0, 3)


def test_empty_result_keeps_the_keypoint_count():
    c = cands([[0, 0, 10, 10]], [0.1], keypoints=np.zeros((1, 5, 3)))
    d = finish(c, IDENTITY, P, True)
    assert d.boxes.dtype == np.float32 and d.class_ids.dtype == np.int32
    assert d.keypoints.shape == (0, 5, 3)
    assert finish(Candidates.empty(17), IDENTITY, P, True).keypoints.shape == (0, 17, 3)


@pytest.mark.parametrize("n_objects", [1, 3])
def test_exactly_n_objects_and_max_detections(n_objects):  # HC-11
    boxes = [[i * 100, 0, i * 100 + 50, 50] for i in range(n_objects)]
    scores = [0.5 + 0.1 * i for i in range(n_objects)]
    d = finish(cands(boxes, scores), IDENTITY, P, True)
    assert len(d) == n_objects
    assert np.all(np.diff(d.scores) <= 0), "highest score first"
    capped = finish(cands(boxes, scores), IDENTITY, PostprocessParams(max_detections=1, score_threshold=0.3), True)
    assert len(capped) == 1 and capped.scores[0] == pytest.approx(max(scores))


def test_per_class_and_agnostic_nms():
    c = cands([[0, 0, 100, 100], [2, 2, 100, 100], [4, 0, 100, 100]], [0.9, 0.8, 0.7], class_ids=[1, 2, 1])
    per_class = finish(c, IDENTITY, P, True)
    assert per_class.class_ids.tolist() == [1, 2]
    agnostic = finish(c, IDENTITY, PostprocessParams(score_threshold=0.3, class_agnostic=True), True)
    assert agnostic.class_ids.tolist() == [1]


def test_no_nms_when_the_model_applied_it():
    c = cands([[0, 0, 100, 100], [1, 1, 100, 100]], [0.7, 0.9], class_ids=[4, 4])
    d = finish(c, IDENTITY, P, applies_nms=False)
    assert len(d) == 2 and d.scores.tolist() == pytest.approx([0.9, 0.7])


def test_inputs_are_not_modified():
    c = cands([[10, 10, 50, 50]], [0.9], keypoints=[[[20, 20, 0.5]]])
    before = (c.boxes.copy(), c.keypoints.copy())
    finish(c, letterbox(1280, 720, 640, 640, "center"), P, True)
    np.testing.assert_array_equal(c.boxes, before[0])
    np.testing.assert_array_equal(c.keypoints, before[1])


SOURCE_SIZES = [(1280, 720), (720, 1280), (640, 640), (641, 481), (100, 1000)]
INPUT_SIZES = [(640, 640), (640, 384)]


@pytest.mark.parametrize("align", ["top_left", "center"])
@pytest.mark.parametrize("src", SOURCE_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dst", INPUT_SIZES, ids=lambda s: f"in{s[0]}x{s[1]}")
def test_box_and_keypoints_come_back_in_source_pixels(src, dst, align):  # HC-07 (geometry part)
    sw, sh = src
    lb = letterbox(sw, sh, dst[0], dst[1], align)
    # One object in the middle of the frame: a box of 30 % x 40 % of the image and a keypoint at its centre.
    src_box = np.array([[0.35 * sw, 0.30 * sh, 0.65 * sw, 0.70 * sh]], np.float32)
    src_kp = np.array([[[0.5 * sw, 0.5 * sh, 0.8]]], np.float32)
    in_box = to_input(src_box.copy(), lb)
    in_kp = src_kp.copy()
    to_input(in_kp[..., :2], lb)
    d = finish(cands(in_box, [0.9], keypoints=in_kp), lb, P, True)
    assert len(d) == 1
    np.testing.assert_allclose(d.boxes, src_box, atol=1e-2)
    np.testing.assert_allclose(d.keypoints, src_kp, atol=1e-2)


def test_clipping_to_the_image_and_padding_only_boxes():
    lb = letterbox(1280, 720, 640, 640, "center")  # content rows 140..500 of the input
    c = cands(
        [
            [-20, 200, 100, 300],  # sticks out left of the input
            [600, 450, 700, 600],  # sticks out right and into the bottom padding
            [100, 10, 200, 100],  # wholly in the top padding: nothing of it is in the image
        ],
        [0.9, 0.8, 0.7],
        class_ids=[0, 1, 2],
        keypoints=[[[-30, 150, 1.2]], [[650, 620, 0.5]], [[150, 50, 0.5]]],
    )
    d = finish(c, lb, P, True)
    assert d.class_ids.tolist() == [0, 1]
    assert d.boxes[0, 0] == 0.0 and d.boxes[1, 2] == 1280.0 and d.boxes[1, 3] == 720.0
    assert np.all(d.boxes >= 0) and np.all(d.boxes[:, 0::2] <= 1280) and np.all(d.boxes[:, 1::2] <= 720)
    assert d.keypoints[0, 0].tolist() == pytest.approx([0.0, 20.0, 1.0])  # x clipped, confidence clipped
    assert d.keypoints[1, 0].tolist() == pytest.approx([1280.0, 720.0, 0.5])
