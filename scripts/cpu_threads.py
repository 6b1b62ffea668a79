"""CPU path frame time against ``engine.threads``: the figures behind the README's "CPU path" guidance.

Usage: ``.venv/bin/python scripts/cpu_threads.py [--shared ../shared] [--threads 0,1,2,4] [--frames 30]
[--out build/cpu_threads.md]``. Runs the CPU pipeline (ONNX Runtime, YOLOX-nano 416x416) on the decoded frames of
the shared street bag (``data/bags/vtest_compressed_mcap``; JPEG decoding excluded), 5 warm-up frames then
``--frames`` measured per thread count, and prints and writes one row per thread count: median and p90 ms per
frame and the frame rate the median allows. Pass the machine's core count in mind: ``nproc`` is printed too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from vrt_ros.inference.backends.cpu import CpuPipeline
from vrt_ros.settings.config import defaults
from vrt_ros.tools.demo import find_image_topic, read_bag_frames


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cpu_threads.py", description=__doc__.splitlines()[0])
    p.add_argument("--shared", type=Path, default=Path(os.environ.get("VRT_SHARED_DIR", "../shared")))
    p.add_argument("--threads", default="0,1,2,4", help="comma-separated engine.threads values")
    p.add_argument("--frames", type=int, default=30)
    p.add_argument("--out", type=Path, default=Path("build/cpu_threads.md"))
    args = p.parse_args(argv)
    bag = args.shared / "data" / "bags" / "vtest_compressed_mcap"
    frames = [f.image for f in read_bag_frames(bag, find_image_topic(bag)[0])]
    values = {**defaults(), "backend": "cpu", "model.path": str(args.shared / "models" / "yolox_nano.onnx"),
              "model.head": "yolox"}
    rows = [f"CPU path, YOLOX-nano 416x416, {frames[0].shape[1]}x{frames[0].shape[0]} frames, nproc {os.cpu_count()}, "
            f"{args.frames} frames per row", "", "| engine.threads | median ms | p90 ms | frames/s at the median |",
            "| ---: | ---: | ---: | ---: |"]
    for threads in (int(t) for t in args.threads.split(",")):
        pipe = CpuPipeline({**values, "engine.threads": threads}, log=lambda _: None)
        for i in range(5):
            pipe.process_bgr(frames[i % len(frames)])
        times = []
        for i in range(args.frames):
            t = time.perf_counter()
            pipe.process_bgr(frames[i % len(frames)])
            times.append((time.perf_counter() - t) * 1e3)
        pipe.close()
        med, p90 = float(np.median(times)), float(np.percentile(times, 90))
        rows.append(f"| {threads} | {med:.1f} | {p90:.1f} | {1000 / med:.1f} |")
    text = "\n".join(rows) + "\n"
    print(text, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
