"""A synchronised batch's raw frames into pinned staging and on the device: serial copies, parallel copies, or
straight from the serialized messages (``input.raw_subscription``), issue 35 item 3.

Usage::

    python -m vrt_ros.bench.stages.batch_staging [--sizes 4 8] [--width 1920 --height 1080] [--repeats 60]
                                          [--out results/bench/batch_staging.json]

Per batch size N, N different bgr8 frames (each its own ``sensor_msgs/Image`` and its serialized bytes), then, per
mode, ``--repeats`` batches of N timed from the worker holding the batch's frames to their bytes being on the
device (the uploader's :meth:`~vrt_ros.gpu.upload.Uploader.upload_batch` and the stream's sync), as the GPU path
stages them before its preprocess:

- ``serial``: typed messages (``image_view`` of rclpy's ``array``), the host copies one after the other on the
  calling thread (the uploader's default: measured fastest on the H200);
- ``parallel``: typed messages, the host copies at the same time on the uploader's copy threads;
- ``raw_subscription``: the serialized bytes a ``raw=True`` subscription delivers, read with
  :func:`vrt_ros.ros.cdr_read.read_image` (a view of the pixels inside the bytes) and copied in parallel; the read
  is inside the timing. The typed modes do not pay rclpy's deserialisation in the worker (the executor thread
  does), so it is measured apart: ``rclpy_deserialize_ms``, all N messages of a batch, for the comparison.

Prints a table (ms per batch: p50, p90, min; p50 per frame) and writes ``--out`` (JSON). Without a CUDA device
(nor the CUDA stand-in the tests install) it prints why and writes ``{"skipped": reason}``, exit status 0.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

MODES = ("serial", "parallel", "raw_subscription")


def _frames(n: int, width: int, height: int) -> tuple[list[Any], list[bytes]]:
    """N different bgr8 Image messages and their serialized bytes."""
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image

    rng = np.random.default_rng(n)
    msgs, blobs = [], []
    for k in range(n):
        img = rng.integers(0, 256, (height, width, 3), np.uint8)
        msg = Image(width=width, height=height, encoding="bgr8", step=width * 3, data=img.tobytes())
        msg.header.frame_id = f"cam{k}"
        msgs.append(msg)
        blobs.append(serialize_message(msg))
    return msgs, blobs


def _pct(a: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(a, np.float64), q))


def measure(rt: Any, n: int, width: int, height: int, repeats: int) -> list[dict]:
    """The three modes' rows for batches of ``n`` frames (module docstring)."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Image

    from vrt_ros.gpu.upload import Uploader
    from vrt_ros.ros.cdr_read import read_image
    from vrt_ros.ros.convert import image_view

    msgs, blobs = _frames(n, width, height)
    stream = rt.create_stream()
    up = Uploader(rt, "bench", max_batch=n)
    rows = []
    try:
        for mode in MODES:
            up.parallel = mode != "serial"
            times = []
            for r in range(repeats + 2):  # two warm-up batches: staging allocated, copy threads started
                t0 = time.perf_counter()
                if mode == "raw_subscription":
                    views = [read_image(b) for b in blobs]
                    items = [(_spec(v), v.data, k) for k, v in enumerate(views)]
                else:
                    items = [(*image_view(m), k) for k, m in enumerate(msgs)]
                out = up.upload_batch(items, stream)
                rt.sync(stream)
                if r >= 2:
                    times.append((time.perf_counter() - t0) * 1e3)
            bad = [o for o in out if isinstance(o, Exception)]
            if bad:
                raise RuntimeError(f"{mode}: a frame was refused: {bad[0]}")
            row = {"batch": n, "mode": mode, "p50_ms": _pct(times, 50), "p90_ms": _pct(times, 90),
                   "min_ms": float(min(times)), "per_frame_p50_ms": _pct(times, 50) / n}
            if mode != "raw_subscription":
                des = []
                for _ in range(max(3, repeats // 4)):
                    t0 = time.perf_counter()
                    for b in blobs:
                        deserialize_message(b, Image)
                    des.append((time.perf_counter() - t0) * 1e3)
                row["rclpy_deserialize_ms"] = _pct(des, 50)
            rows.append(row)
    finally:
        up.close(stream)
    return rows


def _spec(view: Any):
    from vrt_ros.types import ImageSpec

    return ImageSpec(width=int(view.width), height=int(view.height), encoding=str(view.encoding),
                     step=int(view.step), is_bigendian=bool(view.is_bigendian))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vrt_ros.bench.stages.batch_staging", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4, 8], help="batch sizes (frames per batch)")
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--repeats", type=int, default=60, help="timed batches per mode and size")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--out", default="results/bench/batch_staging.json", help="JSON results file")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from vrt_ros.gpu import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason:
        print(f"batch_staging: skipped, no CUDA device: {reason}")
        out.write_text(json.dumps({"skipped": reason}, indent=1) + "\n")
        return 0
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(args.device)
    rows = [row for n in args.sizes for row in measure(rt, n, args.width, args.height, args.repeats)]
    print(f"{args.width}x{args.height} bgr8 on {rt.name}: ms per batch, frames to device + sync ({args.repeats} batches)")
    print(f"{'batch':>5} {'mode':<17} {'p50':>7} {'p90':>7} {'min':>7} {'p50/frame':>9} {'deserialize':>11}")
    for r in rows:
        des = f"{r['rclpy_deserialize_ms']:.3f}" if "rclpy_deserialize_ms" in r else "-"
        print(f"{r['batch']:>5} {r['mode']:<17} {r['p50_ms']:7.3f} {r['p90_ms']:7.3f} {r['min_ms']:7.3f} "
              f"{r['per_frame_p50_ms']:9.3f} {des:>11}")
    result = {"device": rt.name, "width": args.width, "height": args.height, "encoding": "bgr8",
              "repeats": args.repeats, "date": time.strftime("%Y-%m-%d"), "rows": rows}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
