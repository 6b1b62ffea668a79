"""Track ids that are never given twice: per camera for the node's life, and told apart across processes.

**Format** (``Detection2D.id`` and ``Detection3D.id`` are strings: the id is written in decimal)::

    id = epoch_ms * 1_000_000 + n

- ``n`` = 1, 2, 3, ...: the camera's tracks in order of birth (the last six digits);
- ``epoch_ms``: the wall-clock time, ms since 1970-01-01 UTC (``time.time_ns() // 10**6``), at which the counter
  gave its first id (the leading digits). After 999 999 tracks the counter takes a new epoch, ``max(now_ms,
  epoch_ms + 1)``, and counts from 1 again.

E.g. ``1796278412345000017`` is the 17th track of a counter begun at 2026-12-03 06:53:32.345 UTC. 19 digits, below
2**63 until the year 2262: it fits an int64 for consumers that parse it. Two counters' ranges are disjoint unless
they began in the same millisecond, so a restarted process, or a standby that takes over (it gives its first id
after the process it replaces stopped), never publishes an id the earlier process gave another object. Within one
process the node keeps one counter per camera for its whole life (also across a managed node's cleanup and
configure, and across the tracker's resets).

``epoch_ms=0`` (the core tracker's default, used by benchmarks and tests) gives the plain ``1, 2, 3, ...``.
"""

from __future__ import annotations

import time

import numpy as np

#: ids per epoch: ``n`` runs 1 .. PER_EPOCH - 1.
PER_EPOCH = 1_000_000


class TrackIds:
    """One camera's id counter (module docstring).

    Args:
        epoch_ms: the epoch, ms since 1970; None: the wall-clock time at the first id.
    """

    def __init__(self, epoch_ms: int | None = None) -> None:
        self.epoch_ms = epoch_ms
        self._n = 0

    def take(self, m: int) -> np.ndarray:
        """The next ``m`` ids, (m,) int64, increasing."""
        if self.epoch_ms is not None and self._n + m < PER_EPOCH:  # the usual case: one range
            first = self.epoch_ms * PER_EPOCH + self._n + 1
            self._n += m
            return np.arange(first, first + m, dtype=np.int64)
        out = np.empty(m, np.int64)
        for k in range(m):  # m is the number of tracks born this frame: a handful
            if self.epoch_ms is None:
                self.epoch_ms = time.time_ns() // 1_000_000
            if self._n + 1 >= PER_EPOCH:
                self.epoch_ms = max(time.time_ns() // 1_000_000, self.epoch_ms + 1)
                self._n = 0
            self._n += 1
            out[k] = self.epoch_ms * PER_EPOCH + self._n
        return out

    @property
    def given(self) -> int:
        """Ids given in the current epoch."""
        return self._n
