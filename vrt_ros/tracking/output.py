"""What a frame publishes with tracking on: which detections, and the id each one carries.

Contract (README, "Tracking"): the published detections are exactly those at or above ``score_threshold``, the same
set as without tracking; tracking changes only their ``Detection2D.id``: the decimal track id (per camera,
increasing, never reused while the node runs nor by a later process: the format of :mod:`vrt_ros.tracking.ids`,
``epoch_ms * 1000000 + n``) for a detection on a confirmed track, and the empty
string for one that is not (a new object during its first ``tracking.min_hits - 1`` frames, or a detection below
``tracking.high_score`` that continues no track). Detections below ``score_threshold`` (down to
``tracking.low_score``) feed the tracker's second association only.
"""

from __future__ import annotations

import numpy as np

from vrt_ros.tracking.tracker import NO_TRACK, ByteTracker
from vrt_ros.types import Detections


def track_frame(tracker: ByteTracker, stamp_ns: int, dets: Detections, score_threshold: float,
                estimated: bool = False) -> tuple[Detections, list[str]]:
    """Run one frame through its camera's tracker and select what it publishes.

    Args:
        tracker: the camera's tracker.
        stamp_ns: the frame's header stamp, integer ns.
        estimated: ``stamp_ns`` is an estimate (an unstamped frame; :meth:`ByteTracker.update`).
        dets: every detection the pipeline kept (scores down to ``min(score_threshold, tracking.low_score)``).
        score_threshold: the published minimum score.

    Returns:
        ``(published, ids)``: the detections at or above ``score_threshold`` in their original order (keypoints
        included), and one id string per published detection (``""`` when not on a confirmed track).
    """
    track_ids = tracker.update(stamp_ns, dets.boxes, dets.scores, dets.class_ids, dets.theta, estimated)
    keep = np.asarray(dets.scores) >= score_threshold
    if not keep.all():
        dets = select(dets, keep)
        track_ids = track_ids[keep]
    return dets, ["" if t == NO_TRACK else str(t) for t in track_ids.tolist()]


def select(dets: Detections, keep: np.ndarray) -> Detections:
    """The detections where ``keep`` (N,) bool is true, in their order, with every per-detection field (keypoints,
    extras, theta) and the instance-label image relabelled to the new indices (a dropped detection's pixels become
    background, 0), so ``label_mask`` still says ``index + 1`` of the published array. The label image is
    rewritten in place: it is owned by the frame's ``Detections`` (the pipeline's call returned its own array), so
    nothing else reads it."""
    def rows(a):
        return a[keep] if a is not None and len(a) == len(keep) else a

    label = dets.label_mask
    if label is not None:
        lut = np.zeros(len(keep) + 1, label.dtype)
        lut[1:][keep] = np.arange(1, int(keep.sum()) + 1, dtype=label.dtype)
        np.take(lut, label, out=label, mode="clip")
    return Detections(boxes=dets.boxes[keep], scores=dets.scores[keep], class_ids=dets.class_ids[keep],
                      keypoints=rows(dets.keypoints), extras=rows(dets.extras), theta=rows(dets.theta),
                      label_mask=label)
