"""Pairing depth frames with colour frames by stamp: a small ring of each camera's recent depth frames.

A colour frame stamped ``t`` pairs with the ring's depth frame whose stamp is nearest to ``t``, if it is within
``depth.max_skew_ms`` (``|t_depth - t| <= max_skew``; registered RGB-D drivers stamp both with the same time, so 0
is exact pairing). A colour frame that finds none may wait up to ``depth.wait_ms`` for its depth to arrive (0, the
default: never wait); it stops waiting as soon as a depth frame newer than ``t + max_skew`` arrived, since a later
one cannot pair better. Thread-safe: depth frames arrive on the executor's thread, colour frames are paired on the
worker's.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any


class DepthRing:
    """The ``capacity`` most recent depth frames of one camera, by stamp.

    Args:
        capacity: frames kept (the oldest is replaced), >= 1.
    """

    def __init__(self, capacity: int = 8) -> None:
        if capacity < 1:
            raise ValueError(f"depth ring capacity must be >= 1, got {capacity}")
        self._frames: deque[tuple[int, Any]] = deque(maxlen=int(capacity))
        self._cond = threading.Condition()

    def push(self, stamp_ns: int, item: Any) -> None:
        """Add a depth frame stamped ``stamp_ns`` (ns since the epoch); wakes a waiting :meth:`wait_match`."""
        with self._cond:
            self._frames.append((int(stamp_ns), item))
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._frames.clear()

    def __len__(self) -> int:
        with self._cond:
            return len(self._frames)

    def _nearest(self, stamp_ns: int, max_skew_ns: int) -> Any:
        best, best_skew = None, None
        for t, item in self._frames:
            skew = abs(t - stamp_ns)
            if skew <= max_skew_ns and (best_skew is None or skew < best_skew or (skew == best_skew and t >= stamp_ns)):
                best, best_skew = item, skew
        return best

    def match(self, stamp_ns: int, max_skew_ns: int) -> Any:
        """The depth frame nearest to ``stamp_ns`` within ``max_skew_ns`` (a tie: the later one), or None."""
        with self._cond:
            return self._nearest(int(stamp_ns), int(max_skew_ns))

    def wait_match(self, stamp_ns: int, max_skew_ns: int, timeout_s: float) -> Any:
        """As :meth:`match`, waiting up to ``timeout_s`` for a pairable frame while one may still come (no frame
        newer than ``stamp_ns + max_skew_ns`` arrived yet)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        stamp_ns, max_skew_ns = int(stamp_ns), int(max_skew_ns)
        with self._cond:
            while True:
                found = self._nearest(stamp_ns, max_skew_ns)
                left = deadline - time.monotonic()
                newest = max((t for t, _ in self._frames), default=None)
                if found is not None or left <= 0 or (newest is not None and newest > stamp_ns + max_skew_ns):
                    return found
                self._cond.wait(left)
