#!/usr/bin/env python3
"""Parity of vrt_ros's decoders with Ultralytics' own predictor, on real exports (issue 36; run on the GPU machine).

For each family x task (YOLOv8, YOLO11, YOLO26 one-to-many and YOLO26 end-to-end x detect / segment / pose / OBB;
RT-DETR), with the ``ultralytics`` package installed (8.4.x, offline: ``YOLO_OFFLINE=1``):

1. build the model from the package's own yaml (``torch.manual_seed(seed)`` before the build; no weights can be
   downloaded), fill the class-score biases of its head with ``--bias`` (-2.5; ``Detect.cv3`` / ``one2one_cv3``
   last convolutions, RT-DETR ``enc_score_head`` / ``dec_score_head``) and, with ``--spread`` (0.5), set the batch
   norms from the frames and scale the head's last layers (:func:`spread_scores`: the package's initialisation fades
   the input out, every score then equal to ~1e-7 and ties decide NMS, the cap and the classes);
2. export ONNX with the package's default export (``format=onnx, imgsz=640``); YOLO26 also with ``nms=False``
   (the end-to-end head; the deprecated ``end2end=True``);
3. run the same frames through (a) the package's predictor on that ONNX (``conf``, ``iou=0.7``, ``max_det=300``,
   ``retina_masks=True``, CPU), (b) vrt_ros's CPU path (ONNX Runtime + the numpy reference, ``model.head: auto``)
   and (c) vrt_ros's GPU decode: the same ONNX Runtime outputs through the real GPU postprocess kernels
   (:class:`vrt_ros.gpu.postprocess.GpuPostprocessor`: decode, NMS / rank, masks), skipped without a GPU; the
   predictor runs under vrt_ros's conventions where they differ by design (:func:`same_conventions`, README
   "Parity with Ultralytics' predictor"; ``--ultralytics-conventions`` keeps its own), and the reference leaves out
   what vrt_ros does not publish by design (:func:`drop_before_cap`);
4. match detections (same class, greedy by IoU >= 0.5 in the reference's score order) and report per row: counts,
   unmatched, max box difference (source pixels), score, mask IoU (label images built the same way: first
   detection in score order owns a pixel; instances of 1000 px or more), keypoints (px), angles (rad, modulo the
   rectangle's symmetry: theta's range is a documented convention, README "Oriented boxes").

Frames: photos of ``$VRT_SHARED_DIR/data/images`` cut to 640x640 (the verdict: letterbox and stretch are the
identity there, so both sides see the same input tensor, bit for bit) and one photo at its own size
(``letterboxed``, reported apart: Ultralytics' and vrt_ros's resizes differ by design; again on Ultralytics' own
input tensor, :func:`same_input`, to separate the resize from the geometry).

Tolerances: boxes 0.5 px, scores 1e-3, classes equal, masks IoU >= 0.99, keypoints 0.5 px, angles 1e-3 rad. Every
model runs in its own try/except; an error is a row with the message. Writes ``parity.json`` and ``parity.md`` to
``--out`` (default ``$OUT`` or ``results/parity``) and pictures of the YOLO26 end-to-end seg and OBB frames drawn by
vrt_ros (``draw_detections``).

Usage (about 3-5 minutes on the H200; about 6 on two loaded CPU cores with ``--no-gpu``)::

    YOLO_OFFLINE=1 VRT_SHARED_DIR=/path/to/shared python scripts/parity_ultralytics.py --out results/parity
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from parity_reference import (  # noqa: E402, F401  (the Ultralytics side; greedy_keep, long_side_angle: tests)
    MAX_DET, build_and_export, greedy_keep, load_reference, long_side_angle, reference, same_conventions,
)
TOL = {"box": 0.5, "score": 1e-3, "mask_iou": 0.99, "kpt": 0.5, "angle": 1e-3}
#: (row, class, yaml, export arguments, task)
ROWS = [
    (f"{fam} {task}", "YOLO", f"{stem}{suffix}.yaml", {}, task)
    for fam, stem in (("YOLOv8", "yolov8n"), ("YOLO11", "yolo11n"), ("YOLO26", "yolo26n"))
    for task, suffix in (("detect", ""), ("segment", "-seg"), ("pose", "-pose"), ("obb", "-obb"))
] + [
    (f"YOLO26 {task} end-to-end", "YOLO", f"yolo26n{suffix}.yaml", {"nms": False}, task)
    for task, suffix in (("detect", ""), ("segment", "-seg"), ("pose", "-pose"), ("obb", "-obb"))
] + [("RT-DETR detect", "RTDETR", "rtdetr-l.yaml", {}, "detect")]


def frames(shared: Path, count: int) -> list[tuple[str, np.ndarray, bool]]:
    """(name, BGR frame, square) for ``count`` photos cut to 640x640 and one letterboxed photo at its own size."""
    photos = sorted((shared / "data" / "images").glob("*.jp*g")) + sorted((shared / "data" / "images").glob("*.png"))
    out = []
    for p in photos[:count]:
        img = cv2.imread(str(p))
        h, w = img.shape[:2]
        s = min(h, w)
        crop = img[(h - s) // 2 : (h - s) // 2 + s, (w - s) // 2 : (w - s) // 2 + s]
        out.append((p.name, np.ascontiguousarray(cv2.resize(crop, (640, 640), interpolation=cv2.INTER_AREA)), True))
    if photos:
        out.append((photos[-1].name + " (own size)", cv2.imread(str(photos[-1])), False))
    return out



def corners(boxes: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """(N, 4, 2) corners of own-axis boxes turned by theta about their centres."""
    c = (boxes[:, :2] + boxes[:, 2:]) / 2
    half = (boxes[:, 2:] - boxes[:, :2]) / 2
    local = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], np.float64)[None] * half[:, None]
    cos, sin = np.cos(theta)[:, None], np.sin(theta)[:, None]
    return np.stack([c[:, None, 0] + local[..., 0] * cos - local[..., 1] * sin,
                     c[:, None, 1] + local[..., 0] * sin + local[..., 1] * cos], axis=-1)


def corner_error(a: np.ndarray, b: np.ndarray) -> float:
    """Largest corner distance between two quadrilaterals, minimised over the cyclic order (either direction)."""
    best = math.inf
    for bb in (b, b[::-1]):
        for k in range(4):
            best = min(best, float(np.abs(a - np.roll(bb, k, axis=0)).max()))
    return best


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x1, y1 = np.maximum(a[0], b[:, 0]), np.maximum(a[1], b[:, 1])
    x2, y2 = np.minimum(a[2], b[:, 2]), np.minimum(a[3], b[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda z: (z[..., 2] - z[..., 0]) * (z[..., 3] - z[..., 1])  # noqa: E731
    return inter / np.maximum(area(a) + area(b) - inter, 1e-9)


def label_image(masks: np.ndarray, shape) -> np.ndarray:
    """Ultralytics' independent masks as vrt_ros's label image: pixel = index + 1 of the first mask on there."""
    out = np.zeros(shape, np.int32)
    for i in range(len(masks)):
        out[(out == 0) & masks[i]] = i + 1
    return out


def compare(ref: dict, dets, task: str) -> dict:
    """Match vrt_ros's detections to the reference and measure the differences."""
    vb, vs, vc = np.asarray(dets.boxes, np.float64), np.asarray(dets.scores), np.asarray(dets.class_ids)
    if ref.get("capped") and ref.get("unpublished"):  # the reference's cap spent slots on boxes without area
        vb, vs, vc = vb[: len(ref["boxes"])], vs[: len(ref["boxes"])], vc[: len(ref["boxes"])]
    rb, rs, rc = ref["boxes"].astype(np.float64), ref["scores"], ref["classes"]
    free = np.ones(len(vb), bool)
    pairs = []
    for i in np.argsort(-rs, kind="stable"):
        cand = np.flatnonzero(free & (vc == rc[i]))
        if len(cand) == 0:
            continue
        ious = iou(rb[i], vb[cand])
        j = cand[int(np.argmax(ious))]
        if ious.max() >= 0.5:
            pairs.append((i, j))
            free[j] = False
    m = {"ref": int(len(rb)), "vrt": int(len(vb)), "matched": len(pairs)}
    if ref.get("unpublished"):
        m["unpublished"] = ref["unpublished"]
    if not pairs:
        return m
    ri, vi = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    m["score"] = float(np.abs(rs[ri] - vs[vi]).max())
    if task == "obb":
        vc4 = corners(vb[vi], np.asarray(dets.theta)[vi])
        m["box"] = max(corner_error(ref["corners"][a], vc4[k]) for k, a in enumerate(ri))
        d = np.abs(ref["theta"][ri] - np.asarray(dets.theta)[vi])
        size = vb[vi, 2:] - vb[vi, :2]
        defined = size[:, 0] > 1.05 * size[:, 1]  # a near-square box's long side is a coin toss: corners only
        m["angle"] = float(np.minimum(d, math.pi - d)[defined].max()) if defined.any() else 0.0
    else:
        m["box"] = float(np.abs(rb[ri] - vb[vi]).max())
    if "keypoints" in ref and dets.keypoints.shape[1]:
        m["kpt"] = float(np.abs(ref["keypoints"][ri, :, :2] - dets.keypoints[vi, :, :2]).max())
    if "masks" in ref and dets.label_mask is not None:
        ref_lab = label_image(ref["masks"], dets.label_mask.shape)
        worst = 1.0
        for a, k in zip(ri, vi):
            r_on, v_on = ref_lab == a + 1, dets.label_mask == k + 1
            if r_on.sum() >= 1000:
                worst = min(worst, float((r_on & v_on).sum() / max((r_on | v_on).sum(), 1)))
        m["mask_iou"] = worst
    return m


def gpu_decoder():
    """A function (head, outputs, letterbox, params) -> Detections on the real GPU kernels, or None without a GPU."""
    try:
        from vrt_ros.gpu.library import KernelLibrary
        from vrt_ros.gpu.postprocess import GpuPostprocessor
        from vrt_ros.gpu.runtime import GpuRuntime

        rt = GpuRuntime.get(0)
        lib, stream = KernelLibrary.shared(rt.arch), rt.create_stream()
    except Exception as exc:  # no device, no cuda-python: the CPU path only
        print(f"GPU decode skipped: {exc}", flush=True)
        return None

    def run(head, outputs, lb, params):
        post = GpuPostprocessor(rt, lib, head, stream, mask_dtype=np.uint16)
        bufs = []
        for o in outputs:
            a = np.ascontiguousarray(o, np.float32)
            dev, host = rt.alloc_device(a.nbytes, stream), rt.alloc_pinned(a.nbytes)
            host.array[:] = a.view(np.uint8).ravel()
            rt.h2d(dev.ptr, host.ptr, a.nbytes, stream)
            rt.sync(stream)
            host.close()
            bufs.append(dev)
        post.enqueue(stream, [b.ptr for b in bufs], lb, params)
        rt.sync(stream)
        dets = post.read()
        if dets.label_mask is not None:
            dets.label_mask = dets.label_mask.copy()
        post.close(stream)
        for b in bufs:
            b.close(stream)
        return dets

    return run


def same_input(pipe, ref_model, frame: np.ndarray, ref: dict, task: str) -> dict:
    """Separate the resampling from the geometry on a letterboxed frame: vrt_ros's decode and mapping to source
    pixels run on the input tensor Ultralytics' predictor made (``LetterBox``: uint8 ``INTER_LINEAR`` resize),
    with vrt_ros's own letterbox geometry; also the largest difference between the two input tensors, in 0..255
    levels (vrt_ros resizes in float32, as its GPU kernel; OpenCV's uint8 resize rounds with 11-bit weights)."""
    theirs = np.ascontiguousarray(ref_model.predictor.preprocess([frame]).cpu().numpy(), np.float32)
    own = pipe._pre  # the CPU pipeline's CpuPreprocessor (a script's look inside: tensor and geometry)
    tensor, lb = own(frame)
    levels = float(np.abs(theirs - tensor).max() * 255)
    pipe._pre = lambda bgr: (theirs, own(bgr)[1])
    try:
        dets = pipe.process_bgr(frame)
    finally:
        pipe._pre = own
    return {"input_levels": levels, "same_input": compare(ref, dets, task)}


def verdict(metrics: list[dict]) -> tuple[str, dict]:
    """The worst of each difference over the square frames, and pass / FAIL against the tolerances."""
    worst: dict = {}
    ok = True
    for m in metrics:
        if m["ref"] != m["matched"] or m["vrt"] != m["matched"]:
            ok = False
        for k in ("box", "score", "kpt", "angle"):
            if k in m:
                worst[k] = max(worst.get(k, 0.0), m[k])
                ok &= m[k] <= TOL[k]
        if "mask_iou" in m:
            worst["mask_iou"] = min(worst.get("mask_iou", 1.0), m["mask_iou"])
            ok &= m["mask_iou"] >= TOL["mask_iou"]
    worst["unmatched"] = sum(m["ref"] + m["vrt"] - 2 * m["matched"] for m in metrics)
    worst["detections"] = sum(m["ref"] for m in metrics)
    return ("pass" if ok and worst["detections"] else "FAIL"), worst


def run_row(row, frame_list, args, gpu, workdir: Path, pictures: Path) -> dict:
    name, cls_name, yaml, export_args, task = row
    from vrt_ros.settings import config
    from vrt_ros.boxes.geometry import letterbox
    from vrt_ros.inference.pipeline import make_pipeline
    from vrt_ros.types import PostprocessParams

    t0 = time.time()
    squares = np.stack([f for _, f, square in frame_list if square])
    onnx_path = build_and_export(cls_name, yaml, export_args, args.seed, args.bias, workdir, args.spread, squares)
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    shapes = {o.name: [d.dim_value or d.dim_param for d in o.type.tensor_type.shape.dim] for o in graph.output}
    values = config.validate({"backend": "cpu", "model.path": str(onnx_path), "score_threshold": args.conf,
                              "nms_iou": 0.7, "max_detections": MAX_DET, "mask_threshold": 0.5})
    pipe = make_pipeline(values, log=lambda _m: None)
    params = PostprocessParams(score_threshold=args.conf, nms_iou=0.7, max_detections=MAX_DET, want_masks=True,
                               mask_threshold=0.5)
    pipe.set_postprocess(params)
    result = {"row": name, "yaml": yaml, "export": export_args, "outputs": shapes, "head": pipe.head.name,
              "frames": []}
    ref_model = load_reference(onnx_path, cls_name, task)
    for fname, frame, square in frame_list:
        ref = reference(ref_model, task, frame, args.conf)
        cpu = pipe.process_bgr(frame)
        entry = {"frame": fname, "square": square, "cpu": compare(ref, cpu, task)}
        if not square:  # the letterboxed frame again, on Ultralytics' own input tensor (same_input)
            entry.update(same_input(pipe, ref_model, frame, ref, task))
        if gpu is not None and square:  # the same engine outputs through the GPU kernels
            x = np.ascontiguousarray(frame[..., ::-1].transpose(2, 0, 1)[None], np.float32) / 255.0
            outs = pipe.engine.run(x)
            lb = letterbox(640, 640, pipe.input_spec.width, pipe.input_spec.height, pipe.input_spec.align)
            entry["gpu"] = compare(ref, gpu(pipe.head, outs, lb, params), task)
        result["frames"].append(entry)
        if fname == frame_list[0][0] and "end-to-end" in name and task in ("segment", "obb"):
            from vrt_ros.boxes.draw import draw_detections

            img = frame.copy()
            draw_detections(img, cpu)
            cv2.imwrite(str(pictures / f"yolo26_{task}_{Path(fname).stem}.jpg"), img)
    for path in ("cpu", "gpu"):
        ms = [f[path] for f in result["frames"] if f["square"] and path in f]
        if ms:
            result[f"{path}_verdict"], result[f"{path}_worst"] = verdict(ms)
    result["seconds"] = round(time.time() - t0, 1)
    return result


def markdown(results: list[dict], args) -> str:
    lines = [
        "# Parity with Ultralytics' predictor (scripts/parity_ultralytics.py)", "",
        f"ultralytics {args.ultralytics_version}; seed {args.seed}, class-score biases {args.bias}, spread {args.spread}, "
        f"conf {args.conf}, "
        f"iou 0.7, max_det 300; frames: {args.frames} photos cut to 640x640 (verdict) + one at its own size "
        "(letterboxed, reported apart). Tolerances: boxes 0.5 px, scores 1e-3, mask IoU 0.99, keypoints 0.5 px, "
        "angles 1e-3 rad; every detection matched (class equal, IoU >= 0.5). Conventions: README \"Parity with "
        "Ultralytics' predictor\".", "",
        "Command: `YOLO_OFFLINE=1 VRT_SHARED_DIR=<shared> python "
        + shlex.join(["scripts/parity_ultralytics.py", *sys.argv[1:]]) + "`", "",
        "| family x task | outputs | head (auto) | path | detections | unmatched | box px | score | mask IoU | "
        "kpt px | angle rad | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['row']} | | | | | | | | | | | error: {r['error']} |")
            continue
        outs = " + ".join(f"{k} {v}" for k, v in r["outputs"].items())
        for path in ("cpu", "gpu"):
            if f"{path}_verdict" not in r:
                continue
            w = r[f"{path}_worst"]
            f = lambda k, p=".3g": format(w[k], p) if k in w else "-"  # noqa: E731
            lines.append(f"| {r['row']} | {outs} | {r['head']} | {path} | {w['detections']} | {w['unmatched']} | "
                         f"{f('box')} | {f('score')} | {f('mask_iou', '.4f')} | {f('kpt')} | {f('angle')} | "
                         f"{r[f'{path}_verdict']} |")
        own = [f for f in r["frames"] if not f["square"]]
        for f in own:
            for key, label in (("cpu", f"letterboxed {f['frame']}"),
                               ("same_input", f"letterboxed, Ultralytics' input tensor (differs by up to "
                                              f"{f.get('input_levels', 0):.2f} levels)")):
                if key not in f:
                    continue
                ok, w = verdict([f[key]])
                g = lambda k, p=".3g": format(w[k], p) if k in w else "-"  # noqa: E731
                lines.append(f"| {r['row']} ({label}) | | | cpu | {w['detections']} | {w['unmatched']} | "
                             f"{g('box')} | {g('score')} | {g('mask_iou', '.4f')} | {g('kpt')} | {g('angle')} | "
                             f"info: {ok} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "results" / "parity"))
    p.add_argument("--frames", type=int, default=3, help="photos cut to 640x640")
    p.add_argument("--seed", type=int, default=1, help="torch seed of the build (0: one OBB pair at probiou 0.70005 flips, see README)")
    p.add_argument("--bias", type=float, default=-2.5, help="class-score biases of the head")
    p.add_argument("--spread", type=float, default=0.5,
                   help="batch norms set from the frames and the head's last layers scaled to this output standard "
                        "deviation (spread_scores); 0: the package's initialisation (all scores tie)")
    p.add_argument("--conf", type=float, default=0.25)
    p.add_argument("--only", nargs="*", help="rows whose name contains one of these words")
    p.add_argument("--no-gpu", action="store_true")
    p.add_argument("--ultralytics-conventions", action="store_true",
                   help="keep Ultralytics' Fast-NMS for OBB and its dropping of empty-mask detections")
    args = p.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    try:
        import ultralytics

        args.ultralytics_version = ultralytics.__version__
        if not args.ultralytics_conventions:
            same_conventions()
    except ImportError as exc:
        print(f"parity_ultralytics: the ultralytics package is not importable ({exc})", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shared = Path(os.environ.get("VRT_SHARED_DIR", REPO.parent / "shared"))
    frame_list = frames(shared, args.frames)
    gpu = None if args.no_gpu else gpu_decoder()
    rows = [r for r in ROWS if not args.only or any(w in r[0] for w in args.only)]
    results = []
    with tempfile.TemporaryDirectory(prefix="parity_") as tmp:
        for row in rows:
            print(f"{row[0]} ({row[2]}, export {row[3] or 'default'})", flush=True)
            try:
                r = run_row(row, frame_list, args, gpu, Path(tmp), out)
                print(f"  head {r['head']}, outputs {r['outputs']}: cpu {r.get('cpu_verdict')} {r.get('cpu_worst')}; "
                      f"gpu {r.get('gpu_verdict')} {r.get('gpu_worst')} ({r['seconds']} s)", flush=True)
            except Exception as exc:  # one model's failure is a row, not the end of the run
                traceback.print_exc()
                r = {"row": row[0], "yaml": row[2], "export": row[3], "error": f"{type(exc).__name__}: {exc}"[:300]}
            results.append(r)
            (out / "parity.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "parity.md").write_text(markdown(results, args))
    print(markdown(results, args))
    return 0 if all(r.get("cpu_verdict") == "pass" and r.get("gpu_verdict", "pass") == "pass" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
