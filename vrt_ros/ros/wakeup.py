"""Waking the executor from the node's worker thread, under any rclpy executor.

The worker thread must not touch subscriptions or lifecycle transitions itself; it asks the executor's thread to
(unsubscribe after a fatal fault; deactivate a managed node). rclpy's usual tool is a guard condition, but rclpy's
``EventsExecutor`` (``rclpy.experimental``, Jazzy 7.1) refuses them ("Guard conditions not supported", raised from
``spin_once``). A timer works under every executor: :class:`Wakeup` creates a one-shot timer of period 0 from the
asking thread (``Node.create_timer`` wakes the executors the node is added to), and the timer's callback, in the
executor's thread, destroys the timer and runs the request. The timer runs on the steady clock, so a node with
``use_sim_time`` and a paused ``/clock`` is still woken.
"""

from __future__ import annotations

import threading
from typing import Callable

from rclpy.clock import Clock, ClockType


class Wakeup:
    """Run ``callback`` in the executor's thread, asked from any thread.

    Args:
        node: the rclpy node whose executor runs the callback (in the node's default callback group).
        callback: the request (no arguments).
    """

    def __init__(self, node, callback: Callable[[], None]) -> None:
        self._node = node
        self._callback = callback
        self._lock = threading.Lock()
        self._timer = None  # the pending one-shot timer, None when no request waits
        self._clock = Clock(clock_type=ClockType.STEADY_TIME)

    def trigger(self) -> None:
        """Ask for ``callback`` (any thread); triggers before it ran are one request."""
        with self._lock:
            if self._timer is None:
                self._timer = self._node.create_timer(0.0, self._fire, clock=self._clock)

    def _fire(self) -> None:
        with self._lock:  # trigger() holds it until the timer is stored, so this sees it
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            self._node.destroy_timer(timer)
        self._callback()
