"""Non-maximum suppression: the numpy reference the GPU kernel is tested against.

Greedy NMS as in torchvision ``nms`` / ``batched_nms``: visit boxes by score (highest first, ties by lower index),
keep a box unless an already kept box of the same class (any class when class-agnostic) overlaps it with
IoU **greater than** the threshold. IoU on continuous coordinates: area = ``(x2 - x1) * (y2 - y1)``, no +1,
computed in float32 and compared with the threshold as float32 (what the GPU kernel does).
O(N^2) in the worst case, which is fine for the few hundred candidates left after the score threshold.
"""

from __future__ import annotations

import numpy as np


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one box with many.

    Args:
        box: (4,) x1, y1, x2, y2.
        boxes: (M, 4) x1, y1, x2, y2.

    Returns:
        (M,) float32 IoU in [0, 1]; 0 where the union is empty.
    """
    box = np.asarray(box, np.float32)
    boxes = np.asarray(boxes, np.float32)
    iw = np.clip(np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]), 0.0, None)
    ih = np.clip(np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]), 0.0, None)
    inter = iw * ih
    area = max(float(box[2] - box[0]), 0.0) * max(float(box[3] - box[1]), 0.0)
    areas = np.clip(boxes[:, 2] - boxes[:, 0], 0.0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0.0, None)
    union = area + areas - inter
    out = np.zeros(len(boxes), np.float32)
    np.divide(inter, union, out=out, where=union > 0)
    return out


def score_order(scores: np.ndarray) -> np.ndarray:
    """Indices sorting ``scores`` descending, ties by ascending index (a stable order the GPU path reproduces)."""
    scores = np.asarray(scores)
    return np.lexsort((np.arange(len(scores)), -scores.astype(np.float64)))


def nms(
    boxes: np.ndarray,
    scores: np.ndarray,
    iou_threshold: float,
    class_ids: np.ndarray | None = None,
    max_output: int | None = None,
) -> np.ndarray:
    """Greedy NMS, per class or class-agnostic.

    Args:
        boxes: (N, 4) x1, y1, x2, y2 (any consistent pixel frame), finite.
        scores: (N,) finite scores.
        iou_threshold: a box is suppressed by a kept box overlapping it with IoU > this.
        class_ids: (N,) int; boxes suppress only boxes of their own class. None = class-agnostic.
        max_output: stop after keeping this many (None = no limit).

    Returns:
        (K,) int64 indices into the inputs of the kept boxes, by score descending then index ascending.
    """
    order = score_order(scores)
    b = np.asarray(boxes, np.float32).reshape(-1, 4)[order]  # visiting order: row p is box order[p]
    x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    areas = np.clip(x2 - x1, 0.0, None) * np.clip(y2 - y1, 0.0, None)
    cls = None if class_ids is None else np.asarray(class_ids)[order]
    thr = np.float32(iou_threshold)  # IoU and threshold compared in float32, as on the GPU
    limit = len(order) if max_output is None else max(0, int(max_output))
    suppressed = np.zeros(len(order), bool)
    keep: list[int] = []
    for p in range(len(order)):
        if len(keep) >= limit:
            break
        if suppressed[p]:
            continue
        keep.append(int(order[p]))
        q = slice(p + 1, None)
        iw = np.clip(np.minimum(x2[p], x2[q]) - np.maximum(x1[p], x1[q]), 0.0, None)
        ih = np.clip(np.minimum(y2[p], y2[q]) - np.maximum(y1[p], y1[q]), 0.0, None)
        inter = iw * ih
        union = areas[p] + areas[q] - inter
        iou = np.zeros(inter.shape, np.float32)
        np.divide(inter, union, out=iou, where=union > 0)  # an empty union (two empty boxes) never suppresses
        hit = iou > thr
        if cls is not None:
            hit &= cls[q] == cls[p]
        suppressed[q] |= hit
    return np.asarray(keep, np.int64)
