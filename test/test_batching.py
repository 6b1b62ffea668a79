"""Batch assembly (vrt_ros.inference.batching.BatchPlanner), pure: turn-taking, the wait bound, who is waited for (issue 21)."""

from __future__ import annotations

from collections import Counter

import pytest

from vrt_ros.inference.batching import BatchPlanner


def feed(planner: BatchPlanner, cam: int, start: float, period: float, n: int) -> float:
    t = start
    for _ in range(n):
        planner.arrived(cam, t)
        t += period
    return t - period


def test_more_cameras_than_max_batch_take_turns_without_starvation():
    p = BatchPlanner(cameras=5, max_batch=2)
    served = Counter()
    order = []
    for _ in range(10):  # every camera always has a frame waiting
        batch = p.pick(range(5))
        assert len(batch) == 2
        order.append(tuple(batch))
        served.update(batch)
    assert order[:3] == [(0, 1), (2, 3), (4, 0)]
    assert set(served.values()) == {4}  # 20 slots over 5 cameras: each served equally
    # a camera is served within ceil(5 / 2) = 3 batches of wanting it
    p = BatchPlanner(cameras=5, max_batch=2)
    last = {c: -1 for c in range(5)}
    for k in range(30):
        for c in p.pick(range(5)):
            assert k - last[c] <= 3
            last[c] = k


def test_pick_takes_only_waiting_cameras_in_turn_order():
    p = BatchPlanner(cameras=4, max_batch=4)
    assert p.pick([3, 1]) == [1, 3]
    assert p.pick([0, 1, 2, 3]) == [0, 1, 2, 3]  # the turn went past 3: starts at 0
    p = BatchPlanner(cameras=4, max_batch=1)  # max_batch 1: the node's old one-camera-in-turn order
    assert [p.pick([0, 1, 2, 3]) for _ in range(5)] == [[0], [1], [2], [3], [0]]


def test_zero_wait_never_waits():
    p = BatchPlanner(cameras=2, max_batch=2, wait_ms=0)
    feed(p, 1, 0.0, 0.033, 10)
    assert p.wait_s([0], oldest_arrival=0.33, now=0.33) == 0.0


def test_waits_for_a_camera_due_within_the_bound_and_never_beyond_it():
    p = BatchPlanner(cameras=2, max_batch=2, wait_ms=5.0)
    last_b = feed(p, 1, 0.0, 0.0333, 10)  # B at 30 Hz: next frame due at last_b + 33.3 ms
    due = last_b + 0.0333
    # A's frame arrives 3 ms before B's is due: wait, at most until A's frame is 5 ms old
    a = due - 0.003
    w = p.wait_s([0], oldest_arrival=a, now=a)
    assert w == pytest.approx(0.005)
    assert p.wait_s([0], oldest_arrival=a, now=a + 0.004) == pytest.approx(0.001)
    assert p.wait_s([0], oldest_arrival=a, now=a + 0.005) == 0.0  # the bound: never longer than batch_wait_ms
    # A's frame arrives 20 ms before B's is due: B is not expected within 5 ms, no wait
    assert p.wait_s([0], oldest_arrival=due - 0.020, now=due - 0.020) == 0.0
    # a full batch goes at once
    assert p.wait_s([0, 1], oldest_arrival=a, now=a) == 0.0


def test_a_frame_that_already_waited_gets_no_extra_wait():
    p = BatchPlanner(cameras=2, max_batch=2, wait_ms=5.0)
    last_b = feed(p, 1, 0.0, 0.010, 10)
    arrived = last_b + 0.002  # A's frame arrived; the engine was busy for 6 ms
    assert p.wait_s([0], oldest_arrival=arrived, now=arrived + 0.006) == 0.0


def test_a_silent_or_slow_camera_is_not_waited_for():
    """HC-18's rule: camera B at 5 Hz, then silent; A at 30 Hz never waits for B unless B is due within the bound."""
    p = BatchPlanner(cameras=2, max_batch=2, wait_ms=10.0)
    last_b = feed(p, 1, 0.0, 0.2, 6)  # B at 5 Hz
    # B silent: 10 s later, B is overdue by far more than its period
    t = last_b + 10.0
    assert not p.expected(1, t + 0.01, t)
    assert p.wait_s([0], oldest_arrival=t, now=t) == 0.0
    # B at 5 Hz, A's frame 100 ms before B is due: no wait
    t = last_b + 0.1
    assert p.wait_s([0], oldest_arrival=t, now=t) == 0.0
    # a camera never seen (no period yet) is not waited for
    q = BatchPlanner(cameras=3, max_batch=3, wait_ms=10.0)
    assert q.wait_s([0], oldest_arrival=1.0, now=1.0) == 0.0


def test_period_estimate_follows_the_rate_and_restarts_after_a_gap():
    p = BatchPlanner(cameras=1, max_batch=1)
    last = feed(p, 0, 0.0, 0.1, 20)
    assert p.periods[0] == pytest.approx(0.1)
    p.arrived(0, last + 5.0)  # a 5 s gap: not a rate
    assert p.periods[0] == 0.0
    p.arrived(0, last + 5.05)
    assert p.periods[0] == pytest.approx(0.05)


def test_bad_arguments():
    for args in ((0, 1, 0), (1, 0, 0), (1, 1, -1)):
        with pytest.raises(ValueError):
            BatchPlanner(*args)
