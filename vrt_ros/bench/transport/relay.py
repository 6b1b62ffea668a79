"""The zero-work relay: the transport floor of the end-to-end bench (``python -m vrt_ros.bench.transport.ros_e2e``, backend
``floor``).

It subscribes to the frames exactly as the detector node does (``<ns>/camera/image_raw`` or
``.../image_raw/compressed``, the same QoS preset and depth, its own callback group, a ``SingleThreadedExecutor``,
the same Fast DDS profile choice ``--dds-profile``) and answers each frame at once, from the subscription callback,
with an empty ``vision_msgs/Detection2DArray`` carrying the frame's header on ``<ns>/camera/detections`` (reliable,
depth 10, as the node), serialized as the node serializes its detections (:mod:`vrt_ros.ros.cdr`). So
``stamp → answer`` of this process is what moving the frame through DDS and rclpy costs, with no work at all; the
node's figure minus this is the node's own time.

Usage::

    python -m vrt_ros.bench.transport.relay [--compressed] [--qos reliable] [--depth 1] [--dds-profile auto|none|FILE]
                                  [--namespace /vrt_e2e] [--cameras camera,cam1,...]

``--cameras``: one subscription and one answer topic per camera, as the node with several cameras (the
many-camera bench, :mod:`vrt_ros.bench.cameras.cameras_e2e`); with ``--worker`` only one camera.

DDS stays on this machine: the bench starts it with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and its domain id.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from vrt_ros.ros import dds

CAMERA = "camera"


def main(argv: Sequence[str] | None = None) -> int:
    """Relay until SIGINT. Returns 0, or 2 on a bad ``--dds-profile``."""
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.transport.relay", description=__doc__.splitlines()[0])
    ap.add_argument("--compressed", action="store_true", help="subscribe to sensor_msgs/CompressedImage")
    ap.add_argument("--qos", default="reliable", help="input QoS preset, as the node's input.qos (default reliable)")
    ap.add_argument("--depth", type=int, default=1, help="input QoS depth, as the node's input.depth (default 1)")
    ap.add_argument("--namespace", default="/vrt_e2e", help="ROS namespace (default /vrt_e2e)")
    ap.add_argument("--worker", action="store_true",
                    help="answer from a worker thread woken by the callback (the node's hand-off) instead of the callback")
    ap.add_argument("--cameras", default=CAMERA, help=f"comma-separated camera namespaces (default {CAMERA})")
    dds.add_argument(ap)
    args = ap.parse_args(argv)
    cameras = [c for c in args.cameras.split(",") if c]
    if args.worker and len(cameras) != 1:
        ap.error("--worker relays one camera")
    try:
        choice = dds.apply(args.dds_profile)  # before rclpy.init, as the node's main()
    except Exception as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return 2
    import rclpy
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import CompressedImage, Image
    from vision_msgs.msg import Detection2DArray

    from vrt_ros.ros import cdr
    from vrt_ros.ros.qos import make_qos

    import threading
    import time

    import numpy as np

    rclpy.init()
    node = Node("vrt_relay", namespace=args.namespace)
    pubs = {c: node.create_publisher(Detection2DArray, f"{c}/detections", make_qos("reliable", 10)) for c in cameras}
    pub = pubs[cameras[0]]
    inbound_ms: list[float] = []  # header stamp (the bench's wall clock) -> this process's callback
    answer_ms: list[float] = []  # callback -> answer published

    def publish(msg, t_cb: float, out=pub) -> None:
        h = msg.header
        out.publish(cdr.detection_array(cdr.header_bytes(int(h.stamp.sec), int(h.stamp.nanosec), str(h.frame_id)), ()))
        answer_ms.append((time.perf_counter() - t_cb) * 1e3)

    slot: list = []
    wake = threading.Condition()

    def worker() -> None:
        while True:
            with wake:
                while not slot:
                    wake.wait()
                item = slot.pop()
            if item is None:
                return
            publish(*item)

    def answer(msg, out=pub) -> None:
        t_cb = time.perf_counter()
        h = msg.header
        inbound_ms.append((time.time_ns() - (int(h.stamp.sec) * 1_000_000_000 + int(h.stamp.nanosec))) / 1e6)
        if not args.worker:
            publish(msg, t_cb, out)
            return
        with wake:
            slot[:] = [(msg, t_cb)]
            wake.notify()
        time.sleep(0)  # as the node: let the worker take it now

    thread = threading.Thread(target=worker, daemon=True) if args.worker else None
    if thread is not None:
        thread.start()

    for cam in cameras:
        topic = f"{cam}/image_raw/compressed" if args.compressed else f"{cam}/image_raw"
        node.create_subscription(CompressedImage if args.compressed else Image, topic,
                                 lambda msg, out=pubs[cam]: answer(msg, out), make_qos(args.qos, args.depth),
                                 callback_group=MutuallyExclusiveCallbackGroup())
        node.get_logger().info(f"relay {topic} -> {cam}/detections; {choice.reason}")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if inbound_ms:  # the split of the floor: into this process, and out of it
            p = lambda a: "p50 %.2f p99 %.2f" % tuple(np.percentile(a, (50, 99)))  # noqa: E731
            print(f"relay: {len(inbound_ms)} frames; stamp -> callback {p(inbound_ms)} ms; callback -> answer "
                  f"published {p(answer_ms)} ms", flush=True)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
