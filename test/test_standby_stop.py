"""A standby child (``--warm-standby``) waiting for ``go`` ends at once on a stop (vrt_ros.ros.standby, issue 33).

The child is a real process with the stop handling of a node process (``stop.install`` without ``raise_first``: the
signal records the request and raises nothing) and the real ``child_link``; the test holds the supervisor's end of
the socket and never says ``go``. Before the fix the wait's blocked read went on after SIGINT and only the stop's
1.5 s deadline ended the process (its line on stderr, the rest of ``main`` never ran).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vrt_ros.ros import stop
from vrt_ros.ros.supervisor import FD_ENV, ROLE_ENV

REPO = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent('''
    import sys
    from vrt_ros.ros import standby, stop
    stop.install("standby_child")
    stop.started_ros()  # as detector_node before its standby waits: from here a stop is an orderly one
    link = standby.child_link()
    print("waiting", flush=True)
    went = link.wait_for_go()
    print(f"wait_for_go returned {went}", flush=True)
    stop.end_process(0)
''')


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_standby_waiting_for_go_returns_on_a_stop_without_the_deadline(tmp_path, signum):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ours, theirs = socket.socketpair()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **{FD_ENV: str(theirs.fileno()), ROLE_ENV: "standby"})
    proc = subprocess.Popen([sys.executable, str(script)], env=env, pass_fds=(theirs.fileno(),),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    theirs.close()
    try:
        assert proc.stdout.readline().strip() == "waiting"
        ours.sendall(b"import colorsys\n")  # the wait is under way: it answers the import line
        assert ours.makefile("r").readline().strip() == "ready"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        ours.close()
    assert proc.returncode == 0, err
    assert "wait_for_go returned False" in out, f"the wait did not return; stderr: {err}"
    assert "stop:" not in err and "Traceback" not in err, err  # not ended by the deadline, no traceback


def test_a_stop_that_came_before_the_wait_ends_it_at_once(monkeypatch):
    """The request already recorded (a signal between the placeholder node and the wait): the wait ends without
    acting on what the supervisor sent (here a ``go``, already in the socket, which a wait blind to the stop takes)."""
    from vrt_ros.ros import standby

    ours, theirs = socket.socketpair()
    monkeypatch.setattr(stop, "_request", __import__("threading").Event())
    stop._request.set()
    try:
        ours.sendall(b"go 1\n")
        link = standby.ChildLink(theirs, "standby")
        assert link.wait_for_go() is False
        assert link._end_wait not in stop._state["wakers"]  # forgotten: the socket is the active child's later
    finally:
        ours.close()
        theirs.close()
