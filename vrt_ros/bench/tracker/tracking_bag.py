"""The tracker on a real recording: track counts and lengths, and a picture of the tracks drawn over a frame.

Usage::

    python -m vrt_ros.bench.tracker.tracking_bag [--bag ../shared/data/bags/vtest_compressed_mcap]
        [--model ../shared/models/yolox_nano.onnx] [--labels ../shared/models/coco80.names] [--out results/tracking]

Every frame of the bag's image topic goes through the CPU pipeline (ONNX Runtime) with the node's default
parameters and ``tracking.enabled`` (so the pipeline keeps scores down to ``tracking.low_score``), then through the
camera's tracker exactly as the node's worker does (:func:`vrt_ros.tracking.output.track_frame`, the header
stamps). Writes ``bag_tracks.json`` (per track: class, first and last frame, frames published with the id) and
``bag_tracks.md``, and ``bag_tracks.png``: the last frame, dimmed, with each track's path (its box centres over the
bag), the box and id of every track on that frame, and a dot with the id where an earlier track ended.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from vrt_ros.inference.pipeline import make_pipeline
from vrt_ros.model.labels import load_labels
from vrt_ros.settings import config
from vrt_ros.tools.demo_bag import find_image_topic, read_bag_frames
from vrt_ros.tracking import ByteTracker
from vrt_ros.tracking.association import iou_matrix
from vrt_ros.tracking.output import track_frame

#: Width of the written picture, pixels (the frame is scaled down to it when wider).
PICTURE_WIDTH = 640


def run(bag: Path, model: Path, labels: Path | None) -> tuple[list, dict, list]:
    """Detect and track every frame; returns the frames, ``{track id: {class, frames: [...], boxes: [...]}}`` and
    each frame's published boxes."""
    values = config.validate({"backend": "cpu", "model.path": str(model), "model.labels": str(labels or ""),
                              "tracking.enabled": True})
    names = load_labels(values["model.labels"])
    pipeline = make_pipeline(values, log=lambda m: None)
    pipeline.set_postprocess(config.postprocess_params(values))
    tracker = ByteTracker(config.tracker_params(values))
    topic, _ = find_image_topic(bag)
    frames = read_bag_frames(bag, topic)
    tracks: dict[int, dict] = {}
    published = []
    try:
        for f in frames:
            dets, ids = track_frame(tracker, f.stamp_ns, pipeline.process_bgr(f.image), values["score_threshold"])
            published.append(dets.boxes)
            for k, tid in enumerate(ids):
                if tid:
                    cls = int(dets.class_ids[k])
                    t = tracks.setdefault(int(tid), {"class": names[cls] if cls < len(names) else str(cls),
                                                     "frames": [], "boxes": []})
                    t["frames"].append(f.index)
                    t["boxes"].append([round(float(v), 1) for v in dets.boxes[k]])
    finally:
        pipeline.close()
    return frames, tracks, published


def summary(frames: list, tracks: dict, published: list) -> dict:
    """Track counts and lengths (frames published with the id, and first to last frame), and how far objects move
    between frames: the share of detections whose best IoU with any detection of the frame before is below 0.3
    (the IoU an unconfirmed track needs to be continued: such an object cannot be tracked by overlap)."""
    best = [iou_matrix(a, b).max(axis=0) for a, b in zip(published, published[1:]) if len(a) and len(b)]
    best = np.concatenate(best) if best else np.zeros(0)
    lengths = np.array([len(t["frames"]) for t in tracks.values()]) if tracks else np.zeros(0)
    spans = np.array([t["frames"][-1] - t["frames"][0] + 1 for t in tracks.values()]) if tracks else np.zeros(0)
    per_class: dict[str, int] = {}
    for t in tracks.values():
        per_class[t["class"]] = per_class.get(t["class"], 0) + 1
    return {"frames": len(frames), "tracks": len(tracks), "per_class": per_class,
            "length_frames": {"min": int(lengths.min()) if len(lengths) else 0, "median": float(np.median(lengths)) if len(lengths) else 0.0,
                              "max": int(lengths.max(initial=0))},
            "tracks_over_half_the_bag": int((lengths >= len(frames) / 2).sum()),
            "gaps": int((spans - lengths).sum()),
            "detections_moving_beyond_overlap": float((best < 0.3).mean()) if len(best) else 0.0}


def picture(frames: list, tracks: dict, path: Path) -> None:
    """The last frame, dimmed and scaled to :data:`PICTURE_WIDTH`, with every track's path (PNG)."""
    import cv2

    image = frames[-1].image
    scale = min(1.0, PICTURE_WIDTH / image.shape[1])
    canvas = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    canvas = (cv2.cvtColor(cv2.cvtColor(canvas, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR) // 32 * 16).astype(np.uint8)
    rng = np.random.default_rng(1)
    for tid, t in sorted(tracks.items()):
        colour = tuple(int(c) for c in rng.integers(80, 256, 3))
        b = np.asarray(t["boxes"]) * scale
        centres = np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2], 1).round().astype(np.int32)
        cv2.polylines(canvas, [centres.reshape(-1, 1, 2)], False, colour, 1, cv2.LINE_AA)
        if t["frames"][-1] == frames[-1].index:  # on the picture's frame: its box and id
            x1, y1, x2, y2 = b[-1].round().astype(int)
            cv2.rectangle(canvas, (x1, y1), (x2, y2), colour, 1, cv2.LINE_AA)
            cv2.putText(canvas, str(tid), (x1 + 2, max(10, y1 + 11)), cv2.FONT_HERSHEY_SIMPLEX, 0.4, colour, 1, cv2.LINE_AA)
        else:  # ended earlier: its path ends in a dot with the id
            cv2.circle(canvas, tuple(int(v) for v in centres[-1]), 2, colour, -1, cv2.LINE_AA)
            cv2.putText(canvas, str(tid), tuple(int(v) + 3 for v in centres[-1]), cv2.FONT_HERSHEY_SIMPLEX, 0.35, colour, 1,
                        cv2.LINE_AA)
    cv2.imwrite(str(path), canvas, [cv2.IMWRITE_PNG_COMPRESSION, 9])


def main(argv: list[str] | None = None) -> int:
    """Run, print the summary, write the files; exit code 0, 2 when the bag or model is missing."""
    shared = Path(__file__).resolve().parents[3].parent / "shared"
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.tracker.tracking_bag", description=__doc__.splitlines()[0])
    ap.add_argument("--bag", type=Path, default=shared / "data" / "bags" / "vtest_compressed_mcap")
    ap.add_argument("--model", type=Path, default=shared / "models" / "yolox_nano.onnx")
    ap.add_argument("--labels", type=Path, default=shared / "models" / "coco80.names")
    ap.add_argument("--out", type=Path, default=Path("results/tracking"))
    args = ap.parse_args(argv)
    for p in (args.bag, args.model):
        if not p.exists():
            print(f"tracking_bag: {p} not found (give --bag / --model)", file=sys.stderr)
            return 2
    frames, tracks, published = run(args.bag, args.model, args.labels if args.labels.exists() else None)
    s = summary(frames, tracks, published)
    args.out.mkdir(parents=True, exist_ok=True)
    picture(frames, tracks, args.out / "bag_tracks.png")
    doc = {"bag": args.bag.name, "model": args.model.name, "summary": s,
           "tracks": {str(k): {"class": v["class"], "first": v["frames"][0], "last": v["frames"][-1],
                               "published": len(v["frames"])} for k, v in sorted(tracks.items())}}
    (args.out / "bag_tracks.json").write_text(json.dumps(doc, indent=1) + "\n")
    rows = "\n".join(f"| {k} | {v['class']} | {v['first']} | {v['last']} | {v['published']} |" for k, v in doc["tracks"].items())
    text = (f"{s['frames']} frames of `{args.bag.name}`, `{args.model.name}` on the CPU path, default parameters with "
            f"`tracking.enabled: true`: **{s['tracks']} tracks** ({', '.join(f'{n} {c}' for c, n in sorted(s['per_class'].items()))}); "
            f"published frames per track min {s['length_frames']['min']}, median {s['length_frames']['median']:g}, "
            f"max {s['length_frames']['max']}; {s['tracks_over_half_the_bag']} tracks are published in at least half the frames; "
            f"{s['gaps']} frames inside tracks' spans without a published match (occlusions, low scores). "
            f"{100 * s['detections_moving_beyond_overlap']:.0f} % of the published detections overlap no detection of "
            "the frame before by IoU 0.3 or more: those objects moved about their own width or more between two "
            "frames, which no overlap-based tracker (ByteTrack, SORT) can follow before it has learnt their velocity.\n\n"
            "| track id | class | first frame | last frame | frames published with the id |\n| ---: | --- | ---: | ---: | ---: |\n"
            + rows + "\n\n![tracks](bag_tracks.png)\n")
    (args.out / "bag_tracks.md").write_text("# Tracks on a real bag\n\nCommand: `python -m vrt_ros.bench.tracker.tracking_bag`\n\n" + text)
    print(text)
    print(f"wrote {args.out}/bag_tracks.json, .md and .png")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
