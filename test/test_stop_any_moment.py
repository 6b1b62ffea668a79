"""Issue 33 item 3: a stop at any moment is clean, for ``detector_node`` and ``replay``.

SIGINT or SIGTERM is sent to a real process (the node on the shared YOLOX-nano model and the CPU backend; ``replay``
on the shared raw bag, waiting for subscribers) at a dozen moments: from 0.05 s after start (through the imports,
``rclpy.init``, the model load, the node's set-up) to running, and during the shutdown that a first SIGINT began (a
second signal: what ``ros2 launch`` forwards after the terminal's Ctrl-C). Each run must end with status 0 (a
requested stop, README "Stopping"), within 2 s of the signal, with no traceback (nor the thread stacks of :mod:`vrt_ros.ros.stop`'s hard deadline, the sign of a process deaf to
the stop), and leave no child process behind. The stop's own deadline (1.5 s: a start-up step that has not returned
is not waited for) is allowed only for a node still starting (on a loaded machine the model load alone can take
longer); a running node (its executor line logged) and ``replay`` must end by themselves, a running node through its
teardown (its summary line).

"0.05 s after start" counts from the moment the process can handle the signal: a signal that arrives while the
interpreter itself starts (about 45 ms here, before any line of the package runs) gets Python's default action,
which no code of ours can change, so each send waits until ``/proc/PID/status`` shows SIGINT and SIGTERM caught by
the process (``SigCgt``; Python catches SIGINT from its start, SIGTERM only once vrt_ros.ros.stop is installed).

The moments run a few at a time (each process is mostly start-up); the whole file takes about 30 s on 2 cores.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[1]
#: The brief's bound from the signal to the end of the process (s). Measured by this test on the machine's monotonic
#: clock (the child's clock too); its uncertainty is this test's own wake-up after the child's exit (POLL_S).
STOP_BOUND_S = 2.0
POLL_S = 0.01
#: Seconds after start (after the signal can be handled, see the module docstring) of the single-signal moments.
NODE_MOMENTS = (0.05, 0.12, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.2)
#: The node's log line once its model is loaded, before its publishers and subscriptions are made (after
#: ``rclpy.init``: where rclpy's own SIGTERM handler shut the context down under the node, RCLError and exit 1).
BUILDING = "backend: cpu"
BUILDING_MOMENTS = (0.0, 0.01, 0.03)
#: The node's log line once its executor is made (it spins right after): the moments below count from it.
RUNNING = "executor EventsExecutor"
READY_TIMEOUT_S = 60.0
RUNNING_MOMENTS = (0.0, 0.3)
#: A second signal this long after a first SIGINT sent to the running node (s): during its shutdown.
SHUTDOWN_MOMENTS = (0.0, 0.03, 0.08, 0.15)
REPLAY_MOMENTS = (0.05, 0.15, 0.3, 0.5, 0.8, 1.2, 2.0)
#: The stop deadline's line (vrt_ros.ros.stop): the process did not end by itself.
DEADLINE_LINE = "the process ends without it"
PARALLEL = 4


def _caught(pid: int) -> bool:
    """SIGINT and SIGTERM both caught by ``pid`` (its ``SigCgt`` mask), or the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return all(mask & (1 << (s - 1)) for s in (signal.SIGINT, signal.SIGTERM))


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = {int(k) for k in (task / "children").read_text().split()}
            except OSError:
                kids = set()
            todo.extend(kids - out)
            out |= kids
    return out


def _run(cmd: list[str], signals: list[tuple[float, int]], ready: str | None = None) -> dict:
    """Start ``cmd``; send each ``(at_s, signum)`` at ``at_s`` after the process can handle signals (after it printed
    ``ready``, if given); wait for it."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if ready and ready in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while not _caught(proc.pid) and proc.poll() is None:
            time.sleep(0.002)
        if ready:
            seen.wait(READY_TIMEOUT_S)
        start = time.monotonic()
        children: set[int] = set()
        sent_at = None
        for at_s, signum in signals:
            time.sleep(max(0.0, start + at_s - time.monotonic()))
            if proc.poll() is not None:
                break
            children |= _descendants(proc.pid)
            proc.send_signal(signum)
            sent_at = time.monotonic() if sent_at is None else sent_at
        while proc.poll() is None and time.monotonic() - sent_at < 15.0:
            time.sleep(POLL_S)
        took = time.monotonic() - sent_at
        timed_out = proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate(timeout=30)[0]
        reader.join(timeout=30)
    alive = {c for c in children if Path(f"/proc/{c}").exists()}
    return dict(cmd=cmd, signals=signals, rc=proc.returncode, took=took, timed_out=timed_out, err="".join(lines),
                out=out, alive=alive, marker=ready, ready=bool(ready) and seen.is_set())


def _problems(r: dict, deadline_allowed: bool) -> list[str]:
    """What is wrong with run ``r``. ``deadline_allowed``: the stop's own deadline may have ended it (a stop during
    the node's start-up, where a model load may outlast it on a loaded machine); a running node and ``replay``
    must end by themselves."""
    what = f"{[(at, signal.Signals(s).name) for at, s in r['signals']]}"
    found = []
    if r["timed_out"]:
        found.append(f"{what}: still running 15 s after the signal")
    if r["rc"] != 0:
        found.append(f"{what}: exit status {r['rc']} (0 expected)")
    if r["took"] >= STOP_BOUND_S + POLL_S:
        found.append(f"{what}: ended {r['took']:.2f} s after the signal (bound {STOP_BOUND_S} s + {POLL_S} s)")
    text = r["err"] + r["out"]
    # faulthandler's hard deadline (a process deaf to the stop: a C call holding the GIL) prints "Timeout (" and the
    # threads' stacks ("most recent call first")
    for marker in ("Traceback", "Fatal Python error", "Timeout (", "most recent call first", "Exception ignored"):
        if marker in text:
            found.append(f"{what}: {marker!r} in the output:\n{text[-3000:]}")
    if not deadline_allowed and DEADLINE_LINE in text:
        found.append(f"{what}: ended by the stop's deadline, not by itself:\n{text[-3000:]}")
    if r["alive"]:
        found.append(f"{what}: child processes left behind: {sorted(r['alive'])}")
    return found


def _run_all(cmd_for, plans: list[tuple[list[tuple[float, int]], str | None]]) -> list[dict]:
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda ip: _run(cmd_for(ip[0]), *ip[1]), enumerate(plans)))


def _node_cmd(model: Path, i: int) -> list[str]:
    return [sys.executable, "-m", "vrt_ros.ros.main", "--ros-args", "-p", "backend:=cpu", "-p",
            f"model.path:={model}", "-r", f"__ns:=/stop{os.getpid()}_{i}"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_node_stops_cleanly_at_any_moment(shared_dir, signum):
    model = shared_dir / "models" / "yolox_nano.onnx"
    plans = [([(at, signum)], None) for at in NODE_MOMENTS]
    # once it runs (its executor line logged): a stop, and a second signal during the shutdown the first began
    plans += [([(at, signum)], BUILDING) for at in BUILDING_MOMENTS]
    plans += [([(at, signum)], RUNNING) for at in RUNNING_MOMENTS]
    plans += [([(0.0, signal.SIGINT), (d, signum)], RUNNING) for d in SHUTDOWN_MOMENTS]
    results = _run_all(lambda i: _node_cmd(model, i), plans)
    problems = [p for r in results for p in _problems(r, deadline_allowed=r["marker"] != RUNNING or not r["ready"])]
    assert not problems, "\n".join(problems)
    assert all(r["ready"] for r in results if r["marker"] == BUILDING), "the node never loaded its model"
    running = [r for r in results if r["marker"] == RUNNING and r["ready"]]
    assert len(running) == len(RUNNING_MOMENTS) + len(SHUTDOWN_MOMENTS), "the node never came up"
    # a running node's teardown logs its summary line (the stop went through the orderly path)
    assert all("summary:" in r["err"] for r in running), [r["err"][-1500:] for r in running]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_replay_stops_cleanly_at_any_moment(shared_dir, signum):
    """``replay`` waiting for subscribers (there are none) and, before that, in its imports and set-up."""
    bag = shared_dir / "data" / "bags" / "vtest_raw_sqlite3"
    plans = [([(at, signum)], None) for at in REPLAY_MOMENTS]
    results = _run_all(lambda i: [sys.executable, "-m", "vrt_ros.tools.replay", str(bag), "--wait-timeout", "60",
                                  "--ros-args", "-r", f"__ns:=/stoprp{os.getpid()}_{i}"], plans)
    problems = [p for r in results for p in _problems(r, deadline_allowed=False)]
    assert not problems, "\n".join(problems)


def test_a_worker_whose_start_was_interrupted_stops_without_error(monkeypatch):
    """Ctrl-C reaching a node still starting, between the worker thread's creation and its start (issue 33:
    ``RuntimeError: cannot join thread before it is started`` from the teardown's ``Worker.stop``, exit 1, seen in
    test_node.py::test_main_runs_two_named_nodes_and_shuts_down_cleanly): the stop finds no thread to join."""
    import threading as threading_module

    from vrt_ros.faults import FaultPolicy
    from vrt_ros.ros.camera import Camera
    from vrt_ros.ros.worker import Worker

    class Pipeline:
        max_batch = 1

    worker = Worker("w", [Camera("cam", None)], Pipeline(), labels=[], keypoint_names=[],
                    faults=FaultPolicy(3), logger=None, clock=None, on_fatal=lambda reason: None)

    def interrupted(self):
        raise KeyboardInterrupt  # the signal lands before the thread runs

    monkeypatch.setattr(threading_module.Thread, "start", interrupted)
    with pytest.raises(KeyboardInterrupt):
        worker.start()
    monkeypatch.undo()
    worker.stop(timeout_s=1.0)  # raised RuntimeError before the fix
    assert worker.stopping
