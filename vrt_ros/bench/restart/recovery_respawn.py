"""The recovery bench's respawn run (:mod:`vrt_ros.bench.restart.recovery`): fault → detections again, several faults in a
row, under one of two respawners:

- ``launch``: the real ``ros2 launch vrt_ros detector.launch.py respawn:=true respawn_delay:=D`` over a temporary
  colcon workspace whose installed ``detector_node`` is the probe (:func:`respawn_run`); needs the launch stack and
  colcon.
- ``supervisor``: :class:`Supervisor`, a small loop in the bench's process doing what launch's ``respawn: true`` +
  ``respawn_delay`` does: it starts the probe with the command line launch runs (:func:`probe_command`), waits for
  its exit, records the exit's time and status, sleeps ``respawn_delay`` and starts it again
  (:func:`supervised_run`). No colcon, no launch: for machines whose ROS comes as a bundle of rclpy and the message
  packages (the H200's Python 3.12).
- ``standby``: the node's own ``--warm-standby`` (:mod:`vrt_ros.ros.standby`): the probe's command line with
  ``--warm-standby --restart-delay D``, started once; its supervisor restarts the node by handing over to a standby
  process whose imports are done (:func:`standby_run`). The next process's ``started_seen`` is the supervisor's
  take-over line, its ``start`` / ``imported`` marks the standby's ``go``.

Both give the same per-fault rows: the marks (wall-clock ``time.time()``, s) and each component's seconds.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from vrt_ros.bench.common import say
from vrt_ros.bench.restart.recovery_procs import Camera, Output, build_workspace, interrupt, parts

REPO = Path(__file__).resolve().parents[3]
#: The respawn run's components, in order: (key, from mark, to mark).
RESPAWN_PARTS = (("exit", "fault", "exit_seen"), ("delay", "exit_seen", "started_seen"),
                 ("interpreter", "started_seen", "start"), ("imports", "start", "imported"),
                 ("node", "imported", "pipeline_begin"), ("pipeline", "pipeline_begin", "pipeline_end"),
                 ("matched", "pipeline_end", "matched"), ("frame_wait", "matched", "frame_begin"),
                 ("inference", "frame_begin", "frame_end"),
                 ("answer", "frame_end", "first_detection"))
RESPAWNERS = ("launch", "supervisor", "standby")  # --respawn
#: Exit status of a start-up failure: detector.launch.py ends the launch instead of respawning; so does the supervisor.
EXIT_START_UP = 2


def probe_command(params: Path, namespace: str, fault_after: int) -> list[str]:
    """The command line ``detector.launch.py respawn:=true params_file:=<params> namespace:=<namespace>`` runs, with
    the probe (``--fault-after fault_after``) as ``detector_node``: the launch file's process arguments, the robot
    ``default`` YAML of this checkout's config/ then ``params`` (launch_ros passes ``use_sim_time`` in a temporary
    parameter file; here with ``-p``)."""
    return [sys.executable, "-m", "vrt_ros.bench.restart.recovery_probe", "--fault-after", str(fault_after),
            "--names", "vrt_detector", "--dds-profile", "auto", "--exit-with-parent", "--executor", "events",
            "--ros-args", "--log-level", "info", "-r", f"__ns:={namespace}",
            "--params-file", str(REPO / "config" / "default.yaml"), "--params-file", str(params),
            "-p", "use_sim_time:=false"]


class Supervisor:
    """Runs ``command`` and starts it again ``delay`` s after each exit, as launch's ``respawn: true`` +
    ``respawn_delay`` does, in a thread; stops respawning after a start-up failure (exit status 2), as
    detector.launch.py ends the launch then. A context manager: leaving it stops respawning and Ctrl-Cs the
    running process (its own process group).

    Args:
        command: the process's command line.
        env: its environment.
        delay: seconds from an exit (the supervisor's ``waitpid`` returning) to the next start.
    """

    def __init__(self, command: list[str], env: dict[str, str], delay: float) -> None:
        self.command, self.env, self.delay = command, env, delay
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._runs: list[tuple[dict, Output]] = []
        self._current: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "Supervisor":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._stop.set()
            proc = self._current
        if proc is not None:
            interrupt(proc)
        self._thread.join(60.0)

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._stop.is_set():
                    return
                record = {"started_seen": time.time()}  # as the start table's popen mark: before the fork
                proc = self._current = subprocess.Popen(self.command, env=self.env, stdout=subprocess.PIPE,
                                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
                output = Output(proc)
                self._runs.append((record, output))
            code = proc.wait()
            exited = time.time()
            output.join()  # the process's last lines (its fault mark) before the next process starts
            record.update(exit_seen=exited, exit_code=code)
            if code == EXIT_START_UP or self._stop.wait(max(0.0, exited + self.delay - time.time())):
                return

    def alive(self) -> bool:
        """Whether the supervisor still runs (it ends after a start-up failure, or when left)."""
        return self._thread.is_alive()

    def instances(self) -> list[dict[str, float]]:
        """Per process started: ``started_seen``, its probe marks, ``exit_seen`` and ``exit_code`` once it exited
        (the same keys as :meth:`vrt_ros.bench.restart.recovery_procs.Output.instances` gives under launch)."""
        with self._lock:
            runs = list(self._runs)
        out = []
        for record, output in runs:
            marks = output.instances()
            out.append({**(marks[0] if marks else {}), **record})
        return out

    def text(self) -> str:
        """Every process's output, one after the other."""
        with self._lock:
            runs = list(self._runs)
        return "\n".join(f"--- process {i + 1}\n{output.text()}" for i, (_, output) in enumerate(runs))


def _wait_back(instances: Callable[[], list[dict]], alive: Callable[[], bool], camera: Camera, faults: int,
               timeout_s: float) -> None:
    """Until the process started after the ``faults``-th fault answered a frame, the respawner ended, or
    ``timeout_s``."""
    end = time.time() + timeout_s
    while time.time() < end and alive():
        inst = instances()
        if len(inst) > faults and "pipeline_end" in inst[faults] and \
                camera.first_detection_after(inst[faults]["pipeline_end"], 0.0) is not None:
            return
        time.sleep(0.1)


def _rows(inst: list[dict], camera: Camera, faults: int, t0: float, text: str) -> list[dict]:
    """Per fault: the marks (the faulty process's fault and exit, the next process's start to first detection,
    the ERROR on /diagnostics and the match seen here) and the breakdown (:data:`RESPAWN_PARTS`)."""
    if len(inst) <= faults:
        raise RuntimeError(f"{len(inst)} process starts seen, {faults + 1} needed:\n{text[-4000:]}")
    rows = []
    for k in range(faults):
        after = inst[k + 1]
        own = ("fault", "exit_seen", "exit_code", "restart_delay_s")  # the faulty process's; the rest: the next one's
        marks = {**{m: inst[k].get(m) for m in own}, **{m: after[m] for m in after if m not in own}}
        marks = {m: v for m, v in marks.items() if v is not None}
        error = camera.first_error_after(marks.get("fault", t0))
        if error is not None:
            marks["diagnostics_error"] = error
        matched = camera.first_match_after(after["started_seen"])
        if matched is not None:
            marks["matched"] = matched
        first = camera.first_detection_after(after.get("pipeline_end", after["started_seen"]), 0.0)
        if first is not None:
            marks["first_detection"] = first
        seconds = parts(marks, RESPAWN_PARTS)
        seconds["diagnostics_error"] = error - marks["fault"] if error is not None and "fault" in marks else None
        rows.append({"marks": marks, "seconds": seconds})
        say(f"fault {k + 1}: back after {seconds['total']} s")
    return rows


def _watched(command: list[str], env: dict[str, str], camera: Camera, faults: int, timeout_s: float) -> list[dict]:
    """Start ``command`` once (it restarts the node itself: launch, or the node's --warm-standby), read its output
    until the process started after the ``faults``-th fault answered, Ctrl-C it; the per-fault rows."""
    camera.reset()
    t0 = time.time()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    output = Output(proc)
    try:
        _wait_back(output.instances, lambda: proc.poll() is None, camera, faults, timeout_s)
    finally:
        interrupt(proc)
        output.join()
    return _rows(output.instances(), camera, faults, t0, output.text())


def respawn_run(env: dict[str, str], params: Path, camera: Camera, faults: int, fault_after: int, delay: float,
                timeout_s: float, warm_standby: bool = False) -> dict:
    """``faults`` faults in a row under the real launch with respawn (``delay``: respawn_delay, s; ``timeout_s``
    for the whole run); per fault, the marks and the breakdown. ``warm_standby``: with ``warm_standby:=true``
    (the launched process's own standby restarts the node; launch's respawn stays on for the process itself)."""
    launch_args = ["respawn:=true", f"respawn_delay:={delay}", *(["warm_standby:=true"] if warm_standby else [])]
    with tempfile.TemporaryDirectory(prefix="vrt_recovery_ws_") as tmp:
        ws_env = build_workspace(Path(tmp), env, fault_after)
        rows = _watched(["ros2", "launch", "vrt_ros", "detector.launch.py", *launch_args, f"params_file:={params}",
                         f"namespace:={camera.namespace.lstrip('/')}"], ws_env, camera, faults, timeout_s)
    return {"respawner": "launch", "launch_arguments": " ".join(launch_args), "respawn_delay_s": delay,
            "fault_after_frames": fault_after, "faults": rows}


def supervised_run(env: dict[str, str], params: Path, camera: Camera, faults: int, fault_after: int, delay: float,
                   timeout_s: float) -> dict:
    """As :func:`respawn_run`, the probe restarted by a :class:`Supervisor` (``delay``: respawn_delay, s) instead of
    launch; the result also holds ``respawn_command``, the command line started each time."""
    command = probe_command(params, camera.namespace, fault_after)
    camera.reset()
    t0 = time.time()
    with Supervisor(command, env, delay) as supervisor:
        _wait_back(supervisor.instances, supervisor.alive, camera, faults, timeout_s)
    rows = _rows(supervisor.instances(), camera, faults, t0, supervisor.text())
    return {"respawner": "supervisor", "respawn_delay_s": delay, "fault_after_frames": fault_after,
            "respawn_command": shlex.join(command), "faults": rows}


def standby_run(env: dict[str, str], params: Path, camera: Camera, faults: int, fault_after: int, delay: float,
                timeout_s: float) -> dict:
    """As :func:`respawn_run`, the probe started once with ``--warm-standby --restart-delay delay``: the node's own
    supervisor restarts it from a standby process; the result also holds ``respawn_command``."""
    command = [*probe_command(params, camera.namespace, fault_after)]
    command[command.index("--ros-args"):command.index("--ros-args")] = ["--warm-standby", "--restart-delay", str(delay)]
    rows = _watched(command, env, camera, faults, timeout_s)
    return {"respawner": "standby", "respawn_delay_s": delay, "fault_after_frames": fault_after,
            "respawn_command": shlex.join(command), "faults": rows}


def respawn_markdown(respawn: dict, cell: Callable[[float | None], str]) -> list[str]:
    """The respawn section's markdown lines: its title names the respawner, one row per fault (``cell`` formats a
    value), the legend."""
    keys = ["diagnostics_error", *(p[0] for p in RESPAWN_PARTS), "total"]
    delay = respawn["respawn_delay_s"]
    if respawn.get("respawner", "launch") == "launch":
        launch_args = respawn.get("launch_arguments", f"respawn:=true respawn_delay:={delay}")
        lines = [f"## Fault → detections again (`ros2 launch vrt_ros detector.launch.py {launch_args}`, s)", ""]
        legend = ("exit: fault → launch reports the exit (status 3); delay: → launch starts the process again "
                  "(respawn_delay plus launch's own time)")
        if "warm_standby:=true" in launch_args:
            legend = ("exit: fault → the launched process's standby supervisor sees its node process end (status 3); "
                      "delay: → the standby is told to take over (respawn_delay); interpreter and imports: done "
                      "before the fault")
    elif respawn["respawner"] == "standby":
        lines = [f"## Fault → detections again (`--respawn standby`: the node's `--warm-standby`, restart delay "
                 f"{delay} s, s)", "",
                 "Respawner: `standby` (vrt_ros.ros.standby: the node process supervises its node in a child and "
                 "hands over to a standby child whose imports are done). Command started once: "
                 f"`{respawn['respawn_command']}`", ""]
        legend = ("exit: fault → the supervisor sees the child's exit (status 3); delay: → the standby is told to "
                  "take over (the restart delay); interpreter and imports: done before the fault (0 here)")
    else:
        lines = [f"## Fault → detections again (`--respawn supervisor`: the bench's supervisor, respawn delay "
                 f"{delay} s, s)", "",
                 "Respawner: `supervisor` (vrt_ros.bench.restart.recovery_respawn.Supervisor: what launch's `respawn: true` "
                 "+ `respawn_delay` does, without launch or colcon). Command started each time (the launch file's "
                 f"command line, the probe as `detector_node`): `{respawn['respawn_command']}`", ""]
        legend = ("exit: fault → the supervisor's waitpid returns (exit status 3: the fatal fault); delay: → the "
                  "supervisor starts the process again (respawn_delay plus its own time)")
    lines += ["| fault | " + " | ".join(keys) + " | exit status |", "|---|" + "---|" * (len(keys) + 1)]
    for i, row in enumerate(respawn["faults"]):
        lines.append(f"| {i + 1} | " + " | ".join(cell(row["seconds"].get(k)) for k in keys)
                     + f" | {row['marks'].get('exit_code', '–')} |")
    lines += ["", f"diagnostics_error: fault → the ERROR received on /diagnostics in the bench's process; {legend}; "
              "interpreter … answer: the new process, as in the start table; total: fault → first detection of the "
              "new process.", ""]
    return lines
