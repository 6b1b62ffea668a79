"""From decoded candidates to the frame's final :class:`~vrt_ros.types.Detections` (numpy reference).

Steps, in this order (the GPU finalize kernel follows the same order):

1. drop rows with any NaN/Inf (box, score or keypoint) and boxes with width or height <= 0;
2. keep scores >= ``score_threshold``;
3. NMS (:func:`vrt_ros.boxes.nms.nms`: per class, or across classes when ``class_agnostic``) unless the model
   already applied it; else order by score descending, ties by index;
4. map boxes and keypoints from engine-input to source pixels (:func:`vrt_ros.boxes.geometry.to_source`);
5. clip boxes and keypoint positions to the image ``[0, width] x [0, height]``; clip scores and keypoint
   confidences to [0, 1]; drop boxes whose clipped width or height is <= 0 (boxes wholly in the padding);
6. keep the first ``max_detections``.

Per-detection ``extras`` (mask coefficients) follow their rows. Oriented boxes (``oriented=True``, the angle in
``extras[:, 0]``, boxes the rectangle in its own axes) use rotated NMS (:func:`vrt_ros.boxes.rotated.rotated_nms`) in
step 3; in step 5 they are not clipped (a turned rectangle's axes are not the image's) but dropped when their centre
is outside the image, and they get the long-side ``theta`` of :mod:`vrt_ros.boxes.rotated`.
"""

from __future__ import annotations

import numpy as np

from vrt_ros.boxes.geometry import clip_boxes, to_source
from vrt_ros.boxes.nms import nms, score_order
from vrt_ros.boxes.rotated import canonical, rboxes, rotated_nms
from vrt_ros.heads.base import Candidates
from vrt_ros.types import Detections, Letterbox, PostprocessParams


def _valid(boxes: np.ndarray) -> np.ndarray:
    """Rows whose box has positive width and height."""
    return (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])


def _oriented_to_source(boxes: np.ndarray, angle: np.ndarray, lb: Letterbox) -> tuple[np.ndarray, np.ndarray]:
    """Own-axis boxes to source pixels (letterbox only: one scale), in the long-side form; returns boxes, theta."""
    to_source(boxes, lb)
    cx, cy = (boxes[:, 0] + boxes[:, 2]) * 0.5, (boxes[:, 1] + boxes[:, 3]) * 0.5
    w, h, theta = canonical(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1], angle)
    boxes[:] = np.stack([cx - w * 0.5, cy - h * 0.5, cx + w * 0.5, cy + h * 0.5], axis=1)
    return boxes, theta


def finish(cands: Candidates, letterbox: Letterbox, params: PostprocessParams, applies_nms: bool,
           oriented: bool = False) -> Detections:
    """Threshold, NMS, cap and map the candidates of one frame to source pixels.

    Args:
        cands: decoded candidates, engine-input pixels (see :class:`vrt_ros.heads.Candidates`).
        letterbox: the frame's letterbox (source size, scale, padding).
        params: score threshold, NMS IoU, class-agnostic flag, max detections.
        applies_nms: True when NMS must run here (the head's ``applies_nms``).
        oriented: the candidates are oriented boxes, angle in ``cands.extras[:, 0]`` (the head's ``oriented``).

    Returns:
        Detections in source pixels: boxes clipped to the image, every box with width and height > 0, scores
        in [0, 1], at most ``params.max_detections`` rows, highest score first.
    """
    k = cands.keypoints.shape[1] if cands.keypoints.ndim == 3 else 0
    n = len(cands)
    e = 0 if cands.extras is None else int(np.shape(cands.extras)[-1])
    empty = Detections.empty(k, e)
    if oriented:
        empty.theta = np.zeros(0, np.float32)
    if n == 0 or params.max_detections <= 0:
        return empty
    extras = np.zeros((n, 0), np.float32) if cands.extras is None else np.asarray(cands.extras, np.float32).reshape(n, e)
    boxes = np.asarray(cands.boxes, np.float32).reshape(n, 4)
    scores = np.asarray(cands.scores, np.float32).reshape(n)
    kpts = np.asarray(cands.keypoints, np.float32).reshape(n, k, 3)
    ok = np.isfinite(boxes).all(axis=1) & np.isfinite(scores) & np.isfinite(kpts.reshape(n, -1)).all(axis=1)
    ok &= np.isfinite(extras).all(axis=1)
    ok &= _valid(boxes)
    ok &= scores >= params.score_threshold
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return empty
    class_ids = np.asarray(cands.class_ids).reshape(n)[idx].astype(np.int32)
    classes = None if params.class_agnostic else class_ids
    if applies_nms and oriented:
        keep = rotated_nms(rboxes(boxes[idx], extras[idx, 0]), scores[idx], params.nms_iou, classes)
    elif applies_nms:
        keep = nms(boxes[idx], scores[idx], params.nms_iou, classes)
    else:
        keep = score_order(scores[idx])
    idx = idx[keep]
    class_ids = class_ids[keep]

    out_boxes = boxes[idx].copy()  # fancy indexing copies: the caller's arrays stay untouched
    out_kpts = kpts[idx].copy()
    out_extras = extras[idx].copy()
    theta = None
    if oriented:
        out_boxes, theta = _oriented_to_source(out_boxes, out_extras[:, 0], letterbox)
    else:
        to_source(out_boxes, letterbox)
        clip_boxes(out_boxes, letterbox.src_width, letterbox.src_height)
    xy = out_kpts[..., :2]
    to_source(xy, letterbox)
    np.clip(xy[..., 0], 0.0, float(letterbox.src_width), out=xy[..., 0])
    np.clip(xy[..., 1], 0.0, float(letterbox.src_height), out=xy[..., 1])
    np.clip(out_kpts[..., 2], 0.0, 1.0, out=out_kpts[..., 2])

    if oriented:
        cx, cy = (out_boxes[:, 0] + out_boxes[:, 2]) * 0.5, (out_boxes[:, 1] + out_boxes[:, 3]) * 0.5
        ok = (cx >= 0) & (cx <= letterbox.src_width) & (cy >= 0) & (cy <= letterbox.src_height)
        inside = np.flatnonzero(ok & _valid(out_boxes))[: params.max_detections]
    else:
        inside = np.flatnonzero(_valid(out_boxes))[: params.max_detections]
    return Detections(
        boxes=out_boxes[inside],
        scores=np.clip(scores[idx][inside], 0.0, 1.0).astype(np.float32),
        class_ids=class_ids[inside],
        keypoints=out_kpts[inside],
        extras=out_extras[inside],
        theta=None if theta is None else theta[inside],
    )
