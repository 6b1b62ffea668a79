"""Torch engine FP16 vs FP32 on the GPU: engine time, and whether the detections agree on real data.

Usage (GPU machine; the shared data folder as for the tests)::

    python -m vrt_ros.bench.stages.torch_fp16 --shared ../shared --out results/bench/torch_fp16 [--frames 300]

For YOLOX-nano (416x416) and CenterFace (800x480; from the asset cache, skipped when absent), two CUDA pipelines
are built, ``engine.fp16`` false and true (torch engine, CUDA graph). Then:

- **engine time**: the same real photo through each pipeline ``--frames`` times after a warm-up; the pipeline's
  ``inference`` stage (CUDA events around the engine's enqueue, ms) and the whole frame (``total``, host wall
  time) as p50 / p99, and the FP32/FP16 ratio of the medians, from one run;
- **agreement** (HC-10: the same frame through an FP32 and an FP16 engine gives the same detections within
  tolerance): every photo in ``data/images`` (+ the crowd photo for CenterFace) and every frame of both bags
  (YOLOX-nano). Each detection scoring >= 0.45 on either side must have a partner of the same class on the other
  side with IoU >= 0.85 (:data:`MIN_IOU`); FP16 arithmetic moves box edges in proportion to the box's size, so a
  fixed pixel bound does not fit large objects. Also reported: the largest corner difference in pixels and
  relative to the box's size, and how many partners differ by more than 2 px (the bound of the TensorRT FP16 test).
  Detections near the 0.35 threshold may appear on one side only; they are counted, not failed.

The bags are read with rosbags, or from an ``.npz`` of their messages made by ``--export-bag-frames`` (for a
machine without rosbags): the same message bytes either way.

Prints a table and writes ``<out>.json`` and ``<out>.md``. Exit status 1 when any frame disagrees.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

STRONG = 0.45  # detections above this must be on both sides
MIN_IOU = 0.85  # ... with a same-class partner overlapping at least this much
PX_BOUND = 2.0  # reported: partners whose corners differ by more than this (the TensorRT FP16 test's bound)


def _percentiles(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs, np.float64)
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "n": int(a.size)}


def _iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    x1, y1 = np.maximum(box[0], boxes[:, 0]), np.maximum(box[1], boxes[:, 1])
    x2, y2 = np.minimum(box[2], boxes[:, 2]), np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])  # noqa: E731
    return inter / np.maximum(area(box) + area(boxes) - inter, 1e-9)


def compare(a, b) -> dict:
    """HC-10 comparison of two :class:`~vrt_ros.types.Detections` (see the module docstring).

    Returns:
        ``ok``; ``missing`` (strong detections without a same-class partner at IoU >= MIN_IOU); over the matched
        strong detections: ``min_iou``, ``max_box_px`` (largest corner difference, source pixels), ``max_box_rel``
        (that over the box's larger side), ``over_px_bound`` (partners differing by more than PX_BOUND),
        ``max_score``; ``weak_only`` (difference in detection counts, all below STRONG); ``n32``, ``n16``.
    """
    missing, over_px, box_px, box_rel, score_err, min_iou = 0, 0, 0.0, 0.0, 0.0, 1.0
    for ref, other in ((a, b), (b, a)):
        for box, cls, score in zip(ref.boxes, ref.class_ids, ref.scores):
            if score < STRONG:
                continue
            same = np.flatnonzero(other.class_ids == cls)
            ious = _iou(box, other.boxes[same]) if len(same) else np.zeros(0)
            if not len(same) or ious.max() < MIN_IOU:
                missing += 1
                continue
            j = same[int(np.argmax(ious))]
            d = float(np.abs(other.boxes[j] - box).max())
            size = float(max(box[2] - box[0], box[3] - box[1], 1.0))
            min_iou = min(min_iou, float(ious.max()))
            box_px, box_rel = max(box_px, d), max(box_rel, d / size)
            over_px += d > PX_BOUND
            score_err = max(score_err, float(abs(other.scores[j] - score)))
    return {"ok": missing == 0, "missing": missing, "min_iou": min_iou, "max_box_px": box_px,
            "max_box_rel": box_rel, "over_px_bound": over_px, "max_score": score_err,
            "weak_only": abs(len(a) - len(b)), "n32": len(a), "n16": len(b)}


def bag_messages(bag: Path):
    """(label, message fields) of every image message in a rosbag2 folder (needs rosbags)."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        for i, (conn, _, raw) in enumerate(reader.messages()):
            msg = reader.deserialize(raw, conn.msgtype)
            if hasattr(msg, "format"):
                yield f"{bag.name}#{i}", {"format": msg.format, "data": bytes(msg.data)}
            else:
                yield f"{bag.name}#{i}", {"width": msg.width, "height": msg.height, "encoding": msg.encoding,
                                          "step": msg.step, "is_bigendian": bool(msg.is_bigendian),
                                          "data": bytes(msg.data)}


def export_bag_frames(bags: list[Path], out: Path) -> int:
    """Write the bags' messages (fields and bytes, unchanged) to ``out`` (.npz). Returns how many."""
    items = [item for bag in bags for item in bag_messages(bag)]
    np.savez_compressed(out, labels=np.array([label for label, _ in items]),
                        fields=np.array([json.dumps({k: v for k, v in m.items() if k != "data"}) for _, m in items]),
                        **{f"data{i}": np.frombuffer(m["data"], np.uint8) for i, (_, m) in enumerate(items)})
    return len(items)


def _bag_inputs(source: Path):
    """The bags' frames as pipeline inputs, from the bag folders in ``source`` or an .npz of their messages."""
    from vrt_ros.intake.compressed import decode_compressed
    from vrt_ros.types import ImageSpec

    if source.suffix == ".npz":
        z = np.load(source)
        items = [(str(label), dict(json.loads(str(f)), data=z[f"data{i}"].tobytes()))
                 for i, (label, f) in enumerate(zip(z["labels"], z["fields"]))]
    else:
        items = [item for bag in ("vtest_raw_sqlite3", "vtest_compressed_mcap") for item in bag_messages(source / bag)]
    for label, m in items:
        if "format" in m:
            yield label, ("bgr", decode_compressed(m["format"], m["data"]))
        else:
            spec = ImageSpec(m["width"], m["height"], m["encoding"], m["step"], m["is_bigendian"])
            yield label, ("raw", (spec, m["data"]))


def _run(pipe, item):
    kind, payload = item
    return pipe.process_bgr(payload) if kind == "bgr" else pipe.process(*payload)


def measure(name: str, model: Path, extra: dict, inputs, timing_image, frames: int, cache: str, log) -> dict:
    import cv2

    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.settings.config import defaults

    pipes = {}
    for fp16 in (False, True):
        values = defaults()
        values.update({"model.path": str(model), "engine.cache_dir": cache, "backend": "cuda", "engine.fp16": fp16,
                       **extra})
        pipes[fp16] = CudaPipeline(values, log=log)
    engines = {("fp16" if k else "fp32"): p.engine.name for k, p in pipes.items()}
    log(f"{name}: {engines}")
    # engine time: interleaved blocks so that clocks and other load affect both alike
    img = cv2.imread(str(timing_image), cv2.IMREAD_COLOR)
    times = {k: {"inference": [], "total": []} for k in ("fp32", "fp16")}
    for p in pipes.values():
        for _ in range(20):
            p.process_bgr(img)
    block = 50
    for start in range(0, frames, block):
        for fp16, p in pipes.items():
            k = "fp16" if fp16 else "fp32"
            for _ in range(min(block, frames - start)):
                p.process_bgr(img)
                times[k]["inference"].append(p.last_timings["inference"])
                times[k]["total"].append(p.last_timings["total"])
    timing = {k: {s: _percentiles(v) for s, v in d.items()} for k, d in times.items()}
    ratio = timing["fp32"]["inference"]["p50"] / timing["fp16"]["inference"]["p50"]
    # agreement
    rows, bad = [], 0
    for label, item in inputs:
        r = compare(_run(pipes[False], item), _run(pipes[True], item))
        r["input"] = label
        rows.append(r)
        bad += not r["ok"]
    for p in pipes.values():
        p.close()
    agree = {"inputs": len(rows), "disagree": bad,
             "min_iou": min((r["min_iou"] for r in rows), default=1.0),
             "max_box_px": max((r["max_box_px"] for r in rows), default=0.0),
             "max_box_rel": max((r["max_box_rel"] for r in rows), default=0.0),
             "over_px_bound": sum(r["over_px_bound"] for r in rows),
             "max_score": max((r["max_score"] for r in rows), default=0.0),
             "strong_missing": sum(r["missing"] for r in rows), "weak_only": sum(r["weak_only"] for r in rows),
             "detections_fp32": sum(r["n32"] for r in rows), "detections_fp16": sum(r["n16"] for r in rows)}
    return {"model": name, "engines": engines, "timing_image": timing_image.name, "frames": frames,
            "timing_ms": timing, "inference_ratio_fp32_over_fp16": ratio, "agreement": agree, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default="../shared", help="the shared data folder (models/, data/)")
    ap.add_argument("--out", default="results/bench/torch_fp16", help="output path without suffix (.json, .md)")
    ap.add_argument("--frames", type=int, default=300, help="timed frames per precision")
    ap.add_argument("--cache", default="/tmp/vrt_fp16_cache", help="engine.cache_dir (kernel cache)")
    ap.add_argument("--bags", default="", help="the bags: a folder holding both, or an .npz from --export-bag-frames "
                                               "(default: <shared>/data/bags)")
    ap.add_argument("--export-bag-frames", default="", metavar="NPZ", help="only write the bags' messages to NPZ")
    args = ap.parse_args(argv)
    shared = Path(args.shared)
    bags = Path(args.bags) if args.bags else shared / "data" / "bags"
    if args.export_bag_frames:
        n = export_bag_frames([bags / "vtest_raw_sqlite3", bags / "vtest_compressed_mcap"], Path(args.export_bag_frames))
        print(f"{n} messages written to {args.export_bag_frames}")
        return 0
    import cv2
    import torch

    from vrt_ros.tools import assets
    from vrt_ros.gpu.runtime import GpuRuntime

    log = lambda m: print(m, flush=True)  # noqa: E731
    rt = GpuRuntime.get(0)
    photos = sorted((shared / "data" / "images").iterdir())
    yolo_inputs = [(p.name, ("bgr", cv2.imread(str(p), cv2.IMREAD_COLOR))) for p in photos]
    yolo_inputs += list(_bag_inputs(bags))
    results = [measure("yolox_nano", shared / "models" / "yolox_nano.onnx", {}, yolo_inputs,
                       shared / "data" / "images" / "darknet_horses.jpg", args.frames, args.cache, log)]
    cache = assets.assets_dir()
    if all(assets.is_cached(assets.ASSETS[n], cache) for n in (assets.CENTERFACE_MODEL, "crowd.jpg")):
        crowd = cache / "crowd.jpg"
        face_inputs = [(p.name, ("bgr", cv2.imread(str(p), cv2.IMREAD_COLOR))) for p in [crowd, *photos]]
        results.append(measure("centerface", cache / assets.CENTERFACE_MODEL,
                               {"score_threshold": 0.5, "nms_iou": 0.3, "max_detections": 1000}, face_inputs, crowd,
                               args.frames, args.cache, log))
    else:
        log(f"CenterFace skipped: model/crowd photo not in the asset cache {cache}")
    env = {"gpu": rt.name, "arch": rt.arch, "torch": torch.__version__, "python": platform.python_version()}
    lines = [f"# Torch engine FP16 vs FP32 ({env['gpu']}, torch {env['torch']}, CUDA graph)", "",
             f"`python -m vrt_ros.bench.stages.torch_fp16 --frames {args.frames}`; engine time = the pipeline's `inference` "
             "stage (CUDA events around the engine), `total` = whole frame (host wall time), ms p50 / p99.", "",
             "| model | FP32 inference | FP16 inference | FP32/FP16 | FP32 total | FP16 total | inputs | disagree | "
             "min IoU | max corner diff px (rel.) | partners > 2 px | max score diff | detections FP32 / FP16 |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        t, a = r["timing_ms"], r["agreement"]
        lines.append(
            f"| {r['model']} | {t['fp32']['inference']['p50']:.3f} / {t['fp32']['inference']['p99']:.3f} | "
            f"{t['fp16']['inference']['p50']:.3f} / {t['fp16']['inference']['p99']:.3f} | "
            f"{r['inference_ratio_fp32_over_fp16']:.2f}x | {t['fp32']['total']['p50']:.3f} | "
            f"{t['fp16']['total']['p50']:.3f} | {a['inputs']} | {a['disagree']} | {a['min_iou']:.3f} | "
            f"{a['max_box_px']:.2f} ({a['max_box_rel']:.3f}) | {a['over_px_bound']} | {a['max_score']:.2e} | "
            f"{a['detections_fp32']} / {a['detections_fp16']} |")
    lines += ["", f"Agreement (HC-10): each detection scoring >= {STRONG} on either side has a same-class partner with "
              f"IoU >= {MIN_IOU} on the other; corner differences are over those partners (relative: over the box's "
              f"larger side). Difference in detection counts (detections below {STRONG} on one side only): "
              + ", ".join(f"{r['model']} {r['agreement']['weak_only']}" for r in results) + ".", "",
              "Inputs with a strong detection missing on the other side: "
              + ("; ".join(f"{r['model']} {row['input']} ({row})" for r in results for row in r["rows"]
                           if not row["ok"]) or "none") + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"env": env, "results": results}, indent=1, default=float) + "\n")
    return 1 if any(r["agreement"]["disagree"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
