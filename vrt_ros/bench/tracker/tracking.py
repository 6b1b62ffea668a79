"""The tracker's cost per frame (issue 24: at most 0.3 ms at 100 detections on the CPU machine).

Usage::

    python -m vrt_ros.bench.tracker.tracking [--detections 10,50,100,200] [--frames 1000] [--warmup 50] [--rate 30]
                                     [--repeats 3] [--out results/bench]

Per detection count N: :func:`vrt_ros.tracking.scenes.crowd` makes N objects wandering over a 1920x1080 image (5
classes, boxes jittered by 3 %, scores uniform in 0.05-1, so about half enter the first association, 40 % the
second and 5 % are ignored), and one :class:`~vrt_ros.tracking.ByteTracker` with the default ``tracking.*``
parameters runs over the frames; each ``update`` call (predict, both associations, Kalman update, births and
removals) is timed with ``time.perf_counter``. The worker thread calls exactly this once per frame and camera.
Prints the table and writes ``tracking.json`` and ``tracking.md`` under ``--out``; the row reported per N is the
repeat with the median p50 (each repeat a fresh tracker over the same frames).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import timeit
from dataclasses import asdict
from pathlib import Path

import numpy as np

from vrt_ros.bench.stats import summary
from vrt_ros.tracking import ByteTracker, TrackerParams
from vrt_ros.tracking.scenes import crowd

#: The issue's target, ms per frame at 100 detections.
TARGET_MS = 0.3


def run(num: int, frames: int, warmup: int, rate_hz: float, params: TrackerParams) -> dict:
    """Time ``update`` over ``warmup + frames`` frames of ``num`` detections; the summary of the last ``frames``,
    plus the tracks held at the end."""
    seq = crowd(num, rate_hz, warmup + frames, seed=num)
    tracker = ByteTracker(params)
    wall, cpu = [], []
    for k, f in enumerate(seq):
        c0 = time.thread_time()
        t0 = time.perf_counter()
        tracker.update(f.stamp_ns, f.boxes, f.scores, f.class_ids)
        t1 = time.perf_counter()
        c1 = time.thread_time()
        if k >= warmup:
            wall.append((t1 - t0) * 1e3)
            cpu.append((c1 - c0) * 1e3)
    return {**summary(wall), "cpu": summary(cpu), "tracks": len(tracker), "confirmed": tracker.confirmed_count}


def numpy_call_us() -> float:
    """The machine's floor for one numpy call, µs: the best of 5 x 20000 ``np.add(x, 1.0, out=x)`` on 5 elements
    (the tracker makes about a hundred such calls per frame, so its cost scales with this on a loaded machine)."""
    x = np.zeros(5)
    return min(timeit.repeat(lambda: np.add(x, 1.0, out=x), number=20000, repeat=5)) / 20000 * 1e6


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit code 0, or 1 when 100 detections cost more than :data:`TARGET_MS` at p50."""
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.tracker.tracking", description=__doc__.splitlines()[0])
    ap.add_argument("--detections", default="10,50,100,200", help="detection counts per frame, comma-separated")
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--rate", type=float, default=30.0, help="camera rate, Hz (the stamps' step)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("results/bench"))
    args = ap.parse_args(argv)
    params = TrackerParams()
    import scipy

    doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "command": "python -m vrt_ros.bench.tracker.tracking " + " ".join(sys.argv[1:] if argv is None else argv),
           "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
                      f"numpy {np.__version__}, scipy {scipy.__version__}",
           "params": asdict(params), "rate_hz": args.rate, "target_ms": TARGET_MS,
           "load_average_before": os.getloadavg()[0], "numpy_call_us_before": numpy_call_us(), "rows": []}
    lines = [f"Machine: {doc['machine']}; {args.frames} frames after {args.warmup} warm-up, {args.rate:g} Hz stamps, "
             f"median-p50 repeat of {args.repeats}. Load average {doc['load_average_before']:.1f} at the start; one "
             f"numpy call {doc['numpy_call_us_before']:.2f} us (the machine's floor; an idle desktop core: about 0.3).",
             "",
             "| detections per frame | p50 ms | thread CPU p50 ms | p99 ms | mean ms | max ms | tracks held at the end |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for num in (int(x) for x in args.detections.split(",")):
        runs = sorted((run(num, args.frames, args.warmup, args.rate, params) for _ in range(args.repeats)),
                      key=lambda r: r["p50"])
        row = {"detections": num, **runs[len(runs) // 2], "p50_all": [r["p50"] for r in runs]}
        doc["rows"].append(row)
        lines.append(f"| {num} | {row['p50']:.3f} | {row['cpu']['p50']:.3f} | {row['p99']:.3f} | {row['mean']:.3f} | "
                     f"{row['max']:.3f} | {row['tracks']} ({row['confirmed']} confirmed) |")
    doc["load_average_after"] = os.getloadavg()[0]
    at_100 = next((r for r in doc["rows"] if r["detections"] == 100), None)
    verdict = "" if at_100 is None else (f"\n100 detections: p50 {at_100['p50']:.3f} ms, target <= {TARGET_MS} ms: "
                                         f"{'met' if at_100['p50'] <= TARGET_MS else 'NOT met'}.")
    text = "\n".join(lines) + "\n" + verdict + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tracking.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "tracking.md").write_text(f"# Tracker cost per frame\n\nCommand: `{doc['command']}` ({doc['date']})\n\n"
                                          + text)
    print(f"wrote {args.out / 'tracking.json'} and {args.out / 'tracking.md'}")
    return 0 if at_100 is None or at_100["p50"] <= TARGET_MS else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
