"""The scaling curve of the many-camera bench: latency and throughput against the number of cameras, batching on
and off, drawn from the committed JSON of :mod:`vrt_ros.bench.cameras.cameras_e2e` (matplotlib, the ``bench-plot`` extra).

Usage::

    python -m vrt_ros.bench.cameras.scaling_plot results/bench/cameras_e2e.json [-o results/bench/cameras_scaling.png]
        [--size 1920x1080] [--input jpeg] [--phase stagger]
    python -m vrt_ros.bench.cameras.scaling_plot results/bench/cameras_e2e.json [more.json ...] --all
        [--prefix results/bench/cameras_scaling] [--size 1920x1080]

Two panels: the worst camera's stamp -> received p50 and p99 (ms) against N, and frames per second processed
against N, one line per (backend, batching); over repeats, the median with the range as error bars. ``--all``: one
PNG per input and phase found at the size, ``<prefix>_<input>_<phase>.png`` (the committed curves; several JSONs'
runs are drawn together). Exit status 0, 2 when the JSON holds no row of that size, input and phase.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vrt_ros.bench.cameras.cameras_report import row_summary


def series(doc: dict[str, Any], size: str, inp: str, phase: str) -> dict[tuple[str, bool], dict[int, dict[str, list]]]:
    """``{(backend, batching): {cameras: {"p50": [...], "p99": [...], "fps": [...]}}}`` over the rows that match
    (rows with an error are left out)."""
    out: dict = defaultdict(lambda: defaultdict(lambda: {"p50": [], "p99": [], "fps": []}))
    for r in doc.get("runs", []):
        if r.get("error") or r["size"] != size or r["input"] != inp or r["phase"] != phase:
            continue
        s = row_summary(r)
        cell = out[(r["backend"], bool(r["batching"]))][int(r["cameras"])]
        cell["p50"].append(s["worst_p50_ms"])
        cell["p99"].append(s["worst_p99_ms"])
        cell["fps"].append(r.get("frames_per_s"))
    return out


def _median_range(values: list) -> tuple[float, float, float]:
    a = np.asarray([v for v in values if v is not None], np.float64)
    if a.size == 0:
        return float("nan"), 0.0, 0.0
    m = float(np.median(a))
    return m, m - float(a.min()), float(a.max()) - m


def draw(doc: dict[str, Any], out: Path, size: str, inp: str, phase: str) -> int:
    """Draw the PNG; returns the number of lines drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(doc, size, inp, phase)
    if not data:
        return 0
    fig, (lat, thr) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (backend, batching), cells in sorted(data.items()):
        ns = sorted(cells)
        label = f"{backend}, batching {'on' if batching else 'off'}"
        for key, style in (("p50", "-o"), ("p99", "--s")):
            m = [_median_range(cells[n][key]) for n in ns]
            lat.errorbar(ns, [v[0] for v in m], yerr=[[v[1] for v in m], [v[2] for v in m]], fmt=style, capsize=3,
                         label=f"{label} ({key})")
        m = [_median_range(cells[n]["fps"]) for n in ns]
        thr.errorbar(ns, [v[0] for v in m], yerr=[[v[1] for v in m], [v[2] for v in m]], fmt="-o", capsize=3,
                     label=label)
    ticks = sorted({n for cells in data.values() for n in cells})
    lat.set(xlabel="cameras", ylabel="worst camera stamp -> received, ms", title="latency")
    thr.set(xlabel="cameras", ylabel="frames/s processed", title="throughput")
    for ax in (lat, thr):
        ax.set_xticks(ticks)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{doc.get('machine_label') or ''}: {size} {inp}, {phase}, {doc.get('date', '')}", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return len(data)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.cameras.scaling_plot", description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path, nargs="+")
    ap.add_argument("-o", "--out", type=Path, default=None, help="PNG (default: <json stem>_scaling.png beside it)")
    ap.add_argument("--size", default=None, help="rows of this size (default: the first row's)")
    ap.add_argument("--input", default=None, help="raw or jpeg (default: the first row's)")
    ap.add_argument("--phase", default=None, help="stagger or sync (default: the first row's)")
    ap.add_argument("--all", action="store_true", help="every input and phase at the size, one PNG each")
    ap.add_argument("--prefix", type=Path, default=None,
                    help="--all: PNG path prefix (default <first json's folder>/cameras_scaling)")
    args = ap.parse_args(argv)
    docs = [json.loads(p.read_text()) for p in args.json]
    doc = dict(docs[0], runs=[r for d in docs for r in d.get("runs", [])])
    rows = [r for r in doc["runs"] if not r.get("error") and r.get("input") in ("raw", "jpeg")]
    if not rows:
        print(f"scaling_plot: no rows without errors in {', '.join(map(str, args.json))}", file=sys.stderr)
        return 2
    size, inp, phase = args.size or rows[0]["size"], args.input or rows[0]["input"], args.phase or rows[0]["phase"]
    if args.all:
        prefix = args.prefix or args.json[0].parent / "cameras_scaling"
        drawn = 0
        for i, ph in sorted({(r["input"], r["phase"]) for r in rows if r["size"] == size}):
            out = prefix.with_name(f"{prefix.name}_{i}_{ph}.png")
            if draw(doc, out, size, i, ph):
                drawn += 1
                print(f"scaling_plot: wrote {out}")
        return 0 if drawn else 2
    out = args.out or args.json[0].with_name(f"{args.json[0].stem}_scaling.png")
    if draw(doc, out, size, inp, phase) == 0:
        print(f"scaling_plot: no rows of {size} {inp} {phase} in {args.json}", file=sys.stderr)
        return 2
    print(f"scaling_plot: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
