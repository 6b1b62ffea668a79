"""Track ids never given twice and classes kept apart exactly (issue 34, HC-25 in the core): the id format of
vrt_ros.tracking.ids, a counter kept across trackers, class ids 9 999 / 10 000 at large coordinates, and frames
whose time is an estimate (unstamped) that never reset the tracks. No ROS, no GPU."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("scipy", reason="scipy not installed (runtime dependency of tracking: requirements/runtime.txt)")

from vrt_ros.tracking import ByteTracker, TrackerParams  # noqa: E402
from vrt_ros.tracking.ids import PER_EPOCH, TrackIds  # noqa: E402

S = 1_000_000_000
T0 = 1_700_000_000 * S


def one(tracker: ByteTracker, t_ns: int, box, cls: int = 0, estimated: bool = False) -> int:
    return int(tracker.update(t_ns, np.float32([box]), np.float32([0.9]), np.int32([cls]), estimated=estimated)[0])


def test_id_format_is_the_epoch_in_ms_and_the_count():
    before = time.time_ns() // 1_000_000
    ids = TrackIds()
    got = ids.take(3).tolist() + ids.take(1).tolist()
    after = time.time_ns() // 1_000_000
    epoch, n = divmod(got[0], PER_EPOCH)
    assert before <= epoch <= after and n == 1
    assert got == [epoch * PER_EPOCH + k for k in (1, 2, 3, 4)]
    assert max(got) < 2**63
    ids._n = PER_EPOCH - 2  # the epoch's last id, then a new epoch (later), counting from 1
    last, first = ids.take(2).tolist()
    assert last % PER_EPOCH == PER_EPOCH - 1 and first // PER_EPOCH > epoch and first % PER_EPOCH == 1
    assert TrackIds(0).take(3).tolist() == [1, 2, 3]


def test_counters_begun_in_different_milliseconds_never_share_an_id():
    a = TrackIds()
    first = set(a.take(500).tolist())
    time.sleep(0.002)
    b = TrackIds()  # a restarted process, or a standby taking over
    assert not first & set(b.take(500).tolist())


def test_a_counter_kept_across_trackers_never_gives_an_id_again():
    """What the node does across a managed node's cleanup and configure: a new tracker, the camera's counter."""
    ids = TrackIds()
    box = [100, 100, 160, 250]
    got = []
    for _ in range(2):
        tracker = ByteTracker(TrackerParams(min_hits=1), ids)
        got.append(one(tracker, T0, box))
    assert got[1] == got[0] + 1


@pytest.mark.parametrize("cls", [9_999, 10_000])
def test_large_class_ids_at_large_coordinates_track_like_class_0(cls):
    """A small object of class 9 999 or 10 000 moving slowly at x ~ 7000 px: the same ids as class 0 (the IoU is
    exact; with the class offset added in float32 the box collapsed to a multiple of 64 px and the track churned),
    and two classes at one place never share a track."""
    got = {}
    for c in (0, cls):
        tracker = ByteTracker(TrackerParams(min_hits=1))
        got[c] = [one(tracker, T0 + i * S // 30, [7000.3 + 0.7 * i, 4000.1, 7024.6 + 0.7 * i, 4031.7], c)
                  for i in range(30)]
    assert got[cls] == got[0] == [1] * 30
    tracker = ByteTracker(TrackerParams(min_hits=1))
    box = [7000.3, 4000.1, 7024.6, 4031.7]
    ids = [tracker.update(T0 + i * S // 30, np.float32([box, box]), np.float32([0.9, 0.9]),
                          np.int32([9_999, 10_000])).tolist() for i in range(5)]
    assert ids == [[1, 2]] * 5


def test_an_estimated_time_never_resets_the_tracks():
    """An unstamped frame timed by the node (``estimated``) a little after the next stamp: no reset, no time going
    back, the next stamped frame is checked against the last stamp, and the track keeps its id throughout."""
    tracker = ByteTracker(TrackerParams(min_hits=1))
    box = [100, 100, 160, 250]
    ids = [one(tracker, T0 + i * S // 10, box) for i in range(3)]
    ids.append(one(tracker, T0 + 3 * S // 10 + 120_000_000, box, estimated=True))  # 0.42 s: after the next stamp
    ids.append(one(tracker, T0 + 3 * S // 10 + 50_000_000, box, estimated=True))  # before the last: time held
    assert tracker._stamp_ns == T0 + 3 * S // 10 + 120_000_000
    ids += [one(tracker, T0 + i * S // 10, box) for i in range(4, 7)]  # 0.4 s: before the estimate, after 0.2 s
    assert ids == [1] * 8 and tracker.resets == 0
    assert one(tracker, T0, box) == 2 and tracker.resets == 1  # a measured stamp going back still resets
