"""Tracking quality on the synthetic sequences of :mod:`vrt_ros.tracking.scenes`, scored with TrackEval.

``python -m vrt_ros.bench.tracker.tracking_eval [--out results/tracking]`` runs the tracker with the default
``tracking.*`` parameters over every scene at 10 and 30 Hz, prints HOTA, IDF1, MOTA and the id switches per
sequence, and writes ``synthetic.json`` and ``synthetic.md`` under ``--out``. The same functions back
``test/test_tracking_metrics.py``, which holds the thresholds CI checks.

What is scored is what the node publishes with ``tracking.enabled``: the detections at or above
``score_threshold`` that are on a confirmed track, with their track id. Similarity = box IoU, TrackEval's
MOTChallenge 2D-box convention (HOTA over alpha 0.05..0.95; IDF1 and MOTA at IoU 0.5). TrackEval (PyPI
``trackeval`` 1.3.0, by the HOTA authors; Luiten et al. 2021) is imported only here, and is a test dependency: its
metric classes need only numpy and SciPy (``requirements/test-nodeps.txt`` installs it without the rest of its
declared dependencies, which include ``opencv-python`` and would replace ``opencv-python-headless``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from vrt_ros.tracking import NO_TRACK, ByteTracker, TrackerParams
from vrt_ros.tracking.association import iou_matrix
from vrt_ros.tracking.scenes import SCENES, Frame, scene

RATES_HZ = (10.0, 30.0)
#: The node's default ``score_threshold``: the published detections are those at or above it.
SCORE_THRESHOLD = 0.35


def track(frames: Sequence[Frame], params: TrackerParams = TrackerParams()) -> list[np.ndarray]:
    """Run one :class:`~vrt_ros.tracking.ByteTracker` over ``frames``; per frame, (N,) int64 track ids."""
    tracker = ByteTracker(params)
    return [tracker.update(f.stamp_ns, f.boxes, f.scores, f.class_ids) for f in frames]


def frame_index_ids(frames: Sequence[Frame]) -> list[np.ndarray]:
    """What the node publishes without tracking: each detection's index in its frame (the baseline)."""
    return [np.arange(len(f.boxes), dtype=np.int64) for f in frames]


def oracle_ids(frames: Sequence[Frame]) -> list[np.ndarray]:
    """Each detection's true identity: the best any tracker can do with these detections (the reference the
    thresholds are set against)."""
    return [np.asarray(f.det_gt, np.int64) for f in frames]


def trackeval_data(frames: Sequence[Frame], ids: Sequence[np.ndarray], score_threshold: float = SCORE_THRESHOLD) -> dict:
    """One sequence in TrackEval's ``eval_sequence`` form (ids remapped to 0..n-1, IoU similarity).

    Args:
        frames: the sequence (ground truth and detections).
        ids: per frame, the (N,) id of each detection, :data:`~vrt_ros.tracking.NO_TRACK` for none.
        score_threshold: detections below it are not published, so not scored.
    """
    gt_ids, tr_ids, sims = [], [], []
    for f, frame_ids in zip(frames, ids):
        keep = (frame_ids != NO_TRACK) & (f.scores >= score_threshold)
        gt_ids.append(np.asarray(f.gt_ids, np.int64))
        tr_ids.append(frame_ids[keep])
        sims.append(iou_matrix(f.gt_boxes, f.boxes[keep]))
    remap = {v: i for i, v in enumerate(np.unique(np.concatenate(tr_ids)) if tr_ids else [])}
    tr_ids = [np.array([remap[v] for v in t], np.int64) for t in tr_ids]
    gt_remap = {v: i for i, v in enumerate(np.unique(np.concatenate(gt_ids)))}
    gt_ids = [np.array([gt_remap[v] for v in g], np.int64) for g in gt_ids]
    return {
        "num_timesteps": len(frames), "gt_ids": gt_ids, "tracker_ids": tr_ids, "similarity_scores": sims,
        "num_gt_ids": len(gt_remap), "num_tracker_ids": len(remap),
        "num_gt_dets": int(sum(len(g) for g in gt_ids)), "num_tracker_dets": int(sum(len(t) for t in tr_ids)),
    }


def scores(frames: Sequence[Frame], ids: Sequence[np.ndarray], score_threshold: float = SCORE_THRESHOLD) -> dict[str, float]:
    """HOTA, DetA, AssA, IDF1, MOTA, IDSW and the count of ids of one sequence, by TrackEval.

    Raises:
        ImportError: TrackEval is not installed.
    """
    with contextlib.redirect_stdout(io.StringIO()):  # trackeval prints about its optional datasets on import
        from trackeval.metrics import CLEAR, HOTA, Identity
    data = trackeval_data(frames, ids, score_threshold)
    hota = HOTA().eval_sequence(data)
    ident = Identity().eval_sequence(data)
    clear = CLEAR().eval_sequence(data)
    return {"HOTA": float(np.mean(hota["HOTA"])), "DetA": float(np.mean(hota["DetA"])),
            "AssA": float(np.mean(hota["AssA"])), "IDF1": float(ident["IDF1"]), "MOTA": float(clear["MOTA"]),
            "IDSW": int(clear["IDSW"]), "ids": data["num_tracker_ids"], "gt_ids": data["num_gt_ids"]}


def evaluate(params: TrackerParams = TrackerParams(), seeds: Sequence[int] = (0,),
             tracker: Callable[[Sequence[Frame]], list[np.ndarray]] | None = None,
             scenes: Sequence[str] = SCENES) -> list[dict]:
    """Every scene at every rate (and seed): one row of :func:`scores` each, with ``scene``, ``rate_hz``, ``seed``;
    ``tracker`` replaces the :class:`~vrt_ros.tracking.ByteTracker` (e.g. :func:`oracle_ids`)."""
    rows = []
    for name in scenes:
        for rate in RATES_HZ:
            for seed in seeds:
                frames = scene(name, rate, seed)
                ids = tracker(frames) if tracker is not None else track(frames, params)
                rows.append({"scene": name, "rate_hz": rate, "seed": seed, **scores(frames, ids)})
    return rows


def markdown(rows: list[dict], params: TrackerParams) -> str:
    """The results table."""
    lines = [f"Tracker parameters: {asdict(params)}; published detections: score >= {SCORE_THRESHOLD}.", "",
             "| scene | Hz | seed | HOTA | DetA | AssA | IDF1 | MOTA | IDSW | ids / true ids |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['scene']} | {r['rate_hz']:g} | {r['seed']} | {r['HOTA']:.3f} | {r['DetA']:.3f} | "
                     f"{r['AssA']:.3f} | {r['IDF1']:.3f} | {r['MOTA']:.3f} | {r['IDSW']} | {r['ids']} / {r['gt_ids']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print and write the synthetic-sequence metrics; exit code 0, 2 when TrackEval is not installed."""
    parser = argparse.ArgumentParser(prog="python -m vrt_ros.bench.tracker.tracking_eval", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/tracking"), help="folder for synthetic.json / .md")
    parser.add_argument("--seeds", type=int, default=1, help="random seeds per scene and rate (0..N-1)")
    args = parser.parse_args(argv)
    params = TrackerParams()
    try:
        rows = evaluate(params, range(args.seeds))
        oracle = evaluate(params, range(args.seeds), tracker=oracle_ids)
        baseline = evaluate(params, range(args.seeds), tracker=frame_index_ids)
    except ImportError as exc:
        print(f"tracking_eval: TrackEval is not installed ({exc}): pip install --no-deps trackeval==1.3.0", file=sys.stderr)
        return 2
    text = markdown(rows, params)
    text += ("\nOracle, each detection's true identity (the best any tracker can score on these detections; the "
             "published set is the same):\n\n" + markdown(oracle, params).split("\n", 2)[2])
    text += "\nBaseline, the id = index in the frame (the node without tracking):\n\n" + markdown(baseline, params).split("\n", 2)[2]
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "synthetic.json").write_text(json.dumps({"params": asdict(params), "rows": rows, "oracle": oracle, "baseline": baseline}, indent=1))
    (args.out / "synthetic.md").write_text("# Tracking on synthetic sequences (TrackEval)\n\nCommand: `python -m vrt_ros.bench.tracker.tracking_eval`\n\n" + text)
    print(f"wrote {args.out / 'synthetic.json'} and {args.out / 'synthetic.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
