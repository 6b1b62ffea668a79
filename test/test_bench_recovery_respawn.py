"""The recovery bench without launch (issue 27 item 3): the supervisor respawner (what the H200, whose ROS is a
bundle without launch or colcon, runs) bringing the real node process back after each of two fatal faults, and the
lifecycle configure timing of ``detector_node --lifecycle``, both with the shared YOLOX-nano on ONNX Runtime.
The launch respawner runs in test/test_launch_real.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")

from vrt_ros.bench.restart.recovery_respawn import RESPAWN_PARTS, Supervisor  # noqa: E402

pytestmark = pytest.mark.ros


def test_supervisor_restarts_after_each_exit_after_the_delay_and_stops_after_a_start_up_failure(tmp_path):
    """Exit status and times recorded per process; each restart at least ``delay`` after the exit; no restart after
    exit status 2 (as detector.launch.py ends the launch then)."""
    script = tmp_path / "exit.py"
    counter = tmp_path / "runs"
    script.write_text(f"import pathlib, sys\np = pathlib.Path({str(counter)!r})\nn = len(p.read_text()) if p.exists() "
                      "else 0\np.write_text('x' * (n + 1))\nprint('RECOVERY start 1.000000', flush=True)\n"
                      "sys.exit(2 if n == 2 else 3)\n")
    with Supervisor([sys.executable, str(script)], dict(os.environ), delay=0.3) as supervisor:
        end = time.time() + 30
        while supervisor.alive() and time.time() < end:
            time.sleep(0.05)
        assert not supervisor.alive(), "still respawning after exit status 2"
    runs = supervisor.instances()
    assert [r["exit_code"] for r in runs] == [3, 3, 2]
    assert all(r["start"] == 1.0 for r in runs)  # each process's marks are its own
    for before, after in zip(runs, runs[1:]):
        assert after["started_seen"] - before["exit_seen"] >= 0.3
        assert before["started_seen"] < before["exit_seen"] < after["started_seen"]


def test_supervisor_brings_detections_back_after_each_of_two_fatal_faults(shared_dir, tmp_path):
    """``--respawn supervisor``: the probe failing with a poisoned-context CUDA error after 3 frames, restarted
    0.5 s after each exit: two rows, exit status 3 each, every part measured and positive, adding up to the total,
    and a table that names the supervisor, not ``ros2 launch``."""
    from vrt_ros.bench.restart.recovery import _cell
    from vrt_ros.bench.restart.recovery_procs import Camera, params_file
    from vrt_ros.bench.restart.recovery_respawn import respawn_markdown, supervised_run

    with Camera(None, 10.0) as camera:
        result = supervised_run(dict(os.environ, PYTHONUNBUFFERED="1"),
                                params_file(tmp_path, shared_dir / "models" / "yolox_nano.onnx", "cpu"), camera,
                                faults=2, fault_after=3, delay=0.5, timeout_s=120.0)
    assert result["respawner"] == "supervisor" and result["respawn_delay_s"] == 0.5 and len(result["faults"]) == 2
    assert "recovery_probe --fault-after 3 --names vrt_detector" in result["respawn_command"]
    for row in result["faults"]:
        seconds = row["seconds"]
        assert row["marks"]["exit_code"] == 3, row
        values = [seconds[key] for key, _, _ in RESPAWN_PARTS]
        assert all(v is not None and v >= 0 for v in values), seconds
        assert sum(values) == pytest.approx(seconds["total"], abs=1e-6)
        assert seconds["delay"] >= 0.5 and seconds["exit"] > 0 and seconds["pipeline"] > 0, seconds
        assert seconds["inference"] > 0 and seconds["diagnostics_error"] is not None, seconds
    md = "\n".join(respawn_markdown(result, _cell))
    title = md.splitlines()[0]
    assert "supervisor" in title and "ros2 launch" not in title
    assert md.count("| 3 |") == 2  # the exit status column


def test_lifecycle_only_times_cold_warm_and_again_configures(shared_dir, tmp_path):
    """``--lifecycle-only``: a cold and a warm ``detector_node --lifecycle`` process, each configure timed through
    ``change_state`` with all its parts measured and adding up to the total; the configure after cleanup too; the
    build's log line; the files named recovery_lifecycle.*."""
    from vrt_ros.bench.restart.recovery_lifecycle import CONFIGURE_PARTS, LABELS

    domain = os.environ.get("ROS_DOMAIN_ID", "57")
    done = subprocess.run([sys.executable, "-m", "vrt_ros.bench.restart.recovery", "--lifecycle-only", "--lifecycle-repeats",
                           "1", "--import-runs", "1", "--model", str(shared_dir / "models" / "yolox_nano.onnx"),
                           "--backend", "cpu", "--domain-id", domain, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "recovery_lifecycle.json").read_text())
    assert "start" not in result and "respawn" not in result
    life = result["lifecycle"]
    for label in LABELS:
        (run,) = life["configure"][label]
        seconds = run["seconds"]
        values = [seconds[key] for key, _, _ in CONFIGURE_PARTS]
        assert all(v is not None and v >= 0 for v in values), (label, seconds)
        assert sum(values) == pytest.approx(seconds["total"], abs=1e-6)
        assert seconds["engine"] > 0 and seconds["pipeline"] <= seconds["total"], (label, seconds)
        assert any("backend: cpu" in text for _, text in run["log"]), run["log"]
    assert len(life["services_s"]) == 2 and all(s > 0 for s in life["services_s"])
    md = (tmp_path / "recovery_lifecycle.md").read_text()
    assert "## Lifecycle configure" in md and "| cold |" in md and "| again |" in md
    assert "Process start → first detection" not in md


def test_warm_standby_brings_detections_back_after_each_of_two_fatal_faults_without_a_new_start(shared_dir, tmp_path):
    """``--respawn standby``: the probe with ``--warm-standby``: after each fatal fault the supervisor hands over to
    its standby (never a cold start), whose interpreter and imports were done before the fault (0 s of each in the
    row) and whose pipeline is built after the take-over; every part measured, adding up to the total."""
    from vrt_ros.bench.restart.recovery import _cell
    from vrt_ros.bench.restart.recovery_procs import Camera, params_file
    from vrt_ros.bench.restart.recovery_respawn import respawn_markdown, standby_run

    with Camera(None, 10.0) as camera:
        result = standby_run(dict(os.environ, PYTHONUNBUFFERED="1"),
                             params_file(tmp_path, shared_dir / "models" / "yolox_nano.onnx", "cpu"), camera,
                             faults=2, fault_after=20, delay=0.5, timeout_s=120.0)
    assert result["respawner"] == "standby" and len(result["faults"]) == 2
    assert "--warm-standby --restart-delay 0.5 --ros-args" in result["respawn_command"]
    for row in result["faults"]:
        seconds = row["seconds"]
        assert row["marks"]["exit_code"] == 3, row
        values = [seconds[key] for key, _, _ in RESPAWN_PARTS]
        assert all(v is not None for v in values), seconds
        assert sum(values) == pytest.approx(seconds["total"], abs=1e-6)
        # the take-over's start and imported marks are one time, printed by the standby on "go" (no interpreter
        # start, no import), after the fault; the gap to the supervisor's line is this process's read latency
        # (unbounded under load), so it is not asserted (issue 33)
        assert seconds["imports"] == 0.0 and row["marks"]["start"] > row["marks"]["fault"], row
        # the delay: the supervisor's own word (it waits on its own clock, supervisor.py's restart deadline) and the
        # order of its two lines here; their read times are this process's reader thread's, which may read the
        # first line late, so the gap between them is no bound on the wait (issue 33)
        assert row["marks"]["restart_delay_s"] == 0.5 and seconds["delay"] > 0, row
        assert seconds["exit"] > 0 and seconds["pipeline"] > 0, seconds
        assert seconds["inference"] > 0 and seconds["diagnostics_error"] is not None, seconds
    md = "\n".join(respawn_markdown(result, _cell))
    assert "--warm-standby" in md.splitlines()[0] and md.count("| 3 |") == 2


def test_a_take_over_that_did_not_happen_starts_no_instance_the_cold_start_does():
    """The supervisor's take-over line, then ``did not take over`` (``go`` failed, or no answer within
    --takeover-timeout), then the cold start: one process start, with the cold start's marks (issue 33)."""
    from vrt_ros.bench.restart.recovery_procs import Output

    out = Output.__new__(Output)
    out.lines = [(1.0, "RECOVERY start 1.000000"), (1.5, "RECOVERY fault 1.500000"),
                 (1.6, "detector_node: standby: node process 10 ended with status 3; restart 1 in 0.5 s (backing "
                       "off 0.5 s: restart delay)"),
                 (2.1, "detector_node: standby: standby process 11 takes over (started 3.0 s ago)"),
                 (2.2, "detector_node: standby: standby process 11 did not take over: its socket is closed"),
                 (2.3, "detector_node: standby: no standby ready: a new process starts cold"),
                 (2.4, "RECOVERY start 2.400000")]
    inst = out.instances()
    assert len(inst) == 2, inst
    assert inst[0]["exit_code"] == 3 and inst[0]["restart_delay_s"] == 0.5
    assert inst[1] == {"started_seen": 2.3, "start": 2.4}
