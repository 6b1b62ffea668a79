"""The package as a robot runs it (issue 11): ``colcon build`` into a workspace, then the real ``ros2 launch vrt_ros
detector.launch.py`` (upstream launch/launch_ros/ros2cli from ../shared/ros2_launch, installed into the test venv by
scripts/launch_stack.sh) against replayed bags, and ``colcon test`` collecting the suite.

Skipped, with the reason, when ../shared/ros2_launch or the launch stack in the venv is absent: the product never
needs them. Every process launch starts gets DDS on loopback and the tests' domain id (launch passes the
environment down).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")

from rclpy.node import Node  # noqa: E402

from robot_replay import (  # noqa: E402
    check_answers,
    child_env,
    interrupt,
    model_override,
    replay_and_collect,
    robot,
    robot_names,
    start,
)
from ros_testing import private_context, unique_namespace  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


#: How far apart two marks of one interval, taken in two processes or from log lines stamped around the event, may be
#: from the interval itself (s): a respawn delay of 0.5 s was measured 0.4976 and 0.4990 (issue 33).
LOG_MARK_UNCERTAINTY_S = 0.05


@pytest.fixture(scope="module")
def workspace(shared_dir, tmp_path_factory) -> dict[str, str]:
    """vrt_ros built with ``colcon build`` into a temporary workspace; the environment that sources it."""
    if not (shared_dir / "ros2_launch" / "wheels").is_dir():
        pytest.skip(f"{shared_dir / 'ros2_launch'} not found: the real launch stack is for tests only")
    for module in ("launch_ros", "ros2launch", "composition_interfaces.srv"):
        pytest.importorskip(module, reason=f"{module} not in the test venv: run `make test` (scripts/launch_stack.sh)")
    if not (BIN / "colcon").exists() or not (BIN / "ros2").exists():
        pytest.skip("colcon or ros2 missing from the test venv: run `make test` (scripts/launch_stack.sh)")
    ws = tmp_path_factory.mktemp("colcon_ws")
    (ws / "src").mkdir()
    (ws / "src" / "vrt_ros").symlink_to(REPO)
    env = child_env({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"})
    build = subprocess.run([str(BIN / "colcon"), "build", "--base-paths", "src", "--event-handlers",
                            "console_direct-", "console_cohesion-"], cwd=ws, env=env, capture_output=True, text=True,
                           timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    prefix = ws / "install" / "vrt_ros"
    site = next(prefix.glob("lib/python3*/site-packages"))
    # What `source install/setup.bash` sets for this package (the venv stands in for /opt/ros/<distro>).
    env.update(AMENT_PREFIX_PATH=f"{prefix}{os.pathsep}{sys.prefix}",
               PYTHONPATH=f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               VRT_COLCON_WS=str(ws))
    return env


def ros2_launch(env: dict[str, str], *args: str):
    return start(["ros2", "launch", "vrt_ros", "detector.launch.py", *args], env)


def _clean_exit(proc, out: str) -> None:
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert "exit code -2" not in out and "process has finished cleanly" in out, out


def test_installed_with_colcon(workspace):
    prefix = Path(workspace["AMENT_PREFIX_PATH"].split(os.pathsep)[0])
    for rel in ("lib/vrt_ros/detector_node", "share/vrt_ros/launch/detector.launch.py", "share/vrt_ros/package.xml",
                *(f"share/vrt_ros/config/{n}.yaml" for n in robot_names())):
        assert (prefix / rel).exists(), rel
    prefix_out = subprocess.run(["ros2", "pkg", "prefix", "vrt_ros"], env=workspace, capture_output=True, text=True,
                                timeout=60)
    assert prefix_out.stdout.strip() == str(prefix), prefix_out.stderr


def _robot_answers_the_bag(workspace, shared_dir, tmp_path, name: str, *launch_args: str) -> str:
    """``robot:=<name>`` (+ ``launch_args``) answers the replayed bag and exits 0 on Ctrl-C; returns its output."""
    r = robot(name)
    ns = unique_namespace()
    override = model_override(r, shared_dir, tmp_path)
    proc = ros2_launch(workspace, f"robot:={name}", f"params_file:={override}", f"namespace:={ns[1:]}",
                       "use_sim_time:=true", *launch_args)
    try:
        answers = replay_and_collect(ns, r, shared_dir)
    finally:
        out = interrupt(proc)
    print(f"--- ros2 launch robot:={name} {' '.join(launch_args)}: exit code {proc.returncode}\n{out}")
    _clean_exit(proc, out)
    check_answers(r, answers)
    return out


@pytest.mark.parametrize("name", robot_names())
def test_each_robot_yaml_answers_a_replayed_bag_and_ctrl_c_exits_0(workspace, shared_dir, tmp_path, name):
    """``robot:=<name> params_file:=<model> namespace:=<ns> use_sim_time:=true``: the YAML's cameras answer the bag
    (mobile_robot_coco's max_age_ms judges frames by the bag's /clock, so use_sim_time must reach the node), under
    the default executor, rclpy's EventsExecutor. Each camera on its transport's topic (mixed_rig: JPEG and raw
    cameras in one node, each fed its transport's bag), as the node's start-up line says."""
    out = _robot_answers_the_bag(workspace, shared_dir, tmp_path, name)
    assert "executor EventsExecutor" in out, out
    r = robot(name)
    topics = ", ".join(f"{c} (image_raw{'/compressed' if r.transports[c] == 'compressed' else ''})" for c in r.cameras)
    assert f"cameras {topics} " in out, out


def test_single_threaded_executor_through_launch_answers_the_bag_and_ctrl_c_exits_0(workspace, shared_dir, tmp_path):
    """``executor:=single`` (issue 22: the default is rclpy's EventsExecutor): the node process under the
    SingleThreadedExecutor answers the replayed bag, and Ctrl-C ends it cleanly."""
    out = _robot_answers_the_bag(workspace, shared_dir, tmp_path, "default", "executor:=single")
    assert "executor SingleThreadedExecutor" in out, out


def test_namespace_with_several_node_names_applies_each_nodes_section(workspace, shared_dir, tmp_path):
    """namespace + node_names: sections keyed ``/**/<name>`` apply to that node only; a section matching no node is
    warned about at start-up. Also log_level:=debug and dds_profile:=none reach the process."""
    ns = unique_namespace()
    params = tmp_path / "two.yaml"
    params.write_text(
        f"/**:\n  ros__parameters:\n    backend: cpu\n    model:\n      path: {shared_dir / 'models' / 'yolox_nano.onnx'}\n"
        "/**/front_det:\n  ros__parameters:\n    cameras: [front]\n"
        "/**/rear_det:\n  ros__parameters:\n    cameras: [rear]\n    score_threshold: 0.6\n"
        "rear_det:\n  ros__parameters:\n    score_threshold: 0.9\n"  # root namespace only: matches no node here
    )
    proc = ros2_launch(workspace, f"params_file:={params}", f"namespace:={ns[1:]}", "node_names:=front_det rear_det",
                       "log_level:=debug", "dds_profile:=none")
    try:
        with private_context() as ctx:
            probe = Node("probe", context=ctx)
            subs: dict[str, list[str]] = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(subs) < 2:
                for name in ("front_det", "rear_det"):
                    try:
                        topics = [t for t, _ in probe.get_subscriber_names_and_types_by_node(name, ns)]
                    except Exception:  # not discovered yet
                        continue
                    if any(t.endswith("/image_raw") for t in topics):
                        subs[name] = topics
                time.sleep(0.1)
            probe.destroy_node()
    finally:
        out = interrupt(proc)
    print(f"--- ros2 launch namespace:={ns[1:]} node_names:='front_det rear_det': exit code {proc.returncode}\n{out}")
    assert [t for t in subs.get("front_det", []) if t.endswith("image_raw")] == [f"{ns}/front/image_raw"], (subs, out)
    assert [t for t in subs.get("rear_det", []) if t.endswith("image_raw")] == [f"{ns}/rear/image_raw"], (subs, out)
    assert "section '/rear_det' applies to none of this process's nodes" in out and "'/**/rear_det:'" in out, out
    assert "--dds-profile none" in out and "[DEBUG]" in out, out
    _clean_exit(proc, out)


@pytest.mark.parametrize("case, body, words", [
    ("missing", None, "does not exist"),
    ("not_yaml", "a: [\n", "is not valid YAML"),
    ("no_node_level", "ros__parameters:\n  score_threshold: 0.3\n", "must sit under a node name"),
    ("value_at_top", "score_threshold: 0.3\n", "has a value where"),
])  # fmt: skip
def test_bad_params_file_one_line_exit_2(workspace, tmp_path, case, body, words):
    f = tmp_path / f"{case}.yaml"
    if body is not None:
        f.write_text(body)
    proc = subprocess.run(["ros2", "launch", "vrt_ros", "detector.launch.py", f"params_file:={f}"], env=workspace,
                          capture_output=True, text=True, timeout=120)
    print(f"--- ros2 launch params_file:={case}.yaml: exit code {proc.returncode}\n{proc.stderr}")
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "ERROR" in line or "Error" in line]
    assert proc.returncode == 2 and len(errors) == 1 and str(f) in errors[0] and words in errors[0], proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_unknown_robot_one_line_exit_2(workspace):
    proc = subprocess.run(["ros2", "launch", "vrt_ros", "detector.launch.py", "robot:=no_such_robot"], env=workspace,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "available robots: default" in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_colcon_test_collects_every_test(workspace):
    """package.xml declares every test import, so ``colcon test`` collects the whole suite (collection only here:
    `make test` runs it)."""
    ws = Path(workspace["VRT_COLCON_WS"])
    if not shutil.which("colcon", path=workspace["PATH"]):
        pytest.skip("colcon missing from the test venv")
    proc = subprocess.run(["colcon", "test", "--base-paths", "src", "--event-handlers", "console_direct+",
                           "--pytest-args", "--collect-only", "-q"], cwd=ws, env=workspace, capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    collected = [line for line in out.splitlines() if re.match(r"\d+ tests? collected", line)]
    assert len(collected) == 1 and "error" not in collected[0], out  # "N tests collected, M errors" on import errors
    assert int(collected[0].split()[0]) > 100, collected
    print(f"--- colcon test --pytest-args --collect-only: {collected[0]}")


# ------------------------------------------------------------------------------------------- issue 26: launch tells the truth
def _pids(out: str) -> list[int]:
    """The pids of the processes launch started (its ``process started with pid [N]`` lines)."""
    return [int(p) for p in re.findall(r"process started with pid \[(\d+)\]", out)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _blob_params(tmp_path: Path, model: Path, extra: str = "") -> Path:
    path = tmp_path / "blob.yaml"
    path.write_text(f"/**:\n  ros__parameters:\n    backend: cpu\n    model:\n      path: {model}\n{extra}")
    return path


def _wait_for_nodes(ns: str, names, timeout_s: float = 60.0) -> bool:
    """Wait until every node of ``names`` in ``ns`` publishes its detections (configured and running)."""
    with private_context() as ctx:
        probe = Node("probe", context=ctx)
        deadline = time.monotonic() + timeout_s
        up: set[str] = set()
        while time.monotonic() < deadline and len(up) < len(names):
            for name in names:
                try:
                    if any(t.endswith("/detections") for t, _ in probe.get_publisher_names_and_types_by_node(name, ns)):
                        up.add(name)
                except Exception:  # not discovered yet
                    pass
            time.sleep(0.1)
        probe.destroy_node()
    return len(up) == len(names)


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    from synthetic_models import blob_end2end

    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", 320, 320)


def test_bracketed_node_names_and_a_shared_output_topic_is_warned_about(workspace, blob_model, tmp_path):
    """``node_names:=[front_det,rear_det]`` (the list form ROS users write): two nodes, no traceback; both have the
    default camera in one namespace, so the process warns that both publish the same detections topic."""
    ns = unique_namespace()
    proc = ros2_launch(workspace, f"params_file:={_blob_params(tmp_path, blob_model)}", f"namespace:={ns[1:]}",
                       "node_names:=[front_det,rear_det]", "dds_profile:=none")
    try:
        up = _wait_for_nodes(ns, ("front_det", "rear_det"))
    finally:
        out = interrupt(proc)
    print(f"--- ros2 launch node_names:=[front_det,rear_det]: exit code {proc.returncode}\n{out}")
    assert up, out
    assert f"nodes {ns}/front_det and {ns}/rear_det both publish {ns}/camera/detections" in out, out
    _clean_exit(proc, out)


def test_start_up_failure_ends_the_launch_non_zero_and_is_not_respawned(workspace, tmp_path):
    """A node that fails at start-up (exit status 2: the model file does not exist) with respawn:=true: launch
    does not restart it, ends, exits non-zero (1: launch's only error status) and says why in one line."""
    missing = tmp_path / "no_such_model.onnx"
    proc = subprocess.run(["ros2", "launch", "vrt_ros", "detector.launch.py", f"params_file:={_blob_params(tmp_path, missing)}",
                           "respawn:=true", "respawn_delay:=0", "dds_profile:=none"], env=workspace,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    print(f"--- ros2 launch with a missing model, respawn:=true: exit code {proc.returncode}\n{out}")
    assert proc.returncode == 1, out
    assert len(_pids(out)) == 1, out  # started once, never respawned
    verdict = [line for line in out.splitlines() if "failed at start-up" in line]
    assert len(verdict) == 1 and "node vrt_detector" in verdict[0] and "exit status 2" in verdict[0], out
    assert str(missing) in verdict[0] and "not respawned" in verdict[0], out
    assert "Traceback" not in out, out


def test_the_node_does_not_outlive_a_sigtermed_launch(workspace, blob_model, tmp_path):
    """SIGTERM to ``ros2 launch`` (docker stop, a supervisor): launch exits at once and leaves its processes
    running (ros2/launch#666); the node, started with --exit-with-parent, shuts down when its parent goes."""
    ns = unique_namespace()
    proc = ros2_launch(workspace, f"params_file:={_blob_params(tmp_path, blob_model)}", f"namespace:={ns[1:]}",
                       "dds_profile:=none")
    pids: list[int] = []
    try:
        assert _wait_for_nodes(ns, ("vrt_detector",)), "the node did not come up"
        proc.send_signal(signal.SIGTERM)  # to ros2 launch only, not its process group
        out, _ = proc.communicate(timeout=30)
        pids = _pids(out)
        assert len(pids) == 1, out
        deadline = time.monotonic() + 20.0
        while _alive(pids[0]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pids[0]), f"node pid {pids[0]} outlived ros2 launch\n{out}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_respawn_brings_detections_back_after_each_of_two_fatal_faults(workspace, shared_dir, tmp_path):
    """Issue 27 item 3: the recovery bench's respawn run (its own colcon workspace, whose ``detector_node`` is the
    probe failing with a poisoned-context CUDA error after 3 frames) under the real ``ros2 launch ...
    respawn:=true respawn_delay:=0.5``: after each of two faults in a row the process exits with status 3, launch
    starts it again and detections come back; every part of each recovery is measured."""
    from vrt_ros.bench.restart.recovery import RESPAWN_PARTS, respawn_run
    from vrt_ros.bench.restart.recovery_procs import Camera, params_file

    with Camera(None, 10.0) as camera:
        result = respawn_run(dict(os.environ), params_file(tmp_path, shared_dir / "models" / "yolox_nano.onnx", "cpu"),
                             camera, faults=2, fault_after=3, delay=0.5, timeout_s=180.0)
    assert result["respawn_delay_s"] == 0.5 and len(result["faults"]) == 2
    for row in result["faults"]:
        seconds = row["seconds"]
        assert row["marks"]["exit_code"] == 3, row
        assert all(seconds[key] is not None and seconds[key] >= 0 for key, _, _ in RESPAWN_PARTS), seconds
        # launch waited its respawn_delay (0.5 s): the marks are launch's log lines ("process has died", "process
        # started"), stamped around its timer, not the timer itself (0.4990 s seen: issue 33)
        assert seconds["delay"] >= 0.5 - LOG_MARK_UNCERTAINTY_S and seconds["diagnostics_error"] is not None, seconds


def test_warm_standby_through_launch_brings_detections_back_after_each_of_two_fatal_faults(workspace, shared_dir,
                                                                                          tmp_path):
    """``ros2 launch ... respawn:=true warm_standby:=true``: launch starts the process once; after each of two faults
    its standby takes over (launch sees no exit), with its interpreter and imports done before the fault."""
    from vrt_ros.bench.restart.recovery import RESPAWN_PARTS, respawn_run
    from vrt_ros.bench.restart.recovery_procs import Camera, params_file

    with Camera(None, 10.0) as camera:
        result = respawn_run(dict(os.environ), params_file(tmp_path, shared_dir / "models" / "yolox_nano.onnx", "cpu"),
                             camera, faults=2, fault_after=20, delay=0.5, timeout_s=180.0, warm_standby=True)
    assert result["launch_arguments"] == "respawn:=true respawn_delay:=0.5 warm_standby:=true"
    assert len(result["faults"]) == 2
    for row in result["faults"]:
        seconds = row["seconds"]
        assert row["marks"]["exit_code"] == 3, row
        assert all(seconds[key] is not None for key, _, _ in RESPAWN_PARTS), seconds
        # the delay: the supervisor's word and its lines' order (their read times here are no bound on it, issue 33)
        assert seconds["imports"] == 0.0 and row["marks"]["restart_delay_s"] == 0.5 and seconds["delay"] > 0, row
        assert seconds["diagnostics_error"] is not None, seconds
