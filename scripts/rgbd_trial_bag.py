"""Make an RGB-D trial bag from colour-only bags, to try ``depth.enabled`` without an RGB-D camera.

Usage: ``.venv/bin/python scripts/rgbd_trial_bag.py OUT_BAG --camera front=BAG[:TOPIC] [--camera rear=BAG2 ...]
[--distance-m 5] [--encoding 16UC1|32FC1]``.

Writes one rosbag2 (mcap) ``OUT_BAG`` with, per ``--camera NAME=BAG``, the bag's colour frames (its one
``sensor_msgs/Image`` or ``sensor_msgs/CompressedImage`` topic, or ``:TOPIC``) on ``/NAME/image_raw`` or
``/NAME/image_raw/compressed``, bytes and headers unchanged, and for each colour frame, written 1 ms before it in
bag time so that the node holds them when the colour frame comes:

- ``/NAME/depth/image_raw``: a synthetic depth image registered to the colour frame (its header, its size): a flat
  wall ``--distance-m`` metres away, ``16UC1`` (millimetres) or ``32FC1`` (metres);
- ``/NAME/camera_info``: the same header and size, pinhole K with fx = fy = 0.8 x width (about 64 degrees across),
  cx = width / 2, cy = height / 2, ``plumb_bob`` with D = 0, P = [K | 0].

What the node then publishes (``depth.enabled: true``, default topics): every ``Detection3D`` at z = the distance,
x, y = z (u - 0.5 - cx) / fx, z (v - 0.5 - cy) / fy for the 2D box centre (u, v) (docs/depth.md: pixel i covers
[i, i + 1), K's pixel centres are at integers), size.z = 0. The K of each camera is printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

IMAGE, COMPRESSED = "sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage"
F_OVER_WIDTH = 0.8
AHEAD_NS = 1_000_000


def pinhole(width: int, height: int) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) in pixels of the trial camera_info for a ``width`` x ``height`` colour image."""
    f = F_OVER_WIDTH * width
    return f, f, width / 2.0, height / 2.0


def _colour_topic(reader: Reader, bag: Path, topic: str | None) -> tuple[str, str]:
    images = {c.topic: c.msgtype for c in reader.connections if c.msgtype in (IMAGE, COMPRESSED)}
    if topic is not None:
        if topic not in images:
            raise SystemExit(f"rgbd_trial_bag: {bag} has no image topic {topic}; its image topics: {sorted(images)}")
        return topic, images[topic]
    if len(images) != 1:
        raise SystemExit(f"rgbd_trial_bag: {bag} has {len(images)} image topics {sorted(images)}: name one as "
                         f"--camera NAME={bag}:TOPIC")
    return next(iter(images.items()))


def make_bag(out: Path, cameras: dict[str, tuple[Path, str | None]], distance_m: float = 5.0,
             encoding: str = "16UC1") -> dict[str, dict]:
    """Write the trial bag (module docstring); returns per camera ``{"frames", "size", "k", "topic"}``.

    Raises:
        SystemExit: a source bag without exactly one image topic (or without the one named), or ``out`` exists.
    """
    if out.exists():
        raise SystemExit(f"rgbd_trial_bag: {out} already exists; rosbag2 writes a new directory")
    ts = get_typestore(Stores.ROS2_JAZZY)
    T = ts.types
    items, report = [], {}
    for cam, (bag, topic) in cameras.items():
        with Reader(bag) as reader:
            src, msgtype = _colour_topic(reader, bag, topic)
            dst = f"/{cam}/image_raw" + ("/compressed" if msgtype == COMPRESSED else "")
            frames = 0
            for conn, t, raw in reader.messages([c for c in reader.connections if c.topic == src]):
                msg = ts.deserialize_cdr(raw, msgtype)
                if msgtype == COMPRESSED:
                    height, width = cv2.imdecode(np.asarray(msg.data), cv2.IMREAD_UNCHANGED).shape[:2]
                else:
                    height, width = msg.height, msg.width
                fx, fy, cx, cy = pinhole(width, height)
                if encoding == "16UC1":
                    depth = np.full((height, width), round(distance_m * 1000), np.uint16)
                else:
                    depth = np.full((height, width), distance_m, np.float32)
                items.append((t - AHEAD_NS, 0, f"/{cam}/camera_info", "sensor_msgs/msg/CameraInfo", T[
                    "sensor_msgs/msg/CameraInfo"](
                    header=msg.header, height=height, width=width, distortion_model="plumb_bob", d=np.zeros(5),
                    k=np.array([fx, 0, cx, 0, fy, cy, 0, 0, 1.0]), r=np.eye(3).ravel(),
                    p=np.array([fx, 0, cx, 0, 0, fy, cy, 0, 0, 0, 1.0, 0]), binning_x=0, binning_y=0,
                    roi=T["sensor_msgs/msg/RegionOfInterest"](x_offset=0, y_offset=0, height=0, width=0,
                                                              do_rectify=False))))
                items.append((t - AHEAD_NS, 1, f"/{cam}/depth/image_raw", IMAGE, T[IMAGE](
                    header=msg.header, height=height, width=width, encoding=encoding, is_bigendian=0,
                    step=width * depth.itemsize, data=np.frombuffer(depth.tobytes(), np.uint8))))
                items.append((t, 2, dst, msgtype, bytes(raw)))
                frames += 1
            report[cam] = {"frames": frames, "size": (width, height), "k": (fx, fy, cx, cy), "topic": dst}
    items.sort(key=lambda it: (it[0], it[1]))
    with Writer(out, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {}
        for t, _, topic, msgtype, msg in items:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=ts)
            writer.write(conns[topic], t, msg if isinstance(msg, bytes) else bytes(ts.serialize_cdr(msg, msgtype)))
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rgbd_trial_bag.py", description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="bag directory to create")
    p.add_argument("--camera", action="append", required=True, metavar="NAME=BAG[:TOPIC]",
                   help="a camera of the node and the colour bag that feeds it (repeatable)")
    p.add_argument("--distance-m", type=float, default=5.0, help="the synthetic wall's distance, metres (default 5)")
    p.add_argument("--encoding", choices=("16UC1", "32FC1"), default="16UC1", help="depth encoding (default 16UC1)")
    args = p.parse_args(argv)
    cameras = {}
    for spec in args.camera:
        name, sep, source = spec.partition("=")
        if not sep or not name or not source:
            p.error(f"--camera {spec!r}: expected NAME=BAG[:TOPIC]")
        bag, _, topic = source.partition(":")
        cameras[name] = (Path(bag), topic or None)
    if not 0.0 < args.distance_m < 65.0:
        p.error("--distance-m must be in (0, 65) metres (16UC1 holds up to 65.535 m)")
    report = make_bag(args.out, cameras, args.distance_m, args.encoding)
    for cam, r in report.items():
        fx, fy, cx, cy = r["k"]
        print(f"{cam}: {r['frames']} frames on {r['topic']}, {r['size'][0]}x{r['size'][1]}, depth/image_raw "
              f"{args.encoding} wall at {args.distance_m:g} m, camera_info K fx={fx:g} fy={fy:g} cx={cx:g} cy={cy:g}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
