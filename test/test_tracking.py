"""The tracker in the core (issue 24): the Kalman filter against the 8x8 DeepSORT reference, the gated assignment,
ByteTrack's two associations, birth, loss by time, the reset rules, and what a frame publishes. No ROS, no GPU."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("scipy", reason="scipy not installed (runtime dependency of tracking: requirements/runtime.txt)")

from vrt_ros.boxes.nms import box_iou  # noqa: E402
from vrt_ros.errors import ConfigError  # noqa: E402
from vrt_ros.settings import config  # noqa: E402
from vrt_ros.tracking import NO_TRACK, ByteTracker, TrackerParams, kalman  # noqa: E402
from vrt_ros.tracking.association import iou_matrix, match  # noqa: E402
from vrt_ros.tracking.output import track_frame  # noqa: E402
from vrt_ros.types import Detections  # noqa: E402

S = 1_000_000_000  # ns per second
T0 = 1_700_000_000 * S


def box(cx: float, cy: float, w: float = 60.0, h: float = 150.0) -> list[float]:
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def frame(tracker: ByteTracker, t_s: float, boxes, scores=None, classes=None) -> list[int]:
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    scores = np.full(len(boxes), 0.9, np.float32) if scores is None else np.asarray(scores, np.float32)
    classes = np.zeros(len(boxes), np.int32) if classes is None else np.asarray(classes, np.int32)
    return tracker.update(T0 + int(round(t_s * S)), boxes, scores, classes).tolist()


# ------------------------------------------------------------------------------------------- Kalman filter
def _reference(z, steps):
    """DeepSORT's KalmanFilter (8x8 matrices, deep_sort/kalman_filter.py) with dt scaling F and Q as ours."""
    p, v = kalman.STD_POSITION, kalman.STD_VELOCITY
    h = z[3]
    mean = np.r_[z, np.zeros(4)]
    cov = np.diag(np.square([2 * p * h, 2 * p * h, 1e-2, 2 * p * h, 10 * v * h, 10 * v * h, 1e-5, 10 * v * h]))
    out = []
    for dt, meas in steps:
        h = mean[3]
        f = np.eye(8)
        f[:4, 4:] = dt * np.eye(4)
        q = np.diag(np.square([p * h, p * h, 1e-2, p * h, v * h, v * h, 1e-5, v * h])) * dt
        mean, cov = f @ mean, f @ cov @ f.T + q
        if meas is not None:
            hm = np.eye(4, 8)
            r = np.diag(np.square([p * mean[3], p * mean[3], 1e-1, p * mean[3]]))
            s = hm @ cov @ hm.T + r
            k = cov @ hm.T @ np.linalg.inv(s)
            mean, cov = mean + k @ (meas - hm @ mean), cov - k @ s @ k.T
        out.append((mean.copy(), cov.copy()))
    return out


def test_kalman_block_form_equals_the_8x8_reference():
    rng = np.random.default_rng(3)
    boxes = np.array([box(100, 200), box(400, 300, 40, 90), box(900, 500, 120, 260)])
    cols = kalman.initiate(boxes)
    steps = []
    for k in range(8):
        dt = [1.0, 3.0, 0.5, 0.0][k % 4]
        meas = boxes + k * np.array([5.0, 1.0, 5.0, 1.0]) + rng.normal(0, 2.0, boxes.shape)
        steps.append((dt, meas, [0, 2] if k % 3 else [0, 1, 2]))
    refs = [_reference(z, [(dt, kalman.xyxy_to_xyah(m[i:i + 1])[:, 0] if i in idx else None) for dt, m, idx in steps])
            for i, z in enumerate(kalman.xyxy_to_xyah(boxes).T)]
    for k, (dt, meas, idx) in enumerate(steps):
        kalman.predict(cols, dt)
        g = cols[:, idx]
        kalman.update(g, meas[idx])
        cols[:, idx] = g
        for i in range(3):
            mean, cov = refs[i][k]
            blocks = np.zeros((8, 8))
            for c in range(4):
                blocks[c, c], blocks[4 + c, 4 + c] = cols[8 + c, i], cols[16 + c, i]
                blocks[c, 4 + c] = blocks[4 + c, c] = cols[12 + c, i]
            np.testing.assert_allclose(cols[:8, i], mean, rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(blocks, cov, rtol=1e-12, atol=1e-12)


def test_box_conversions_round_trip():
    boxes = np.array([box(10, 20, 30, 40), box(500.5, 200.25, 1.5, 300)])
    np.testing.assert_allclose(kalman.xyah_to_xyxy(kalman.xyxy_to_xyah(boxes)), boxes, atol=1e-9)


def test_prediction_uses_the_time_step():
    """Velocity is per reference period: the same motion sampled at 10 and 30 Hz predicts the same place."""
    predicted = {}
    for rate in (10.0, 30.0):
        cols = kalman.initiate(np.array([box(100, 300)]))
        for i in range(1, int(rate) + 1):  # one second of 120 px/s
            kalman.predict(cols, (1.0 / rate) / kalman.REFERENCE_PERIOD_S)
            kalman.update(cols, np.array([box(100 + 120 * i / rate, 300)]))
        kalman.predict(cols, 0.5 / kalman.REFERENCE_PERIOD_S)  # half a second ahead
        predicted[rate] = kalman.xyah_to_xyxy(cols[:4])[0]
    expected = np.array(box(100 + 120 * 1.5, 300))
    for rate, got in predicted.items():
        assert np.abs(got - expected).max() < 6.0, (rate, got, expected)


# ------------------------------------------------------------------------------------------- association
def test_iou_matrix_agrees_with_the_nms_reference():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 100, (7, 2))
    a = np.concatenate([a, a + rng.uniform(0, 60, (7, 2))], 1)
    b = rng.uniform(0, 100, (5, 2))
    b = np.concatenate([b, b + rng.uniform(0, 60, (5, 2))], 1)
    b[0] = [10, 10, 10, 50]  # empty box
    got = iou_matrix(a, b)
    assert got.shape == (7, 5)
    for i in range(7):
        np.testing.assert_allclose(got[i], box_iou(a[i], b), atol=1e-6)


def _brute_force(iou: np.ndarray, min_iou: float) -> float:
    """The best summed IoU over every one-to-one set of allowed pairs (most pairs first)."""
    n, m = iou.shape
    best = (0, 0.0)
    for perm in itertools.permutations(range(m), min(n, m)) if n <= m else itertools.permutations(range(n), m):
        pairs = list(zip(range(n), perm)) if n <= m else list(zip(perm, range(m)))
        ok = [(r, c) for r, c in pairs if iou[r, c] >= min_iou]
        best = max(best, (len(ok), sum(iou[r, c] for r, c in ok)))
    return best


@pytest.mark.parametrize("seed", range(20))
def test_match_is_an_optimal_gated_assignment(seed):
    rng = np.random.default_rng(seed)
    iou = rng.uniform(0, 1, (rng.integers(1, 6), rng.integers(1, 6)))
    iou[rng.uniform(size=iou.shape) < 0.5] = 0.0
    rows, cols = match(iou, 0.3)
    assert len(set(rows.tolist())) == len(rows) and len(set(cols.tolist())) == len(cols)
    assert (iou[rows, cols] >= 0.3).all()
    assert (len(rows), pytest.approx(iou[rows, cols].sum())) == _brute_force(iou, 0.3)


def test_match_pairs_that_stand_alone_without_the_solver():
    iou = np.array([[0.9, 0.0, 0.0], [0.0, 0.0, 0.6], [0.0, 0.1, 0.0]])
    rows, cols = match(iou, 0.2)
    assert sorted(zip(rows.tolist(), cols.tolist())) == [(0, 0), (1, 2)]
    assert match(np.zeros((0, 3)), 0.2)[0].size == 0 and match(np.zeros((3, 3)), 0.2)[0].size == 0


# ------------------------------------------------------------------------------------------- the tracker
def test_birth_after_min_hits_and_ids_persist():
    tracker = ByteTracker(TrackerParams(min_hits=3))
    got = [frame(tracker, 0.1 * i, [box(100 + 10 * i, 300), box(700 - 10 * i, 300)]) for i in range(6)]
    assert got[0] == got[1] == [NO_TRACK, NO_TRACK]  # tentative for the first min_hits - 1 frames
    assert got[2] == got[3] == got[4] == got[5] and sorted(got[2]) == [1, 2]


def test_min_hits_one_confirms_at_birth():
    assert frame(ByteTracker(TrackerParams(min_hits=1)), 0.0, [box(100, 300)]) == [1]


def test_a_tentative_track_that_misses_a_frame_is_removed():
    tracker = ByteTracker(TrackerParams(min_hits=2))
    frame(tracker, 0.0, [box(100, 300)])
    frame(tracker, 0.1, [])
    assert len(tracker) == 0
    assert frame(tracker, 0.2, [box(100, 300)]) == [NO_TRACK]
    assert frame(tracker, 0.3, [box(100, 300)]) == [3 - 1]  # ids: 1 (removed), 2 (this one)


def test_loss_is_a_time_not_a_frame_count():
    """The same 1.2 s gap is survived with max_lost_s 1.5 at 10 and 30 Hz; 0.9 s of max_lost_s loses the track."""
    for rate in (10.0, 30.0):
        for max_lost_s, survives in ((1.5, True), (0.9, False)):
            tracker = ByteTracker(TrackerParams(max_lost_s=max_lost_s))
            t, ids = 0.0, []
            n = int(rate)  # one second seen, 1.2 s unseen, then seen again, walking at 100 px/s
            for i in range(n + int(1.2 * rate) + 3):
                t = i / rate
                seen = i < n or i >= n + int(1.2 * rate)
                ids.append(frame(tracker, t, [box(100 + 100 * t, 300)] if seen else []))
            first, last = ids[n - 1][0], ids[-1][0]
            assert first == 1
            assert (last == first) == survives, (rate, max_lost_s, ids[-4:])


def test_low_score_detections_keep_a_track_alive_but_never_start_one():
    params = TrackerParams(high_score=0.6, low_score=0.1)
    tracker = ByteTracker(params)
    for i in range(3):
        frame(tracker, 0.1 * i, [box(100 + 10 * i, 300)], [0.9])
    # three frames of a low score (partly hidden): still track 1
    assert [frame(tracker, 0.1 * i, [box(100 + 10 * i, 300)], [0.3])[0] for i in range(3, 6)] == [1, 1, 1]
    # a low-score detection far from any track starts nothing
    assert frame(tracker, 0.6, [box(160, 300), box(900, 300)], [0.9, 0.3]) == [1, NO_TRACK]
    assert len(tracker) == 1
    # below low_score: ignored, the track is lost, not continued
    assert frame(tracker, 0.7, [box(170, 300)], [0.05]) == [NO_TRACK]


def test_the_second_association_needs_more_overlap():
    """Low-score detections match only with IoU >= 0.5 (ByteTrack), high-score ones from min_iou (0.2)."""
    for score, matched in ((0.9, True), (0.3, False)):
        tracker = ByteTracker(TrackerParams(min_hits=1))
        frame(tracker, 0.0, [box(100, 300)])
        # shifted by 0.45 of the width: IoU ~0.38
        assert (frame(tracker, 0.0, [box(127, 300)], [score])[0] == 1) == matched


def test_classes_never_share_a_track():
    tracker = ByteTracker(TrackerParams(min_hits=1))
    assert frame(tracker, 0.0, [box(100, 300)], classes=[2]) == [1]
    assert frame(tracker, 0.1, [box(100, 300)], classes=[5]) == [2]


def test_crossing_paths_keep_their_ids():
    tracker = ByteTracker(TrackerParams())
    ids = []
    for i in range(40):  # two people crossing on the same line at 10 Hz, 180 px/s each way
        t = i / 10
        ids.append(frame(tracker, t, [box(100 + 180 * t, 400), box(800 - 180 * t, 400, 56, 140)]))
    assert all(f == [1, 2] for f in ids[1:]), ids


@pytest.mark.parametrize("jump_s, reason", [(-3.0, "back"), (2.0, "forward")])
def test_a_stamp_jump_resets_and_no_id_survives(jump_s, reason):
    tracker = ByteTracker(TrackerParams(max_lost_s=1.5))
    for i in range(5):
        frame(tracker, 10.0 + 0.1 * i, [box(100, 300)])
    assert frame(tracker, 10.5, [box(100, 300)]) == [1] and tracker.reset_reason is None
    t = 10.5 + jump_s
    assert frame(tracker, t, [box(100, 300)]) == [NO_TRACK]
    assert tracker.resets == 1 and f"jumped {reason}" in tracker.reset_reason
    assert frame(tracker, t + 0.1, [box(100, 300)]) == [2]  # a new id, never the old one
    assert tracker.reset_reason is None


def test_a_gap_within_max_lost_is_no_reset():
    tracker = ByteTracker(TrackerParams(max_lost_s=1.5))
    frame(tracker, 0.0, [box(100, 300)])
    frame(tracker, 0.1, [box(100, 300)])
    assert frame(tracker, 1.5, [box(100, 300)]) == [1] and tracker.resets == 0


def test_reset_forgets_tracks_and_keeps_counting_ids():
    tracker = ByteTracker(TrackerParams(min_hits=1))
    assert frame(tracker, 0.0, [box(100, 300)]) == [1]
    tracker.reset()
    assert len(tracker) == 0
    assert frame(tracker, 0.0, [box(100, 300)]) == [2]  # same stamp after a reset: fine, and a new id


def test_empty_frames_and_no_detections():
    tracker = ByteTracker(TrackerParams())
    assert frame(tracker, 0.0, []) == []
    frame(tracker, 0.1, [box(100, 300)])
    frame(tracker, 0.2, [box(100, 300)])
    assert frame(tracker, 0.3, []) == [] and tracker.confirmed_count == 1


# ------------------------------------------------------------------------------------------- what is published
def test_track_frame_publishes_the_same_set_with_track_ids():
    tracker = ByteTracker(TrackerParams(high_score=0.5, low_score=0.1))
    kps = np.zeros((3, 2, 3), np.float32)
    kps[:, :, 0] = np.arange(3)[:, None]
    published = []
    for i in range(3):
        dets = Detections(boxes=np.array([box(100 + 5 * i, 300), box(500, 300), box(900, 300)], np.float32),
                          scores=np.array([0.9, 0.4, 0.2], np.float32), class_ids=np.zeros(3, np.int32), keypoints=kps)
        published.append(track_frame(tracker, T0 + i * S // 10, dets, score_threshold=0.35))
    out, ids = published[0]
    assert len(out) == 2 and ids == ["", ""]  # 0.2 is below score_threshold: fed to the tracker only
    out, ids = published[2]
    np.testing.assert_array_equal(out.scores, np.float32([0.9, 0.4]))
    np.testing.assert_array_equal(out.keypoints[:, 0, 0], [0, 1])  # keypoints follow their detection
    assert ids == ["1", ""]  # 0.4 is below high_score: never starts a track


def test_tracking_parameters_in_the_schema():
    values = config.validate({"tracking.enabled": True, "score_threshold": 0.4, "tracking.low_score": 0.1})
    assert config.postprocess_params(values).score_threshold == pytest.approx(0.1)
    assert config.tracker_params(values) == TrackerParams()
    off = config.validate({"score_threshold": 0.4})
    assert config.postprocess_params(off).score_threshold == pytest.approx(0.4) and config.tracker_params(off) is None
    assert config.postprocess_params(config.validate({"tracking.enabled": True, "tracking.low_score": 0.5,
                                                      "tracking.high_score": 0.6})).score_threshold == pytest.approx(0.35)
    with pytest.raises(ConfigError, match="'tracking.low_score' = 0.7 must not exceed 'tracking.high_score' = 0.5"):
        config.validate({"tracking.low_score": 0.7, "tracking.high_score": 0.5})
    assert all(config.SCHEMA[n].read_only for n in config.SCHEMA if n.startswith("tracking."))
    assert config.SCHEMA["tracking.enabled"].default is False
