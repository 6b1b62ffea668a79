"""Figures and the markdown report of the many-camera bench (:mod:`vrt_ros.bench.cameras.cameras_e2e`). Pure Python.

Per row: each camera's stamp -> received p50/p99 and frames lost (sent - received), the batch-size histogram (the
node's ``batch.size.<n>`` on ``/diagnostics``), frames per batch, GPU time per frame (the sum of the batch's
CUDA-event stage p50s, ``upload``/``decode`` + ``preprocess`` + ``inference`` + ``postprocess``, divided by the mean
batch size: a batch's stages are shared by its frames), frames per second processed (detections received over the
measured time), and the node process's CPU use (user + system CPU seconds over wall seconds, x 100 %).

The tables for the docs are generated from the committed JSON (:func:`scaling_table`; issue 35's targets:
:func:`vrt_ros.bench.cameras.cameras_targets.markdown`)::

    python -m vrt_ros.bench.cameras.cameras_report results/bench/cameras_e2e.json [more.json ...] [--size 1920x1080]
        [--targets] [-o results/bench/cameras_scaling.md]

prints (and with ``-o`` writes) the scaling table of the documents' runs together, and with ``--targets`` the target
tables before it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from vrt_ros.bench.cameras.cameras_targets import markdown as targets_markdown

#: The pipeline stages whose sum is the batch's device time (CUDA events on the GPU path; host times on the CPU).
DEVICE_STAGES = ("upload", "decode", "preprocess", "inference", "postprocess")


def percentiles(ms: Sequence[float]) -> dict[str, float] | None:
    """``{n, p50, p99, max}`` of ``ms``, or None when empty."""
    if not len(ms):
        return None
    a = np.asarray(ms, np.float64)
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max())}


def camera_figures(sent_ns: Sequence[int], received: Mapping[int, int]) -> dict[str, Any]:
    """One camera: ``sent``, ``received`` (measured frames whose detections came back), ``lost`` and the latency
    percentiles (ms) from ``received`` = {stamp ns: receipt ns}."""
    got = [(received[s] - s) / 1e6 for s in sent_ns if s in received]
    return {"sent": len(sent_ns), "received": len(got), "lost": len(sent_ns) - len(got), "latency_ms": percentiles(got)}


def histogram(values: Mapping[str, str]) -> dict[int, int]:
    """The node's ``batch.size.<n>`` values -> {n: batches}."""
    out = {}
    for k, v in values.items():
        if k.startswith("batch.size."):
            out[int(k.rsplit(".", 1)[1])] = int(v)
    return dict(sorted(out.items()))


def mean_batch(hist: Mapping[int, int]) -> float:
    """Frames per batch over the histogram (1.0 when the node ran no batches: frame by frame)."""
    batches = sum(hist.values())
    return sum(n * k for n, k in hist.items()) / batches if batches else 1.0


def device_ms_per_frame(stages_p50: Mapping[str, float], hist: Mapping[int, int]) -> float | None:
    """The batch's stage p50s summed, over the mean batch size (None without stage figures)."""
    parts = [v for k, v in stages_p50.items() if k in DEVICE_STAGES]
    return sum(parts) / mean_batch(hist) if parts else None


def stage_figures(values: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """A camera's ``/diagnostics`` stage times (``<stage>_ms_p50`` / ``_ms_p99``) -> {stage: {"p50", "p99"}} ms."""
    out: dict[str, dict[str, float]] = {}
    for k, v in values.items():
        for q in ("p50", "p99"):
            if k.endswith(f"_ms_{q}"):
                try:
                    out.setdefault(k[: -len(f"_ms_{q}")], {})[q] = float(v)
                except ValueError:
                    pass
    return dict(sorted(out.items()))


def row_summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's derived figures: worst camera p50/p99, total lost, throughput."""
    cams = row.get("cameras_detail") or {}
    p50 = [c["latency_ms"]["p50"] for c in cams.values() if c.get("latency_ms")]
    p99 = [c["latency_ms"]["p99"] for c in cams.values() if c.get("latency_ms")]
    return {"worst_p50_ms": max(p50) if p50 else None, "worst_p99_ms": max(p99) if p99 else None,
            "lost": sum(c["lost"] for c in cams.values()), "sent": sum(c["sent"] for c in cams.values())}


def _f(v, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def _backend(run: Mapping[str, Any]) -> str:
    """The run's backend with the node's extra command-line options, e.g. ``cuda --executor=events``."""
    return " ".join([run["backend"], *run.get("node_args", [])])


def markdown(doc: Mapping[str, Any]) -> str:
    """The report: one table row per run, then each run's per-camera figures."""
    lines = [f"# Many cameras, one node ({doc.get('machine_label', '')})", "",
             f"{doc.get('date', '')}; `{doc.get('command', '')}`", "",
             f"Host: {doc.get('host', {})}; GPU: {doc.get('gpu') or 'none'}; model {doc.get('model', '')}", "",
             "| backend | cameras | size | input | phase | batching | received / sent | worst camera p50 ms | "
             "worst camera p99 ms | batch sizes | device ms / frame | frames/s | node CPU % |",
             "| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for r in doc.get("runs", []):
        s = row_summary(r)
        hist = ", ".join(f"{n}:{k}" for n, k in (r.get("batch_sizes") or {}).items()) or "-"
        got = s["sent"] - s["lost"]
        backend = _backend(r)
        lines.append(f"| {backend} | {r['cameras']} | {r['size']} | {r['input']} | {r['phase']} | "
                     f"{'on' if r['batching'] else 'off'} | {got} / {s['sent']} | {_f(s['worst_p50_ms'])} | "
                     f"{_f(s['worst_p99_ms'])} | {hist} | {_f(r.get('device_ms_per_frame'), '{:.3f}')} | "
                     f"{_f(r.get('frames_per_s'), '{:.1f}')} | {_f(r.get('node_cpu_percent'), '{:.0f}')} |"
                     + (f" error: {r['error']}" if r.get("error") else ""))
    lines += ["", "Per camera (stamp -> detections received, ms):", ""]
    for r in doc.get("runs", []):
        cams = r.get("cameras_detail") or {}
        kinds = {c: " ({input} {size} {encoding})".format(**cs) for c, cs in (r.get("camera_specs") or {}).items()}
        parts = [f"{c}{kinds.get(c, '')}: {d['received']}/{d['sent']} p50 {_f((d['latency_ms'] or {}).get('p50'))} "
                 f"p99 {_f((d['latency_ms'] or {}).get('p99'))}" for c, d in cams.items()]
        lines.append(f"- {_backend(r)} {r['cameras']}x {r['size']} {r['input']} {r['phase']} "
                     f"batching {'on' if r['batching'] else 'off'}: " + "; ".join(parts))
    lines += ["", *[f"- {n}" for n in doc.get("notes", [])], ""]
    return "\n".join(lines)


_INPUT_TITLES = {"jpeg": "JPEG", "raw": "raw bgr8"}
_PHASE_TITLES = {"stagger": "staggered", "sync": "synchronised"}


def _median_range_text(values: Sequence[float | None], fmt: str) -> str:
    """``median`` of the values, with ``(min-max)`` when they differ; ``-`` when none."""
    a = np.asarray([v for v in values if v is not None], np.float64)
    if a.size == 0:
        return "-"
    med, lo, hi = (fmt.format(x) for x in (np.median(a), a.min(), a.max()))
    return med if lo == hi else f"{med} ({lo}-{hi})"


def scaling_table(doc: Mapping[str, Any], size: str = "1920x1080") -> list[str]:
    """The scaling table (markdown lines) of a many-camera bench document: one line per (backend, input, phase,
    batching, cameras) at ``size``, over its runs without an error (the median, with the range over repeats);
    rows of a mixed rig and of other sizes are left out. Columns: received / sent (summed over the repeats), the
    worst camera's p50 / p99, frames/s, device ms per frame, node CPU %."""
    groups: dict[tuple, list] = {}
    for r in doc.get("runs", []):
        if r.get("error") or r.get("size") != size or r.get("input") not in _INPUT_TITLES:
            continue
        key = (r["backend"] != "floor", r["backend"], " ".join(r.get("node_args", [])), r["input"], r["phase"],
               not r["batching"], int(r["cameras"]))
        groups.setdefault(key, []).append(r)
    lines = [f"| {size} | cameras | runs | received / sent | worst camera p50 / p99 ms | frames/s | "
             "device ms / frame | node CPU % |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key in sorted(groups, key=lambda k: (not k[0], *k[1:])):
        _, backend, node_args, inp, phase, off, n = key
        runs = groups[key]
        summ = [row_summary(r) for r in runs]
        sent = sum(s["sent"] for s in summ)
        got = sent - sum(s["lost"] for s in summ)
        title = f"{_INPUT_TITLES[inp]}, {_PHASE_TITLES.get(phase, phase)}"
        title = f"floor relay, {title}" if backend == "floor" else title
        title += (f", {backend}" if backend not in ("cuda", "floor") else "") + (f" {node_args}" if node_args else "")
        title += ", batching **off**" if off else ""
        received = f"{got} / {sent}" if got == sent else f"**{got}** / {sent}"
        lat = (_median_range_text([s["worst_p50_ms"] for s in summ], "{:.2f}") + " / "
               + _median_range_text([s["worst_p99_ms"] for s in summ], "{:.2f}"))
        lines.append(f"| {title} | {n} | {len(runs)} | {received} | {lat} | "
                     f"{_median_range_text([r.get('frames_per_s') for r in runs], '{:.0f}')} | "
                     f"{_median_range_text([r.get('device_ms_per_frame') for r in runs], '{:.2f}')} | "
                     f"{_median_range_text([r.get('node_cpu_percent') for r in runs], '{:.0f}')} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.cameras.cameras_report", description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path, nargs="+", help="documents of python -m vrt_ros.bench.cameras.cameras_e2e")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--targets", action="store_true", help="issue 35's target tables first")
    ap.add_argument("-o", "--out", type=Path, default=None)
    args = ap.parse_args(argv)
    docs = [json.loads(p.read_text()) for p in args.json]
    doc = dict(docs[0], runs=[r for d in docs for r in d.get("runs", [])])
    lines = scaling_table(doc, args.size)
    if args.targets:
        lines = [*targets_markdown(doc), *lines]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
