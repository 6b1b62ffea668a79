"""Per-frame values built once per distinct key (frame geometry, encoding, buffers, thresholds), then reused.

What a frame needs beyond its pixels depends only on values that change rarely: the kernel launch arguments of the
GPU path (:mod:`vrt_ros.gpu.preprocess`, :mod:`vrt_ros.gpu.postprocess`) and the letterbox and scratch buffers of
the CPU path (:mod:`vrt_ros.preprocess`). :class:`KeyedCache` keeps them keyed by those values, so a steady stream
of frames builds and allocates nothing. Pure Python, part of the core.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

#: Distinct keys kept before the cache is emptied (a camera changing resolution or thresholds every frame would
#: otherwise grow it without bound).
CAPACITY = 16


class KeyedCache:
    """Values built by ``build()`` on the first request of each key, then returned as they are.

    Args:
        capacity: distinct keys kept; on the next new key beyond it the cache is emptied first (>= 1).

    Attributes:
        builds: how many times a value was built (the tests check that steady frames build nothing).

    Raises:
        ValueError: ``capacity`` < 1.
    """

    def __init__(self, capacity: int = CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity {capacity} must be >= 1")
        self.capacity = capacity
        self.builds = 0
        self._values: dict[Hashable, Any] = {}

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The value for ``key``: cached, or ``build()`` stored under it (``key`` must be hashable)."""
        value = self._values.get(key)
        if value is None:
            if len(self._values) >= self.capacity:
                self._values.clear()
            value = self._values[key] = build()
            self.builds += 1
        return value

    def __len__(self) -> int:
        return len(self._values)
