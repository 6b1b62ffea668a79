"""What a new user trips over on the first run (issue 15): set-up prerequisites, the demo's domain id and output
folders, the demo's timing columns, model-path errors judged by content."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vrt_ros.errors import ModelError
from vrt_ros.model.model_file import check_model_file, is_onnx_model, model_format
from vrt_ros.tools import demo, demo_report
from vrt_ros.types import Detections

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------ set-up
def _check(tmp_path: Path, path_dirs: list[Path], python: str = sys.executable, need_build: str = "1",
           disk_mb: str = "600") -> subprocess.CompletedProcess:
    script = f'. "{REPO}/scripts/progress.sh"; check_prerequisites "{python}" "{tmp_path}" {need_build}; echo passed'
    env = {"PATH": os.pathsep.join(str(p) for p in path_dirs), "VRT_DISK_NEEDED_MB": disk_mb, "HOME": str(tmp_path)}
    return subprocess.run([shutil.which("bash"), "-c", script], env=env, capture_output=True, text=True, timeout=60)


def _bin_with(folder: Path, *tools: str) -> Path:
    """A PATH folder holding links to the named tools only."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} not installed here, so the check cannot be shown passing")
        (folder / tool).symlink_to(found)
    return folder


def test_prerequisites_missing_are_listed_before_anything_is_downloaded(tmp_path):
    """No cmake and no compiler: the check fails with every missing item listed, and says nothing was downloaded."""
    folder = _bin_with(tmp_path / "bin", "df", "awk")
    result = _check(tmp_path, [folder])
    assert result.returncode == 1, result.stdout
    assert "nothing was downloaded" in result.stderr
    assert "cmake" in result.stderr and "C and C++ compiler" in result.stderr and "passed" not in result.stdout


def test_prerequisites_interpreter_and_disk_are_checked(tmp_path):
    folder = _bin_with(tmp_path / "full", "df", "awk", "cmake", "cc", "c++")
    assert _check(tmp_path, [folder]).stdout.strip() == "passed"
    too_old = _check(tmp_path, [folder], python="no-such-python")
    assert too_old.returncode == 1 and "no-such-python" in too_old.stderr
    full = _check(tmp_path, [folder], disk_mb="999999999")
    assert full.returncode == 1 and "free disk" in full.stderr
    # with vision_msgs importable elsewhere no build is needed, so cmake and the compiler are not required
    bare = _bin_with(tmp_path / "bare", "df", "awk")
    assert _check(tmp_path, [bare], need_build="0").stdout.strip() == "passed"


def test_long_steps_print_their_expected_duration_and_log_path(tmp_path):
    log = tmp_path / "logs" / "step.log"
    script = (f'. "{REPO}/scripts/progress.sh"; VRT_PROGRESS_S=1 run_logged build "about 2 s" "{log}" '
              'bash -c "echo \'[ 10%] a\'; sleep 1.5; echo \'[ 55%] b\'; sleep 1.5"')
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    assert lines[0] == f"  build: about 2 s; log: {log}"
    assert any(line.startswith("  build: still running after") and f"log: {log}" in line and "%]" in line
               for line in lines[1:-1]), lines
    assert lines[-1].startswith("  build: done in")
    failing = subprocess.run(["bash", "-c", f'. "{REPO}/scripts/progress.sh"; run_logged x "1 s" "{log}" '
                              'bash -c "echo boom; exit 3"'], capture_output=True, text=True, timeout=60)
    assert failing.returncode == 3 and "boom" in failing.stderr and f"full log: {log}" in failing.stderr


# ------------------------------------------------------------------------------------------------ the demo
@pytest.mark.parametrize("target", ["demo", "demo-coco"])
def test_make_demo_honours_the_domain_id_given(target):
    make = shutil.which("make")
    if make is None:
        pytest.skip("make not installed")

    # as from a user's shell: no command-line variables inherited from a calling make, whatever ROS_DOMAIN_ID says
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["ROS_DOMAIN_ID"] = "33"

    def command(*args: str) -> str:
        out = subprocess.run([make, "-n", target, *args], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=60).stdout
        return next(line for line in out.splitlines() if "vrt_ros.tools.demo" in line)

    assert "--domain-id 85" in command("ROS_DOMAIN_ID=85")
    assert f"--domain-id {demo.DEFAULT_DOMAIN_ID}" in command()


def test_demo_modes_write_to_separate_folders(tmp_path):
    assert demo.default_out_dir(False) != demo.default_out_dir(True)
    assert demo.default_out_dir(False).parent == demo.default_out_dir(True).parent == demo.DEFAULT_OUT
    pytest.importorskip("cv2", reason="OpenCV not installed")
    image = np.zeros((64, 64, 3), np.uint8)
    one = demo.FrameResult(demo.Frame(0, "a.jpg", image, 1), Detections.empty(), [], [], True)
    coco = demo.write_annotated([one], tmp_path / demo.default_out_dir(True))
    faces = demo.write_annotated([one], tmp_path / demo.default_out_dir(False))
    assert coco[0].exists() and faces[0].exists()  # the second run did not remove the first one's images


def test_crowded_frames_are_drawn_without_overlapping_labels(tmp_path):
    pytest.importorskip("cv2", reason="OpenCV not installed")
    import cv2

    image = np.full((200, 400, 3), 128, np.uint8)
    n = demo_report.MAX_LABELLED + 1
    boxes = np.asarray([[10 + 14 * i, 80, 20 + 14 * i, 100] for i in range(n)], np.float32)
    many = Detections(boxes, np.full(n, 0.9, np.float32), np.zeros(n, np.int32), np.zeros((n, 0, 3), np.float32))
    few = Detections(boxes[:1], many.scores[:1], many.class_ids[:1], many.keypoints[:1])
    paths = demo.write_annotated([demo.FrameResult(demo.Frame(0, "many", image, 1), many, ["face"] * n, [], True),
                                  demo.FrameResult(demo.Frame(1, "few", image, 2), few, ["face"], [], True)], tmp_path)
    # label bands are drawn above the boxes (rows < 80): untouched for the crowded frame, drawn for the other
    above_many = cv2.imread(str(paths[0]))[60:78, 10:30].astype(int)
    above_few = cv2.imread(str(paths[1]))[60:78, 10:30].astype(int)
    assert np.abs(above_many - 128).max() < 20
    assert np.abs(above_few - 128).max() > 60


def test_wall_time_runs_to_the_frames_last_output_and_the_legend_says_what_each_column_spans(tmp_path):
    """Keypoints arrive after the detections: wall ms runs to the later one, as node ms runs to the last publish."""
    frame = demo.Frame(0, "f", np.zeros((10, 10, 3), np.uint8), 1_000)
    result = demo.FrameResult(frame)
    det = {"header": {"stamp": {"sec": 0, "nanosec": 1_000}}, "detections": []}
    lines = [{"topic": "/camera/detections", "t_ns": 5_000_000, "msg": det},
             {"topic": "/camera/keypoints", "t_ns": 9_000_000, "msg": det}]
    jsonl = tmp_path / "o.jsonl"
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines))
    demo_report.fill_results([result], jsonl, "/camera/detections", "/camera/keypoints", [1_000_000], ())
    assert result.received and result.wall_ms == pytest.approx(8.0)
    result.callback_ms = 9.0  # a node span larger than the wall span: the legend must allow it
    _, _, legend = demo_report.latency_columns([result])
    assert "last output" in legend and "node ms can be the larger" in legend


# ------------------------------------------------------------------------------------------------ model files
def test_model_path_directory_is_named_as_such_with_the_models_in_it(tmp_path):
    (tmp_path / "yolox_nano.onnx").write_bytes(b"\x08\x07\x12\x04test")
    with pytest.raises(ModelError, match=r"is a directory, not a model file: set model.path .*yolox_nano.onnx"):
        check_model_file(tmp_path)
    with pytest.raises(ModelError, match="does not exist"):
        check_model_file(tmp_path / "nope.onnx")


def test_model_kind_is_judged_by_content_not_by_name(tmp_path):
    from synthetic_models import blob_end2end

    onnx_as_engine = blob_end2end(tmp_path / "blob.engine", 64, 64)
    assert model_format(onnx_as_engine) == "onnx" and is_onnx_model(onnx_as_engine)
    plan_as_onnx = tmp_path / "model.onnx"
    plan_as_onnx.write_bytes(b"ftrt" + bytes(60))
    assert model_format(plan_as_onnx) == "tensorrt" and not is_onnx_model(plan_as_onnx)
    ultralytics = tmp_path / "yolo.engine"
    meta = b'{"task": "detect"}'
    ultralytics.write_bytes(len(meta).to_bytes(4, "little") + meta + b"ftrt" + bytes(40))
    assert model_format(ultralytics) == "tensorrt"
    assert model_format(tmp_path / "missing.onnx") is None and is_onnx_model(tmp_path / "missing.onnx")


def test_cpu_path_loads_an_onnx_model_named_engine_and_refuses_a_plan_named_onnx(tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    from synthetic_models import blob_end2end

    from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine

    engine = OnnxRuntimeEngine(blob_end2end(tmp_path / "blob.engine", 64, 64))
    assert engine.inputs[0].shape == (1, 3, 64, 64)
    plan = tmp_path / "model.onnx"
    plan.write_bytes(b"ftrt" + bytes(60))
    with pytest.raises(ModelError, match="is a TensorRT engine"):
        OnnxRuntimeEngine(plan)


# ------------------------------------------------------------------------------------------------ teardown
def test_spin_threads_end_before_their_nodes_are_destroyed(monkeypatch):
    """Point 8: leaving ``spinning`` and destroying the nodes at once, with timers and messages in flight, raises
    nothing in any thread (pytest used to report InvalidHandle from a spin thread torn down under load)."""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
    import threading

    from rclpy.node import Node
    from std_msgs.msg import String

    from ros_testing import private_context, spinning, unique_namespace

    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    for _ in range(10):
        with private_context() as ctx:
            node = Node("teardown", context=ctx, namespace=unique_namespace())
            pub = node.create_publisher(String, "chatter", 10)
            node.create_subscription(String, "chatter", lambda _msg: None, 10)
            node.create_timer(0.001, lambda: pub.publish(String(data="x")))
            with spinning(ctx, node):
                threading.Event().wait(0.05)
            node.destroy_node()
    assert errors == []
