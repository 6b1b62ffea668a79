"""Soak (handed case HC-16): replay a bag's frames in a loop through a pipeline and watch memory and latency.

``python -m vrt_ros.bench.robustness.soak --model M.onnx --bag BAG [--frames 10000] [--backend cpu|cuda|auto]``

Frames are read once from the bag with ``rosbags`` and fed as the node feeds them: raw ``sensor_msgs/Image``
bytes (``pipeline.process``) or decoded ``CompressedImage`` payloads (``pipeline.process_bgr``). Every
``--every`` frames it samples the process's resident memory (``/proc/self/statm``), the device memory in use
(GPU path, ``cuMemGetInfo``), the GPU runtime's allocation counters, the frames dropped (``FrameError``) and the
latency p50/p99 of the window. It prints a table, writes JSON, and reports the growth of resident and device
memory from the end of warm-up (the first ``--warmup`` frames) to the largest later sample.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vrt_ros.errors import FrameError
from vrt_ros.settings import config
from vrt_ros.types import ImageSpec


def resident_bytes() -> int:
    """Resident memory of this process, bytes (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def read_bag(bag: Path, topic: str | None = None) -> list[tuple[str, Any]]:
    """The bag's image messages, ready to feed: ``("raw", (ImageSpec, bytes))`` or ``("compressed", (format, bytes))``.

    Raises:
        ValueError: no image topic, or several and no ``topic`` given.
    """
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    types = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
    out: list[tuple[str, Any]] = []
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if c.msgtype in types and (topic is None or c.topic == topic)]
        if len({c.topic for c in conns}) != 1:
            raise ValueError(f"{bag}: expected one image topic (give --topic), found {sorted({c.topic for c in conns})}")
        for conn, _, raw in reader.messages(connections=conns):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            if conn.msgtype.endswith("CompressedImage"):
                out.append(("compressed", (msg.format, bytes(msg.data))))
            else:
                spec = ImageSpec(msg.width, msg.height, msg.encoding, msg.step, bool(msg.is_bigendian))
                out.append(("raw", (spec, bytes(msg.data))))
    return out


def soak(pipeline, frames: list[tuple[str, Any]], total: int, every: int, warmup: int,
         out: Callable[[str], None] = print) -> dict[str, Any]:
    """Run ``total`` frames (cycling over ``frames``) and sample every ``every`` frames.

    Returns:
        ``{"samples": [...], "rss_growth": fraction, "gpu_growth": fraction or None, "dropped": n, ...}``; growth is
        (largest sample after warm-up - the sample at the end of warm-up) / that sample.
    """
    from vrt_ros.intake.compressed import decode_compressed

    runtime = getattr(pipeline, "runtime", None)
    samples: list[dict[str, Any]] = []
    lat: list[float] = []
    dropped = 0
    out(f"{'frames':>8} {'rss MiB':>9} {'gpu MiB':>9} {'allocs':>7} {'dropped':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for i in range(total):
        kind, payload = frames[i % len(frames)]
        t0 = time.perf_counter()
        try:
            if kind == "raw":
                pipeline.process(*payload)
            elif hasattr(pipeline, "process_compressed"):  # the node's GPU path: decoded on the GPU (nvImageCodec)
                pipeline.process_compressed(*payload)
            else:
                pipeline.process_bgr(decode_compressed(*payload))
        except FrameError:
            dropped += 1
        lat.append((time.perf_counter() - t0) * 1e3)
        if (i + 1) % every == 0 or i + 1 == total:
            snap = runtime.counters.snapshot() if runtime is not None else {}
            s = {
                "frames": i + 1,
                "rss_bytes": resident_bytes(),
                "gpu_bytes": runtime.device_memory_used() if runtime is not None else None,
                "allocs": snap.get("device_allocs", 0) + snap.get("pinned_allocs", 0) if snap else None,
                "dropped": dropped,
                "p50_ms": float(np.percentile(lat, 50)),
                "p99_ms": float(np.percentile(lat, 99)),
            }
            lat.clear()
            samples.append(s)
            gpu = f"{s['gpu_bytes'] / 2**20:9.1f}" if s["gpu_bytes"] is not None else f"{'-':>9}"
            allocs = f"{s['allocs']:7d}" if s["allocs"] is not None else f"{'-':>7}"
            out(f"{s['frames']:8d} {s['rss_bytes'] / 2**20:9.1f} {gpu} {allocs} {dropped:8d} "
                f"{s['p50_ms']:8.2f} {s['p99_ms']:8.2f}")
    base = next((s for s in samples if s["frames"] >= warmup), samples[-1])
    later = [s for s in samples if s["frames"] > base["frames"]] or [base]

    def growth(key: str) -> float | None:
        if base[key] is None:
            return None
        return (max(s[key] for s in later) - base[key]) / base[key]

    return {
        "samples": samples,
        "warmup_frames": base["frames"],
        "rss_growth": growth("rss_bytes"),
        "gpu_growth": growth("gpu_bytes"),
        "allocs_after_warmup": (later[-1]["allocs"] - base["allocs"]) if base["allocs"] is not None else None,
        "dropped": dropped,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line; exit 0 when resident (and device) memory grew < 1 % after warm-up, else 1."""
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.robustness.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="model file (model.path)")
    ap.add_argument("--bag", required=True, type=Path, help="rosbag2 folder with one image topic")
    ap.add_argument("--topic", default=None, help="image topic when the bag has several")
    ap.add_argument("--backend", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--head", default="auto", help="model.head")
    ap.add_argument("--frames", type=int, default=10_000, help="frames to run (default 10000)")
    ap.add_argument("--every", type=int, default=1000, help="sample every N frames (default 1000)")
    ap.add_argument("--warmup", type=int, default=1000, help="frames before the memory baseline (default 1000)")
    ap.add_argument("--json", type=Path, default=None, help="write the samples and verdict here")
    args = ap.parse_args(argv)
    values = config.validate({"backend": args.backend, "model.path": args.model, "model.head": args.head})
    from vrt_ros.inference.pipeline import make_pipeline

    pipe = make_pipeline(values, log=lambda m: print(m, file=sys.stderr))
    frames = read_bag(args.bag, args.topic)
    print(f"soak: {pipe.name}; {len(frames)} bag frames cycled to {args.frames}")
    result = soak(pipe, frames, args.frames, args.every, args.warmup)
    result.update(pipeline=pipe.name, model=str(args.model), bag=str(args.bag), date=time.strftime("%Y-%m-%d"))
    ok = result["rss_growth"] < 0.01 and (result["gpu_growth"] is None or result["gpu_growth"] < 0.01)
    gpu = f"{result['gpu_growth'] * 100:.2f} %" if result["gpu_growth"] is not None else "n/a (CPU path)"
    print(f"after warm-up ({result['warmup_frames']} frames): resident memory growth {result['rss_growth'] * 100:.2f} %, "
          f"device memory growth {gpu}, allocations {result['allocs_after_warmup']}, dropped {result['dropped']}: "
          f"{'flat' if ok else 'GROWING'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    pipe.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
