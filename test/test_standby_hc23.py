"""Handed case HC-23 (issue 33): the ``--warm-standby`` supervisor under odd timing, with real child processes on
the real protocol (test/test_standby.py's ``CHILD``), no ROS: killed while its child starts; a stop during a spawn,
the restart delay and a take-over; a standby killed, or stopped (SIGSTOP), before a fault; a node that fails at
once, again and again. The supervisor runs in its own process (a hook in it puts a signal at an exact moment); its
lines and the children's events go to one file, in the order they happened."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from test_standby import CHILD, _alive, _events
from vrt_ros.ros import supervisor as sv

# What the supervisor's process runs: {hook} sets a signal at a moment; its lines go to the events file.
SUPERVISOR = '''
import json, os, signal, subprocess, sys
from vrt_ros.ros import supervisor as sv
script, LOG, plan, options = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
def say(text):
    with open(LOG, "a") as f:
        f.write(json.dumps(dict(pid=os.getpid(), event="log", text=text)) + "\\n")
def interrupt():
    os.kill(os.getpid(), signal.SIGINT)
log = say
{hook}
sys.exit(sv.Supervisor([sys.executable, script, LOG, plan], log=log, **options).run())
'''


def _tagged(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment holds ``tag``: the supervisor and every child it started."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if tag.encode() in (proc / "environ").read_bytes() and _alive(int(proc.name)):
                    out.append(int(proc.name))
            except OSError:
                pass
    return out


class Run:
    """The supervisor's process with ``plan`` (CHILD's), ``hook`` code and Supervisor ``options``."""

    def __init__(self, tmp_path: Path, plan: str, hook: str = "", env: dict | None = None, **options) -> None:
        (tmp_path / "child.py").write_text(CHILD)
        (tmp_path / "sup.py").write_text(SUPERVISOR.format(hook=hook))
        self.log, self.tag = tmp_path / "events.jsonl", f"VRT_HC23_{uuid.uuid4().hex}"
        options.setdefault("delay_s", 0.2)
        self.proc = subprocess.Popen(
            [sys.executable, str(tmp_path / "sup.py"), str(tmp_path / "child.py"), str(self.log), plan,
             json.dumps(options)], env={**os.environ, "CHILD_RUN_S": "0.5", **(env or {}), "VRT_HC23_TAG": self.tag},
            stderr=subprocess.PIPE, text=True)

    def events(self, kind: str | None = None) -> list[dict]:
        return [e for e in _events(self.log) if kind is None or e["event"] == kind]

    def lines(self) -> list[str]:
        return [e["text"] for e in self.events("log")]

    def wait_for(self, test, timeout_s: float = 30.0):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if (found := test()):
                return found
            time.sleep(0.02)
        raise AssertionError(f"not seen in {timeout_s} s: {self.events()}")

    def end(self, timeout_s: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout_s)
        finally:  # a failure leaves nothing behind
            for pid in _tagged(self.tag):
                os.kill(pid, signal.SIGKILL)
            self.proc.wait(10)
            self.proc.stderr.close()

    def nothing_left_within(self, seconds: float) -> list[int]:
        end = time.monotonic() + seconds
        while _tagged(self.tag) and time.monotonic() < end:
            time.sleep(0.05)
        return _tagged(self.tag)

    def starts_after_the_stop(self) -> list[str]:
        """Supervisor lines that start or wake a child after its ``stopping on`` line."""
        lines = self.lines()
        stop = next(i for i, line in enumerate(lines) if line.startswith("stopping on"))
        return [line for line in lines[stop:] if re.search(r"takes over|starts cold|standby process \d+ started",
                                                           line)]


@pytest.mark.parametrize("when", ["0.1 s after start", "as its first child starts"])
def test_HC_23_children_die_with_a_supervisor_killed_while_they_start(tmp_path, when):
    """SIGKILL to the supervisor while its child is still in its imports (CHILD_IMPORT_S: before any code of the
    child's could ask for anything): the kernel kills the child (PR_SET_PDEATHSIG set between fork and exec)."""
    run = Run(tmp_path, "wait", env={"CHILD_IMPORT_S": "5"})
    try:
        if when.startswith("0.1"):
            time.sleep(0.1)
        else:
            run.wait_for(lambda: [p for p in _tagged(run.tag) if p != run.proc.pid])
        run.proc.kill()
        run.proc.wait(10)
        assert run.nothing_left_within(2.0) == []
    finally:
        run.end()


@pytest.mark.parametrize("spawn, plan", [(1, "wait"), (2, "crash_before_report,wait")],
                         ids=["first child", "cold restart"])
def test_HC_23_a_stop_during_a_spawn_reaches_the_new_child(tmp_path, spawn, plan):
    """SIGINT while the supervisor starts a child (inside Popen): the new child gets it, everything ends, and no
    child is started after the stop."""
    hook = f'''
real = subprocess.Popen
class Popen(real):
    count = 0
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        Popen.count += 1
        if Popen.count == {spawn}:
            interrupt()
sv.subprocess.Popen = Popen
'''
    run = Run(tmp_path, plan, hook, env={"CHILD_RUN_S": "0"})
    try:
        status = run.proc.wait(20)
    finally:
        run.end()
    assert status is not None and run.nothing_left_within(2.0) == []
    assert run.starts_after_the_stop() == [], run.lines()
    assert len(run.events("start")) <= spawn  # the spawned one may have died before it logged


@pytest.mark.parametrize("delay_s", [0.0, 0.5])
def test_HC_23_a_stop_during_the_restart_delay_starts_nothing_and_ends_every_child(tmp_path, delay_s):
    """SIGINT as the supervisor logs the fatal exit (delay 0: the same turn as the take-over would be): no take-over,
    no cold start; the standby ends; the supervisor ends with the failed child's status."""
    hook = '''
def log(text):
    say(text)
    if "ended with status 3" in text:
        interrupt()
'''
    run = Run(tmp_path, "fatal,wait", hook, delay_s=delay_s)
    try:
        status = run.proc.wait(30)
    finally:
        run.end()
    assert status == 3 and run.nothing_left_within(2.0) == []
    assert run.events("go") == [] and run.starts_after_the_stop() == [], run.lines()
    standby = [e["pid"] for e in run.events("start") if e["role"] == "standby"]
    assert len(standby) == 1 and {"pid": standby[0], "event": "exit", "status": 0, "reason": "no go"} in run.events()


def test_HC_23_a_stop_during_a_take_over_reaches_the_standby_that_was_told_go(tmp_path):
    """SIGINT while the supervisor sends ``go``: the child that took over gets it and ends; nothing else starts."""
    hook = '''
real_send = sv._Child.send
def send(self, line):
    if line.startswith("go "):
        interrupt()
    return real_send(self, line)
sv._Child.send = send
'''
    run = Run(tmp_path, "fatal,wait", hook)
    try:
        status = run.proc.wait(30)
    finally:
        run.end()
    went = [int(m.group(1)) for x in run.lines() if (m := re.search(r"standby process (\d+) takes over", x))]
    assert status == 0 and len(went) == 1, run.events()  # it may get the stop before it reads go: it ends then
    assert {"pid": went[0], "event": "signal", "signum": signal.SIGINT} in run.events()
    assert run.nothing_left_within(2.0) == [] and run.starts_after_the_stop() == [], run.lines()


def test_HC_23_a_standby_killed_before_a_fault_is_reaped_replaced_and_the_new_one_takes_over(tmp_path):
    run = Run(tmp_path, "fatal,ok", env={"CHILD_RUN_S": "4"})
    try:
        first = run.wait_for(lambda: [e["pid"] for e in run.events("start") if e["role"] == "standby"])[0]
        os.kill(first, signal.SIGKILL)
        end = time.monotonic() + 2.0
        while Path(f"/proc/{first}").exists() and time.monotonic() < end:
            time.sleep(0.02)
        assert not Path(f"/proc/{first}").exists(), "the killed standby was not reaped (a zombie)"
        status = run.proc.wait(30)
    finally:
        run.end()
    standbys = [e["pid"] for e in run.events("start") if e["role"] == "standby"]
    assert status == 0 and len(standbys) >= 2 and standbys[0] == first
    assert [(e["pid"], e["restart"]) for e in run.events("go")] == [(standbys[1], 1)], run.events()
    assert any(f"standby process {first} ended with status 137 before it was needed" in x for x in run.lines())
    assert not any("starts cold" in x for x in run.lines())


def test_HC_23_a_hung_standby_is_killed_when_it_does_not_answer_go_and_a_cold_start_follows(tmp_path):
    run = Run(tmp_path, "fatal,ok", env={"CHILD_RUN_S": "3"}, takeover_s=1.0)
    try:
        hung = int(run.wait_for(lambda: [m for x in run.lines()
                                         if (m := re.search(r"standby process (\d+) ready", x))])[0].group(1))
        os.kill(hung, signal.SIGSTOP)  # ready (imports done): it has --takeover-timeout to answer go
        status = run.proc.wait(30)
    finally:
        run.end()
    lines = run.lines()
    assert status == 0, lines
    assert any(f"standby process {hung} did not take over: no answer to go within 1 s" in x for x in lines), lines
    assert any("no standby ready: a new process starts cold" in x for x in lines)
    assert [e["role"] for e in run.events("start")].count("active") == 2 and not Path(f"/proc/{hung}").exists()


def test_HC_23_a_node_that_fails_at_once_is_restarted_with_growing_delays_and_the_reason(tmp_path):
    """A child that dies before its node is up, every time, with --restart-delay 0.1: the delays double (from
    MIN_STEP_S) and each restart line says why; a stop during the 5th back-off ends it."""
    hook = '''
def log(text):
    say(text)
    if "restart 5 in" in text:
        interrupt()
'''
    run = Run(tmp_path, "crash_before_report", hook, env={"CHILD_RUN_S": "0"}, delay_s=0.1)
    try:
        status = run.proc.wait(60)
    finally:
        run.end()
    restarts = [x for x in run.lines() if "ended with status 137" in x]
    assert status == 137 and len(restarts) == 5 and len(run.events("start")) == 5, run.lines()
    delays = [float(re.search(r"backing off ([\d.]+) s", x).group(1)) for x in restarts]
    assert delays == [0.1, 0.5, 1.0, 2.0, 4.0]  # MIN_STEP_S 0.25 doubled, then doubled again
    assert "restart 5 in a row without a healthy run (the last never reported its node(s) up)" in restarts[-1]
