"""Issue 35's target rows of the many-camera bench (``python -m vrt_ros.bench.cameras.cameras_e2e --targets``): what runs,
and the tables of what was measured against the targets. Pure Python (the runs themselves are
:func:`vrt_ros.bench.cameras.cameras_e2e.run_row`'s; :mod:`vrt_ros.bench.cameras.cameras_report` renders these tables from a JSON).

Each target row runs ``--repeats`` times (3 by default; the repeats interleaved: every row once, then every row
again, so a slow spell of the machine touches all rows alike). Per row the report gives, over the repeats, the
median and range of every camera's stamp -> received p50 and p99, frames lost per run, the node's stage p50s from
``/diagnostics`` (per camera: the batch's stages, CUDA events on the GPU path), and the device time per frame (the
batch's device-stage p50s over the mean batch size, :func:`vrt_ros.bench.cameras.cameras_report.device_ms_per_frame`).
A target is met when the median over the repeats is within it (every camera: the worst camera's median).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

FULL_HD = (1920, 1080)


@dataclass(frozen=True)
class TargetRow:
    """One target row: its cameras (``(input, (width, height), encoding)`` each, in order ``cam0``..), phase and
    limits (None: not a target of this row)."""

    key: str
    title: str
    cameras: tuple[tuple[str, tuple[int, int], str], ...]
    phase: str
    max_lost: int | None = None
    max_p99_ms: float | None = None
    max_p50_ms: float | None = None
    params: tuple[str, ...] = field(default=())


TARGET_ROWS = (
    TargetRow("jpeg8_sync", "8 x 1920x1080 JPEG, synchronised", (("jpeg", FULL_HD, "bgr8"),) * 8, "sync",
              max_lost=0, max_p99_ms=12.0),
    TargetRow("jpeg8_stagger", "8 x 1920x1080 JPEG, staggered", (("jpeg", FULL_HD, "bgr8"),) * 8, "stagger",
              max_p99_ms=8.0),
    TargetRow("raw4_sync", "4 x 1920x1080 raw bgr8, synchronised", (("raw", FULL_HD, "bgr8"),) * 4, "sync",
              max_lost=0, max_p99_ms=15.0),
    TargetRow("raw8_stagger", "8 x 1920x1080 raw bgr8, staggered", (("raw", FULL_HD, "bgr8"),) * 8, "stagger",
              max_lost=0),
    TargetRow("mixed_sync", "3 JPEG 1920x1080 + 2 raw bgr8 1280x720 + 1 yuv422 640x480, one node, synchronised",
              (("jpeg", FULL_HD, "bgr8"),) * 3 + (("raw", (1280, 720), "bgr8"),) * 2 + (("raw", (640, 480), "yuv422"),),
              "sync", max_lost=0, max_p99_ms=12.0),
    TargetRow("jpeg1", "1 x 1920x1080 JPEG", (("jpeg", FULL_HD, "bgr8"),), "sync", max_p50_ms=4.5),
)
#: Device time per frame at batch 8 (``jpeg8_sync``) over batch 1 (``jpeg1``): at most this.
DEVICE_RATIO_MAX = 0.35
DEVICE_RATIO_ROWS = ("jpeg8_sync", "jpeg1")


def select(only: str | None) -> list[TargetRow]:
    """The target rows named in ``only`` (comma-separated keys; None or empty: all), in :data:`TARGET_ROWS` order.

    Raises:
        ValueError: a name that is no row's key (the message lists the keys).
    """
    names = [n for n in (only or "").split(",") if n]
    unknown = sorted(set(names) - {r.key for r in TARGET_ROWS})
    if unknown:
        raise ValueError(f"--only: no target row {unknown}; the rows: {', '.join(r.key for r in TARGET_ROWS)}")
    return [r for r in TARGET_ROWS if not names or r.key in names]


def jobs(rows: Sequence[TargetRow], repeats: int, backend: str, shrink: int = 1) -> list[dict[str, Any]]:
    """The runs in order (repeat by repeat, every row once per repeat), each a row spec for ``run_row`` with its
    ``target`` key and ``repeat``; ``shrink`` divides every camera's width and height (a smoke test's small frames;
    widths kept even for 4:2:2)."""
    out = []
    for rep in range(repeats):
        for r in rows:
            specs = [{"input": inp, "size": (w // shrink // 2 * 2, h // shrink), "encoding": enc}
                     for inp, (w, h), enc in r.cameras]
            inputs = {c["input"] for c in specs}
            out.append({"backend": backend, "cameras": len(specs), "size": specs[0]["size"],
                        "input": inputs.pop() if len(inputs) == 1 else "mixed", "camera_specs": specs,
                        "phase": r.phase, "batching": True, "params": list(r.params), "target": r.key,
                        "repeat": rep})
    return out


def _median_range(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    a = np.asarray([v for v in values if v is not None], np.float64)
    return None if a.size == 0 else (float(np.median(a)), float(a.min()), float(a.max()))


def _summed_histogram(hists) -> dict[int, int]:
    """Batch-size histograms (keys ints, or strings after JSON) summed: {size: batches}."""
    out: dict[int, int] = {}
    for h in hists:
        for n, k in h.items():
            out[int(n)] = out.get(int(n), 0) + int(k)
    return dict(sorted(out.items()))


def summarise(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per target row (key) over its runs without an error: ``runs``, ``failed`` (runs with an error),
    ``cameras`` {cam: {"p50": (median, min, max), "p99": ..., "callback_p99": ..., "publish_p50": ...}}, ``lost`` (per run), ``worst_p50``/``worst_p99`` (the
    worst camera's median, and that camera's range), ``stages`` {stage: (median, min, max)} of the slowest
    camera's p50 per run, ``device_ms_per_frame`` and ``mean_batch`` (median, min, max), ``batch_sizes`` (the
    runs' batch-size histograms summed)."""
    out: dict[str, dict[str, Any]] = {}
    for r in TARGET_ROWS:
        runs = [x for x in doc.get("runs", []) if x.get("target") == r.key]
        good = [x for x in runs if not x.get("error")]
        if not runs:
            continue
        cams: dict[str, dict[str, list]] = {}
        for x in good:
            for c, d in (x.get("cameras_detail") or {}).items():
                lat = d.get("latency_ms") or {}
                cb = d.get("callback_latency_ms") or {}
                cell = cams.setdefault(c, {"p50": [], "p99": [], "callback_p99": [], "publish_p50": []})
                cell["p50"].append(lat.get("p50"))
                cell["p99"].append(lat.get("p99"))
                cell["callback_p99"].append(cb.get("p99"))
                cell["publish_p50"].append((d.get("publish_ms") or {}).get("p50"))
        cameras = {c: {k: _median_range(v) for k, v in cell.items()} for c, cell in cams.items()}
        stages: dict[str, list] = {}
        for x in good:
            per_cam = x.get("stages_by_camera") or {}
            for stage in sorted({s for st in per_cam.values() for s in st}):
                vals = [st[stage]["p50"] for st in per_cam.values() if stage in st]
                stages.setdefault(stage, []).append(max(vals) if vals else None)
        s = {"title": r.title, "runs": len(good), "failed": len(runs) - len(good), "cameras": cameras,
             "lost": [sum(d["lost"] for d in (x.get("cameras_detail") or {}).values()) for x in good],
             "stages": {k: _median_range(v) for k, v in stages.items()},
             "device_ms_per_frame": _median_range([x.get("device_ms_per_frame") for x in good]),
             "mean_batch": _median_range([x.get("mean_batch") for x in good]),
             "batch_sizes": _summed_histogram(x.get("batch_sizes") or {} for x in good)}
        for q in ("p50", "p99"):
            ranked = [(v[q][0], c) for c, v in cameras.items() if v[q] is not None]
            s[f"worst_{q}"] = cameras[max(ranked)[1]][q] if ranked else None
        out[r.key] = s
    return out


def _mr(v: tuple[float, float, float] | None, fmt: str = "{:.2f}") -> str:
    if v is None:
        return "-"
    return fmt.format(v[0]) if v[1] == v[2] else f"{fmt.format(v[0])} ({fmt.format(v[1])}-{fmt.format(v[2])})"


def _verdict(checks: list[bool | None]) -> str:
    if any(c is None for c in checks) or not checks:
        return "not measured"
    return "met" if all(checks) else "**missed**"


def target_table(doc: Mapping[str, Any]) -> list[str]:
    """The issue's targets against the measured medians (range over the repeats in brackets): markdown lines."""
    summ = summarise(doc)
    lines = ["| target row | target | runs | lost per run | worst camera p50 ms | worst camera p99 ms | |",
             "| --- | --- | ---: | --- | ---: | ---: | --- |"]
    for r in TARGET_ROWS:
        s = summ.get(r.key)
        limits, checks = [], []
        if r.max_lost is not None:
            limits.append("0 lost" if r.max_lost == 0 else f"at most {r.max_lost} lost")
            lost = _median_range(s["lost"]) if s else None
            checks.append(None if lost is None else lost[0] <= r.max_lost)
        for q, limit in (("p50", r.max_p50_ms), ("p99", r.max_p99_ms)):
            if limit is not None:
                limits.append(f"every camera {q} <= {limit:g} ms")
                v = s[f"worst_{q}"] if s else None
                checks.append(None if v is None else v[0] <= limit)
        if s is None:
            lines.append(f"| {r.title} | {'; '.join(limits)} | 0 | - | - | - | not measured |")
            continue
        runs = f"{s['runs']}" + (f" (+{s['failed']} failed)" if s["failed"] else "")
        lines.append(f"| {r.title} | {'; '.join(limits)} | {runs} | {', '.join(str(v) for v in s['lost']) or '-'} | "
                     f"{_mr(s['worst_p50'])} | {_mr(s['worst_p99'])} | {_verdict(checks)} |")
    lines.append(device_ratio_line(summ))
    return lines


def device_ratio_line(summ: Mapping[str, Any]) -> str:
    """The device-time target's row: batch-8 row's device ms per frame over the batch-1 row's."""
    many, one = (summ.get(k) for k in DEVICE_RATIO_ROWS)
    title = "device time per frame, 8 JPEG synchronised ÷ 1 JPEG"
    target = f"<= {DEVICE_RATIO_MAX:g} x"
    if not many or not one or not many["device_ms_per_frame"] or not one["device_ms_per_frame"]:
        return f"| {title} | {target} | - | - | - | - | not measured |"
    ratio = many["device_ms_per_frame"][0] / one["device_ms_per_frame"][0]
    return (f"| {title} | {target} | {many['runs']} / {one['runs']} | - | "
            f"{_mr(many['device_ms_per_frame'], '{:.3f}')} at mean batch {_mr(many['mean_batch'], '{:.1f}')} ÷ "
            f"{_mr(one['device_ms_per_frame'], '{:.3f}')} = {ratio:.2f} x | - | "
            f"{'met' if ratio <= DEVICE_RATIO_MAX else '**missed**'} |")


def camera_table(doc: Mapping[str, Any]) -> list[str]:
    """Per target row and camera: stamp -> received p50 and p99, stamp -> the bench's Python callback p99 (later by
    its executor's queue), and the publisher's own ``publish`` call p50 (part of stamp -> received: the stamp is
    taken just before it), median (range) over the repeats."""
    lines = ["| target row | camera | p50 ms | p99 ms | to the bench's callback p99 ms | publish call p50 ms |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for key, s in summarise(doc).items():
        for cam, v in s["cameras"].items():
            lines.append(f"| {key} | {cam} | {_mr(v['p50'])} | {_mr(v['p99'])} | {_mr(v.get('callback_p99'))} | "
                         f"{_mr(v.get('publish_p50'))} |")
    return lines


def stage_table(doc: Mapping[str, Any]) -> list[str]:
    """Per target row: the node's stage p50s (the slowest camera's per run; median (range) over the repeats)."""
    summ = summarise(doc)
    stages = sorted({k for s in summ.values() for k in s["stages"]})
    lines = ["| target row | device ms / frame | mean batch | batch sizes (all runs) | " + " | ".join(stages) + " |",
             "| --- | ---: | ---: | --- | " + " | ".join("---:" for _ in stages) + " |"]
    for key, s in summ.items():
        hist = ", ".join(f"{n}:{k}" for n, k in s["batch_sizes"].items()) or "-"
        lines.append(f"| {key} | {_mr(s['device_ms_per_frame'], '{:.3f}')} | {_mr(s['mean_batch'], '{:.1f}')} | {hist} | "
                     + " | ".join(_mr(s["stages"].get(k)) for k in stages) + " |")
    return lines


def markdown(doc: Mapping[str, Any]) -> list[str]:
    """The targets section of the report: the target table, then per-camera and per-stage tables."""
    missing = [f"Not started (``--budget-s``): {'; '.join(doc['not_run'])}.", ""] if doc.get("not_run") else []
    return ["## Issue 35's targets (median of the repeats, range in brackets)", "", *target_table(doc), "", *missing,
            "### Per camera", "", *camera_table(doc), "", "### Node stages (p50 ms, /diagnostics)", "",
            *stage_table(doc), ""]
