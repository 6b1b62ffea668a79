"""Benchmark of the new heads' decode and of the instance-mask assembly (issue 23).

Usage: ``python -m vrt_ros.bench.outputs.heads [--frames N] [--cameras 1,8] [--no-gpu] [--quick] [--out DIR]``.

Part 1, **decode per head** at a 1920x1080 frame and a 640x640 engine input, on synthetic raw outputs of each
layout (the engine is not timed): the GPU postprocess (decode, rank, NMS, finalize, D2H; CUDA events around it)
and the numpy reference (decode + ``finish``), p50 / p99 ms, for ``yolov8`` (the baseline), ``yolov8_seg``
(boxes only), ``yolov8_obb`` and ``detr``.

Part 2, **mask assembly against the number of detections** D (1 ... 100 separated boxes) at 1920x1080: GPU time of
the postprocess with masks minus without (the mask stage: logits, labels, label D2H), the label image's bytes, the
host time to build the ``instance_mask`` message from it, and the numpy reference's mask time; for 1 and 8 cameras
(8 cameras: 8 frames enqueued on one stream, one sync, time per round of 8).

Prints its figures and writes ``heads.json`` and ``heads.md`` into ``--out`` (default ``results/bench/heads``).
``--no-gpu`` runs the CPU rows only (CI runs ``--no-gpu --quick`` to check the command); the GPU rows need the GPU
machine (scripts/gpu_check.sh runs it).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.masks import label_dtype
from vrt_ros.boxes.postprocess import finish
from vrt_ros.heads import select_head
from vrt_ros.heads.base import grid_cells
from vrt_ros.heads.yolov8 import STRIDES
from vrt_ros.types import InputSpec, PostprocessParams, TensorInfo

W = H = 640
SRC = (1920, 1080)
N = grid_cells(W, H, STRIDES)
DETECTIONS = (1, 2, 4, 8, 16, 32, 64, 100)


def layouts() -> dict[str, list[TensorInfo]]:
    return {
        "yolov8": [TensorInfo("output0", (1, 84, N))],
        "yolov8_seg": [TensorInfo("output0", (1, 4 + 80 + 32, N)), TensorInfo("output1", (1, 32, H // 4, W // 4))],
        "yolov8_obb": [TensorInfo("output0", (1, 4 + 15 + 1, N))],
        "detr": [TensorInfo("pred_logits", (1, 300, 80)), TensorInfo("pred_boxes", (1, 300, 4))],
    }


def raw_outputs(name: str, detections: int = 20, seed: int = 0) -> list[np.ndarray]:
    """Synthetic outputs of one layout: ``detections`` separated confident boxes on a grid over the picture's part of
    the engine input (a 1920x1080 frame's letterbox, or the whole input for the stretched ``detr``), the rest low
    scores."""
    rng = np.random.default_rng(seed)
    lb = letterbox(*SRC, W, H, "center", "stretch" if name == "detr" else "letterbox")
    side = max(1, math.ceil(math.sqrt(detections)))
    cw, ch = lb.resized_width / side, lb.resized_height / side
    centres = [(lb.pad_x + (i % side + 0.5) * cw, lb.pad_y + (i // side + 0.5) * ch) for i in range(detections)]
    if name == "detr":
        logits = rng.normal(-6, 1, (1, 300, 80)).astype(np.float32)
        boxes = rng.uniform(0.1, 0.2, (1, 300, 4)).astype(np.float32)
        for q, (cx, cy) in enumerate(centres[:300]):
            boxes[0, q] = [cx / W, cy / H, 0.6 * cw / W, 0.6 * ch / H]
            logits[0, q, q % 80] = 4.0
        return [logits, boxes]
    out_shape = layouts()[name][0].shape
    out = np.zeros(out_shape, np.float32)
    c = out_shape[1]
    out[0, 0:2] = rng.uniform(0, W, (2, N))
    out[0, 2:4] = rng.uniform(8, 40, (2, N))
    out[0, 4 : c - (32 if name == "yolov8_seg" else 1 if name == "yolov8_obb" else 0)] = rng.uniform(0, 0.1)
    cells = rng.choice(N, detections, replace=False)
    for k, (cx, cy) in zip(cells, centres):
        out[0, :4, k] = [cx, cy, 0.6 * cw, 0.6 * ch]
        out[0, 4, k] = 0.9
    extra = []
    if name == "yolov8_seg":
        out[0, 84:, :] = rng.normal(0, 1, (32, N))
        out[0, 84, cells] = 3.0
        protos = rng.normal(0, 0.2, (1, 32, H // 4, W // 4)).astype(np.float32)
        protos[0, 0] += 1.0
        extra = [protos]
    if name == "yolov8_obb":
        out[0, -1] = rng.uniform(-math.pi / 4, 3 * math.pi / 4, N)
    return [out, *extra]


def _stats(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms, np.float64)
    return {"p50_ms": float(np.median(a)), "p99_ms": float(np.percentile(a, 99)), "n": int(a.size)}


def _cpu_decode(name: str, frames: int) -> dict:
    head = select_head(name, layouts()[name], InputSpec(W, H))
    outs, lb = raw_outputs(name), letterbox(*SRC, W, H, "center", head.INPUT_DEFAULTS.resize)
    params = PostprocessParams(score_threshold=0.5)
    times, n = [], 0
    for _ in range(frames):
        t0 = time.perf_counter()
        n = len(finish(head.decode(outs, 0.5), lb, params, head.applies_nms, head.oriented))
        times.append((time.perf_counter() - t0) * 1e3)
    return {"head": name, "path": "cpu reference", "detections": n, **_stats(times)}


def _cpu_masks(d: int, frames: int) -> dict:
    head = select_head("yolov8_seg", layouts()["yolov8_seg"], InputSpec(W, H))
    outs, lb = raw_outputs("yolov8_seg", d), letterbox(*SRC, W, H, "center")
    params = PostprocessParams(score_threshold=0.5, max_detections=100)
    dets = finish(head.decode(outs, 0.5), lb, params, True)
    buf = np.zeros((SRC[1], SRC[0]), np.uint8)
    times = []
    for _ in range(frames):
        t0 = time.perf_counter()
        head.label_mask(dets, outs, lb, params, np.uint8, buf)
        times.append((time.perf_counter() - t0) * 1e3)
    return {"detections": len(dets), "path": "cpu reference", "cameras": 1, **_stats(times)}


def _message_ms(frames: int) -> dict:
    """Host time to build the instance_mask Image from a 1080p label image (rclpy's message, one copy)."""
    try:
        from std_msgs.msg import Header

        from vrt_ros.ros.instance_mask import instance_mask_msg
    except ImportError as exc:
        return {"skipped": f"rclpy messages not importable: {exc}"}
    labels, header = np.zeros((SRC[1], SRC[0]), np.uint8), Header()
    times = []
    for _ in range(frames):
        t0 = time.perf_counter()
        instance_mask_msg(labels, header, "mono8")
        times.append((time.perf_counter() - t0) * 1e3)
    return {"bytes": labels.nbytes, **_stats(times)}


class _Gpu:
    """Postprocessors with uploaded raw outputs, timed with CUDA events."""

    def __init__(self) -> None:
        from vrt_ros.gpu.library import KernelLibrary
        from vrt_ros.gpu.runtime import GpuRuntime

        self.rt = GpuRuntime.get(0)
        self.lib = KernelLibrary.shared(self.rt.arch)
        self.stream = self.rt.create_stream()
        self.start, self.end = self.rt.timing_event(), self.rt.timing_event()

    def setup(self, name: str, outs: list[np.ndarray], cameras: int = 1):
        from vrt_ros.gpu.postprocess import GpuPostprocessor

        head = select_head(name, layouts()[name], InputSpec(W, H))
        posts, bufs = [], []
        for _ in range(cameras):
            post = GpuPostprocessor(self.rt, self.lib, head, self.stream, mask_dtype=label_dtype(100))
            dev = []
            for o in outs:
                o = np.ascontiguousarray(o, np.float32)
                b = self.rt.alloc_device(o.nbytes, self.stream)
                host = self.rt.alloc_pinned(o.nbytes)
                host.array[:] = o.view(np.uint8).ravel()
                self.rt.h2d(b.ptr, host.ptr, o.nbytes, self.stream)
                self.rt.sync(self.stream)
                host.close()
                dev.append(b)
            posts.append(post)
            bufs.append(dev)
        return head, posts, bufs

    def time(self, posts, bufs, lb, params, frames: int) -> list[float]:
        times = []
        for i in range(frames + 10):
            self.start.record(self.stream)
            for post, dev in zip(posts, bufs):
                post.enqueue(self.stream, [b.ptr for b in dev], lb, params)
            self.end.record(self.stream)
            self.rt.sync(self.stream)
            for post in posts:
                post.read()
            if i >= 10:
                times.append(self.end.elapsed_ms(self.start))
        return times

    def release(self, posts, bufs) -> None:
        for post, dev in zip(posts, bufs):
            post.close(self.stream)
            for b in dev:
                b.close(self.stream)
        self.rt.sync(self.stream)


def _gpu_rows(frames: int, cameras: list[int], detections, say) -> tuple[list[dict], list[dict]]:
    gpu = _Gpu()
    decode, masks = [], []
    for name in layouts():
        head, posts, bufs = gpu.setup(name, raw_outputs(name))
        lb = letterbox(*SRC, W, H, "center", head.INPUT_DEFAULTS.resize)
        t = gpu.time(posts, bufs, lb, PostprocessParams(score_threshold=0.5), frames)
        decode.append({"head": name, "path": "gpu postprocess", "detections": len(posts[0].read()), **_stats(t)})
        say(f"decode {name}: {decode[-1]}")
        gpu.release(posts, bufs)
    lb = letterbox(*SRC, W, H, "center")
    for cams in cameras:
        for d in detections:
            head, posts, bufs = gpu.setup("yolov8_seg", raw_outputs("yolov8_seg", d), cams)
            base = gpu.time(posts, bufs, lb, PostprocessParams(score_threshold=0.5), frames)
            with_masks = gpu.time(posts, bufs, lb, PostprocessParams(score_threshold=0.5, want_masks=True), frames)
            masks.append({"detections": d, "path": "gpu mask stage", "cameras": cams,
                          "p50_ms": float(np.median(with_masks) - np.median(base)),
                          "postprocess_p50_ms": float(np.median(with_masks)), "d2h_bytes": cams * SRC[0] * SRC[1]})
            say(f"masks {cams} camera(s), {d} detections: {masks[-1]}")
            gpu.release(posts, bufs)
    return decode, masks


def _markdown(report: dict) -> str:
    lines = [f"# Heads benchmark ({report['date']}, {report['device']})", "",
             f"Frame {SRC[0]}x{SRC[1]}, engine input {W}x{H}, synthetic raw outputs; {report['frames']} frames a row.",
             "", "| head | path | detections | p50 ms | p99 ms |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['head']} | {r['path']} | {r['detections']} | {r['p50_ms']:.3f} | {r.get('p99_ms', float('nan')):.3f} |"
              for r in report["decode"]]
    lines += ["", "| mask path | cameras | detections | p50 ms |", "| --- | --- | --- | --- |"]
    lines += [f"| {r['path']} | {r['cameras']} | {r['detections']} | {r['p50_ms']:.3f} |" for r in report["masks"]]
    m = report["message"]
    lines += ["", f"instance_mask message build (host, {SRC[0]}x{SRC[1]} mono8): "
              + (f"p50 {m['p50_ms']:.3f} ms, p99 {m['p99_ms']:.3f} ms" if "p50_ms" in m else m.get("skipped", ""))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--cameras", default="1,8", help="comma-separated camera counts of the mask rows")
    ap.add_argument("--no-gpu", action="store_true", help="CPU reference rows only")
    ap.add_argument("--quick", action="store_true", help="few frames, D in {1, 8} (a check that the command runs)")
    ap.add_argument("--out", type=Path, default=Path("results/bench/heads"))
    args = ap.parse_args(argv)
    frames = 3 if args.quick else args.frames
    detections = (1, 8) if args.quick else DETECTIONS
    say = print
    decode = [_cpu_decode(name, frames) for name in layouts()]
    masks = [_cpu_masks(d, frames) for d in detections]
    device = "cpu only"
    if not args.no_gpu:
        from vrt_ros.gpu import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason:
            print(f"GPU rows skipped: {reason}", file=sys.stderr)
        else:
            gpu_decode, gpu_masks = _gpu_rows(frames, [int(c) for c in args.cameras.split(",")], detections, say)
            decode += gpu_decode
            masks += gpu_masks
            from vrt_ros.gpu.runtime import GpuRuntime

            device = GpuRuntime.get(0).name
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": device, "frames": frames,
              "decode": decode, "masks": masks, "message": _message_ms(frames)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "heads.json").write_text(json.dumps(report, indent=1))
    text = _markdown(report)
    (args.out / "heads.md").write_text(text)
    print(text)
    print(f"written: {args.out / 'heads.json'}, {args.out / 'heads.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
