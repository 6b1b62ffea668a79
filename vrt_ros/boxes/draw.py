"""Annotate a BGR image with detections: boxes, "label score" text, keypoints (OpenCV drawing, in place).

Used by the node's ``debug_image`` and by the demo. Everything is drawn into the caller's buffer; nothing is
allocated here beyond OpenCV's own work. Colours come from two small tables (per class, per keypoint index).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from vrt_ros.types import Detections

CLASS_COLORS: tuple[tuple[int, int, int], ...] = (
    (56, 56, 255), (151, 157, 255), (31, 112, 255), (29, 178, 255), (49, 210, 207), (10, 249, 72),
    (23, 204, 146), (134, 219, 61), (52, 147, 26), (187, 212, 0), (168, 153, 44), (255, 194, 0),
    (147, 69, 52), (255, 115, 100), (236, 24, 0), (255, 56, 132), (133, 0, 82), (255, 56, 203),
)
"""BGR box colour of class ``i`` is ``CLASS_COLORS[i % len(CLASS_COLORS)]`` (Ultralytics' palette, BGR)."""

KEYPOINT_COLORS: tuple[tuple[int, int, int], ...] = (
    (255, 0, 0), (0, 0, 255), (0, 255, 0), (255, 0, 255), (0, 255, 255),
    (255, 255, 0), (128, 0, 255), (0, 128, 255), (255, 128, 0),
)
"""BGR colour of keypoint index ``j`` is ``KEYPOINT_COLORS[j % len(KEYPOINT_COLORS)]`` (for CenterFace's five
landmarks in head order: blue, red, green, magenta, yellow)."""

_FONT = cv2.FONT_HERSHEY_SIMPLEX
_TEXT_COLOR = (255, 255, 255)


def line_width(height: int, width: int) -> int:
    """Box line thickness in pixels for an image size: 1 px per 500 px of the shorter side, at least 1."""
    return max(1, round(min(height, width) / 500))


def draw_detections(
    image: np.ndarray,
    detections: Detections,
    *,
    labels: Sequence[str] = (),
    keypoint_threshold: float = 0.5,
    thickness: int = 0,
    draw_text: bool = True,
) -> np.ndarray:
    """Draw masks, boxes, ``"<label> <score>"`` text and keypoints onto ``image`` in place.

    Instance masks (``detections.label_mask``, pixel = index + 1) are blended in the class colour at 50 % first.

    Box ``i`` is its outline, the closed polygon through its rounded corners (:meth:`Detections.corners`: an
    axis-aligned box is the rectangle from ``round(boxes[i, :2])`` to ``round(boxes[i, 2:])``, an oriented one its
    turned rectangle), in the class colour (8-connected when its edges run along the image axes, anti-aliased
    otherwise), with the text on a filled band just above the outline's top-left (inside it when the box touches
    the top edge). Keypoints
    whose confidence is at least ``keypoint_threshold`` are filled circles (radius ``thickness + 2`` px)
    in the keypoint-index colour. Coordinates outside the image are clipped by OpenCV.

    Args:
        image: (H, W, 3) uint8 BGR, C-contiguous and writable; drawn into.
        detections: boxes and keypoints in this image's pixels.
        labels: class names by class index; the decimal index is shown for ids without a name.
        keypoint_threshold: minimum keypoint confidence drawn, [0, 1].
        thickness: line thickness in pixels; 0 picks :func:`line_width` for the image size.
        draw_text: False draws boxes and keypoints only.

    Returns:
        ``image`` itself.

    Raises:
        ValueError: ``image`` is not a writable C-contiguous (H, W, 3) uint8 array.
    """
    if not (
        isinstance(image, np.ndarray)
        and image.dtype == np.uint8
        and image.ndim == 3
        and image.shape[2] == 3
        and image.flags.c_contiguous
        and image.flags.writeable
    ):
        got = f"{type(image).__name__} {getattr(image, 'shape', '')} {getattr(image, 'dtype', '')}"
        raise ValueError(f"draw_detections needs a writable C-contiguous (H, W, 3) uint8 BGR array, got {got}")
    height, width = image.shape[:2]
    thick = thickness or line_width(height, width)
    font_scale = 0.4 * thick + 0.1  # 0.5 at 1 px lines: readable on VGA-sized frames
    radius = thick + 2
    scores = np.asarray(detections.scores)
    class_ids = np.asarray(detections.class_ids)
    keypoints = np.asarray(detections.keypoints)
    if detections.label_mask is not None and detections.label_mask.shape == (height, width) and len(detections):
        _blend_masks(image, detections.label_mask, class_ids)
    outlines = np.round(detections.corners()).astype(np.int32)  # (N, 4, 2), whatever the kind of box
    for i in range(len(detections)):
        cid = int(class_ids[i])
        color = CLASS_COLORS[cid % len(CLASS_COLORS)]
        outline = outlines[i]
        # edges along the image axes are drawn crisp (the same pixels as cv2.rectangle), turned ones smoothed
        crisp = outline[0, 0] == outline[1, 0] or outline[0, 1] == outline[1, 1]
        cv2.polylines(image, [outline], True, color, thick, cv2.LINE_8 if crisp else cv2.LINE_AA)
        x1, y1 = int(outline[:, 0].min()), int(outline[:, 1].min())
        if draw_text:
            name = labels[cid] if 0 <= cid < len(labels) else str(cid)
            text = f"{name} {float(scores[i]):.2f}"
            (tw, th), base = cv2.getTextSize(text, _FONT, font_scale, max(1, thick - 1))
            top = y1 - th - base - thick if y1 - th - base - thick >= 0 else y1 + thick
            cv2.rectangle(image, (x1, top), (x1 + tw + 2 * thick, top + th + base + thick), color, cv2.FILLED)
            cv2.putText(image, text, (x1 + thick, top + th + thick // 2), _FONT, font_scale, _TEXT_COLOR,
                        max(1, thick - 1), cv2.LINE_AA)
        if keypoints.ndim == 3 and keypoints.shape[0] > i:
            for j, (kx, ky, kc) in enumerate(keypoints[i]):
                if float(kc) >= keypoint_threshold and np.isfinite(kx) and np.isfinite(ky):
                    centre = (int(round(float(kx))), int(round(float(ky))))
                    cv2.circle(image, centre, radius, KEYPOINT_COLORS[j % len(KEYPOINT_COLORS)], cv2.FILLED,
                               cv2.LINE_AA)
    return image


def _blend_masks(image: np.ndarray, label_mask: np.ndarray, class_ids: np.ndarray) -> None:
    """Blend each labelled pixel 50 % with its detection's class colour (in place)."""
    on = label_mask > 0
    if not on.any():
        return
    palette = np.asarray(CLASS_COLORS, np.uint16)[np.asarray(class_ids, np.int64) % len(CLASS_COLORS)]
    colors = palette[label_mask[on].astype(np.int64) - 1]
    image[on] = ((image[on].astype(np.uint16) + colors) // 2).astype(np.uint8)
