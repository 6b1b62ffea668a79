"""What the 3D output costs per frame on the CPU path (issue 25): the per-box statistic and the 3D boxes.

Usage::

    python -m vrt_ros.bench.outputs.depth_cost [--sizes 640x480,1280x720] [--boxes 1,10,50] [--frames 50]
                                       [--out results/bench]

Per depth size and number of boxes (a 16UC1 depth image registered to a colour image of the same size, plumb_bob
K and D, boxes of a tenth of the image's width and height at random places, a tenth of their pixels invalid):
``stats``, :func:`vrt_ros.depth.stats.box_stats` (the CPU reference of the GPU kernel), and ``geometry``,
:func:`vrt_ros.depth.boxes3d.boxes_3d` (rays through OpenCV's ``undistortPoints``); with rclpy and vision_msgs
importable also ``message``, building the ``Detection3DArray``. Prints p50 / p99 ms and writes
``depth_cost.json`` and ``depth_cost.md`` to ``--out``. The GPU statistic (``kernels/depth.cu``, inside the frame's
sync) is measured by the GPU benchmark on a GPU machine, not here.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from vrt_ros.bench.common import parse_size, say
from vrt_ros.bench.stats import summary
from vrt_ros.depth.boxes3d import boxes_3d
from vrt_ros.depth.camera_model import CameraInfo, CameraModel
from vrt_ros.depth.stats import box_stats
from vrt_ros.types import Detections

D = (-0.28, 0.09, 0.0012, -0.0008, -0.012)


def _scene(w: int, h: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    depth = rng.integers(300, 8000, (h, w)).astype(np.uint16)
    depth[rng.random((h, w)) < 0.1] = 0
    bw, bh = w / 10, h / 10
    x1, y1 = rng.uniform(0, w - bw, n), rng.uniform(0, h - bh, n)
    boxes = np.stack([x1, y1, x1 + bw, y1 + bh], axis=1).astype(np.float32)
    f = 0.8 * w
    info = CameraInfo(w, h, "plumb_bob", D, (f, 0.0, w / 2, 0.0, f, h / 2, 0.0, 0.0, 1.0))
    return depth, boxes, CameraModel.from_info(info)


def measure(w: int, h: int, n: int, frames: int) -> dict[str, dict[str, float]]:
    """p50/p99 ms per stage for ``n`` boxes on a ``w`` x ``h`` depth frame."""
    depth, boxes, model = _scene(w, h, n)
    dets = Detections(boxes=boxes, scores=np.full(n, 0.9, np.float32), class_ids=np.zeros(n, np.int32))
    try:
        from std_msgs.msg import Header

        from vrt_ros.ros.depth_msgs import detections_3d_msg
    except ImportError:
        detections_3d_msg = None
    times: dict[str, list[float]] = {"stats": [], "geometry": []}
    if detections_3d_msg is not None:
        times["message"] = []
    for _ in range(frames):
        t0 = time.perf_counter()
        stats = box_stats(depth, 1000.0, boxes, 1.0, (0.1, 20.0), 50.0)
        t1 = time.perf_counter()
        out = boxes_3d(boxes, stats, model)
        t2 = time.perf_counter()
        times["stats"].append((t1 - t0) * 1e3)
        times["geometry"].append((t2 - t1) * 1e3)
        if detections_3d_msg is not None:
            detections_3d_msg(Header(), dets, out, ())
            times["message"].append((time.perf_counter() - t2) * 1e3)
    return {k: summary(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vrt_ros.bench.outputs.depth_cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="640x480,1280x720")
    p.add_argument("--boxes", default="1,10,50")
    p.add_argument("--frames", type=int, default=50)
    p.add_argument("--out", type=Path, default=Path("results/bench"))
    args = p.parse_args(argv)
    rows = []
    for size in args.sizes.split(","):
        w, h = parse_size(size)
        for n in (int(b) for b in args.boxes.split(",")):
            say(f"depth_cost: {w}x{h}, {n} boxes, {args.frames} frames")
            rows.append({"size": f"{w}x{h}", "boxes": n, **measure(w, h, n, args.frames)})
    stages = [s for s in ("stats", "geometry", "message") if s in rows[0]]
    lines = [f"CPU cost of the 3D output per frame, p50 / p99 ms ({platform.node()}, {platform.processor() or platform.machine()}, "
             f"{args.frames} frames per row)", "",
             "| depth size | boxes | " + " | ".join(stages) + " |", "| --- | ---: | " + " | ".join("---:" for _ in stages) + " |"]
    for r in rows:
        lines.append(f"| {r['size']} | {r['boxes']} | " + " | ".join(f"{r[s]['p50']:.3f} / {r[s]['p99']:.3f}" for s in stages) + " |")
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "depth_cost.json").write_text(json.dumps({"frames": args.frames, "rows": rows}, indent=1))
    (args.out / "depth_cost.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
