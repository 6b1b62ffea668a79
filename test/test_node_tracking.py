"""Tracking through the node (issue 24) on real DDS: track ids in ``Detection2D.id`` and in the keypoints' parent id,
one tracker per camera (also with a pipeline shared by two nodes), resets on deactivate/activate, and HC-19: a bag
replayed in a loop (stamps jump back), with and without ``use_sim_time``.

The detector is the synthetic blob model of test_node.py: its box is where the test drew the object, so a moving
object is a moving box with score 1.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")
pytest.importorskip("scipy", reason="scipy not installed (runtime dependency of tracking)")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from lifecycle_msgs.msg import Transition  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end, brightness_end2end, constant_yolov8, ramp_rectangle  # noqa: E402
from test_lifecycle import Lifecycle, managed_node  # noqa: E402
from test_node import Collector, _lock_step, blob_node, image_msg, overrides, settled, wait_matched, wait_until  # noqa: E402
from vrt_ros.inference.pipeline import make_pipeline  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.settings import config  # noqa: E402
from vrt_ros.tools.demo_bag import Frame, write_image_bag  # noqa: E402
from vrt_ros.tools.replay import BagPlayer  # noqa: E402

pytestmark = pytest.mark.ros

TRACKING = dict(tracking__enabled=True, tracking__min_hits=2)
LOOP_FRAMES = 8


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", 320, 320)


def walking(i: int) -> np.ndarray:
    """Frame ``i`` of an object walking right, 8 px a frame."""
    x = 40.0 + 8.0 * i
    return ramp_rectangle(320, 240, (x, 60.0, x + 100.0, 180.0))


def stamped(bgr: np.ndarray, t_ns: int, frame_id: str = "cam_optical") -> Image:
    msg = image_msg(bgr, t_ns // 1_000_000_000, frame_id)
    msg.header.stamp.nanosec = t_ns % 1_000_000_000
    return msg


def send(node, pub, frames: list[Image], camera: str = "camera", start: int = 0) -> None:
    """Publish frames one by one, each processed before the next (none superseded)."""
    for k, msg in enumerate(frames):
        pub.publish(msg)
        assert settled(node, start + k + 1, camera)


def ids_of(msgs) -> list[list[str]]:
    """Each message's ids, a track id as its count ``n`` in its counter (``"1"``, ``"2"``, ...; the format
    ``epoch_ms * 1000000 + n`` of vrt_ros.tracking.ids, its epoch checked to be within the last hour)."""
    return [[short_id(d.id) for d in m.detections] for m in msgs]


def short_id(track_id: str) -> str:
    if track_id == "":
        return ""
    epoch_ms, n = divmod(int(track_id), 1_000_000)
    assert 0 <= time.time() * 1e3 - epoch_ms < 3_600_000, track_id
    return str(n)


def through(ctx, ns: str, node, frames: list[Image], topics=("camera/detections",), timeout_s: float = 10.0) -> dict:
    """Send ``frames`` to the node's camera one by one (each processed before the next) and return every message
    of each topic (``/diagnostics`` as DiagnosticArray, the others Detection2DArray). Destroys the node."""
    client = Node("client", context=ctx, namespace=ns)
    out = {t: Collector(client, DiagnosticArray if t == "/diagnostics" else Detection2DArray, t) for t in topics}
    pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
    with spinning(ctx, node, client):
        wait_matched(pub)
        send(node, pub, frames)
        got = {t: c.wait(len(frames) if t != "/diagnostics" else 1, timeout_s) for t, c in out.items()}
        if "/diagnostics" in out:  # a message sent after every frame was processed (issue 33: not any message)
            def after_frames():
                return [m for m in out["/diagnostics"].wait(0, 0) if _tracking_values(m, processed=len(frames))]

            assert wait_until(after_frames, timeout_s)
            got["/diagnostics"] = after_frames()
    client.destroy_node()
    node.destroy_node()
    return got


def _tracking_values(msg, processed: int | None = None) -> dict[str, str]:
    """The ``tracking.*`` values of ``msg``'s camera status (of the status that counts ``processed`` frames, if
    given: a message the node sent after it had processed them)."""
    out = {}
    for st in msg.status:
        values = {kv.key: kv.value for kv in st.values}
        if processed is None or values.get("processed") == str(processed):
            out.update({k: v for k, v in values.items() if k.startswith("tracking.")})
    return out


@pytest.mark.parametrize("raw", [False, True], ids=["typed", "raw_subscription"])
def test_track_ids_persist_and_tentative_tracks_publish_an_empty_id(blob_model, raw):
    ns = unique_namespace()
    sent = [stamped(walking(i), 5_000_000_000 + i * 100_000_000) for i in range(6)]
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, input__raw_subscription=raw, **TRACKING)
        got = through(ctx, ns, node, sent, ("camera/detections", "/diagnostics"))
    dets = got["camera/detections"]
    status = _tracking_values(got["/diagnostics"][0], processed=len(sent))
    assert [m.header for m in dets] == [m.header for m in sent]
    assert ids_of(dets) == [[""]] + [["1"]] * 5  # min_hits 2: the first frame has no confirmed track yet
    assert status["tracking.resets"] == "0" and status["tracking.confirmed"] == "1"


def test_without_tracking_the_id_is_the_index_in_the_frame(blob_model):
    ns = unique_namespace()
    with private_context() as ctx:
        got = through(ctx, ns, blob_node(ctx, ns, blob_model),
                      [stamped(walking(i), 5_000_000_000 + i * 100_000_000) for i in range(3)])
    assert [[d.id for d in m.detections] for m in got["camera/detections"]] == [["0"]] * 3


def test_keypoints_carry_the_track_id_of_their_detection(tmp_path):
    out = np.zeros((1, 5 + 3 * 17, 4), np.float32)
    out[0, :5, 0] = [320, 320, 100, 200, 0.9]  # one person (engine pixels), the same in every frame
    out[0, 5::3, 0] = 280 + 5 * np.arange(17)
    out[0, 6::3, 0] = 250.0
    out[0, 7::3, 0] = 0.8
    model = constant_yolov8(tmp_path / "pose.onnx", 640, 640, out)
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, parameter_overrides=overrides(
            backend="cpu", model__path=str(model), model__head="yolov8_pose", input__qos="reliable", **TRACKING))
        got = through(ctx, ns, node, [stamped(np.zeros((640, 640, 3), np.uint8), 7_000_000_000 + i * 50_000_000)
                                      for i in range(3)], ("camera/detections", "camera/keypoints"))
    assert ids_of(got["camera/detections"]) == [[""], ["1"], ["1"]]
    assert [set(ids) for ids in ids_of(got["camera/keypoints"])] == [{""}, {"1"}, {"1"}]
    assert all(len(m.detections) == 17 for m in got["camera/keypoints"])


def test_two_nodes_sharing_one_pipeline_track_their_cameras_apart(blob_model):
    """Each camera has its own tracker: ids start at 1 per camera, whatever the other camera or node does."""
    shared = make_pipeline(config.validate({"backend": "cpu", "model.path": str(blob_model), "model.pad_value": 0.0,
                                            "tracking.enabled": True}), log=lambda m: None)
    params = dict(model__path=str(blob_model), input__qos="reliable", input__depth=10, **TRACKING)
    ns = unique_namespace()
    try:
        with private_context() as ctx:
            a = DetectorNode("det_a", context=ctx, namespace=ns, pipeline=shared,
                             parameter_overrides=overrides(cameras=["front", "left"], **params))
            b = DetectorNode("det_b", context=ctx, namespace=ns, pipeline=shared,
                             parameter_overrides=overrides(cameras=["rear"], **params))
            client = Node("client", context=ctx, namespace=ns)
            out = {cam: Collector(client, Detection2DArray, f"{cam}/detections") for cam in ("front", "left", "rear")}
            pubs = {cam: client.create_publisher(Image, f"{cam}/image_raw", make_qos("reliable", 10)) for cam in out}
            with spinning(ctx, a, b, client):
                for p in pubs.values():
                    wait_matched(p)
                threads = [threading.Thread(target=send, args=(node, pubs[cam], [
                    stamped(walking(i + shift), 9_000_000_000 + i * 100_000_000, cam) for i in range(5)], cam))
                    for node, cam, shift in ((a, "front", 0), (a, "left", 6), (b, "rear", 12))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                got = {cam: c.wait(5) for cam, c in out.items()}
            client.destroy_node()
            a.destroy_node()
            b.destroy_node()
    finally:
        shared.close()
    for cam, msgs in got.items():
        assert ids_of(msgs) == [[""]] + [["1"]] * 4, cam
        assert all(m.header.frame_id == cam for m in msgs)


def test_deactivate_and_activate_reset_the_tracks(blob_model):
    ns = unique_namespace()
    with private_context() as ctx:
        node = managed_node(ctx, ns, blob_model, **TRACKING)
        client = Node("client", context=ctx, namespace=ns)
        lc = Lifecycle(client, node.get_fully_qualified_name())
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            assert lc.set(Transition.TRANSITION_CONFIGURE) and lc.set(Transition.TRANSITION_ACTIVATE)
            wait_matched(pub)
            send(node, pub, [stamped(walking(i), 3_000_000_000 + i * 100_000_000) for i in range(3)])
            assert lc.set(Transition.TRANSITION_DEACTIVATE) and lc.set(Transition.TRANSITION_ACTIVATE)
            wait_matched(pub)
            # the next stamps continue smoothly: only the deactivation can explain a reset
            send(node, pub, [stamped(walking(i), 3_000_000_000 + i * 100_000_000) for i in range(3, 6)], start=3)
            got = dets.wait(6)
        client.destroy_node()
        node.destroy_node()
    assert ids_of(got) == [[""], ["1"], ["1"], [""], ["2"], ["2"]]


def test_HC_25_ids_never_repeat_across_cleanup_configure_and_a_restart(blob_model):
    """HC-25: a managed node tracks an object, goes through deactivate -> cleanup -> configure -> activate and tracks
    another, then a new node (a restart, or a standby taking over: a new id counter) tracks a third. Each object
    has one id, and no id is published for two objects: the count goes on after the cleanup, and the restart's ids
    carry a later epoch."""
    ns = unique_namespace()
    phases = []
    with private_context() as ctx:
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        for restart in (False, True):
            node = managed_node(ctx, ns, blob_model, **TRACKING)
            lc = Lifecycle(client, node.get_fully_qualified_name())
            with spinning(ctx, node, client):
                for cycle in range(1 if restart else 2):
                    if cycle:
                        assert lc.set(Transition.TRANSITION_DEACTIVATE) and lc.set(Transition.TRANSITION_CLEANUP)
                    assert lc.set(Transition.TRANSITION_CONFIGURE) and lc.set(Transition.TRANSITION_ACTIVATE)
                    wait_matched(pub)
                    t0 = (4 + len(phases)) * 1_000_000_000  # the stamps continue: only the node explains new ids
                    send(node, pub, [stamped(walking(i), t0 + i * 100_000_000) for i in range(3)])
                    phases.append([d.id for m in dets.wait(3 * (len(phases) + 1))[-3:] for d in m.detections])
            node.destroy_node()
        client.destroy_node()
    assert [p[0] for p in phases] == [""] * 3, phases  # each phase's object is new
    ids = [p[1] for p in phases]
    assert all(p[1:] == [i, i] for p, i in zip(phases, ids)), phases
    assert len(set(ids)) == 3, ids  # never one id for two objects
    epochs = [int(i) // 1_000_000 for i in ids]
    assert [short_id(i) for i in ids] == ["1", "2", "1"] and epochs[0] == epochs[1] < epochs[2], ids


def test_an_unstamped_frame_in_a_stamped_stream_keeps_the_tracks(blob_model):
    """A camera whose driver stamps its frames with the ROS clock sends one frame with stamp 0: it is tracked on the
    node's ROS clock (its arrival, less the stream's delay), not taken as a jump back that resets every track."""
    ns = unique_namespace()
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, **TRACKING)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            for i in range(6):
                pub.publish(stamped(walking(i), 0 if i == 3 else time.time_ns()))
                assert settled(node, i + 1)
                time.sleep(0.05)
            got = dets.wait(6)
            resets = node._cameras["camera"].tracker.resets
        client.destroy_node()
        node.destroy_node()
    assert [m.header.stamp.sec == 0 for m in got] == [False, False, False, True, False, False]
    assert ids_of(got) == [[""]] + [["1"]] * 5 and resets == 0


# ------------------------------------------------------------------------------------------- HC-19
@pytest.fixture(scope="module")
def walking_bag(tmp_path_factory) -> Path:
    """LOOP_FRAMES frames at 10 Hz of an object walking right, as a rosbag2 (stamps 2023, as the shared bags)."""
    path = tmp_path_factory.mktemp("bags") / "walking"
    t0 = 1_690_000_000_000_000_000
    write_image_bag(path, [Frame(i, f"frame_{i}", walking(i), t0 + i * 100_000_000) for i in range(LOOP_FRAMES)],
                    topic="/camera/image_raw")
    return path


@pytest.mark.parametrize("use_sim_time", [True, False], ids=["use_sim_time", "wall_clock"])
def test_HC_19_bag_loop_resets_the_tracks_and_no_id_survives(blob_model, walking_bag, use_sim_time, capfd):
    """HC-19: tracking on, a bag replayed three times in a loop (``replay --loop`` is the same player with no end;
    with ``--clock`` for use_sim_time): at each jump back the tracks reset (logged at INFO), every pass gets its own
    id and never one of an earlier pass, and nothing logs an error or a warning about time going backwards."""
    ns = unique_namespace()
    loops = 3
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, use_sim_time=use_sim_time, input__max_age_ms=0.0, **TRACKING)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        with spinning(ctx, node, client):
            with BagPlayer(client, walking_bag, remap={"/camera/image_raw": f"{ns}/camera/image_raw"},
                           clock_hz=100.0 if use_sim_time else 0.0) as player:
                assert player.wait_for_subscribers(1, 20.0)
                result = player.play(rate=1.0, loops=loops, on_message=_lock_step(dets))
            got = dets.wait(loops * LOOP_FRAMES, 20.0)
            if use_sim_time:
                sim_now = node.get_clock().now().nanoseconds
            resets = node._cameras["camera"].tracker.resets
        client.destroy_node()
        node.destroy_node()
    log = capfd.readouterr().err
    assert result.loops == loops and len(got) == loops * LOOP_FRAMES
    if use_sim_time:
        assert 1_690_000_000_000_000_000 <= sim_now < 1_690_000_001_000_000_000  # the node ran on the bag's clock
    passes = [ids_of(got[k * LOOP_FRAMES:(k + 1) * LOOP_FRAMES]) for k in range(loops)]
    ids = []
    for k, p in enumerate(passes):
        assert p[0] == [""], (k, p)  # reset at the jump: the first frame of every pass starts a new track
        assert len({i for f in p[1:] for i in f}) == 1, (k, p)  # one id for the whole pass
        ids.append(p[1][0])
    assert len(set(ids)) == loops, ids  # no track keeps an id across the loop
    assert resets == loops - 1
    assert log.count("tracks reset, stamp jumped back by 0.") == loops - 1, log
    assert "[ERROR]" not in log and "[WARN]" not in log, log
    assert not re.search(r"backwards|back in time|went back", log, re.IGNORECASE), log


def test_HC_19_replay_tool_with_loop_and_clock(blob_model, walking_bag, capfd):
    """HC-19 through the real tool: ``replay BAG --loop --clock`` (until interrupted) into a use_sim_time node with
    tracking. Passes are told apart by the header stamps going back; within each complete pass one id, a new one
    each pass (the first answered frame of a pass has none: the tracks were reset), and no error anywhere."""
    ns = unique_namespace()
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "PYTHONUNBUFFERED": "1"}
    with private_context() as ctx:
        node = blob_node(ctx, ns, blob_model, use_sim_time=True, input__max_age_ms=0.0, **TRACKING)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        with spinning(ctx, node, client):
            replay = subprocess.Popen(
                [sys.executable, "-m", "vrt_ros.tools.replay", str(walking_bag), "--loop", "--clock", "--qos", "reliable",
                 "--depth", "10", "--topic", f"/camera/image_raw={ns}/camera/image_raw"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                assert wait_until(lambda: _passes(dets.wait(0)) >= 4, 60.0), f"{_passes(dets.wait(0))} passes"
            finally:
                replay.send_signal(signal.SIGINT)
                out, err = replay.communicate(timeout=30)
            got = dets.wait(0)
        client.destroy_node()
        node.destroy_node()
    log = capfd.readouterr().err + err
    stamps = [m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in got]
    starts = [0] + [k for k in range(1, len(stamps)) if stamps[k] < stamps[k - 1]]
    passes = [ids_of(got[a:b]) for a, b in zip(starts, starts[1:])][1:]  # complete passes after the first
    ids = []
    for p in passes:
        assert p[0] == [""], passes  # reset at the jump back
        assert len({i for f in p[1:] for i in f}) == 1, passes
        ids.append(p[1][0])
    assert len(ids) >= 2 and len(set(ids)) == len(ids), ids  # no id survives a loop
    assert "[ERROR]" not in log and "Traceback" not in log, log
    assert not re.search(r"backwards|back in time|went back", log, re.IGNORECASE), log


def _passes(msgs) -> int:
    """How many times the header stamps went back (bag loops seen)."""
    stamps = [m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in msgs]
    return sum(b < a for a, b in zip(stamps, stamps[1:]))


def test_tracking_after_batched_inference_keeps_each_camera_apart(tmp_path):
    """engine.max_batch 2: the cameras' frames go through the batched pipeline call (one batch of two, or two of one
    when a camera's frame arrives after the worker took the other's: that depends on the scheduling, not the node),
    then each camera's own tracker gives its ids (the same fixed box on both cameras: two objects, each camera's
    id 1)."""
    model = brightness_end2end(tmp_path / "brightness.onnx", 320, 320, (10.0, 20.0, 100.0, 120.0))
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, parameter_overrides=overrides(
            backend="cpu", model__path=str(model), model__pad_value=0.0, input__qos="reliable", input__depth=10,
            cameras=["a", "b"], engine__max_batch=2, input__batch_wait_ms=200.0, **TRACKING))
        client = Node("client", context=ctx, namespace=ns)
        pubs = {c: client.create_publisher(Image, f"{c}/image_raw", make_qos("reliable", 10)) for c in "ab"}
        got = {c: Collector(client, Detection2DArray, f"{c}/detections") for c in "ab"}
        with spinning(ctx, node, client):
            for p in pubs.values():
                wait_matched(p)
            for i in range(4):
                for c in "ab":
                    pubs[c].publish(stamped(np.full((240, 320, 3), 240, np.uint8), 2_000_000_000 + i * 100_000_000, c))
                assert all(settled(node, i + 1, c) for c in "ab")
            out = {c: got[c].wait(4) for c in "ab"}
            batches = dict(node._worker.batch_sizes)
        client.destroy_node()
        node.destroy_node()
    assert sum(size * n for size, n in batches.items()) == 8, batches  # every frame through process_batch
    for c in "ab":
        assert ids_of(out[c]) == [[""], ["1"], ["1"], ["1"]], c
