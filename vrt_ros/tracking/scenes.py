"""Synthetic tracking sequences with known ground truth, for the metrics tests and the tracker's benchmark.

Objects are boxes moving at constant velocity over a 1280x720 image (pedestrian-sized, 60x150 px at 100-200 px/s
unless said otherwise); a detector is simulated from the ground truth: the box, possibly jittered, with a score,
possibly missed. Each scene is one of the situations a tracker gets wrong first:

- ``crossing``: two people cross on the same line, the farther one (smaller) is behind the nearer one while they
  overlap (more than 30 % of it covered), and its score drops to 0.2-0.4 there (what a detector does with a half-hidden person); a third walks
  across them the other way, higher up;
- ``occlusion``: one person walks behind a pillar: no detection at all for 10 frames, then seen again; a second
  person walks on nearby, unoccluded;
- ``missed``: six people, each detection missed with probability 0.2;
- ``jitter``: six people, every box edge jittered by Gaussian noise of 4 % of the box size (std), scores jittered.

All randomness comes from a seeded ``numpy.random.Generator``: a scene is the same on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCENES = ("crossing", "occlusion", "missed", "jitter")
WIDTH, HEIGHT = 1280, 720
OCCLUDED_FRAMES = 10
MISS_RATE = 0.2
JITTER = 0.04


@dataclass
class Frame:
    """One frame of a sequence: ground truth and simulated detections.

    Attributes:
        stamp_ns: frame stamp, integer ns.
        gt_ids: (K,) int ground-truth identities (0-based, contiguous over the sequence).
        gt_boxes: (K, 4) float32 x1, y1, x2, y2 pixels.
        boxes: (N, 4) float32 detected boxes, x1, y1, x2, y2 pixels.
        scores: (N,) float32 detection scores in [0, 1].
        class_ids: (N,) int32 (all 0: one class).
        det_gt: (N,) int64 the ground-truth identity each detection was made from (what an oracle tracker knows).
    """

    stamp_ns: int
    gt_ids: np.ndarray
    gt_boxes: np.ndarray
    boxes: np.ndarray
    scores: np.ndarray
    class_ids: np.ndarray
    det_gt: np.ndarray


def _walkers(rate_hz: float, duration_s: float, starts, velocities, sizes) -> tuple[np.ndarray, np.ndarray]:
    """Ground truth of constant-velocity boxes: (T, K, 4) boxes and (T, K) visibility (inside the image)."""
    t = np.arange(int(round(duration_s * rate_hz)))[:, None, None] / rate_hz
    centres = np.asarray(starts, np.float64)[None] + t * np.asarray(velocities, np.float64)[None]
    half = np.asarray(sizes, np.float64)[None] * 0.5
    boxes = np.concatenate([centres - half, centres + half], axis=2)
    inside = (boxes[..., 0] >= 0) & (boxes[..., 2] <= WIDTH) & (boxes[..., 1] >= 0) & (boxes[..., 3] <= HEIGHT)
    return boxes, inside


def _covered(front: np.ndarray, back: np.ndarray) -> np.ndarray:
    """Fraction of each ``back`` box (..., 4) covered by the ``front`` box."""
    iw = np.clip(np.minimum(front[..., 2], back[..., 2]) - np.maximum(front[..., 0], back[..., 0]), 0, None)
    ih = np.clip(np.minimum(front[..., 3], back[..., 3]) - np.maximum(front[..., 1], back[..., 1]), 0, None)
    return iw * ih / ((back[..., 2] - back[..., 0]) * (back[..., 3] - back[..., 1]))


def scene(name: str, rate_hz: float, seed: int = 0, duration_s: float = 6.0) -> list[Frame]:
    """One synthetic sequence.

    Args:
        name: one of :data:`SCENES`.
        rate_hz: camera rate, frames per second (the stamps step by ``1 / rate_hz``).
        seed: seed of the scene's random numbers.
        duration_s: length of the sequence, seconds.

    Returns:
        The frames in stamp order.

    Raises:
        ValueError: an unknown scene name.
    """
    rng = np.random.default_rng(seed)
    size = (60.0, 150.0)
    if name == "crossing":
        gt, inside = _walkers(rate_hz, duration_s, [(100, 400), (1180, 410), (1180, 200)],
                              [(180, 0), (-180, 0), (-150, 0)], [(80, 200), (56, 140), size])
    elif name == "occlusion":
        gt, inside = _walkers(rate_hz, duration_s, [(100, 400), (200, 250)], [(150, 0), (120, 10)], [size, size])
    elif name in ("missed", "jitter"):
        starts = np.stack([rng.uniform(150, 1130, 6), rng.uniform(150, 570, 6)], 1)
        velocities = rng.uniform(-120, 120, (6, 2))
        gt, inside = _walkers(rate_hz, duration_s, starts, velocities, [size] * 6)
    else:
        raise ValueError(f"unknown scene {name!r}: one of {', '.join(SCENES)}")
    frames_n, k = inside.shape
    scores = np.clip(rng.normal(0.8, 0.08, (frames_n, k)), 0.55, 0.98)
    detected = inside.copy()
    if name == "crossing":  # the farther person (1) is behind the nearer one (0) while they overlap
        hidden = _covered(gt[:, 0], gt[:, 1]) > 0.3
        scores[:, 1] = np.where(hidden, rng.uniform(0.2, 0.4, frames_n), scores[:, 1])
    elif name == "occlusion":  # person 0 behind a pillar for OCCLUDED_FRAMES frames from the sequence's middle
        first = frames_n // 2 - OCCLUDED_FRAMES // 2
        detected[first:first + OCCLUDED_FRAMES, 0] = False
    elif name == "missed":
        detected &= rng.random((frames_n, k)) >= MISS_RATE
    boxes = gt.copy()
    if name == "jitter":
        wh = np.concatenate([gt[..., 2:] - gt[..., :2]] * 2, axis=2)
        boxes = gt + rng.normal(0.0, JITTER, gt.shape) * wh
        scores = np.clip(scores + rng.normal(0.0, 0.05, scores.shape), 0.5, 1.0)
    out = []
    period_ns = int(round(1e9 / rate_hz))
    for i in range(frames_n):
        seen = np.flatnonzero(inside[i])
        det = np.flatnonzero(detected[i])
        order = det[np.argsort(-scores[i, det], kind="stable")]  # a detector's output order: by score
        out.append(Frame(
            stamp_ns=1_700_000_000_000_000_000 + i * period_ns,
            gt_ids=seen.astype(np.int64), gt_boxes=gt[i, seen].astype(np.float32),
            boxes=boxes[i, order].astype(np.float32), scores=scores[i, order].astype(np.float32),
            class_ids=np.zeros(len(order), np.int32), det_gt=order.astype(np.int64)))
    return out


def crowd(num: int, rate_hz: float, frames: int, seed: int = 0) -> list[Frame]:
    """``num`` objects wandering over a 1920x1080 image for the benchmark: random sizes (20-120 x 40-240 px),
    velocities (up to 150 px/s) and classes (0-4), boxes jittered by 3 %, bouncing off the image borders so every
    object stays in view (``num`` detections in every frame)."""
    rng = np.random.default_rng(seed)
    wh = np.stack([rng.uniform(20, 120, num), rng.uniform(40, 240, num)], 1)
    pos = np.stack([rng.uniform(0, 1920, num), rng.uniform(0, 1080, num)], 1)
    vel = rng.uniform(-150, 150, (num, 2))
    classes = rng.integers(0, 5, num).astype(np.int32)
    limit = np.array([1920.0, 1080.0])
    out = []
    period_ns = int(round(1e9 / rate_hz))
    for i in range(frames):
        pos = pos + vel / rate_hz
        bounce = (pos < 0) | (pos > limit)
        vel = np.where(bounce, -vel, vel)
        pos = np.clip(pos, 0, limit)
        gt = np.concatenate([pos - wh / 2, pos + wh / 2], 1)
        boxes = gt + rng.normal(0.0, 0.03, gt.shape) * np.concatenate([wh, wh], 1)
        scores = rng.uniform(0.05, 1.0, num)
        out.append(Frame(stamp_ns=i * period_ns, gt_ids=np.arange(num), gt_boxes=gt.astype(np.float32),
                         boxes=boxes.astype(np.float32), scores=scores.astype(np.float32), class_ids=classes,
                         det_gt=np.arange(num)))
    return out
