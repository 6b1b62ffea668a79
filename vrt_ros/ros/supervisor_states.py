"""The ``--warm-standby`` supervisor's states and restart back-off (issue 33): a pure table, no processes, no ROS.

:class:`~vrt_ros.ros.standby.Supervisor` feeds it what it sees (its children's reports and ends, the signals it got,
the clock) and does what it answers; everything here is testable with plain calls.

States (of the node's side; a standby is tracked beside them, :attr:`Machine.standby_ready`):

- ``starting``: an active child was started (cold) or told ``go`` and has not reported its node(s) yet;
- ``running``: the active child's node(s) are up (it reported), no standby is ready;
- ``standby_ready``: as ``running``, and a standby is waiting for ``go`` with its imports done;
- ``backing_off``: the active child ended with a status that is restarted (3, or a death by a signal); the restart
  waits :meth:`Backoff.delay` seconds;
- ``stopping``: a stop (SIGINT / SIGTERM) came, or the active child ended with a status that is not restarted; no
  child is started or told ``go`` from here on (every transition out of it is refused: it is absorbing).

Back-off: the first restart after a healthy run waits ``base_s`` (``--restart-delay``); each further restart of a
node that did not run healthy (it never reported, or it ended less than ``healthy_s`` after its report) doubles it:
``max(base_s, MIN_STEP_S) * 2**k`` for the k-th restart in a row (k >= 1), at most ``max_s``. A run of ``healthy_s``
after the report resets it. ``MIN_STEP_S`` keeps ``--restart-delay 0`` from restarting at a constant rate for ever.
"""

from __future__ import annotations

from enum import Enum

from vrt_ros.faults import EXIT_FATAL


class State(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    STANDBY_READY = "standby_ready"
    BACKING_OFF = "backing_off"
    STOPPING = "stopping"


#: The smallest doubling step of the back-off (s), for ``--restart-delay 0``.
MIN_STEP_S = 0.25

S = State
#: (state, event) -> next state. An event missing here for a state is refused (:class:`Refused`); ``stop`` from any
#: state, and every event in ``stopping``, lead to ``stopping``.
TABLE: dict[tuple[State, str], State] = {
    (S.STARTING, "reported"): S.RUNNING,
    (S.STARTING, "ended_restart"): S.BACKING_OFF,
    (S.STARTING, "ended_final"): S.STOPPING,
    (S.STARTING, "takeover_timeout"): S.STARTING,  # the hung standby killed, a cold start
    (S.STARTING, "standby_ready"): S.STARTING,
    (S.STARTING, "standby_lost"): S.STARTING,
    (S.RUNNING, "reported"): S.RUNNING,  # a later report (what its frames imported)
    (S.RUNNING, "standby_ready"): S.STANDBY_READY,
    (S.RUNNING, "ended_restart"): S.BACKING_OFF,
    (S.RUNNING, "ended_final"): S.STOPPING,
    (S.STANDBY_READY, "reported"): S.STANDBY_READY,
    (S.STANDBY_READY, "standby_lost"): S.RUNNING,
    (S.STANDBY_READY, "ended_restart"): S.BACKING_OFF,
    (S.STANDBY_READY, "ended_final"): S.STOPPING,
    (S.BACKING_OFF, "standby_ready"): S.BACKING_OFF,
    (S.BACKING_OFF, "standby_lost"): S.BACKING_OFF,
    (S.BACKING_OFF, "delay_elapsed"): S.STARTING,
}


class Refused(RuntimeError):
    """An event the current state does not take (a bug in the supervisor's loop, never a child's doing)."""


def restarted(status: int) -> bool:
    """Whether a child's ``Popen.returncode`` is restarted: a fatal fault (:data:`~vrt_ros.faults.EXIT_FATAL`) or a
    death by a signal (negative: a crash, or the OOM killer's SIGKILL)."""
    return status == EXIT_FATAL or status < 0


class Backoff:
    """The restart delay (see the module docstring).

    Args:
        base_s: the first delay, s (``--restart-delay``, >= 0).
        max_s: the longest delay, s (``--restart-delay-max``).
        healthy_s: a node that ran this long after its report resets the back-off, s (``--restart-healthy``).
    """

    def __init__(self, base_s: float, max_s: float, healthy_s: float) -> None:
        self.base_s, self.max_s, self.healthy_s = float(base_s), max(float(max_s), float(base_s)), float(healthy_s)
        self.in_a_row = 0  # restarts in a row after runs that were not healthy

    def delay(self, ran_s: float | None) -> tuple[float, str]:
        """The delay before the next restart, and why, given how long the node ran after its report (None: it
        never reported). Counts this restart."""
        if ran_s is not None and ran_s >= self.healthy_s:
            self.in_a_row = 0
        k, self.in_a_row = self.in_a_row, self.in_a_row + 1
        if k == 0:
            return self.base_s, "restart delay"
        how = "never reported its node(s) up" if ran_s is None else f"ran {ran_s:.1f} s < {self.healthy_s:g} s"
        return (min(self.max_s, max(self.base_s, MIN_STEP_S) * 2 ** k),
                f"restart {k + 1} in a row without a healthy run (the last {how})")


class Machine:
    """The supervisor's state (see the module docstring); :meth:`on` applies an event."""

    def __init__(self) -> None:
        self.state = State.STARTING
        self.standby_ready = False  # a standby waits for go, imports done (in any state but stopping)
        self.history: list[tuple[State, str, State]] = []

    @property
    def stopping(self) -> bool:
        return self.state is State.STOPPING

    def on(self, event: str) -> State:
        """Apply ``event``: ``reported``, ``standby_ready``, ``standby_lost``, ``ended_restart``, ``ended_final``,
        ``delay_elapsed``, ``takeover_timeout`` or ``stop``. Returns the new state.

        Raises:
            Refused: the state does not take the event (``stopping`` takes every one and stays).
        """
        before = self.state
        if event == "stop" or before is State.STOPPING:
            after = State.STOPPING
        elif (before, event) in TABLE:
            after = TABLE[(before, event)]
        else:
            raise Refused(f"supervisor state {before.value} does not take {event!r}")
        if event == "standby_ready":
            self.standby_ready = True
        elif event in ("standby_lost", "delay_elapsed"):  # delay_elapsed: the standby is used (or none was there)
            self.standby_ready = False
        if after is State.RUNNING and self.standby_ready:
            after = State.STANDBY_READY
        self.state = after
        self.history.append((before, event, after))
        return after

    def may_start(self) -> bool:
        """Whether a child may be started or told ``go`` now (never once stopping)."""
        return not self.stopping
