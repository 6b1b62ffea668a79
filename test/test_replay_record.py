"""Replay (rosbag2 → graph, raw CDR) and record (graph → rosbag2 / JSON lines) on real DDS, private contexts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("sensor_msgs.msg", reason="sensor_msgs not installed")
pytest.importorskip("rosbags", reason="rosbags not installed")

from rclpy.node import Node  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from rosbags.rosbag2 import Reader, StoragePlugin, Writer  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from vrt_ros.errors import ConfigError  # noqa: E402
from vrt_ros.ros.qos import QOS_KEYS, make_qos, subscription_qos_events  # noqa: E402
from vrt_ros.tools.record import Recorder, message_to_dict  # noqa: E402
from vrt_ros.tools.replay import BagPlayer, parse_remap, play_bag  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[1]
TOPIC = "/camera/image_raw"
STORE = get_typestore(Stores.ROS2_JAZZY)


def _image_cdr(i: int, width: int = 32, height: int = 24) -> bytes:
    """A bgr8 Image with a distinct stamp, frame id and pixel pattern per index, serialized to CDR."""
    types = STORE.types
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=1_700_000_000 + i, nanosec=1000 * i), frame_id=f"cam_{i}"
    )
    data = (np.arange(height * width * 3, dtype=np.uint32) * (i + 1) % 251).astype(np.uint8)
    msg = types["sensor_msgs/msg/Image"](
        header=header, height=height, width=width, encoding="bgr8", is_bigendian=0, step=width * 3, data=data
    )
    return bytes(STORE.serialize_cdr(msg, "sensor_msgs/msg/Image"))


def _write_bag(path: Path, storage: str, n: int, period_ns: int = 100_000_000) -> list[bytes]:
    raws = [_image_cdr(i) for i in range(n)]
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=8, storage_plugin=plugin) as writer:
        conn = writer.add_connection(TOPIC, "sensor_msgs/msg/Image", typestore=STORE)
        for i, raw in enumerate(raws):
            writer.write(conn, 1_700_000_000_000_000_000 + i * period_ns, raw)
    return raws


def _read_bag(path: Path) -> list[tuple[str, int, bytes]]:
    with Reader(path) as reader:
        return [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages()]


class _Collector:
    """Subscribes with reliable QoS and keeps every raw message received."""

    def __init__(self, node: Node, topic: str, msg_type=Image) -> None:
        self.raws: list[bytes] = []
        node.create_subscription(msg_type, topic, self.raws.append, make_qos("reliable", 100), raw=True)

    def wait(self, n: int, timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while len(self.raws) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self.raws) >= n


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_replay_then_record_round_trips_raw_bytes(tmp_path, storage):
    src = tmp_path / "src"
    raws = _write_bag(src, storage, 6)
    ns = unique_namespace()
    with private_context() as ctx:
        node = Node("rr", context=ctx, namespace=ns)
        recorder = Recorder(node, {"out/image": "sensor_msgs/msg/Image"}, tmp_path / "rec", fmt=storage)
        with spinning(ctx, node):
            with BagPlayer(node, src, remap={TOPIC: f"{ns}/out/image"}) as player:
                assert player.wait_for_subscribers(1, 20.0)
                result = player.play(rate=4.0)
            assert result.published == {f"{ns}/out/image": 6}
            assert recorder.wait_for({"out/image": 6}, 10.0), recorder.counts()
        recorder.close()
        node.destroy_node()
    recorded = _read_bag(tmp_path / "rec")
    assert [t for t, _, _ in recorded] == [f"{ns}/out/image"] * 6
    assert [raw for _, _, raw in recorded] == raws  # byte for byte: headers and payloads unchanged
    stamps = [t for _, t, _ in recorded]
    assert stamps == sorted(stamps)


def test_record_jsonl_deserializes_headers(tmp_path):
    src = tmp_path / "src"
    _write_bag(src, "mcap", 3)
    ns = unique_namespace()
    out = tmp_path / "rec.jsonl"
    with private_context() as ctx:
        node = Node("rj", context=ctx, namespace=ns)
        with Recorder(node, {"img": "sensor_msgs/Image"}, out, fmt="jsonl") as recorder:
            with spinning(ctx, node):
                play_bag(node, src, rate=0, remap={TOPIC: f"{ns}/img"}, wait_subscribers=1, wait_timeout_s=20.0)
                assert recorder.wait_for({"img": 3}, 10.0)
        node.destroy_node()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["msg"]["header"]["frame_id"] for line in lines] == ["cam_0", "cam_1", "cam_2"]
    assert [line["msg"]["header"]["stamp"]["sec"] for line in lines] == [1_700_000_000 + i for i in range(3)]
    assert all(line["type"] == "sensor_msgs/msg/Image" and line["topic"] == f"{ns}/img" for line in lines)
    assert lines[0]["msg"]["width"] == 32 and "base64" in lines[0]["msg"]["data"]


def test_replay_rate_loops_and_speed(tmp_path):
    src = tmp_path / "src"
    _write_bag(src, "sqlite3", 5, period_ns=100_000_000)  # 0.4 s of recorded time
    ns = unique_namespace()
    with private_context() as ctx:
        node = Node("rl", context=ctx, namespace=ns)
        collector = _Collector(node, f"{ns}/img")
        with spinning(ctx, node):
            with BagPlayer(node, src, remap={TOPIC: f"{ns}/img"}) as player:
                assert player.message_count == 5
                assert player.wait_for_subscribers(1, 20.0)
                paced = player.play(rate=1.0)
                fast = player.play(rate=0, loops=2)
            assert collector.wait(15)
        node.destroy_node()
    assert paced.total == 5 and paced.loops == 1
    assert paced.wall_s >= 0.35  # recorded spacing honoured at rate 1
    assert fast.total == 10 and fast.loops == 2
    assert fast.wall_s < paced.wall_s


@pytest.mark.parametrize("bag", ["vtest_raw_sqlite3", "vtest_compressed_mcap"])
def test_replay_shared_bags_with_original_headers(shared_dir, bag):
    path = shared_dir / "data" / "bags" / bag
    stored = _read_bag(path)
    topic = stored[0][0]
    msg_type = Image if topic.endswith("image_raw") else CompressedImage
    ns = unique_namespace()
    with private_context() as ctx:
        node = Node("rs", context=ctx, namespace=ns)
        collector = _Collector(node, f"{ns}{topic}", msg_type)
        with spinning(ctx, node):
            result = play_bag(
                node, path, rate=0, remap={topic: f"{ns}{topic}"}, wait_subscribers=1, wait_timeout_s=20.0, depth=100
            )
            assert collector.wait(len(stored), 20.0), f"{len(collector.raws)} of {len(stored)}"
        node.destroy_node()
    assert result.total == len(stored)
    assert collector.raws == [raw for _, _, raw in stored]
    first = deserialize_message(collector.raws[0], msg_type)
    assert first.header.frame_id == "camera_optical_frame"
    assert first.header.stamp.sec * 10**9 + first.header.stamp.nanosec == 1_700_000_000_000_000_000


def test_replay_errors_name_the_problem(tmp_path):
    src = tmp_path / "src"
    _write_bag(src, "mcap", 1)
    with pytest.raises(ConfigError, match="FROM=TO"):
        parse_remap(["/a/b"])
    with private_context() as ctx:
        node = Node("re", context=ctx)
        with pytest.raises(ConfigError, match="/nope"):
            BagPlayer(node, src, topics=["/nope"])
        with pytest.raises(ConfigError, match="cannot open rosbag2"):
            BagPlayer(node, tmp_path / "missing")
        with pytest.raises(ConfigError, match="--qos"):
            BagPlayer(node, src, qos="fastest")
        with pytest.raises(ConfigError, match="did not appear"):
            Recorder(node, ["/never_published"], tmp_path / "x", discover_timeout_s=0.2)
        with pytest.raises(ConfigError, match="format"):
            Recorder(node, {"/a": "sensor_msgs/msg/Image"}, tmp_path / "y", fmt="csv")
        node.destroy_node()


def test_record_discovers_type_and_latched_qos(tmp_path):
    """A transient-local publisher that published before the recorder existed is still recorded (QoS adapted)."""
    from vrt_ros.ros.qos import latched_qos

    ns = unique_namespace()
    with private_context() as ctx:
        node = Node("rd", context=ctx, namespace=ns)
        pub = node.create_publisher(Image, "latched", latched_qos())
        msg = Image()
        msg.header.frame_id = "latched_frame"
        msg.width, msg.height, msg.encoding, msg.step = 1, 1, "mono8", 1
        msg.data = b"\x07"
        pub.publish(msg)
        with Recorder(node, ["latched"], tmp_path / "rec.jsonl", fmt="jsonl") as recorder:
            assert recorder.types == {f"{ns}/latched": "sensor_msgs/msg/Image"}
            with spinning(ctx, node):
                assert recorder.wait_for({"latched": 1}, 10.0)
        node.destroy_node()
    line = json.loads((tmp_path / "rec.jsonl").read_text().splitlines()[0])
    assert line["msg"]["header"]["frame_id"] == "latched_frame"


def test_incompatible_qos_warning_names_both_sides(capfd):
    """HC-06: a reliable subscription and a best-effort publisher do not match; the warning says so."""
    ns = unique_namespace()
    with private_context() as ctx:
        pub_node = Node("camera_driver", context=ctx, namespace=ns)
        sub_node = Node("detector", context=ctx, namespace=ns)
        pub_node.create_publisher(Image, "image_raw", make_qos("best_effort", 1))
        own = make_qos("reliable", 1)
        topic = f"{ns}/image_raw"
        sub_node.create_subscription(
            Image, "image_raw", lambda m: None, own, event_callbacks=subscription_qos_events(sub_node, topic, own)
        )
        text = ""
        with spinning(ctx, pub_node, sub_node):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "incompatible QoS" not in text:
                time.sleep(0.1)
                text += capfd.readouterr().err
        sub_node.destroy_node()
        pub_node.destroy_node()
    assert "incompatible QoS" in text
    assert "reliability=reliable" in text  # our side
    assert "camera_driver" in text and "reliability=best_effort" in text  # their side
    assert "input.qos" in text  # the fix


def test_qos_presets():
    for key in QOS_KEYS:
        assert make_qos(key, 3).depth == 3
    with pytest.raises(ConfigError, match="input.qos"):
        make_qos("fast", 1)
    with pytest.raises(ConfigError, match="depth"):
        make_qos("reliable", 0)


def test_message_to_dict_handles_bytes_and_nesting():
    msg = Image()
    msg.header.frame_id = "f"
    msg.data = b"\x01\x02"
    d = message_to_dict(msg)
    assert d["header"]["frame_id"] == "f" and d["data"] == {"base64": "AQI="}
    from diagnostic_msgs.msg import DiagnosticStatus

    assert message_to_dict(DiagnosticStatus(level=DiagnosticStatus.WARN))["level"] == 1


@pytest.mark.slow
def test_console_tools_replay_into_record(tmp_path):
    """The replay and record console tools as separate processes (python -m), as a user runs them."""
    src = tmp_path / "src"
    raws = _write_bag(src, "mcap", 4)
    ns = unique_namespace()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = tmp_path / "rec"
    rec = subprocess.Popen(
        [sys.executable, "-m", "vrt_ros.tools.record", str(out), f"{ns}/img:sensor_msgs/msg/Image", "--count", "4",
         "--duration", "30"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        play = subprocess.run(
            [sys.executable, "-m", "vrt_ros.tools.replay", str(src), "--rate", "5", "--topic", f"{TOPIC}={ns}/img",
             "--wait-timeout", "20"],
            env=env, capture_output=True, text=True, timeout=60,
        )
        assert play.returncode == 0, play.stderr
        assert "published 4 messages" in play.stdout
        rec_out, _ = rec.communicate(timeout=40)
    finally:
        if rec.poll() is None:
            rec.kill()
    assert rec.returncode == 0, rec_out
    assert [raw for _, _, raw in _read_bag(out)] == raws
