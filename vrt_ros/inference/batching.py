"""Batch assembly for a node's cameras: which waiting frames form the next batch, and how long to wait for more.

Pure Python (no ROS, no GPU): the worker (:mod:`vrt_ros.ros.worker`) holds the frames and the lock, and asks a
:class:`BatchPlanner`, fed with each frame's arrival time:

- **which**: :meth:`BatchPlanner.pick` takes up to ``max_batch`` of the cameras that have a frame waiting, in turn
  from the camera after the last one served, so with more cameras than ``max_batch`` every camera is served within
  ``ceil(cameras / max_batch)`` batches (no starvation);
- **when**: :meth:`BatchPlanner.wait_s` says how much longer to wait for other cameras' frames. Never beyond
  ``input.batch_wait_ms`` after the OLDEST waiting frame arrived (a frame that already waited while the engine was
  busy gets no extra wait), never when the batch is full, and only for a camera expected within that bound: one
  whose next frame is due (its last arrival + its period, an average of its arrival intervals) before the deadline,
  and that is not overdue by more than a period (a silent or much slower camera is not waited for: another camera's
  latency does not depend on it, handed case HC-18). ``batch_wait_ms`` 0 (the default): never wait.

The staleness check (``input.max_age_ms``) runs per frame when the batch is formed, after any wait (the worker's).
"""

from __future__ import annotations

from typing import Sequence

#: Weight of the newest arrival interval in a camera's period estimate (exponential moving average).
PERIOD_WEIGHT = 0.25
#: An interval longer than this many periods is a gap (a camera that paused), not a rate change: the estimate
#: restarts from the next interval.
GAP_PERIODS = 4.0


class BatchPlanner:
    """Turn-taking and the wait bound of one worker's batches (module docstring).

    Args:
        cameras: number of cameras (indices ``0 .. cameras - 1``, the worker's order).
        max_batch: most frames per batch (the pipeline's ``max_batch``, >= 1).
        wait_ms: ``input.batch_wait_ms``, >= 0.

    Attributes:
        periods: estimated seconds between two frames, per camera (0: not known yet).
        last: ``time.monotonic()`` of each camera's last arrival, s (-inf before the first).
    """

    def __init__(self, cameras: int, max_batch: int, wait_ms: float = 0.0) -> None:
        if cameras < 1 or max_batch < 1 or wait_ms < 0:
            raise ValueError(f"BatchPlanner needs cameras >= 1, max_batch >= 1, wait_ms >= 0; got {cameras}, "
                             f"{max_batch}, {wait_ms}")
        self.cameras = int(cameras)
        self.max_batch = int(max_batch)
        self.wait_s_max = float(wait_ms) / 1e3
        self.periods = [0.0] * self.cameras
        self.last = [float("-inf")] * self.cameras
        self._turn = 0

    def arrived(self, cam: int, t: float) -> None:
        """A frame of camera ``cam`` arrived at ``t`` (monotonic s): updates its period estimate."""
        prev, period = self.last[cam], self.periods[cam]
        self.last[cam] = t
        if prev == float("-inf"):
            return
        interval = t - prev
        if interval <= 0:
            return
        if period <= 0 or interval > GAP_PERIODS * period:
            self.periods[cam] = interval if period <= 0 else 0.0  # first interval, or restart after a gap
            return
        self.periods[cam] = (1 - PERIOD_WEIGHT) * period + PERIOD_WEIGHT * interval

    def pick(self, ready: Sequence[int]) -> list[int]:
        """Up to ``max_batch`` of the cameras in ``ready`` (those with a frame waiting), in turn; advances the turn
        past the last one picked. Returns them in turn order (the batch's slot order)."""
        waiting = set(ready)
        chosen = []
        for k in range(self.cameras):
            cam = (self._turn + k) % self.cameras
            if cam in waiting:
                chosen.append(cam)
                if len(chosen) == self.max_batch:
                    break
        if chosen:
            self._turn = (chosen[-1] + 1) % self.cameras
        return chosen

    def expected(self, cam: int, deadline: float, now: float) -> bool:
        """Camera ``cam``'s next frame is due by ``deadline`` and it is not overdue by more than a period."""
        period = self.periods[cam]
        if period <= 0:
            return False
        due = self.last[cam] + period
        return due <= deadline and now <= due + period

    def wait_s(self, ready: Sequence[int], oldest_arrival: float, now: float) -> float:
        """Seconds to keep waiting before taking the frames in ``ready`` (0: take them now).

        Args:
            ready: cameras with a frame waiting.
            oldest_arrival: arrival of the oldest waiting frame, monotonic s.
            now: monotonic s.
        """
        if self.wait_s_max <= 0 or self.max_batch == 1 or len(ready) >= min(self.max_batch, self.cameras):
            return 0.0
        deadline = oldest_arrival + self.wait_s_max
        if now >= deadline:
            return 0.0
        waiting = set(ready)
        if any(self.expected(c, deadline, now) for c in range(self.cameras) if c not in waiting):
            return deadline - now
        return 0.0
