"""``--warm-standby`` (vrt_ros.ros.standby, issue 27): the supervisor and its children, with real child processes
that speak the real protocol (``child_link``), no ROS. The node under it: test/test_bench_recovery_respawn.py.

Each child appends one JSON line per event to a log file: ``start`` (its pid and role), ``go`` (a standby's
take-over: the restart number, and whether the module the active child had imported was imported before ``go``),
``exit`` (its status)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vrt_ros.faults import EXIT_FATAL
from vrt_ros.ros import standby

# A module no child imports unless told: the active child imports it before its report, so a standby that has it
# before ``go`` got it from the supervisor's ``import`` line.
MARKER = "colorsys"

CHILD = textwrap.dedent('''
    import json, os, signal, sys, time
    time.sleep(float(os.environ.get("CHILD_IMPORT_S", "0")))  # a node's imports, before it could set anything
    import importlib
    from vrt_ros.ros import standby
    LOG, PLAN = sys.argv[1], sys.argv[2].split(",")  # per process started, in order: what it does
    def log(**row):
        with open(LOG, "a") as f:
            f.write(json.dumps(dict(pid=os.getpid(), **row)) + "\\n")
    def stop(signum, frame):
        log(event="signal", signum=signum)
        log(event="exit", status=0)
        os._exit(0)
    signal.signal(signal.SIGINT, stop)
    link = standby.child_link()
    log(event="start", role=link.role)
    if link.standby:
        def importer(name):
            importlib.import_module(name)
            log(event="imported", name=name)
        if not link.wait_for_go(importer):
            log(event="exit", status=0, reason="no go")
            sys.exit(0)
        log(event="go", restart=link.restart, marker_before_go={marker!r} in sys.modules)
    n = sum(1 for line in open(LOG) if '"go"' in line or '"role": "active"' in line) - 1  # this process's turn
    action = PLAN[min(n, len(PLAN) - 1)]
    if action != "crash_before_report":
        import {marker}
        link.report()
    time.sleep(float(os.environ.get("CHILD_RUN_S", "1.0")))  # the standby starts and imports meanwhile
    if action == "wait":
        while True:
            time.sleep(0.1)
    if action.startswith("crash"):
        log(event="exit", status=-9)
        os.kill(os.getpid(), signal.SIGKILL)
    status = {{"fatal": 3, "ok": 0, "startup": 2}}[action]
    log(event="exit", status=status)
    os._exit(status)
''').format(marker=MARKER)


def _events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _supervise(tmp_path: Path, plan: str, delay_s: float = 0.2) -> tuple[int, list[dict], list[str]]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    log = tmp_path / "events.jsonl"
    lines: list[str] = []
    sup = standby.Supervisor([sys.executable, str(script), str(log), plan], delay_s, log=lines.append)
    status = sup.run()
    return status, _events(log), lines


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_imported_names_roots_in_order_and_every_vrt_ros_module():
    names = ["sys", "numpy", "numpy.core", "vrt_ros", "vrt_ros.ros.main", "torch", "torch.nn", "_io", "__main__",
             "pytest", "_pytest.main"]
    assert standby.imported_names(names) == ["sys", "numpy", "vrt_ros", "vrt_ros.ros.main", "torch"]


def test_exit_status_of_a_death_by_signal_is_128_plus_the_signal():
    assert standby.exit_status(-9) == 137 and standby.exit_status(3) == 3 and standby.exit_status(0) == 0


def test_a_fatal_exit_hands_over_to_the_standby_which_had_the_active_childs_imports(tmp_path):
    """Status 3: after the delay the standby (started after the active child's report, told to import what it
    had imported) takes over as restart 1; its own end (status 0) ends the supervisor with 0."""
    status, events, lines = _supervise(tmp_path, "fatal,ok", delay_s=0.3)
    assert status == 0, (events, lines)
    starts = [e for e in events if e["event"] == "start"]
    assert [e["role"] for e in starts] == ["active", "standby", "standby"]  # the 2nd's standby came after its report
    first, second, third = (e["pid"] for e in starts)
    go = [e for e in events if e["event"] == "go"]
    assert go == [{"pid": second, "event": "go", "restart": 1, "marker_before_go": True}]
    exits = {e["pid"]: e["status"] for e in events if e["event"] == "exit"}
    assert exits[first] == EXIT_FATAL and exits[second] == 0
    assert exits[third] == 0 and not _alive(third)  # the last standby told to end (end of file), and reaped
    assert any("ended with status 3; restart 1 in 0.3 s" in line for line in lines)
    assert any(f"standby process {second} takes over" in line for line in lines)


def test_each_fatal_exit_in_a_row_takes_a_new_standby(tmp_path):
    status, events, lines = _supervise(tmp_path, "fatal,fatal,fatal,ok")
    assert status == 0, lines
    assert [e["restart"] for e in events if e["event"] == "go"] == [1, 2, 3]
    assert all(e["marker_before_go"] for e in events if e["event"] == "go")
    assert not any("starts cold" in line for line in lines)


@pytest.mark.parametrize("plan, expected", [("ok", 0), ("startup", 2)])
def test_no_restart_after_an_orderly_end_or_a_start_up_failure(tmp_path, plan, expected):
    status, events, lines = _supervise(tmp_path, plan)
    assert status == expected
    assert not [e for e in events if e["event"] == "go"] and not any("restart" in line for line in lines)
    standbys = [e["pid"] for e in events if e["event"] == "start" and e["role"] == "standby"]
    assert all(not _alive(pid) for pid in standbys)


def test_a_crash_is_restarted_and_a_child_that_died_before_its_report_is_started_cold(tmp_path):
    """SIGKILL (a crash, the OOM killer) is restarted like status 3; the child died before it reported its imports,
    so no standby was there: a new process starts cold (role active), then the plan's next child ends it."""
    status, events, lines = _supervise(tmp_path, "crash_before_report,ok")
    assert status == 0, lines
    assert [e["role"] for e in events if e["event"] == "start"][:2] == ["active", "active"]
    assert any("ended with status 137" in line for line in lines)
    assert any("no standby ready: a new process starts cold" in line for line in lines)


def test_sigint_to_the_supervisor_goes_to_the_active_child_and_ends_it_without_a_restart(tmp_path):
    """Ctrl-C / launch's SIGINT: the active child gets it (it runs in its own session, so only from the
    supervisor), ends with 0, and the supervisor returns 0 without a restart; the standby ends."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    log = tmp_path / "events.jsonl"
    code = (f"import sys; from vrt_ros.ros.standby import Supervisor; "
            f"sys.exit(Supervisor([sys.executable, {str(script)!r}, {str(log)!r}, 'wait'], 0.2).run())")
    env = dict(os.environ, CHILD_RUN_S="0.2")
    sup = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end and len([e for e in _events(log) if e["event"] == "start"]) < 2:
            time.sleep(0.05)  # the active child and its standby are up
        sup.send_signal(signal.SIGINT)
        assert sup.wait(30) == 0, sup.stderr.read()
    finally:  # a failure leaves nothing behind: the children, then the supervisor
        for pid in [e["pid"] for e in _events(log) if e["event"] == "start"] + [sup.pid]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        sup.wait(10)
    events = _events(log)
    active = next(e["pid"] for e in events if e["event"] == "start" and e["role"] == "active")
    assert {"pid": active, "event": "signal", "signum": signal.SIGINT} in events
    standbys = [e["pid"] for e in events if e["event"] == "start" and e["role"] == "standby"]
    assert len(standbys) == 1 and {"pid": standbys[0], "event": "exit", "status": 0, "reason": "no go"} in events
    assert "restart" not in sup.stderr.read()


def test_child_link_is_none_outside_a_supervisor(monkeypatch):
    monkeypatch.delenv(standby.FD_ENV, raising=False)
    assert standby.child_link() is None
