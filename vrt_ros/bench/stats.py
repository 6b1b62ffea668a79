"""Summaries of per-frame times (numpy only)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def summary(ms: Sequence[float]) -> dict[str, float]:
    """p50, p99, mean, min, max (ms) and frames/s of a series of per-frame times in milliseconds.

    Frames per second is ``1000 / mean``: one frame after the other, as a node's callback runs.

    Raises:
        ValueError: empty series.
    """
    a = np.asarray(ms, np.float64)
    if a.size == 0:
        raise ValueError("no samples")
    mean = float(a.mean())
    return {
        "n": int(a.size),
        "p50": float(np.percentile(a, 50)),
        "p99": float(np.percentile(a, 99)),
        "mean": mean,
        "min": float(a.min()),
        "max": float(a.max()),
        "fps": 1000.0 / mean if mean > 0 else float("inf"),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None when either is missing or ``b`` is 0."""
    if a is None or b is None or b == 0:
        return None
    return a / b
