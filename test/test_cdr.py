"""The node's serialized detections (vrt_ros.ros.cdr) equal rclpy's serialization of the same message: same length,
same bytes but for the alignment padding (Fast CDR leaves padding bytes uninitialised, ours are zero), and they
deserialize to a message equal, field for field, to the one the Python message builders make."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")

from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from std_msgs.msg import Header  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from vrt_ros.ros.convert import detections_to_cdr, detections_to_msg, keypoints_to_cdr, keypoints_to_msg  # noqa: E402
from vrt_ros.types import Detections  # noqa: E402

LABELS = ("person", "bicycle", "café", "")  # a non-ASCII name, an empty one; ids >= 4 are published as numbers


def same_bytes_but_padding(ours: bytes, theirs: bytes) -> bool:
    """Equal length, and every byte equal except where ours is a zero padding byte (Fast CDR's are arbitrary)."""
    a, b = np.frombuffer(ours, np.uint8), np.frombuffer(theirs, np.uint8)
    return a.size == b.size and bool(np.all((a == b) | (a == 0)))


def random_detections(rng, n: int, k: int = 0) -> Detections:
    xy = rng.uniform(-5, 1900, (n, 2)).astype(np.float32)
    wh = rng.uniform(0, 400, (n, 2)).astype(np.float32)
    kps = np.concatenate([rng.uniform(0, 1080, (n, k, 2)), rng.uniform(0, 1, (n, k, 1))], axis=2).astype(np.float32)
    return Detections(boxes=np.concatenate([xy, xy + wh], axis=1), scores=rng.uniform(0, 1, n).astype(np.float32),
                      class_ids=rng.integers(0, 7, n).astype(np.int32), keypoints=kps)


@pytest.mark.parametrize("frame_id", ["", "c", "cam", "camera_optical_frame", "kamera_ü"])  # every alignment
def test_detections_serialize_as_rclpy_does(frame_id):
    rng = np.random.default_rng(len(frame_id))
    for n in (0, 1, 2, 7, 40):
        header = Header(frame_id=frame_id)
        header.stamp.sec, header.stamp.nanosec = int(rng.integers(-5, 2**31 - 1)), int(rng.integers(0, 10**9))
        dets = random_detections(rng, n)
        raw = detections_to_cdr(dets, header, LABELS)
        want = detections_to_msg(dets, header, LABELS)
        assert same_bytes_but_padding(raw, serialize_message(want)), (frame_id, n)
        back = deserialize_message(raw, Detection2DArray)
        assert back == want and len(back.detections) == n and back.header.frame_id == frame_id


def test_keypoints_serialize_as_rclpy_does():
    rng = np.random.default_rng(3)
    names = ("nose", "left_eye")  # the third keypoint has no name: published as "2"
    for n, frame_id in ((0, "a"), (1, "ab"), (3, "abc"), (5, "abcde")):
        dets = random_detections(rng, n, k=3)
        header = Header(frame_id=frame_id)
        header.stamp.sec = 17
        raw = keypoints_to_cdr(dets, header, names)
        want = keypoints_to_msg(dets, header, names)
        assert same_bytes_but_padding(raw, serialize_message(want)), (n, frame_id)
        back = deserialize_message(raw, Detection2DArray)
        assert back == want and len(back.detections) == 3 * n
