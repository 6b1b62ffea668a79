"""Regenerate every generated block of README.md and docs/*.md, and the result pictures the docs show.

A generated block sits between ``<!-- gen:NAME -->`` and ``<!-- gen:end -->``; NAME is a key of
:data:`GENERATORS`, whose function builds the block's markdown from the schema (:mod:`vrt_ros.config`) or from the
committed results JSON under ``results/``. Pictures: :data:`IMAGES` (results/ → docs/images/, byte copies, since
mkdocs serves only files under docs/).

Usage (from the repository root, with the venv's Python)::

    python scripts/docs_gen.py            # rewrite every stale block and picture, print what changed
    python scripts/docs_gen.py --check    # change nothing; exit 1 naming each stale block (test/test_docs.py)

Exit status: 0 when everything is current (or was rewritten), 1 with ``--check`` when something is stale, 2 for an
unknown block name or an unterminated block (the message names the file and the block).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: A generated block: its name, then its text (without the marker lines).
BLOCK = re.compile(r"<!-- gen:([a-z0-9-]+) -->\n(.*?)<!-- gen:end -->", re.S)
OPEN = re.compile(r"<!-- gen:(?!end -->)([a-z0-9-]+) -->")

#: Pictures of results shown by the docs: (source under results/, copy under docs/images/).
IMAGES = (
    ("results/tracking/bag_tracks.png", "docs/images/bag_tracks.png"),
    ("results/bench/cameras_scaling_jpeg_sync.png", "docs/images/cameras_scaling_jpeg_sync.png"),
)


def _json(rel: str) -> dict:
    return json.loads((ROOT / rel).read_text())


def _ms(stats: dict | None, q: str = "p50") -> str:
    return "–" if not stats or stats.get(q) is None else f"{stats[q]:.2f}"


def params_table() -> str:
    """The parameter reference: :func:`vrt_ros.config.markdown_table` (one row per ``PARAMS`` entry)."""
    from vrt_ros.config import markdown_table

    return markdown_table()


def bench_headline() -> str:
    """The headline performance table: :func:`vrt_ros.bench.report.readme_table` of results/bench/bench.json."""
    from vrt_ros.bench.report import readme_table

    return "\n".join(readme_table(_json("results/bench/bench.json")))


def e2e_compressed() -> str:
    """Raw and JPEG 1080p frames through the node and through the zero-work relay (results/bench/ros_e2e_1080p_final.json)."""
    doc = _json("results/bench/ros_e2e_1080p_final.json")
    runs = {(r["backend"], r["input"]): r for r in doc["runs"] if r["size"] == "1920x1080"}
    lines = ["| 1920x1080, YOLOX-nano | vrt_ros GPU (`cuda`) | zero-work relay from a worker thread (the floor) | received / sent |",
             "| --- | ---: | ---: | ---: |"]
    for inp, title in (("raw", "raw bgr8"), ("jpeg", "JPEG as CompressedImage, GPU decode")):
        node, floor = runs.get(("cuda", inp)), runs.get(("floor-worker", inp))
        if node is None:
            continue
        size = f" ({node['frame_bytes'] / 1e6:.1f} MB)" if node.get("frame_bytes") else ""
        cell = lambda r: "–" if r is None else f"{_ms(r['latency_ms'])} / {_ms(r['latency_ms'], 'p99')}"  # noqa: E731
        got = " · ".join(f"{r['received']} / {r['sent']}" for r in (node, floor) if r)
        lines.append(f"| {title}{size} | {cell(node)} | {cell(floor)} | {got} |")
    return "\n".join(lines)


#: dds_floor variants in words (the bench's own names in results/bench/dds_floor*.json).
DDS_VARIANTS = {
    "shipped": "shipped profile (SHM 16 MiB + UDPv4, reliable, typed)",
    "shm_only": "shared memory only (no UDPv4 beside it)",
    "udp_only": "UDPv4 only",
    "default_profile": "Fast DDS's default 512 KiB segment",
    "shm_big_messages": "shared memory, `maxMessageSize` 8 MiB",
    "shm_big_messages_udp": "shared memory + UDPv4, `maxMessageSize` 8 MiB",
    "best_effort": "best effort instead of reliable",
    "sync_publish": "`RMW_FASTRTPS_PUBLICATION_MODE=SYNCHRONOUS` set explicitly",
    "async_publish": "`RMW_FASTRTPS_PUBLICATION_MODE=ASYNCHRONOUS`",
    "raw_subscription": "relay subscribes `raw=True`",
    "preserialized": "publisher publishes pre-serialized bytes",
}


def dds_floor() -> str:
    """Stamp → answer p50 of each transport variant relative to the shipped profile, on the 2-core VM and the H200's
    16-core host (results/bench/dds_floor.json, dds_floor_h200.json); the shipped rows in ms."""
    files = (("results/bench/dds_floor.json", "2-core VM"), ("results/bench/dds_floor_h200.json", "H200 host, 16 cores"))
    docs = [_json(rel) for rel, _ in files]
    sizes = ("640x480", "1920x1080")
    p50 = [{(r["variant"], r["size"]): (r.get("latency_ms") or {}).get("p50") for r in d["rows"]} for d in docs]
    variants = list(dict.fromkeys(r["variant"] for d in docs for r in d["rows"]))
    machines = [label for _, label in files]
    head = " | ".join(f"{s}, {m}" for s in sizes for m in machines)
    lines = [f"| variant | {head} |", "| --- |" + " ---: |" * (len(sizes) * len(machines))]
    for v in variants:
        cells = []
        for s in sizes:
            for t in p50:
                got, ref = t.get((v, s)), t.get(("shipped", s))
                if got is None or ref is None:
                    cells.append("–")
                else:
                    cells.append(f"{got:.2f} ms" if v == "shipped" else f"{got / ref:.2f}×")
        lines.append(f"| {DDS_VARIANTS.get(v, v)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cameras(rel: str) -> str:
    from vrt_ros.bench.cameras_report import row_summary

    doc = _json(rel)
    lines = ["| node | size | input, phase | batching | cameras | received / sent | worst camera p50 / p99 ms | "
             "frames/s | device ms / frame | node CPU % |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    f = lambda v, fmt: "–" if v is None else fmt.format(v)  # noqa: E731
    for r in doc["runs"]:
        s = row_summary(r)
        node = " ".join([r["backend"], *r.get("node_args", [])])
        lines.append(f"| {node} | {r['size']} | {r['input']}, {r['phase']} | {'on' if r['batching'] else 'off'} | "
                     f"{r['cameras']} | {s['sent'] - s['lost']} / {s['sent']} | "
                     f"{f(s['worst_p50_ms'], '{:.2f}')} / {f(s['worst_p99_ms'], '{:.2f}')} | "
                     f"{f(r.get('frames_per_s'), '{:.0f}')} | {f(r.get('device_ms_per_frame'), '{:.2f}')} | "
                     f"{f(r.get('node_cpu_percent'), '{:.0f}')} |")
    return "\n".join(lines)


def cameras_scaling() -> str:
    """Every run of the many-camera bench on the H200 (results/bench/cameras_e2e.json)."""
    return _cameras("results/bench/cameras_e2e.json")


def cameras_executor() -> str:
    """The executor comparison runs of the many-camera bench (results/bench/cameras_e2e_executor.json)."""
    return _cameras("results/bench/cameras_e2e_executor.json")


#: tracking_eval's scenes in words.
TRACKING_SCENES = {
    "crossing": "two people crossing, the one behind scored 0.2-0.4 while hidden",
    "occlusion": "10 frames with no detection (occlusion)",
    "missed": "20 % of the detections missed",
    "jitter": "boxes jittered by 4 %",
}


def tracking_synthetic() -> str:
    """HOTA / IDF1 of the tracker, its oracle and the frame-index baseline per scene and rate, ranges over the seeds
    (results/tracking/synthetic.json)."""
    doc = _json("results/tracking/synthetic.json")

    def rng(rows: list[dict], key: str) -> str:
        lo, hi = min(r[key] for r in rows), max(r[key] for r in rows)
        return f"{lo:.3f}" if f"{lo:.3f}" == f"{hi:.3f}" else f"{lo:.3f}-{hi:.3f}"

    rates = sorted({r["rate_hz"] for r in doc["rows"]})
    seeds = len({r["seed"] for r in doc["rows"]})
    head = " | ".join(f"{h:g} Hz HOTA / IDF1" for h in rates)
    lines = [f"| sequence ({seeds} seeds) | {head} | id switches | oracle HOTA | ids = index in frame (no tracking): HOTA |",
             "| --- |" + " ---: |" * (len(rates) + 3)]
    for scene in dict.fromkeys(r["scene"] for r in doc["rows"]):
        pick = lambda rows, hz=None: [r for r in rows if r["scene"] == scene and (hz is None or r["rate_hz"] == hz)]  # noqa: E731
        cells = [f"{rng(pick(doc['rows'], hz), 'HOTA')} / {rng(pick(doc['rows'], hz), 'IDF1')}" for hz in rates]
        cells.append(str(max(r["IDSW"] for r in pick(doc["rows"]))))
        cells.append(rng(pick(doc["oracle"]), "HOTA"))
        cells.append(rng(pick(doc["baseline"]), "HOTA"))
        lines.append(f"| {TRACKING_SCENES.get(scene, scene)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _bench_table(module: str, function: str, rel: str, heading: str) -> str:
    """The first table under the heading containing ``heading`` in the report that the bench's own ``function``
    renders from its committed JSON ``rel`` (so the page and the bench's markdown cannot differ)."""
    import importlib

    text = getattr(importlib.import_module(module), function)(_json(rel))
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#") and heading in line)
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[first:end])


def recovery_start() -> str:
    """Process start → first detection, cold and warm (results/bench/recovery.json, the recovery bench's table)."""
    return _bench_table("vrt_ros.bench.recovery", "to_markdown", "results/bench/recovery.json", "Process start")


def recovery_respawn() -> str:
    """Fault → detections again under launch's respawn (results/bench/recovery.json, the recovery bench's table)."""
    return _bench_table("vrt_ros.bench.recovery", "to_markdown", "results/bench/recovery.json", "Fault → detections")


#: Block name → the function that builds it.
GENERATORS: dict[str, Callable[[], str]] = {
    "params": params_table,
    "bench-headline": bench_headline,
    "e2e-compressed": e2e_compressed,
    "dds-floor": dds_floor,
    "cameras-scaling": cameras_scaling,
    "cameras-executor": cameras_executor,
    "tracking-synthetic": tracking_synthetic,
    "recovery-start": recovery_start,
    "recovery-respawn": recovery_respawn,
}


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def render(text: str, where: str, cache: dict[str, str]) -> str:
    """``text`` with every generated block rebuilt; ValueError naming ``where`` and the block for an unknown name or
    a block without its ``<!-- gen:end -->``."""
    opened = OPEN.findall(text)
    closed = BLOCK.findall(text)
    if len(opened) != len(closed):
        raise ValueError(f"{where}: a <!-- gen:NAME --> block without its <!-- gen:end --> ({opened})")

    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{where}: unknown generated block {name!r} (known: {', '.join(GENERATORS)})")
        if name not in cache:
            cache[name] = GENERATORS[name]().rstrip("\n")
        return f"<!-- gen:{name} -->\n{cache[name]}\n<!-- gen:end -->"

    return BLOCK.sub(one, text)


def stale(root: Path = ROOT) -> list[str]:
    """What is out of date: ``file: block NAME`` per stale block, ``IMAGE`` per stale picture (nothing written)."""
    out, cache = [], {}
    for path in doc_files(root):
        text = path.read_text()
        new = render(text, str(path.relative_to(root)), cache)
        if new != text:
            old_blocks = dict(BLOCK.findall(text))
            new_blocks = dict(BLOCK.findall(new))
            names = [n for n in new_blocks if old_blocks.get(n) != new_blocks[n]]
            out += [f"{path.relative_to(root)}: block {n}" for n in names]
    for src, dst in IMAGES:
        if not (root / dst).is_file() or (root / dst).read_bytes() != (root / src).read_bytes():
            out.append(f"{dst} (copy of {src})")
    return out


def write(root: Path = ROOT) -> list[str]:
    """Rewrite what :func:`stale` lists; returns it."""
    changed = stale(root)
    cache: dict[str, str] = {}
    for path in doc_files(root):
        text = path.read_text()
        new = render(text, str(path.relative_to(root)), cache)
        if new != text:
            path.write_text(new)
    for src, dst in IMAGES:
        if not (root / dst).is_file() or (root / dst).read_bytes() != (root / src).read_bytes():
            (root / dst).write_bytes((root / src).read_bytes())
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/docs_gen.py", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block or picture is stale")
    args = parser.parse_args(argv)
    try:
        todo = stale() if args.check else write()
    except ValueError as exc:
        print(f"docs_gen: error: {exc}", file=sys.stderr)
        return 2
    for item in todo:
        print(f"docs_gen: {'stale' if args.check else 'rewrote'}: {item}")
    if args.check and todo:
        print("docs_gen: regenerate with: python scripts/docs_gen.py", file=sys.stderr)
        return 1
    if not todo:
        print("docs_gen: every generated block and picture is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
