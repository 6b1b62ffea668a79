"""One camera of the many-camera bench (:mod:`vrt_ros.bench.cameras.cameras_e2e`): a publisher process on its own schedule.

Usage (started by the bench, one process per camera)::

    python -m vrt_ros.bench.cameras.camera_pub --camera cam0 --size 1920x1080 [--compressed | --encoding yuv422] --rate 30
        --go GO_FILE --ready READY_FILE --warmup-s 3 --offset-ms 4.2 --frames 300 --out sent_cam0.json [--shared DIR]

Frames are prepared before the run (the shared data's frames, resized to ``--size``; ``--compressed``: JPEG
quality 90, published as ``sensor_msgs/CompressedImage``; else a raw ``sensor_msgs/Image`` in ``--encoding``:
``bgr8``, or ``yuv422``, UYVY, BT.601 video range, :func:`vrt_ros.bench.frames.bgr_to_uyvy`), each message built
once; only the stamp changes per send. Start: once its frames are prepared and the node subscribed, the process
writes ``--ready`` and waits for ``--go`` to appear, holding the start (wall clock, ns; the same for every camera, so no camera starts late and sends
a catch-up burst). Schedule: ``--warmup-s`` of warm-up frames at ``--rate``, then the measured frames at
``start + offset + i / rate`` (absolute, so a late send does not shift the next ones;
``--offset-ms`` is the phase: the bench gives 0 to every camera for ``--phase sync``, ``k / (N x rate)`` for
``stagger``). Each frame's ``header.stamp`` = ``time.time_ns()`` just before ``publish``. ``--out``: the JSON of the
measured stamps sent (ns) and how long each ``publish`` took, for the bench to match against what came back.

Publisher QoS: reliable, depth ``--depth`` (10, as a camera driver's). DDS stays on this machine (the bench sets
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and the domain id in this process's environment). Exit status 0, 1
when no subscriber matched within ``--wait-s``, 2 on bad arguments or no frames.
"""

from __future__ import annotations

import argparse
import array
import json
import sys
import time
from pathlib import Path
from typing import Sequence

from vrt_ros.bench.common import parse_size
from vrt_ros.bench.frames import BYTES_PER_PIXEL
from vrt_ros.bench.transport.e2e_probe import NAMESPACE
from vrt_ros.ros import dds

JPEG_QUALITY = 90


def prepare(shared: Path | None, size: tuple[int, int], compressed: bool, first: int = 0,
            images: Sequence[Path] = (), encoding: str = "bgr8") -> list[bytes]:
    """The payloads, in send order (starting at source ``first``, so cameras do not send the same frame at once):
    JPEG bytes with ``compressed``, else the raw pixels in ``encoding`` (``bgr8`` or ``yuv422``).

    Raises:
        ValueError: no frames (see :func:`vrt_ros.bench.frames.load_sources`), or an odd width for yuv422.
    """
    import cv2

    from vrt_ros.bench.frames import bgr_to_uyvy, load_sources

    sources, _ = load_sources(shared if shared is not None and shared.is_dir() else None, images)
    sources = sources[first % len(sources):] + sources[: first % len(sources)]
    frames = [cv2.resize(s, size, interpolation=cv2.INTER_LINEAR) for s in sources]
    if compressed:
        return [cv2.imencode(".jpg", f, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])[1].tobytes() for f in frames]
    if encoding == "yuv422":
        return [bgr_to_uyvy(f).tobytes() for f in frames]
    return [f.tobytes() for f in frames]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.cameras.camera_pub", description=__doc__.splitlines()[0])
    ap.add_argument("--camera", required=True)
    ap.add_argument("--size", type=parse_size, required=True, help="WIDTHxHEIGHT")
    ap.add_argument("--compressed", action="store_true")
    ap.add_argument("--encoding", default="bgr8", choices=sorted(BYTES_PER_PIXEL), help="raw frames' encoding")
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--go", type=Path, required=True, help="file holding the start (wall-clock ns); waited for")
    ap.add_argument("--ready", type=Path, required=True, help="file written once ready to start")
    ap.add_argument("--warmup-s", type=float, default=3.0, help="seconds of frames before the measured ones")
    ap.add_argument("--offset-ms", type=float, default=0.0, help="this camera's phase after the warm-up, ms")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shared", type=Path, default=None)
    ap.add_argument("--images", action="append", default=[], type=Path, help="extra photo folder (repeatable)")
    ap.add_argument("--first", type=int, default=0, help="index of the first source frame (rotation)")
    ap.add_argument("--namespace", default=NAMESPACE)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--wait-s", type=float, default=60.0, help="longest wait for the node to subscribe")
    dds.add_argument(ap)
    args = ap.parse_args(argv)
    if args.rate <= 0 or args.frames < 1:
        ap.error("--rate must be > 0 and --frames >= 1")
    try:
        payloads = prepare(args.shared, args.size, args.compressed, args.first, args.images, args.encoding)
    except ValueError as exc:
        print(f"camera_pub: {exc}", file=sys.stderr)
        return 2
    dds.apply(args.dds_profile)
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CompressedImage, Image

    rclpy.init()
    node = Node(f"vrt_camera_{args.camera}", namespace=args.namespace)
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=args.depth, reliability=ReliabilityPolicy.RELIABLE)
    w, h = args.size
    msgs = []
    for data in payloads:
        m = CompressedImage() if args.compressed else Image()
        m.header.frame_id = f"{args.camera}_optical"
        if args.compressed:
            m.format = "jpeg"
        else:
            m.height, m.width, m.encoding, m.is_bigendian = h, w, args.encoding, 0
            m.step = w * BYTES_PER_PIXEL[args.encoding]
        m.data = array.array("B", data)
        msgs.append(m)
    topic = f"{args.camera}/image_raw/compressed" if args.compressed else f"{args.camera}/image_raw"
    pub = node.create_publisher(CompressedImage if args.compressed else Image, topic, qos)
    deadline = time.monotonic() + args.wait_s
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    if pub.get_subscription_count() < 1:
        print(f"camera_pub {args.camera}: no subscriber on {topic} within {args.wait_s} s", file=sys.stderr)
        node.destroy_node()
        rclpy.try_shutdown()
        return 1
    args.ready.write_text("ready\n")
    while not args.go.is_file() and time.monotonic() < deadline + args.wait_s:
        time.sleep(0.01)
    if not args.go.is_file():
        print(f"camera_pub {args.camera}: no start ({args.go}) within {args.wait_s} s", file=sys.stderr)
        node.destroy_node()
        rclpy.try_shutdown()
        return 1
    period_ns = int(1e9 / args.rate)
    start_ns = int(args.go.read_text().split()[0])
    first_ns = start_ns + int((args.warmup_s + args.offset_ms / 1e3) * 1e9)
    warm = 0
    # warm-up: the same rate and phase, ending before the measured schedule starts
    t = first_ns - period_ns * max(1, (first_ns - time.time_ns()) // period_ns)
    while t < first_ns:
        _sleep_until(t)
        _send(pub, msgs[warm % len(msgs)])
        warm += 1
        t += period_ns
    sent, publish_ms = [], []
    for i in range(args.frames):
        _sleep_until(first_ns + i * period_ns)
        m = msgs[i % len(msgs)]
        t0 = time.perf_counter()
        sent.append(_send(pub, m))
        publish_ms.append((time.perf_counter() - t0) * 1e3)
    time.sleep(0.5)  # reliable delivery of the last frames before the publisher goes
    part = args.out.with_name(args.out.name + ".part")  # written whole, then renamed: the bench reads it at once
    part.write_text(json.dumps({"camera": args.camera, "warmup_sent": warm, "stamps_ns": sent,
                                "publish_ms": publish_ms}) + "\n")
    part.rename(args.out)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def _sleep_until(t_ns: int) -> None:
    """Sleep until wall-clock ``t_ns`` (no busy wait: the publishers share the machine with the node)."""
    while (left := t_ns - time.time_ns()) > 0:
        time.sleep(left / 1e9)


def _send(pub, msg) -> int:
    stamp = time.time_ns()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
    pub.publish(msg)
    return stamp


if __name__ == "__main__":
    sys.exit(main())
