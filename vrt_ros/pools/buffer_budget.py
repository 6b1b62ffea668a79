"""A byte bound shared by the pools of buffers kept per frame geometry (issue 34): staging sets and the label images
of instance masks (:mod:`vrt_ros.gpu.upload`, :mod:`vrt_ros.gpu.label_images`).

Each pool (:class:`vrt_ros.pools.keyed_cache.LruPool`) bounds how many values it keeps; a camera whose frame size changes
on every frame would still make the bytes they hold grow with the largest sizes seen. A :class:`ByteBudget` caps
the bytes of every pool registered with it together: before a pool builds a value it asks the budget for room,
and the least recently used values of the pools (the asking pool's first) are released until the new one fits.

Values used by the pipeline call in progress are held: :meth:`ByteBudget.begin` starts a call, and a value
added or looked up since then is never released for room (a queued copy may still read it). When the held values
and the new one together exceed the bound, the new frame is refused with a :class:`~vrt_ros.errors.FrameError`
(reason :data:`FRAME_TOO_LARGE`) naming the bound's parameter: nothing was allocated for it and the node drops it.
Pure Python, part of the core.
"""

from __future__ import annotations

from typing import Protocol

from vrt_ros.errors import FrameError

#: Drop reason of a frame whose buffers do not fit the bound.
FRAME_TOO_LARGE = "frame_too_large"

MIB = 2**20


class Evicting(Protocol):
    """What the budget needs of a pool: release its least recently used value that is not held."""

    def evict_one(self) -> bool:
        """Release one value not held by the current call; False when there is none."""


class ByteBudget:
    """At most ``limit`` bytes held by the pools registered with it (device and pinned bytes counted alike).

    Args:
        limit: bytes (>= 1).
        name: what sets the limit, for the refusal message (e.g. ``engine.frame_buffers_mb``).

    Attributes:
        used: bytes held now.
        peak: the most bytes held at once.
        epoch: the current call (values used in it carry it and are held).
        refused: frames refused so far.

    Raises:
        ValueError: ``limit`` < 1.
    """

    def __init__(self, limit: int, name: str = "the frame buffer bound") -> None:
        if limit < 1:
            raise ValueError(f"limit {limit} must be >= 1 byte")
        self.limit, self.name = int(limit), name
        self.used = self.peak = self.refused = 0
        self.epoch = 1
        self._pools: list[Evicting] = []

    def register(self, pool: Evicting) -> None:
        """``pool``'s values count against this budget."""
        self._pools.append(pool)

    def begin(self) -> None:
        """A new pipeline call: what the previous one used may be released from now on."""
        self.epoch += 1

    def make_room(self, nbytes: int, first: Evicting, what: str) -> None:
        """Release values (``first``'s least recently used first, then the other pools') until ``nbytes`` more fit.

        Raises:
            FrameError: (reason :data:`FRAME_TOO_LARGE`) they cannot fit beside the values the call holds; nothing
                was released that the call holds.
        """
        for pool in (first, *(p for p in self._pools if p is not first)):
            while self.used + nbytes > self.limit and pool.evict_one():
                pass
        if self.used + nbytes > self.limit:
            self.refused += 1
            raise FrameError(
                f"{what} need {nbytes / MIB:.1f} MiB of device and pinned memory, but only "
                f"{(self.limit - self.used) / MIB:.1f} MiB of {self.name} ({self.limit / MIB:.0f} MiB) are left beside "
                f"the other frames of this batch; raise {self.name}", reason=FRAME_TOO_LARGE)

    def take(self, nbytes: int) -> None:
        """``nbytes`` were allocated (after :meth:`make_room`)."""
        self.used += nbytes
        self.peak = max(self.peak, self.used)

    def give_back(self, nbytes: int) -> None:
        """``nbytes`` were released."""
        self.used -= nbytes
