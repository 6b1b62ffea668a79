"""The tracker on oriented boxes (issue 34, HC-24): rotated boxes are associated by the probabilistic IoU of the
rotated NMS (vrt_ros.boxes.rotated), so two thin objects crossing at different angles keep their ids, and the gated pairs
give the same assignment as the full probiou matrix. No ROS, no GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("scipy", reason="scipy not installed (runtime dependency of tracking: requirements/runtime.txt)")

from vrt_ros.boxes.rotated import corners, corners_of, probiou, rboxes  # noqa: E402
from vrt_ros.tracking import NO_TRACK, ByteTracker, TrackerParams  # noqa: E402
from vrt_ros.tracking.association import class_offsets, rotated_pairs  # noqa: E402
from vrt_ros.tracking.output import track_frame  # noqa: E402
from vrt_ros.tracking.tracker import _THETA  # noqa: E402
from vrt_ros.types import Detections  # noqa: E402

S = 1_000_000_000
T0 = 1_700_000_000 * S


def stick(cx: float, cy: float, angle_deg: float, length: float = 300.0, thickness: float = 14.0):
    """An oriented detection of a thin object: own-axis box and theta (long-side form)."""
    return [cx - length / 2, cy - thickness / 2, cx + length / 2, cy + thickness / 2], math.radians(angle_deg)


def crossing(seed: int, frames: int = 40, rate_hz: float = 10.0):
    """Two thin objects of one class, one at +40 deg moving right, one at -40 deg moving left, crossing at the
    image centre half-way (their own-axis rectangles equal in size: image-aligned, they are the same box there);
    centres jittered by 1.5 px, the object listed first alternating (a detector's order is by score)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(frames):
        t = i / rate_hz
        a = stick(640 - 150 + 75 * t + rng.normal(0, 1.5), 360 + rng.normal(0, 1.5), 40.0)
        b = stick(640 + 150 - 75 * t + rng.normal(0, 1.5), 360 + rng.normal(0, 1.5), -40.0)
        pair = [a, b] if i % 2 == 0 else [b, a]
        out.append((T0 + int(t * S), np.float32([p[0] for p in pair]), np.float32([p[1] for p in pair]),
                    [0, 1] if i % 2 == 0 else [1, 0]))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_HC_24_two_crossing_thin_objects_keep_their_track_ids(seed):
    tracker = ByteTracker(TrackerParams())
    ids_of_object: dict[int, set] = {0: set(), 1: set()}
    for stamp, boxes, theta, objects in crossing(seed):
        dets = Detections(boxes=boxes, scores=np.float32([0.9, 0.9]), class_ids=np.zeros(2, np.int32), theta=theta)
        _, ids = track_frame(tracker, stamp, dets, 0.35)
        for obj, i in zip(objects, ids):
            if i:
                ids_of_object[obj].add(i)
    assert len(ids_of_object[0]) == 1 and len(ids_of_object[1]) == 1, ids_of_object  # no switch, no new id
    assert ids_of_object[0] != ids_of_object[1]


def test_rotated_pairs_give_every_pair_that_can_pass_a_gate():
    """The gate leaves out only pairs whose probiou is below 0.01 (the lowest min_iou) and the values are probiou's
    own; classes never pair."""
    rng = np.random.default_rng(5)
    n, m = 60, 70
    c = rng.uniform(0, 600, (n + m, 2))
    wh = rng.uniform([2, 1], [160, 40], (n + m, 2))
    rb = np.concatenate([c, wh, rng.uniform(-math.pi / 2, math.pi / 2, (n + m, 1))], axis=1).astype(np.float32)
    classes = rng.integers(0, 2, n + m)
    rows, cols, iou = rotated_pairs(rb.T.copy(), n, class_offsets(classes))
    full = np.stack([probiou(rb[i], rb[n:]) for i in range(n)])
    same = classes[:n, None] == classes[None, n:]
    np.testing.assert_array_equal(iou, full[rows, cols])
    taken = np.zeros_like(same)
    taken[rows, cols] = True
    assert not np.any(taken & ~same)
    assert np.all(full[same & ~taken] < 0.01)
    assert np.count_nonzero(same & ~taken) > 0  # the gate does leave pairs out


def test_oriented_and_axis_aligned_tracks_from_the_same_boxes():
    """One object seen as an oriented box: its track continues, its angle follows the detections."""
    tracker = ByteTracker(TrackerParams(min_hits=1))
    got = []
    for i in range(5):
        box, theta = stick(100 + 10 * i, 200, 30.0 + i)
        got.append(tracker.update(T0 + i * S // 10, np.float32([box]), np.float32([0.9]), np.zeros(1, np.int32),
                                  np.float32([theta]))[0])
    assert got == [1] * 5
    assert tracker._s[_THETA, 0] == np.float32(math.radians(34.0))


def test_rboxes_says_whether_detections_are_rotated():
    boxes = np.float32([[10, 20, 50, 30]])
    assert rboxes(boxes, None) is None
    rb = rboxes(boxes, np.float32([0.5]))
    np.testing.assert_array_equal(rb, np.float32([[30, 25, 40, 10, 0.5]]))
    np.testing.assert_array_equal(corners_of(rb)[0], corners(30, 25, 40, 10, np.float32(0.5)))
    assert corners_of(rb[:0]).shape == (0, 4, 2)
    assert NO_TRACK == -1
