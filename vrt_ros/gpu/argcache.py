"""Kernel argument tuples built once per distinct frame geometry (no numpy scalars created per frame).

The arguments of a frame's launches depend only on the frame's geometry and encoding, the device buffers (fixed
per geometry) and the thresholds, which change rarely. :class:`ArgCache` keeps the tuples keyed by those values,
so a steady stream of frames reuses them. Pure Python (no CUDA import), so it is tested on any machine.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

#: Distinct keys kept before the cache is emptied (a camera changing resolution or thresholds every frame would
#: otherwise grow it without bound).
CAPACITY = 16


class ArgCache:
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
