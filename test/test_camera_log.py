"""The node's own log about its cameras (vrt_ros.ros.camera_log): drops, silence, shutdown summary.

Pure: fake cameras with the node's counter layout and a fake clock; the node-level check (the real node's log on a
replay) is test_node.py::test_node_logs_superseded_silent_cameras_and_a_summary.
"""

from __future__ import annotations

import threading
from collections import Counter
from types import SimpleNamespace

import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")

from vrt_ros.ros.camera_log import DROP_LOG_PERIOD_S, SILENT_AFTER_S, CameraLog, drop_hint  # noqa: E402


def _camera(name: str):
    counters = SimpleNamespace(received=0, processed=0, dropped=Counter())
    return SimpleNamespace(name=name, slot_lock=threading.Lock(), counters=counters, last_frame_mono=float("-inf"),
                           sub=SimpleNamespace(topic_name=f"/robot/{name}/image_raw"))


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _log():
    warns: list[str] = []
    infos: list[str] = []
    return warns, infos


def test_superseded_frames_are_reported_per_camera_with_the_parameter_to_change():
    front, rear = _camera("front"), _camera("rear")
    clock = _Clock()
    warns, infos = _log()
    log = CameraLog([front, rear], warns.append, infos.append, clock=clock)
    for i in range(1, 11):  # front: 10 frames in 1 s, 6 superseded; rear: frames, none dropped
        front.counters.received, rear.counters.received = i, i
        front.last_frame_mono = rear.last_frame_mono = clock.t
    front.counters.dropped["superseded"] = 6
    clock.t += 1.0
    log.tick()
    assert len(warns) == 1 and "camera 'front'" in warns[0]
    assert "6 of 10 frames dropped (superseded)" in warns[0] and "engine.threads" in warns[0]
    # more drops within DROP_LOG_PERIOD_S: counted, not logged; after it: one line with the drops since the last one
    front.counters.dropped["superseded"] = 9
    front.counters.received = 20
    front.last_frame_mono = rear.last_frame_mono = clock.t
    clock.t += 1.0
    log.tick()
    assert len(warns) == 1
    clock.t += DROP_LOG_PERIOD_S
    front.last_frame_mono = rear.last_frame_mono = clock.t
    log.tick()
    assert len(warns) == 2 and "3 of 10 frames dropped (superseded)" in warns[1] and "9 since start" in warns[1]


def test_a_silent_camera_is_reported_once_with_its_topic_and_again_when_it_resumes():
    front, rear = _camera("front"), _camera("rear")
    clock = _Clock()
    warns, infos = _log()
    log = CameraLog([front, rear], warns.append, infos.append, clock=clock)
    front.counters.received, front.last_frame_mono = 1, clock.t
    clock.t += SILENT_AFTER_S - 0.5
    front.last_frame_mono = clock.t
    log.tick()
    assert warns == []
    clock.t += 1.0
    front.last_frame_mono = clock.t
    log.tick()
    log.tick()
    assert len(warns) == 1
    assert "camera 'rear': no frame received" in warns[0] and "since start" in warns[0]
    assert "/robot/rear/image_raw" in warns[0] and "input.qos" in warns[0]
    rear.counters.received, rear.last_frame_mono = 1, clock.t
    log.tick()
    assert infos == ["camera 'rear': frames arriving again on /robot/rear/image_raw"]


def test_a_silent_camera_with_publishers_names_them_and_their_dds_profile_only_when_nothing_ever_arrived():
    from vrt_ros.ros import dds

    front, rear = _camera("front"), _camera("rear")
    clock = _Clock()
    warns, infos = _log()
    asked: list[str] = []

    def publishers(topic: str):
        asked.append(topic)
        return [SimpleNamespace(node_name="usb_cam", node_namespace="/robot"),
                SimpleNamespace(node_name="bag_player", node_namespace="/")]

    log = CameraLog([front, rear], warns.append, infos.append, clock=clock, publishers=publishers)
    rear.counters.received = 3  # rear had frames, then stopped: no DDS profile problem (its frames arrived)
    rear.last_frame_mono = clock.t
    clock.t += SILENT_AFTER_S + 1
    log.tick()
    assert asked == ["/robot/front/image_raw"]
    assert "2 publisher(s) (/bag_player, /robot/usb_cam) publish there" in warns[0]
    assert dds.publisher_fix() in warns[0] and str(dds.PROFILE) in warns[0]
    assert "camera 'rear'" in warns[1] and "since its last frame" in warns[1] and "Fast DDS" not in warns[1]


def test_summary_lists_every_camera_with_drops_by_reason():
    front, rear = _camera("front"), _camera("rear")
    clock = _Clock()
    warns, infos = _log()
    log = CameraLog([front, rear], warns.append, infos.append, clock=clock)
    front.counters.received, front.counters.processed = 40, 36
    front.counters.dropped.update({"superseded": 3, "stale": 1, "bad_size": 0})
    front.last_frame_mono = clock.t + 2.0
    clock.t += 4.0
    lines = log.summary()
    assert lines[0] == ("camera 'front' (/robot/front/image_raw): received 40, processed 36, dropped 4 "
                        "(stale 1, superseded 3) in 4.0 s; last frame 2.0 s ago")
    assert lines[1].startswith("camera 'rear' (/robot/rear/image_raw): received 0,") and "last frame never" in lines[1]
    assert infos == [f"summary: {line}" for line in lines]


def test_every_drop_reason_has_a_hint():
    from vrt_ros.errors import FrameError

    assert "input.max_age_ms" in drop_hint("stale")
    assert "model.path" in drop_hint("engine_error")
    assert "encoding" in drop_hint("unknown_encoding") and "encoding" in drop_hint("short_data")
    assert "input.compressed" in drop_hint("unsupported_format")
    assert FrameError  # the frame faults share the generic hint
