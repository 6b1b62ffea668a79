"""From decoded candidates to the frame's final :class:`~vrt_ros.types.Detections` (numpy reference).

Steps, in this order (the GPU finalize kernel follows the same order):

1. drop rows with any NaN/Inf (box, score or keypoint) and boxes with width or height <= 0;
2. keep scores >= ``score_threshold``;
3. NMS (:func:`vrt_ros.nms.nms`: per class, or across classes when ``class_agnostic``) unless the model
   already applied it; else order by score descending, ties by index;
4. map boxes and keypoints from engine-input to source pixels (:func:`vrt_ros.geometry.to_source`);
5. clip boxes and keypoint positions to the image ``[0, width] x [0, height]``; clip scores and keypoint
   confidences to [0, 1]; drop boxes whose clipped width or height is <= 0 (boxes wholly in the padding);
6. keep the first ``max_detections``.
"""

from __future__ import annotations

import numpy as np

from vrt_ros.geometry import clip_boxes, to_source
from vrt_ros.heads.base import Candidates
from vrt_ros.nms import nms, score_order
from vrt_ros.types import Detections, Letterbox, PostprocessParams


def _valid(boxes: np.ndarray) -> np.ndarray:
    """Rows whose box has positive width and height."""
    return (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])


def finish(cands: Candidates, letterbox: Letterbox, params: PostprocessParams, applies_nms: bool) -> Detections:
    """Threshold, NMS, cap and map the candidates of one frame to source pixels.

    Args:
        cands: decoded candidates, engine-input pixels (see :class:`vrt_ros.heads.Candidates`).
        letterbox: the frame's letterbox (source size, scale, padding).
        params: score threshold, NMS IoU, class-agnostic flag, max detections.
        applies_nms: True when NMS must run here (the head's ``applies_nms``).

    Returns:
        Detections in source pixels: boxes clipped to the image, every box with width and height > 0, scores
        in [0, 1], at most ``params.max_detections`` rows, highest score first.
    """
    k = cands.keypoints.shape[1] if cands.keypoints.ndim == 3 else 0
    n = len(cands)
    if n == 0 or params.max_detections <= 0:
        return Detections.empty(k)
    boxes = np.asarray(cands.boxes, np.float32).reshape(n, 4)
    scores = np.asarray(cands.scores, np.float32).reshape(n)
    kpts = np.asarray(cands.keypoints, np.float32).reshape(n, k, 3)
    ok = np.isfinite(boxes).all(axis=1) & np.isfinite(scores) & np.isfinite(kpts.reshape(n, -1)).all(axis=1)
    ok &= _valid(boxes)
    ok &= scores >= params.score_threshold
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return Detections.empty(k)
    class_ids = np.asarray(cands.class_ids).reshape(n)[idx].astype(np.int32)
    if applies_nms:
        keep = nms(boxes[idx], scores[idx], params.nms_iou, None if params.class_agnostic else class_ids)
    else:
        keep = score_order(scores[idx])
    idx = idx[keep]
    class_ids = class_ids[keep]

    out_boxes = boxes[idx].copy()  # fancy indexing copies: the caller's arrays stay untouched
    out_kpts = kpts[idx].copy()
    to_source(out_boxes, letterbox)
    clip_boxes(out_boxes, letterbox.src_width, letterbox.src_height)
    xy = out_kpts[..., :2]
    to_source(xy, letterbox)
    np.clip(xy[..., 0], 0.0, float(letterbox.src_width), out=xy[..., 0])
    np.clip(xy[..., 1], 0.0, float(letterbox.src_height), out=xy[..., 1])
    np.clip(out_kpts[..., 2], 0.0, 1.0, out=out_kpts[..., 2])

    inside = np.flatnonzero(_valid(out_boxes))[: params.max_detections]
    return Detections(
        boxes=out_boxes[inside],
        scores=np.clip(scores[idx][inside], 0.0, 1.0).astype(np.float32),
        class_ids=class_ids[inside],
        keypoints=out_kpts[inside],
    )
