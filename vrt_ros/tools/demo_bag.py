"""The demo's frames and bags (:mod:`vrt_ros.tools.demo`): the :class:`Frame` type, writing photos into a rosbag2 as
``sensor_msgs/Image`` bgr8, and finding and decoding the image topic of a given bag. Uses rosbags (pure Python), no
rclpy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np


CAMERA = "camera"
IMAGE_TOPIC = f"/{CAMERA}/image_raw"
FRAME_ID = "camera_optical_frame"


# ------------------------------------------------------------------------------------------------ frames and bags
@dataclass
class Frame:
    """One input frame of the demo.

    Attributes:
        index: position in the bag, from 0.
        name: where it came from (photo file name, or ``frame_<i>`` for a bag).
        image: (H, W, 3) uint8 BGR pixels (for drawing).
        stamp_ns: header stamp, ns since the epoch.
    """

    index: int
    name: str
    image: np.ndarray
    stamp_ns: int


def image_msg_dict(image: np.ndarray, stamp_ns: int, frame_id: str) -> dict[str, Any]:
    """Field values of a packed ``bgr8`` ``sensor_msgs/Image`` holding ``image`` ((H, W, 3) uint8)."""
    h, w = image.shape[:2]
    return {
        "stamp": (stamp_ns // 1_000_000_000, stamp_ns % 1_000_000_000),
        "frame_id": frame_id,
        "height": h,
        "width": w,
        "encoding": "bgr8",
        "is_bigendian": 0,
        "step": w * 3,
        "data": np.ascontiguousarray(image, dtype=np.uint8).reshape(-1),
    }


def write_image_bag(path: Path, frames: Sequence[Frame], *, topic: str = IMAGE_TOPIC, frame_id: str = FRAME_ID) -> None:
    """Write frames as ``sensor_msgs/msg/Image`` (bgr8) into a new rosbag2 (sqlite3 storage) with rosbags.

    The bag timestamp of each message equals its header stamp.

    Args:
        path: bag directory to create (must not exist).
        frames: the frames, in order; each ``image`` (H, W, 3) uint8 BGR.
        topic: topic name.
        frame_id: header frame id.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    Image = store.types["sensor_msgs/msg/Image"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.SQLITE3)
    writer.open()
    try:
        conn = writer.add_connection(topic, "sensor_msgs/msg/Image", typestore=store)
        for f in frames:
            d = image_msg_dict(f.image, f.stamp_ns, frame_id)
            msg = Image(
                header=Header(stamp=Time(sec=d["stamp"][0], nanosec=d["stamp"][1]), frame_id=d["frame_id"]),
                height=d["height"], width=d["width"], encoding=d["encoding"], is_bigendian=d["is_bigendian"],
                step=d["step"], data=d["data"],
            )
            writer.write(conn, f.stamp_ns, store.serialize_cdr(msg, "sensor_msgs/msg/Image"))
    finally:
        writer.close()


def find_image_topic(bag: Path) -> tuple[str, bool]:
    """The one image topic of a bag and whether it is compressed.

    Returns:
        ``(topic, compressed)``.

    Raises:
        ValueError: no, or several, ``sensor_msgs/msg/Image`` / ``CompressedImage`` topics.
    """
    from rosbags.rosbag2 import Reader

    with Reader(bag) as reader:
        found = {
            c.topic: c.msgtype == "sensor_msgs/msg/CompressedImage"
            for c in reader.connections
            if c.msgtype in ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
        }
    if len(found) != 1:
        raise ValueError(f"{bag}: expected one Image or CompressedImage topic, found {sorted(found) or 'none'}")
    return next(iter(found.items()))


def read_bag_frames(bag: Path, topic: str) -> list[Frame]:
    """Decode every frame of an image topic to BGR (for drawing), with its header stamp.

    Raises:
        FrameError: a frame cannot be decoded (from :mod:`vrt_ros.intake.frames` / :mod:`vrt_ros.intake.compressed`).
    """
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    from vrt_ros.intake import frames as vframes
    from vrt_ros.intake.compressed import decode_compressed
    from vrt_ros.types import ImageSpec

    store = get_typestore(Stores.ROS2_JAZZY)
    out: list[Frame] = []
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if c.topic == topic]
        for i, (conn, _, raw) in enumerate(reader.messages(connections=conns)):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            if conn.msgtype.endswith("CompressedImage"):
                bgr = decode_compressed(msg.format, msg.data)
            else:
                spec = ImageSpec(msg.width, msg.height, msg.encoding, msg.step, bool(msg.is_bigendian))
                bgr = vframes.to_bgr(spec, msg.data).copy()
            stamp = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
            out.append(Frame(i, f"frame_{i:03d}", bgr, stamp))
    return out
