"""A parameter file none of whose sections applies to the node (issue 37): said first, naming the file, its sections
and the node, before the start-up error that the node's defaults then cause (an empty ``model.path``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")

from rclpy.context import Context  # noqa: E402
from rclpy.node import Node  # noqa: E402

from vrt_ros.ros import startup  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[1]

REMAPS = [
    [],
    ["-r", "__ns:=/robot1"],
    ["-r", "__ns:=/robot1/front"],
    ["-r", "__ns:=/"],
    ["-r", "__node:=front_det"],
    ["-r", "det:__node:=named", "-r", "__node:=other"],
    ["-r", "someone_else:__ns:=/x", "-r", "__ns:=/y", "-r", "__ns:=/z"],
    ["--remap", "det:__ns:=/a/b", "-r", "__name:=n2"],  # the namespace rule is matched against the new name
    ["-r", "n2:__ns:=/a/b", "-r", "__node:=n2"],
]


@pytest.mark.parametrize("rules", REMAPS, ids=lambda r: " ".join(r) or "none")
def test_node_fqn_before_rclpy_init_agrees_with_rcl(rules):
    argv = ["detector_node", "--ros-args", *rules]
    ctx = Context()
    rclpy.init(args=argv, context=ctx)
    try:
        node = Node("det", context=ctx, enable_rosout=False, start_parameter_services=False)
        expected = node.get_fully_qualified_name()
        node.destroy_node()
    finally:
        ctx.try_shutdown()
    assert startup.node_fqn("det", argv) == expected


def _node_process(*ros_args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "vrt_ros.ros.main", "--ros-args", *ros_args], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("key, fix", [("/other_node", "key a section by the node's name ('/**/vrt_detector:'"),
                                      ("/**/vrt_detektor", "'/**/vrt_detektor' is not 'vrt_detector'")])
def test_a_file_for_no_node_is_named_before_the_start_up_error(tmp_path, key, fix):
    f = tmp_path / "robot.yaml"
    f.write_text(f"{key}:\n  ros__parameters:\n    backend: cpu\n    model:\n      path: {tmp_path / 'm.onnx'}\n")
    proc = _node_process("--params-file", str(f), "-r", "__ns:=/robot1")
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("detector_node:")]
    assert lines, proc.stderr
    first = lines[0]
    assert f"parameter file {f} applies to none of this process's nodes (/robot1/vrt_detector)" in first, first
    assert f"its sections ({key}) match no node's name" in first, first
    assert fix in first, first
    assert any("start-up failed" in line and "model.path" in line for line in lines[1:]), proc.stderr
    assert proc.stderr.count("applies to none") == 1, proc.stderr  # not repeated section by section


def test_a_file_that_applies_is_not_reported(tmp_path):
    f = tmp_path / "robot.yaml"
    f.write_text(f"/**/vrt_detector:\n  ros__parameters:\n    model:\n      path: {tmp_path / 'm.onnx'}\n")
    other = tmp_path / "driver.yaml"  # for a node another process of the launch runs
    other.write_text("camera_driver:\n  ros__parameters:\n    fps: 30\n")
    argv = ["detector_node", "--ros-args", "--params-file", str(f), "--params-file", str(other)]
    assert startup.files_for_no_node(argv, ["vrt_detector"], ["camera_driver"]) == {}
    assert list(startup.files_for_no_node(argv, ["vrt_detector"])) == [str(other)]
