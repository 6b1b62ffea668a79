"""Every shipped robot YAML, as ``detector_node --ros-args --params-file config/<robot>.yaml`` (issue 11): the node
starts from the file as rcl reads it (``[]`` is "not set": the schema default) and answers a real replayed bag;
Ctrl-C to its process group ends it with exit code 0 and no traceback. The same through ``ros2 launch``:
test_launch_real.py.
"""

from __future__ import annotations

import sys

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")

from robot_replay import check_answers, child_env, interrupt, model_override, replay_and_collect, robot, robot_names, start  # noqa: E402
from ros_testing import unique_namespace  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.mark.parametrize("name", robot_names())
def test_detector_node_with_every_robot_yaml_answers_a_replayed_bag(name, shared_dir, tmp_path):
    r = robot(name)
    override = model_override(r, shared_dir, tmp_path)
    ns = unique_namespace()
    proc = start([sys.executable, "-m", "vrt_ros.ros.main", "--ros-args", "--params-file", str(r.yaml),
                  "--params-file", str(override), "-p", "use_sim_time:=true", "-r", f"__ns:={ns}"], child_env())
    try:
        answers = replay_and_collect(ns, r, shared_dir)
    finally:
        out = interrupt(proc)
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    check_answers(r, answers)
