"""Waking the executor from the node's worker thread: a guard condition, or a flag the spin loop serves.

The worker thread must not touch subscriptions or lifecycle transitions itself; it asks the executor's thread to
(unsubscribe after a fatal fault; deactivate a managed node). rclpy's executors do that with a guard condition.
rclpy's ``EventsExecutor`` (``rclpy.experimental``, Jazzy 7.1) refuses guard conditions ("Guard conditions not
supported", raised from ``spin_once``), so a node made for it gets a :class:`PolledWakeup`: ``trigger`` sets a
flag, and the process's spin loop calls :meth:`PolledWakeup.run_pending` between two ``spin_once`` calls (the
executor's thread, no callback running), so the reaction comes within one spin timeout instead of at once.
"""

from __future__ import annotations

import threading
from typing import Callable


class PolledWakeup:
    """A guard condition's stand-in: ``trigger()`` from any thread, ``run_pending()`` from the spin loop.

    Args:
        callback: what the guard condition would call in the executor (no arguments).
    """

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback
        self._pending = threading.Event()

    def trigger(self) -> None:
        """Ask for ``callback`` (any thread; several triggers before one ``run_pending`` run it once)."""
        self._pending.set()

    def run_pending(self) -> bool:
        """Run ``callback`` if triggered since the last call; True when it ran. Call from the executor's thread."""
        if not self._pending.is_set():
            return False
        self._pending.clear()
        self._callback()
        return True


def make_wakeup(node, callback: Callable[[], None], guard_conditions: bool):
    """A guard condition of ``node`` calling ``callback`` (``guard_conditions``), else a :class:`PolledWakeup`
    that the caller keeps and serves. Both have ``trigger()``."""
    if guard_conditions:
        return node.create_guard_condition(callback)
    return PolledWakeup(callback)


def run_pending(nodes) -> None:
    """Serve every :class:`PolledWakeup` of ``nodes`` (their ``wakeups()``); a no-op for guard conditions."""
    for node in nodes:
        for w in node.wakeups():
            if isinstance(w, PolledWakeup):
                w.run_pending()
