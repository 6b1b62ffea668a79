"""The ``--warm-standby`` supervisor's states and back-off (vrt_ros.ros.supervisor_states, issue 33): the pure
table, no process. The supervisor's processes: test/test_standby.py."""

from __future__ import annotations

import pytest

from vrt_ros.ros.supervisor_states import MIN_STEP_S, TABLE, Backoff, Machine, Refused, State, restarted

EVENTS = ("reported", "standby_ready", "standby_lost", "ended_restart", "ended_final", "delay_elapsed",
          "takeover_timeout")


def _machine(*events: str) -> Machine:
    m = Machine()
    for e in events:
        m.on(e)
    return m


def test_a_run_a_fault_and_a_take_over_go_through_every_state_but_stopping():
    m = Machine()
    assert m.state is State.STARTING and m.may_start()
    assert m.on("reported") is State.RUNNING
    assert m.on("standby_ready") is State.STANDBY_READY
    assert m.on("ended_restart") is State.BACKING_OFF and m.standby_ready
    assert m.on("delay_elapsed") is State.STARTING and not m.standby_ready  # the standby is the active one now
    assert m.on("reported") is State.RUNNING
    assert m.on("ended_final") is State.STOPPING and not m.may_start()


def test_a_standby_ready_before_the_take_over_answered_makes_running_standby_ready():
    assert _machine("ended_restart", "delay_elapsed", "standby_ready", "reported").state is State.STANDBY_READY
    assert _machine("reported", "standby_ready", "standby_lost").state is State.RUNNING


@pytest.mark.parametrize("state", list(State))
def test_a_stop_from_any_state_is_stopping_and_stopping_takes_every_event_and_starts_nothing(state):
    m = Machine()
    m.state = state
    assert m.on("stop") is State.STOPPING
    for event in EVENTS:
        assert m.on(event) is State.STOPPING and not m.may_start()


def test_HC_23_a_stop_during_the_restart_delay_is_never_followed_by_a_take_over():
    m = _machine("reported", "standby_ready", "ended_restart")
    m.on("stop")
    assert m.on("delay_elapsed") is State.STOPPING and not m.may_start()
    assert ("backing_off", "delay_elapsed", "starting") not in [(a.value, e, b.value) for a, e, b in m.history]


def test_events_a_state_does_not_take_are_refused():
    for state in State:
        for event in EVENTS:
            if state is not State.STOPPING and (state, event) not in TABLE:
                m = Machine()
                m.state = state
                with pytest.raises(Refused, match=event):
                    m.on(event)
    assert (State.RUNNING, "delay_elapsed") not in TABLE and (State.STARTING, "delay_elapsed") not in TABLE


def test_restarted_statuses_are_a_fatal_fault_and_a_death_by_signal():
    assert restarted(3) and restarted(-9) and restarted(-11)
    assert not restarted(0) and not restarted(2) and not restarted(1)


def test_HC_23_back_off_doubles_for_each_restart_without_a_healthy_run_up_to_the_max():
    b = Backoff(0.5, 6.0, healthy_s=1.0)
    delays = [b.delay(None)[0] for _ in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 6.0, 6.0]
    delay, why = b.delay(0.3)
    assert delay == 6.0 and "ran 0.3 s < 1 s" in why and "in a row" in why


def test_a_healthy_run_resets_the_back_off():
    b = Backoff(0.5, 30.0, healthy_s=1.0)
    assert [b.delay(0.1)[0] for _ in range(3)] == [0.5, 1.0, 2.0]
    assert b.delay(1.0) == (0.5, "restart delay")
    assert b.delay(None)[0] == 1.0


def test_a_zero_restart_delay_still_backs_off():
    b = Backoff(0.0, 30.0, healthy_s=1.0)
    assert [b.delay(None)[0] for _ in range(4)] == [0.0, 2 * MIN_STEP_S, 4 * MIN_STEP_S, 8 * MIN_STEP_S]
