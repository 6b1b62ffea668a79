"""Instance masks of a segmentation head (YOLOv8/YOLO11-seg): the numpy reference of the GPU mask assembly.

Steps, in the order the GPU kernels do them, in float32 as they do (``kernels/masks.cu``; the GPU is compared with
this within IoU 0.99 for every mask of at least 1000 pixels):

1. **Logits at prototype resolution**, kept detections only: ``L[d] = coefficients[d] @ prototypes`` (float32,
   ``(P, PH, PW)`` prototypes, ``PH = H / 4`` for Ultralytics), no sigmoid (Ultralytics ``ops.process_mask``).
2. **Source pixel -> prototype position**: source pixel centre ``x + 0.5`` -> engine input
   ``x_in = (x + 0.5) * scale_x + pad_x`` (:mod:`vrt_ros.boxes.geometry`: the letterbox, or the stretch, removed by the
   same mapping the boxes use) -> prototype sample position ``u = x_in * PW / W - 0.5`` (pixel-centre convention),
   clamped to ``[0, PW - 1]``; the same for y.
3. **Bilinear sample** of ``L[d]`` at ``(u, v)`` (the taps and clamping of ``kernels/preprocess.cu``).
4. **Crop to the box** by pixel index, as Ultralytics (``ultralytics/utils/ops.py::crop_mask``, 8.4):
   ``x1 <= x < x2`` and ``y1 <= y < y2``, box in source pixels (the crop by pixel centre,
   ``x1 <= x + 0.5 < x2``, used before gave 1000-pixel instances IoU down to 0.895 in the parity run).
5. **Threshold**: on where ``logit > log(t / (1 - t))``, i.e. ``sigmoid(logit) > t`` for ``t = mask_threshold``
   (strict, as Ultralytics' ``masks.gt_(0.5)`` after the sigmoid).
6. **Labels**: pixel = index + 1 of the first (highest-scored: detections are ordered by score) detection whose
   mask is on there, 0 = background; ``uint8`` images label at most 255 detections, later ones get no pixels.

Why bilinear on logits: one read of four prototype values per pixel, no intermediate 640x640 or source-size
float image per detection, and the crop keeps the work to the box. Ultralytics (``process_mask`` with
``upsample``) resizes the sigmoid of the cropped 160x160 mask bilinearly to the input and then to the source;
microwink (the package that made ``../shared/models/seg/masks``) resizes the un-padded 160x160 logits straight to
the source with Lanczos-3. Both give the same masks away from the edges; they differ from this by a pixel or two
along the boundary (the tests measure it).
"""

from __future__ import annotations

import math

import numpy as np

from vrt_ros.types import Detections, Letterbox

#: Largest label a ``uint8`` (``mono8``) instance image can hold.
MONO8_LABELS = 255


def label_dtype(max_detections: int) -> type:
    """uint8 when at most 254 detections can be labelled (``mono8``), else uint16 (``mono16``)."""
    return np.uint8 if max_detections <= 254 else np.uint16


def logit_threshold(mask_threshold: float) -> float:
    """The logit above which a pixel is on: ``log(t / (1 - t))``; -inf for t <= 0, +inf for t >= 1."""
    t = float(mask_threshold)
    if t <= 0.0:
        return -math.inf
    if t >= 1.0:
        return math.inf
    return math.log(t / (1.0 - t))


def mask_logits(coefficients: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """Step 1: ``(D, PH, PW)`` float32 logits of D detections from ``(D, P)`` coefficients and ``(P, PH, PW)``
    prototypes."""
    p, ph, pw = prototypes.shape
    coef = np.asarray(coefficients, np.float32).reshape(-1, p)
    return (coef @ np.asarray(prototypes, np.float32).reshape(p, ph * pw)).reshape(-1, ph, pw)


def _taps(first: int, count: int, scale: float, pad: int, proto_per_input: float, size: int):
    """Steps 2-3 along one axis for source pixels ``first .. first + count - 1``: i0, i1 (int) and the weight of
    i1 (float32), in float32 and with the clamping of ``kernels/masks.cu``'s ``mask_tap``."""
    f32 = np.float32
    x = np.arange(first, first + count, dtype=np.float32)
    s = ((x + f32(0.5)) * f32(scale) + f32(pad)) * f32(proto_per_input) - f32(0.5)
    s = np.maximum(s, f32(0.0))
    i0 = np.minimum(np.floor(s).astype(np.int64), size - 1)
    i1 = np.minimum(i0 + 1, size - 1)
    frac = (s - i0.astype(np.float32)).astype(np.float32)
    frac[i1 == i0] = 0.0
    return i0, i1, frac


def pixel_span(lo: float, hi: float, size: int) -> tuple[int, int]:
    """Step 4 along one axis: the pixels ``[first, end)`` whose index ``i`` is in ``[lo, hi)`` (Ultralytics'
    ``crop_mask``), within ``[0, size)``."""
    first = max(0, int(math.ceil(lo)))
    end = min(size, int(math.ceil(hi)))
    return first, max(first, end)


def sample_mask(logits: np.ndarray, box: np.ndarray, lb: Letterbox, threshold_logit: float) -> tuple[slice, slice, np.ndarray]:
    """Steps 2-5 for one detection: its on-pixels inside its box.

    Args:
        logits: (PH, PW) float32 logits of the detection (step 1).
        box: (4,) x1, y1, x2, y2 in source pixels.
        lb: the frame's letterbox (or stretch) geometry.
        threshold_logit: :func:`logit_threshold` of ``mask_threshold``.

    Returns:
        ``(rows, cols, on)``: the box's pixel window in the source image and an (rows, cols) bool array.
    """
    ph, pw = logits.shape
    x0, x1 = pixel_span(float(box[0]), float(box[2]), lb.src_width)
    y0, y1 = pixel_span(float(box[1]), float(box[3]), lb.src_height)
    rows, cols = slice(y0, y1), slice(x0, x1)
    if x1 <= x0 or y1 <= y0:
        return rows, cols, np.zeros((y1 - y0, x1 - x0), bool)
    j0, j1, fx = _taps(x0, x1 - x0, lb.scale_x, lb.pad_x, np.float32(pw) / np.float32(lb.dst_width), pw)
    i0, i1, fy = _taps(y0, y1 - y0, lb.scale_y, lb.pad_y, np.float32(ph) / np.float32(lb.dst_height), ph)
    fx, fy = fx[None, :], fy[:, None]
    top = logits[np.ix_(i0, j0)] * (1.0 - fx) + logits[np.ix_(i0, j1)] * fx
    bottom = logits[np.ix_(i1, j0)] * (1.0 - fx) + logits[np.ix_(i1, j1)] * fx
    value = top * (1.0 - fy) + bottom * fy
    return rows, cols, value > np.float32(threshold_logit)


def label_image(dets: Detections, prototypes: np.ndarray, lb: Letterbox, mask_threshold: float,
                dtype: type = np.uint8, out: np.ndarray | None = None) -> np.ndarray:
    """The instance-label image of one frame (steps 1-6).

    Args:
        dets: the frame's final detections, highest score first; ``dets.extras`` (N, P) mask coefficients; boxes in
            source pixels.
        prototypes: (P, PH, PW) (or (1, P, PH, PW)) float32 mask prototypes of the frame.
        lb: the frame's geometry (source size, scale, padding).
        mask_threshold: probability threshold in [0, 1].
        dtype: np.uint8 or np.uint16 (:func:`label_dtype`).
        out: optional (src_height, src_width) array of ``dtype`` to fill (reused between frames).

    Returns:
        (src_height, src_width) array of ``dtype``: 0 background, ``i + 1`` for detection i.
    """
    protos = np.asarray(prototypes, np.float32)
    protos = protos.reshape(protos.shape[-3:])
    shape = (lb.src_height, lb.src_width)
    if out is None or out.shape != shape or out.dtype != dtype:
        out = np.zeros(shape, dtype)
    else:
        out[:] = 0
    n = min(len(dets), int(np.iinfo(dtype).max))
    if n == 0:
        return out
    logits = mask_logits(np.asarray(dets.extras)[:n, : protos.shape[0]], protos)
    thr = logit_threshold(mask_threshold)
    for d in range(n):
        rows, cols, on = sample_mask(logits[d], dets.boxes[d], lb, thr)
        window = out[rows, cols]
        window[on & (window == 0)] = d + 1
    return out
