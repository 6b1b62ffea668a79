"""The two processes of the DDS floor study (:mod:`vrt_ros.bench.transport.dds_floor`): a paced frame publisher that
measures, and a zero-work relay that answers each frame with its header.

Each runs in a process of its own because Fast DDS reads its XML profile (``FASTRTPS_DEFAULT_PROFILES_FILE`` /
``FASTDDS_DEFAULT_PROFILES_FILE``) once, when the process creates its first participant: every variant needs fresh
processes on both sides.

Publisher (``python -m vrt_ros.bench.transport.dds_floor_procs publish WxH --frames N --rate HZ --qos Q [--preserialized]``):
publishes ``bgr8`` frames on ``dds_floor/image`` (``header.stamp`` = ``time.time_ns()`` just before ``publish``),
subscribes ``dds_floor/answer`` (``Detection2DArray``, reliable) and prints one JSON line: per frame the ``publish``
call's duration and stamp → answer received (ms), frames sent and answered, and its own CPU time (s).

Relay (``... relay --qos Q [--raw]``): subscribes ``dds_floor/image`` (typed, or ``raw=True`` and read by
:func:`vrt_ros.ros.cdr_read.read_image`) and answers from the callback with an empty ``Detection2DArray`` carrying
the frame's header (serialized as the node does, :mod:`vrt_ros.ros.cdr`); on SIGINT prints its CPU time and the
frames it answered as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import struct
import sys
import threading
import time


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def publish(size: str, frames: int, rate_hz: float, qos: str, preserialized: bool, warmup: int = 10) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    from vrt_ros.bench.common import parse_size
    from vrt_ros.ros.qos import make_qos

    w, h = parse_size(size)
    rclpy.init()
    node = rclpy.create_node("dds_floor_publisher")
    pub = node.create_publisher(Image, "dds_floor/image", make_qos(qos, 10))
    answered: dict[int, float] = {}
    lock = threading.Lock()

    def on_answer(msg) -> None:
        now = time.time_ns()
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with lock:
            answered[stamp] = (now - stamp) / 1e6

    node.create_subscription(Detection2DArray, "dds_floor/answer", on_answer, make_qos("reliable", 10))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    deadline = time.monotonic() + 20.0
    while (pub.get_subscription_count() < 1 or node.count_publishers("dds_floor/answer") < 1) and time.monotonic() < deadline:
        time.sleep(0.05)
    msg = Image(height=h, width=w, encoding="bgr8", step=w * 3, data=bytes(w * h * 3))
    msg.header.frame_id = "camera_optical_frame"
    raw = bytearray(serialize_message(msg)) if preserialized else None  # stamp at offset 4 (after the encapsulation)
    period = 1.0 / rate_hz
    publish_ms, stamps = [], []
    cpu0 = None
    t_next = time.monotonic()
    for i in range(warmup + frames):
        if i == warmup:
            cpu0 = _cpu_s()
        t_next += period
        stamp = time.time_ns()
        sec, ns = divmod(stamp, 1_000_000_000)
        t0 = time.perf_counter()
        if raw is not None:
            struct.pack_into("<iI", raw, 4, sec, ns)
            pub.publish(bytes(raw))
        else:
            msg.header.stamp.sec, msg.header.stamp.nanosec = sec, ns
            pub.publish(msg)
        t1 = time.perf_counter()
        if i >= warmup:
            publish_ms.append((t1 - t0) * 1e3)
            stamps.append(stamp)
        time.sleep(max(0.0, t_next - time.monotonic()))
    time.sleep(1.0)
    cpu = _cpu_s() - (cpu0 or 0.0)
    with lock:
        latency = [answered[s] for s in stamps if s in answered]
    print(json.dumps({"publish_ms": publish_ms, "latency_ms": latency, "sent": len(stamps), "answered": len(latency),
                      "cpu_s": cpu}), flush=True)
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def relay(qos: str, raw: bool, depth: int = 1) -> int:
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    from vrt_ros.ros import cdr
    from vrt_ros.ros.cdr_read import read_image
    from vrt_ros.ros.qos import make_qos

    rclpy.init()
    node = rclpy.create_node("dds_floor_relay")
    out = node.create_publisher(Detection2DArray, "dds_floor/answer", make_qos("reliable", 10))
    count = [0]

    def on_frame(msg) -> None:
        header = read_image(msg).header if raw else msg.header
        out.publish(cdr.detection_array(cdr.header_bytes(header.stamp.sec, header.stamp.nanosec, header.frame_id), ()))
        count[0] += 1

    node.create_subscription(Image, "dds_floor/image", on_frame, make_qos(qos, depth), raw=raw)
    cpu0 = _cpu_s()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.1)
    except ExternalShutdownException:
        pass
    print(json.dumps({"relay_cpu_s": _cpu_s() - cpu0, "relayed": count[0]}), flush=True)
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.transport.dds_floor_procs", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="role", required=True)
    p = sub.add_parser("publish")
    p.add_argument("size")
    p.add_argument("--frames", type=int, default=100)
    p.add_argument("--rate", type=float, default=10.0)
    p.add_argument("--qos", default="reliable")
    p.add_argument("--preserialized", action="store_true")
    r = sub.add_parser("relay")
    r.add_argument("--qos", default="reliable")
    r.add_argument("--raw", action="store_true")
    r.add_argument("--depth", type=int, default=1, help="subscription depth (default 1, as the node's input.depth)")
    args = ap.parse_args(argv)
    if args.role == "publish":
        return publish(args.size, args.frames, args.rate, args.qos, args.preserialized)
    return relay(args.qos, args.raw, args.depth)


if __name__ == "__main__":
    sys.exit(main())
