"""What writing one frame's ``detections_3d`` costs on the node's thread (issue 35 item 5): the rclpy message built
field by field and converted, against the CDR writer.

Usage::

    python -m vrt_ros.bench.outputs.writer_3d [--detections 0,10,100] [--frames 500] [--warmup 20] [--repeats 3]
                                      [--out results/bench]

Per number of 3D boxes N (a frame of N 2D detections, all with valid depth, rotated boxes, labelled classes and
track-id strings as with tracking on, a 26-character optical frame id):

- ``message``: :func:`vrt_ros.ros.depth_msgs.detections_3d_msg` alone (building the Python message);
- ``before``: that plus ``rclpy.serialization.serialize_message`` of it: what ``publish(msg)`` did on the node's
  thread (rclpy converts the Python message to its C struct and Fast CDR serializes it; ``serialize_message`` runs
  the same two steps);
- ``after``: :func:`vrt_ros.ros.depth_msgs.detections_3d_cdr`, the bytes ``publish(bytes)`` hands to the middleware
  as they are (equal to ``before``'s but for padding: ``test/test_cdr_3d.py``).

Each call is timed with ``time.perf_counter``; the row kept per N is the repeat with the median ``after`` p50.
Prints the table and writes ``writer_3d.json`` and ``writer_3d.md`` under ``--out``. Exit status 0, 2 on bad
arguments or without rclpy / vision_msgs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vrt_ros.bench.stats import summary

LABELS = ("person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck")
STAGES = ("message", "before", "after")


def scene(n: int, seed: int = 0):
    """(header, detections, 3D boxes, labels, ids) of one frame with ``n`` boxes."""
    from std_msgs.msg import Header

    from vrt_ros.depth.boxes3d import Boxes3D
    from vrt_ros.types import Detections

    rng = np.random.default_rng(seed)
    header = Header(frame_id="front_camera_optical_frame")
    header.stamp.sec, header.stamp.nanosec = 1_764_000_000, 123_456_789
    dets = Detections(boxes=np.zeros((n, 4), np.float32), scores=rng.uniform(0.05, 1, n).astype(np.float32),
                      class_ids=rng.integers(0, len(LABELS), n).astype(np.int32))
    boxes = Boxes3D(index=np.arange(n), centres=rng.uniform(-5, 5, (n, 3)) + [0, 0, 8],
                    sizes=rng.uniform(0.2, 2, (n, 3)), yaw=rng.uniform(-math.pi / 2, math.pi / 2, n))
    ids = [str(1_764_000_000_000 * 1_000_000 + k) for k in range(n)]
    return header, dets, boxes, LABELS, ids


def _time(fn: Callable[[], Any], frames: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(frames):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def measure(n: int, frames: int, warmup: int) -> dict[str, Any]:
    """p50/p99 ms per stage (module docstring) for one frame of ``n`` boxes, and the two byte strings' lengths."""
    from rclpy.serialization import serialize_message

    from vrt_ros.ros.depth_msgs import detections_3d_cdr, detections_3d_msg

    frame = scene(n)
    calls = {"message": lambda: detections_3d_msg(*frame),
             "before": lambda: serialize_message(detections_3d_msg(*frame)),
             "after": lambda: detections_3d_cdr(*frame)}
    row: dict[str, Any] = {"detections": n}
    for stage in STAGES:
        row[stage] = summary(_time(calls[stage], frames, warmup))
    row["bytes"] = len(calls["after"]())
    if row["bytes"] != len(calls["before"]()):
        raise RuntimeError(f"{n} boxes: the CDR writer's {row['bytes']} bytes, rclpy's {len(calls['before']())}")
    row["speedup"] = row["before"]["p50"] / row["after"]["p50"]
    return row


def markdown(doc: dict[str, Any]) -> str:
    """The report: one row per N, p50 / p99 ms per stage and before ÷ after at p50."""
    lines = ["# detections_3d: the message built by rclpy against the CDR writer", "",
             f"Command: `{doc['command']}` ({doc['date']})", "",
             f"Machine: {doc['machine']}; {doc['frames']} calls after {doc['warmup']} warm-up, the median-`after` "
             f"repeat of {doc['repeats']}. Load average {doc['load_average']:.1f} at the start.", "",
             "| 3D boxes | message built (ms p50 / p99) | before: built + converted (ms p50 / p99) | "
             "after: CDR writer (ms p50 / p99) | before ÷ after (p50) | bytes |",
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in doc["rows"]:
        cells = [f"{r[s]['p50']:.3f} / {r[s]['p99']:.3f}" for s in STAGES]
        lines.append(f"| {r['detections']} | " + " | ".join(cells) + f" | {r['speedup']:.1f}x | {r['bytes']} |")
    lines += ["", "before = `serialize_message(detections_3d_msg(...))`: what `publish(msg)` did on the node's thread; "
              "after = `detections_3d_cdr(...)`, published as bytes (the same bytes but for padding, "
              "test/test_cdr_3d.py).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.outputs.writer_3d", description=__doc__.splitlines()[0])
    ap.add_argument("--detections", default="0,10,100")
    ap.add_argument("--frames", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("results/bench"))
    args = ap.parse_args(argv)
    try:
        counts = [int(v) for v in args.detections.split(",") if v]
    except ValueError:
        ap.error("--detections: comma-separated integers")
    if not counts or min(counts) < 0 or args.frames < 1 or args.repeats < 1 or args.warmup < 0:
        ap.error("--detections >= 0, --frames >= 1, --repeats >= 1, --warmup >= 0")
    try:
        import rclpy  # noqa: F401
        import vision_msgs.msg  # noqa: F401
    except ImportError as exc:
        print(f"writer_3d: needs rclpy and vision_msgs ({exc})", file=sys.stderr)
        return 2
    doc: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m vrt_ros.bench.outputs.writer_3d " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_average": os.getloadavg()[0], "frames": args.frames, "warmup": args.warmup, "repeats": args.repeats,
        "rows": []}
    for n in counts:
        runs = sorted((measure(n, args.frames, args.warmup) for _ in range(args.repeats)),
                      key=lambda r: r["after"]["p50"])
        doc["rows"].append(dict(runs[len(runs) // 2], before_p50_range=[min(r["before"]["p50"] for r in runs),
                                                                          max(r["before"]["p50"] for r in runs)],
                                after_p50_range=[runs[0]["after"]["p50"], runs[-1]["after"]["p50"]]))
    text = markdown(doc)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "writer_3d.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "writer_3d.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
