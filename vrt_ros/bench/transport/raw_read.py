"""What a ``raw=True`` subscription with the raw-bytes reader saves against a typed one (issue 22, item 1).

Usage::

    python -m vrt_ros.bench.transport.raw_read [--sizes 640x480,1280x720,1920x1080] [--frames 200] [--domain-id 66]
                                     [--out results/bench]

Two measurements per frame size (bgr8 ``sensor_msgs/Image``, one message prepared before the run):

- ``convert``: the conversion alone, on the same serialized bytes: rclpy's ``deserialize_message`` (Fast CDR into
  the C message, then into the Python message: what a typed subscription does after the middleware's take) followed
  by :func:`vrt_ros.ros.convert.image_view`, against :func:`vrt_ros.ros.cdr_read.read_image`;
- ``take``: a publisher process (``--rate`` Hz, reliable, depth 1, the large-frames Fast DDS profile) and a
  subscription here (typed, then ``raw=True``): the subscribing thread's CPU time (``time.thread_time``) of the ``spin_once`` that delivers each frame, which holds the
  middleware's take, the conversion and the callback (the callback reads the frame as the node does).

Both print p50 / p99 in ms and write ``raw_read.json`` and ``raw_read.md`` to ``--out``. Copies of the pixel bytes
per frame in the node's process: typed 2 (rmw → C message, C message → Python ``array``), raw 1 (rmw → ``bytes``);
the upload's copy into pinned memory comes after either.

DDS stays on this machine: ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and ``ROS_DOMAIN_ID=--domain-id`` are set
before rclpy starts.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from vrt_ros.bench.common import write_result, parse_size, say
from vrt_ros.bench.stats import ratio, summary


def _message(w: int, h: int):
    from sensor_msgs.msg import Image

    msg = Image(height=h, width=w, encoding="bgr8", step=w * 3, data=bytes(range(256)) * (w * h * 3 // 256) + bytes(w * h * 3 % 256))
    msg.header.frame_id = "camera_optical_frame"
    msg.header.stamp.sec = 1_700_000_000
    return msg


def measure_convert(w: int, h: int, frames: int) -> dict[str, dict[str, float]]:
    """p50/p99 ms of turning one serialized frame into (header, ImageSpec, view), typed vs raw."""
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import Image

    from vrt_ros.ros.cdr_read import read_image
    from vrt_ros.ros.convert import image_view

    raw = serialize_message(_message(w, h))
    typed_ms, raw_ms = [], []
    for _ in range(frames):
        t0 = time.perf_counter()
        msg = deserialize_message(raw, Image)
        image_view(msg)
        t1 = time.perf_counter()
        image_view(read_image(raw))
        t2 = time.perf_counter()
        typed_ms.append((t1 - t0) * 1e3)
        raw_ms.append((t2 - t1) * 1e3)
    return {"typed": summary(typed_ms), "raw": summary(raw_ms)}


def publish(w: int, h: int, count: int, rate_hz: float, depth: int = 1) -> int:
    """The publisher process of :func:`measure_take`: waits for a subscriber, then publishes ``count`` frames."""
    import rclpy
    from sensor_msgs.msg import Image

    from vrt_ros.ros.qos import make_qos

    rclpy.init()
    node = rclpy.create_node("raw_read_bench_pub")
    pub = node.create_publisher(Image, "raw_read_bench/image", make_qos("reliable", depth))
    deadline = time.monotonic() + 10.0
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    msg = _message(w, h)
    for _ in range(count):
        pub.publish(msg)
        time.sleep(1.0 / rate_hz)
    time.sleep(0.5)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def measure_take(w: int, h: int, frames: int, raw: bool, rate_hz: float = 20.0, depth: int = 1) -> dict[str, float]:
    """Thread CPU ms of the ``spin_once`` that delivers each frame from a publisher process to a typed or raw
    subscription (reliable, depth 1, the large-frames Fast DDS profile in both processes)."""
    import subprocess
    import sys

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image

    from vrt_ros.ros.cdr_read import read_image
    from vrt_ros.ros.convert import image_view
    from vrt_ros.ros.qos import make_qos

    context = rclpy.Context()
    rclpy.init(context=context)
    proc = None
    try:
        node = rclpy.create_node("raw_read_bench", context=context)
        got: list[int] = []

        def on_frame(msg) -> None:
            image_view(read_image(msg) if raw else msg)
            got.append(1)

        node.create_subscription(Image, "raw_read_bench/image", on_frame, make_qos("reliable", depth), raw=raw)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        proc = subprocess.Popen([sys.executable, "-m", "vrt_ros.bench.transport.raw_read", "--publish", f"{w}x{h}",
                                 "--frames", str(frames + 5), "--rate", str(rate_hz), "--depth", str(depth),
                                 "--domain-id", os.environ["ROS_DOMAIN_ID"]], env=os.environ.copy())
        cpu_ms = []
        deadline = time.monotonic() + 30.0 + frames / rate_hz
        while len(got) < frames + 5 and time.monotonic() < deadline and proc.poll() is None:
            before = len(got)
            t0 = time.thread_time()
            executor.spin_once(timeout_sec=0.2)
            spent = time.thread_time() - t0
            if len(got) > before and len(got) > 5:  # the first frames warm up the transport
                cpu_ms.append(spent * 1e3)
        executor.shutdown()
        node.destroy_node()
        return summary(cpu_ms) | {"received": len(got), "sent": frames + 5}
    finally:
        if proc is not None:
            proc.wait(timeout=30)
        context.try_shutdown()


def to_markdown(result: dict) -> str:
    lines = [
        "# Raw-bytes input: typed vs `raw=True` subscription (`python -m vrt_ros.bench.transport.raw_read`)",
        "",
        f"Machine: {result['machine']}; {result['frames']} frames per row; bgr8 frames; ms, p50 / p99.",
        "",
        "| size | convert typed | convert raw | ratio | take+convert CPU typed | take+convert CPU raw | ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["rows"]:
        c, t = row["convert"], row["take"]
        cr = ratio(c["typed"]["p50"], c["raw"]["p50"])
        tr = ratio(t["typed"]["p50"], t["raw"]["p50"])
        lines.append(
            f"| {row['size']} | {c['typed']['p50']:.3f} / {c['typed']['p99']:.3f} | {c['raw']['p50']:.3f} / "
            f"{c['raw']['p99']:.3f} | {cr:.0f}x | {t['typed']['p50']:.3f} / {t['typed']['p99']:.3f} | "
            f"{t['raw']['p50']:.3f} / {t['raw']['p99']:.3f} | {tr:.2f}x |")
    lines += ["", "Copies of the pixel bytes in the node's process per frame: typed 2 (rmw → C message → Python "
              "array), raw 1 (rmw → bytes); the pinned-memory copy of the upload follows either.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.transport.raw_read", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="640x480,1280x720,1920x1080")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--domain-id", type=int, default=66)
    ap.add_argument("--out", default="results/bench")
    ap.add_argument("--rate", type=float, default=20.0, help="publisher rate, Hz")
    ap.add_argument("--depth", type=int, default=1, help="QoS depth of both sides (default 1, the node's input.depth)")
    ap.add_argument("--publish", metavar="WxH", help=argparse.SUPPRESS)  # the publisher process of the take rows
    args = ap.parse_args(argv)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = str(args.domain_id)
    from vrt_ros.ros import dds

    dds.apply("auto", os.environ)  # the large-frames profile, in this process and (inherited) the publisher's
    if args.publish:
        return publish(*parse_size(args.publish), args.frames, args.rate, args.depth)
    rows = []
    for text in args.sizes.split(","):
        w, h = parse_size(text)
        say(f"{w}x{h}: convert")
        convert = measure_convert(w, h, args.frames)
        say(f"{w}x{h}: take (typed, raw)")
        take = {"typed": measure_take(w, h, args.frames, False, args.rate, args.depth),
                "raw": measure_take(w, h, args.frames, True, args.rate, args.depth)}
        rows.append({"size": f"{w}x{h}", "convert": convert, "take": take})
    result = {"machine": f"{platform.node()} ({os.cpu_count()} CPUs)", "frames": args.frames, "rows": rows}
    write_result(args.out, "raw_read", result, to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
