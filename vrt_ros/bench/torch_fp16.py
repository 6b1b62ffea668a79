"""Torch engine FP16 vs FP32 on the GPU: engine time, and whether the detections agree on real data.

Usage (GPU machine; the shared data folder as for the tests)::

    python -m vrt_ros.bench.torch_fp16 --shared ../shared --out results/bench/torch_fp16 [--frames 300]

For YOLOX-nano (416x416) and CenterFace (800x480; from the asset cache, skipped when absent), two CUDA pipelines
are built, ``engine.fp16`` false and true (torch engine, CUDA graph). Then:

- **engine time**: the same real photo through each pipeline ``--frames`` times after a warm-up; the pipeline's
  ``inference`` stage (CUDA events around the engine's enqueue, ms) and the whole frame (``total``, host wall
  time) as p50 / p99, and the FP32/FP16 ratio of the medians, from one run;
- **agreement** (HC-10: the same frame through an FP32 and an FP16 engine gives the same detections within
  tolerance): every photo in ``data/images`` (+ the crowd photo for CenterFace) and every frame of both bags
  (YOLOX-nano). Tolerance, the one the TensorRT FP16 test uses: each detection scoring >= 0.45 on either side has a
  detection of the same class on the other side whose box corners are within 2.0 px (source pixels). Detections
  near the 0.35 threshold may appear on one side only (FP16 moves scores by ~1e-3); they are counted, not failed.

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
BOX_TOL_PX = 2.0


def _percentiles(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs, np.float64)
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "n": int(a.size)}


def compare(a, b) -> dict:
    """HC-10 comparison of two :class:`~vrt_ros.types.Detections` (see the module docstring).

    Returns:
        ``ok``, ``missing`` (strong detections without a partner), ``max_box_px`` over matched strong detections,
        ``max_score`` difference over those, ``weak_only`` (detections below STRONG present on one side only).
    """
    missing, box_err, score_err = 0, 0.0, 0.0
    for ref, other in ((a, b), (b, a)):
        for box, cls, score in zip(ref.boxes, ref.class_ids, ref.scores):
            if score < STRONG:
                continue
            same = other.class_ids == cls
            if not same.any():
                missing += 1
                continue
            d = np.abs(other.boxes[same] - box).max(axis=1)
            j = int(np.argmin(d))
            if d[j] > BOX_TOL_PX:
                missing += 1
                continue
            box_err = max(box_err, float(d[j]))
            score_err = max(score_err, float(abs(other.scores[same][j] - score)))
    weak_only = abs(len(a) - len(b))
    return {"ok": missing == 0, "missing": missing, "max_box_px": box_err, "max_score": score_err,
            "weak_only": weak_only, "n32": len(a), "n16": len(b)}


def _bag_frames(bag: Path):
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    from vrt_ros.compressed import decode_compressed
    from vrt_ros.types import ImageSpec

    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        for i, (conn, _, raw) in enumerate(reader.messages()):
            msg = reader.deserialize(raw, conn.msgtype)
            if hasattr(msg, "format"):
                yield f"{bag.name}#{i}", ("bgr", decode_compressed(msg.format, msg.data))
            else:
                spec = ImageSpec(msg.width, msg.height, msg.encoding, msg.step, bool(msg.is_bigendian))
                yield f"{bag.name}#{i}", ("raw", (spec, bytes(msg.data)))


def _run(pipe, item):
    kind, payload = item
    return pipe.process_bgr(payload) if kind == "bgr" else pipe.process(*payload)


def measure(name: str, model: Path, extra: dict, inputs, timing_image, frames: int, cache: str, log) -> dict:
    import cv2

    from vrt_ros.backends.cuda import CudaPipeline
    from vrt_ros.config import defaults

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
             "max_box_px": max((r["max_box_px"] for r in rows), default=0.0),
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
    args = ap.parse_args(argv)
    import cv2
    import torch

    from vrt_ros import assets
    from vrt_ros.gpu.runtime import GpuRuntime

    shared = Path(args.shared)
    log = lambda m: print(m, flush=True)  # noqa: E731
    rt = GpuRuntime.get(0)
    photos = sorted((shared / "data" / "images").iterdir())
    yolo_inputs = [(p.name, ("bgr", cv2.imread(str(p), cv2.IMREAD_COLOR))) for p in photos]
    for bag in ("vtest_raw_sqlite3", "vtest_compressed_mcap"):
        yolo_inputs += list(_bag_frames(shared / "data" / "bags" / bag))
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
             f"`python -m vrt_ros.bench.torch_fp16 --frames {args.frames}`; engine time = the pipeline's `inference` "
             "stage (CUDA events around the engine), `total` = whole frame (host wall time), ms p50 / p99.", "",
             "| model | FP32 inference | FP16 inference | FP32/FP16 | FP32 total | FP16 total | inputs | disagree | "
             "max box diff px | max score diff | detections FP32 / FP16 |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        t, a = r["timing_ms"], r["agreement"]
        lines.append(
            f"| {r['model']} | {t['fp32']['inference']['p50']:.3f} / {t['fp32']['inference']['p99']:.3f} | "
            f"{t['fp16']['inference']['p50']:.3f} / {t['fp16']['inference']['p99']:.3f} | "
            f"{r['inference_ratio_fp32_over_fp16']:.2f}x | {t['fp32']['total']['p50']:.3f} | "
            f"{t['fp16']['total']['p50']:.3f} | {a['inputs']} | {a['disagree']} | {a['max_box_px']:.3f} | "
            f"{a['max_score']:.2e} | {a['detections_fp32']} / {a['detections_fp16']} |")
    lines += ["", f"Agreement (HC-10): each detection scoring >= {STRONG} on either side has a same-class partner "
              f"within {BOX_TOL_PX} px on the other. Detections present on one side only (all below {STRONG}): "
              + ", ".join(f"{r['model']} {r['agreement']['weak_only']}" for r in results) + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"env": env, "results": results}, indent=1, default=float) + "\n")
    return 1 if any(r["agreement"]["disagree"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
