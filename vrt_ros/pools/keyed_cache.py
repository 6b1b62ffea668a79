"""Per-frame values built once per distinct key (frame geometry, encoding, buffers, thresholds), then reused.

What a frame needs beyond its pixels depends only on values that change rarely: the kernel launch arguments of the
GPU path (:mod:`vrt_ros.gpu.preprocess`, :mod:`vrt_ros.gpu.postprocess`) and the letterbox and scratch buffers of
the CPU path (:mod:`vrt_ros.intake.preprocess`). :class:`KeyedCache` keeps them keyed by those values, so a steady stream
of frames builds and allocates nothing. :class:`LruPool` keeps resources that must be released (staging and
decoded-image buffers per frame geometry), growing when the cameras' geometries outnumber it. Pure Python, part of
the core.
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


class LruPool:
    """Per-key resources (a frame geometry's staging buffers, decoded-image buffers, label images), the least
    recently used one evicted beyond ``capacity``; an evicted key that comes back means the cameras' working set is
    larger than the pool, so every frame would reallocate: the capacity then doubles, up to ``limit`` (logged), and
    only a stream of more than ``limit`` alternating keys (a camera changing resolution every frame) keeps
    reallocating. With a ``budget`` (:class:`vrt_ros.pools.buffer_budget.ByteBudget`) the bytes of the values (given to
    :meth:`add`) are bounded too, together with the other pools of that budget; values used since the budget's
    last ``begin()`` are never evicted for room.

    Args:
        capacity: keys kept at first (>= 1).
        limit: largest capacity it grows to (>= capacity).
        log: called with a line when the capacity grows.
        what: what the values are, for the log line.
        budget: optional byte bound shared with other pools.

    Attributes:
        allocations: values added (the first of each key, and each re-allocation after an eviction).
        reallocations: values added for a key that had been evicted before.
        nbytes: bytes of the values kept (as given to :meth:`add`).

    Raises:
        ValueError: ``capacity`` < 1 or ``limit`` < ``capacity``.
    """

    def __init__(self, capacity: int, limit: int, log: Callable[[str], None] = lambda m: None,
                 what: str = "buffers", budget: Any = None) -> None:
        if capacity < 1 or limit < capacity:
            raise ValueError(f"capacity {capacity} must be >= 1 and limit {limit} >= capacity")
        self.capacity, self.limit = capacity, limit
        self.allocations = self.reallocations = self.nbytes = 0
        self._log, self._what = log, what
        self._budget = budget
        # key -> [value, release, nbytes, epoch of its last use]; insertion order = least recently used first
        self._values: dict[Hashable, list] = {}
        self._evicted: dict[Hashable, bool] = {}  # keys evicted, oldest first (at most `limit` remembered)
        if budget is not None:
            budget.register(self)

    def _epoch(self) -> int:
        return self._budget.epoch if self._budget is not None else 0

    def get(self, key: Hashable) -> Any:
        """The value of ``key`` (now the most recently used, and held by the budget's current call), or None."""
        entry = self._values.pop(key, None)
        if entry is None:
            return None
        entry[3] = self._epoch()
        self._values[key] = entry
        return entry[0]

    def _release(self, key: Hashable) -> None:
        value, release, nbytes, _ = self._values.pop(key)
        release(key, value)
        self.nbytes -= nbytes
        if self._budget is not None:
            self._budget.give_back(nbytes)
        self._evicted[key] = True
        while len(self._evicted) > self.limit:
            del self._evicted[next(iter(self._evicted))]

    def evict_one(self) -> bool:
        """Release the least recently used value not held by the budget's current call; False when none is left."""
        epoch = self._epoch()
        for key, entry in self._values.items():
            if self._budget is None or entry[3] != epoch:
                self._release(key)
                return True
        return False

    def add(self, key: Hashable, build: Callable[[], Any], release: Callable[[Hashable, Any], None],
            nbytes: int = 0) -> Any:
        """Build and keep the value of ``key`` (absent); the least recently used values beyond the capacity (and,
        with a budget, as many as its bytes need) are released first (``release(key, value)``, the function given
        when that value was added), so the new one never coexists with them. Returns the value.

        Raises:
            FrameError: with a budget, ``nbytes`` do not fit beside the values its current call holds
                (:meth:`vrt_ros.pools.buffer_budget.ByteBudget.make_room`); nothing was built.
        """
        if self._evicted.pop(key, False):
            self.reallocations += 1
            if self.capacity < self.limit:
                self.capacity = min(2 * self.capacity, self.limit)
                self._log(f"{self._what}: more frame geometries alternate than were kept; keeping up to "
                          f"{self.capacity} (limit {self.limit})")
        while len(self._values) >= self.capacity:
            self._release(next(iter(self._values)))
        if self._budget is not None:
            self._budget.make_room(nbytes, self, self._what)
        value = build()
        self._values[key] = [value, release, nbytes, self._epoch()]
        self.nbytes += nbytes
        if self._budget is not None:
            self._budget.take(nbytes)
        self.allocations += 1
        return value

    def pop_all(self) -> list[Any]:
        """Every value (for the caller to release); the pool is empty afterwards."""
        values, self._values = [e[0] for e in self._values.values()], {}
        if self._budget is not None:
            self._budget.give_back(self.nbytes)
        self.nbytes = 0
        return values

    def __len__(self) -> int:
        return len(self._values)
