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


@pytest.mark.parametrize("name", robot_names())
def test_each_robot_yaml_answers_a_replayed_bag_and_ctrl_c_exits_0(workspace, shared_dir, tmp_path, name):
    """``robot:=<name> params_file:=<model> namespace:=<ns> use_sim_time:=true``: the YAML's cameras answer the bag
    (mobile_robot_coco's max_age_ms judges frames by the bag's /clock, so use_sim_time must reach the node)."""
    r = robot(name)
    ns = unique_namespace()
    override = model_override(r, shared_dir, tmp_path)
    proc = ros2_launch(workspace, f"robot:={name}", f"params_file:={override}", f"namespace:={ns[1:]}",
                       "use_sim_time:=true")
    try:
        answers = replay_and_collect(ns, r, shared_dir)
    finally:
        out = interrupt(proc)
    print(f"--- ros2 launch robot:={name}: exit code {proc.returncode}\n{out}")
    _clean_exit(proc, out)
    check_answers(r, answers)


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
