"""The demo's results and report (:mod:`vrt_ros.tools.demo`): what came back per frame (:class:`FrameResult`, decoded
from the recorded ``detections``/``keypoints`` messages), the printed tables and the annotated images. No rclpy."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vrt_ros.tools.demo_bag import Frame
from vrt_ros.types import Detections


MAX_LABELLED = 25
"""Frames with more detections than this get boxes and keypoints only: 97 overlapping face labels are unreadable."""


@dataclass
class FrameResult:
    """What came back for one frame.

    Attributes:
        frame: the input.
        detections: decoded from the ``detections`` (and ``keypoints``) messages; empty when lost.
        class_names: ``class_id`` string of each detection, as published.
        keypoint_names: names of the K keypoints, as published.
        received: False when no detections message arrived for this frame.
        pipeline_ms: the node's pipeline time for the frame (sum of its stage timings), ms.
        callback_ms: the node's callback-entry-to-publish time, ms, when the node reports it
            (``CameraCounters.last_callback_ms``); NaN otherwise.
        stages_ms: the node's per-stage timings, ms.
        wall_ms: from the return of the replay's ``publish`` to the arrival here of the frame's last output
            (detections, and keypoints for heads with keypoints), ms.
    """

    frame: Frame
    detections: Detections = field(default_factory=Detections.empty)
    class_names: list[str] = field(default_factory=list)
    keypoint_names: list[str] = field(default_factory=list)
    received: bool = False
    pipeline_ms: float = float("nan")
    callback_ms: float = float("nan")
    stages_ms: dict[str, float] = field(default_factory=dict)
    wall_ms: float = float("nan")


# --------------------------------------------------------------------------------------------- recorded results
def _stamp_of(msg: Mapping[str, Any]) -> int:
    stamp = msg["header"]["stamp"]
    return int(stamp["sec"]) * 1_000_000_000 + int(stamp["nanosec"])


def detections_from_dicts(
    detections: Mapping[str, Any], keypoints: Mapping[str, Any] | None, labels: Sequence[str] = ()
) -> tuple[Detections, list[str], list[str]]:
    """Rebuild :class:`Detections` from recorded ``detections``/``keypoints`` messages (JSON-lines dict form).

    Args:
        detections: a ``vision_msgs/Detection2DArray`` as a dict (``detections[i].bbox.center.position.x`` ...).
        keypoints: the matching keypoints array (one entry per keypoint, ``id`` = parent index), or None.
        labels: class names, to turn published names back into indices (unknown names: their decimal value, or -1).

    Returns:
        ``(detections, class_names, keypoint_names)``; boxes in source pixels, keypoints (N, K, 3).
    """
    items = detections["detections"]
    n = len(items)
    boxes = np.zeros((n, 4), np.float32)
    scores = np.zeros((n,), np.float32)
    class_ids = np.zeros((n,), np.int32)
    names: list[str] = []
    index = {name: i for i, name in enumerate(labels)}
    for i, d in enumerate(items):
        c = d["bbox"]["center"]["position"]
        w, h = d["bbox"]["size_x"], d["bbox"]["size_y"]
        boxes[i] = (c["x"] - w / 2, c["y"] - h / 2, c["x"] + w / 2, c["y"] + h / 2)
        hyp = d["results"][0]["hypothesis"]
        scores[i] = hyp["score"]
        names.append(hyp["class_id"])
        class_ids[i] = index.get(hyp["class_id"], int(hyp["class_id"]) if hyp["class_id"].isdigit() else -1)
    per_parent: dict[str, list[tuple[str, float, float, float]]] = {}
    for k in (keypoints or {}).get("detections", []):
        p = k["bbox"]["center"]["position"]
        per_parent.setdefault(k["id"], []).append(
            (k["results"][0]["hypothesis"]["class_id"], p["x"], p["y"], k["results"][0]["hypothesis"]["score"])
        )
    num_k = max((len(v) for v in per_parent.values()), default=0)
    kps = np.zeros((n, num_k, 3), np.float32)
    kp_names: list[str] = []
    for i, d in enumerate(items):
        for j, (name, x, y, conf) in enumerate(per_parent.get(d["id"], [])):
            kps[i, j] = (x, y, conf)
            if len(kp_names) <= j:
                kp_names.append(name)
    return Detections(boxes, scores, class_ids, kps), names, kp_names


def fill_results(
    results: Sequence[FrameResult], jsonl: Path, det_topic: str, kp_topic: str, publish_ns: Sequence[int],
    labels: Sequence[str],
) -> None:
    """Pair the recorded outputs with the frames by header stamp and decode them into the results."""
    by_stamp = {r.frame.stamp_ns: (i, r) for i, r in enumerate(results)}
    got: dict[int, dict[str, dict[str, Any]]] = {}
    for line in jsonl.read_text().splitlines() if jsonl.exists() else []:
        rec = json.loads(line)
        stamp = _stamp_of(rec["msg"])
        if stamp in by_stamp:
            got.setdefault(stamp, {})["det" if rec["topic"] == det_topic else "kp"] = rec
    for stamp, recs in got.items():
        i, res = by_stamp[stamp]
        if "det" not in recs:
            continue
        res.received = True
        if i < len(publish_ns):  # to the frame's last output received (keypoints come after the detections)
            res.wall_ms = (max(r["t_ns"] for r in recs.values()) - publish_ns[i]) / 1e6
        res.detections, res.class_names, res.keypoint_names = detections_from_dicts(
            recs["det"]["msg"], recs["kp"]["msg"] if "kp" in recs else None, labels
        )


# ------------------------------------------------------------------------------------------------ report, images
def _fmt_ms(value: float) -> str:
    return f"{value:8.1f}" if np.isfinite(value) else "       -"


def latency_columns(results: Sequence[FrameResult]) -> tuple[list[str], Callable[[FrameResult], str], str]:
    """Header cells, a row formatter and the legend of the latency columns (the node column only when reported)."""
    with_node = any(np.isfinite(r.callback_ms) for r in results)
    heads = ["pipe ms"] + (["node ms"] if with_node else []) + ["wall ms"]

    def cells(r: FrameResult) -> str:
        values = [r.pipeline_ms] + ([r.callback_ms] if with_node else []) + [r.wall_ms]
        return "  ".join(_fmt_ms(v) for v in values)

    legend = "pipe ms: the node's pipeline (preprocess + inference + postprocess)"
    if with_node:
        legend += ("; node ms: in the node, from the frame reaching its callback to its last output's publish() "
                   "returning (keypoints included)")
    legend += ("; wall ms: here, from the replay's publish() returning to the frame's last output received "
               "(independent of header stamps)")
    if with_node:
        legend += (". The two spans start and end at different points (the frame reaches the node before the replay's "
                   "publish() returns; the output can arrive here before the node's publish() returns), so for a fast "
                   "frame node ms can be the larger of the two")
    return heads, cells, legend


def face_lines(res: FrameResult, max_listed: int = 3) -> list[str]:
    """One line per detection (box, score, named keypoints) for the first ``max_listed`` detections."""
    lines = []
    det = res.detections
    for i in range(min(len(det), max_listed)):
        x1, y1, x2, y2 = (float(v) for v in det.boxes[i])
        kps = " ".join(
            f"{name}=({det.keypoints[i, j, 0]:.0f},{det.keypoints[i, j, 1]:.0f})"
            for j, name in enumerate(res.keypoint_names[: det.keypoints.shape[1]])
        )
        lines.append(f"      #{i} box=({x1:.0f},{y1:.0f})-({x2:.0f},{y2:.0f}) score={det.scores[i]:.2f} {kps}".rstrip())
    if len(det) > max_listed:
        lines.append(f"      ... and {len(det) - max_listed} more, each with {det.keypoints.shape[1]} landmarks")
    return lines


def print_face_report(results: Sequence[FrameResult], out: Callable[[str], None] = print) -> None:
    """Per frame: index, source, size, faces, mean score, node pipeline ms, wall latency ms; then each face."""
    heads, cells, legend = latency_columns(results)
    out(f"{'frame':>5}  {'source':<18} {'size':>9}  {'faces':>5}  {'mean score':>10}  "
        + "  ".join(f"{h:>8}" for h in heads))
    for r in results:
        h, w = r.frame.image.shape[:2]
        n = len(r.detections)
        mean = f"{float(np.mean(r.detections.scores)):.3f}" if n else "-"
        faces = str(n) if r.received else "lost"
        out(f"{r.frame.index:>5}  {r.frame.name:<18} {f'{w}x{h}':>9}  {faces:>5}  {mean:>10}  "
            f"{cells(r)}")
        for line in face_lines(r):
            out(line)
    out(legend)


def print_class_report(results: Sequence[FrameResult], out: Callable[[str], None] = print) -> None:
    """Per frame: index, size, detections, counts by class, node pipeline ms, wall latency ms; then the totals."""
    total: Counter = Counter()
    heads, cells, legend = latency_columns(results)
    out(f"{'frame':>5}  {'size':>9}  {'dets':>4}  " + "  ".join(f"{h:>8}" for h in heads) + "  counts by class")
    for r in results:
        h, w = r.frame.image.shape[:2]
        counts = Counter(r.class_names)
        total.update(counts)
        by_class = ", ".join(f"{name} {k}" for name, k in counts.most_common()) if r.received else "lost"
        out(f"{r.frame.index:>5}  {f'{w}x{h}':>9}  {len(r.detections):>4}  {cells(r)}  {by_class}")
    out("total: " + ", ".join(f"{name} {k}" for name, k in total.most_common()))
    out(legend)


def write_annotated(results: Sequence[FrameResult], out_dir: Path, labels: Sequence[str] = ()) -> list[Path]:
    """Draw each frame's detections (boxes, label + score, keypoints) and write ``<index>_<name>.jpg`` files.

    Annotated frames of an earlier run (``NN_*.jpg``) in ``out_dir`` are removed first; nothing else is touched.
    Label and score text is drawn for frames with at most :data:`MAX_LABELLED` detections.

    Returns:
        The written paths, in frame order.
    """
    import cv2

    from vrt_ros.boxes.draw import draw_detections

    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("[0-9][0-9]_*.jpg"):  # annotated frames of an earlier run would read as this run's
        old.unlink()
    paths = []
    for r in results:
        canvas = np.ascontiguousarray(r.frame.image.copy())
        det = r.detections
        if r.class_names:
            # draw with the published names (the labels may be absent)
            names = list(dict.fromkeys(r.class_names))
            det = Detections(det.boxes, det.scores, np.asarray([names.index(c) for c in r.class_names], np.int32),
                             det.keypoints)
            draw_detections(canvas, det, labels=names, keypoint_threshold=0.0, draw_text=len(det) <= MAX_LABELLED)
        path = out_dir / f"{r.frame.index:02d}_{Path(r.frame.name).stem}.jpg"
        if not cv2.imwrite(str(path), canvas):
            raise OSError(f"cannot write {path}")
        paths.append(path)
    return paths
