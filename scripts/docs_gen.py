"""Regenerate every generated block of README.md and docs/*.md, and the result pictures the docs show.

A generated block sits between ``<!-- gen:NAME -->`` and ``<!-- gen:end -->``; NAME is a key of
:data:`GENERATORS`, whose function builds the block's markdown from the schema (:mod:`vrt_ros.settings.config`) or from the
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
    ("results/bench/cameras_targets_scaling_jpeg_sync.png", "docs/images/cameras_targets_jpeg_sync.png"),
)


def _json(rel: str) -> dict:
    return json.loads((ROOT / rel).read_text())


def _ms(stats: dict | None, q: str = "p50") -> str:
    return "–" if not stats or stats.get(q) is None else f"{stats[q]:.2f}"


def params_table() -> str:
    """The parameter reference: :func:`vrt_ros.settings.config.markdown_table` (one row per ``PARAMS`` entry)."""
    from vrt_ros.settings.config import markdown_table

    return markdown_table()


def bench_headline() -> str:
    """The headline performance table: :func:`vrt_ros.bench.stages.report.readme_table` of results/bench/bench.json."""
    from vrt_ros.bench.stages.report import readme_table

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
    from vrt_ros.bench.cameras.cameras_report import row_summary

    doc = _json(rel)
    lines = ["| node | size | input, phase | batching | cameras | received / sent | worst camera p50 / p99 ms | "
             "frames/s | device ms / frame | node CPU % |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    f = lambda v, fmt: "–" if v is None else fmt.format(v)  # noqa: E731
    for r in doc["runs"]:
        s = row_summary(r)
        node = " ".join([r["backend"], *r.get("node_args", [])])
        if r.get("error"):
            node += f" (run failed: {r['error']})"
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
    return _bench_table("vrt_ros.bench.restart.recovery", "to_markdown", "results/bench/recovery.json", "Process start")


def recovery_respawn() -> str:
    """Fault → detections again under launch's respawn (results/bench/recovery.json, the recovery bench's table)."""
    return _bench_table("vrt_ros.bench.restart.recovery", "to_markdown", "results/bench/recovery.json", "Fault → detections")


def cameras_targets() -> str:
    """Issue 21's many-camera targets, met or missed, from the H200 runs (results/bench/cameras_e2e.json; the
    executor runs of cameras_e2e_executor.json for the p99 row; issue 14's single-camera JPEG figure from
    ros_e2e_1080p_final.json)."""
    from vrt_ros.bench.cameras.cameras_report import row_summary

    runs = [r for r in _json("results/bench/cameras_e2e.json")["runs"]
            if r["backend"] == "cuda" and r["size"] == "1920x1080" and r["batching"] and not r.get("node_args")
            and not r.get("error")]
    events = [r for r in _json("results/bench/cameras_e2e_executor.json")["runs"]
              if r["input"] == "jpeg" and "--executor=events" in r.get("node_args", []) and not r.get("error")]
    pick = lambda **kw: [r for r in runs if all(r[k] == v for k, v in kw.items())]  # noqa: E731
    s = {id(r): row_summary(r) for r in runs + events}
    verdict = lambda ok: "met" if ok else "**missed**"  # noqa: E731
    lines = ["| target | measured | |", "| --- | --- | --- |"]
    j8 = pick(input="jpeg", cameras=8)
    ok = bool(j8) and all(s[id(r)]["lost"] == 0 and r["frames_per_s"] >= 239.5 for r in j8)
    lines.append("| 8 x 1080p JPEG at 30 Hz: 0 lost, >= 240 frames/s, both phases | "
                 + "; ".join(f"{r['phase']}: {s[id(r)]['sent'] - s[id(r)]['lost']} / {s[id(r)]['sent']}, "
                             f"{r['frames_per_s']:.1f} frames/s" for r in j8) + f" | {verdict(ok)} |")
    p99 = [(r["phase"], s[id(r)]["worst_p99_ms"]) for r in j8] + \
          [("staggered, `--executor events`", s[id(r)]["worst_p99_ms"]) for r in events]
    lines.append("| ... and every camera p99 <= 12 ms | " + "; ".join(f"{ph} {v:.1f} ms" for ph, v in p99)
                 + f" | {verdict(all(v <= 12.0 for _, v in p99[:len(j8)]))} |")
    r4 = pick(input="raw", cameras=4)
    lost0 = all(s[id(r)]["lost"] == 0 for r in r4)
    p99ok = all(s[id(r)]["worst_p99_ms"] <= 20.0 for r in r4)
    lines.append("| 4 x 1080p raw: 0 lost, every camera p99 <= 20 ms | "
                 + "; ".join(f"{r['phase']}: {s[id(r)]['lost']} lost, p99 {s[id(r)]['worst_p99_ms']:.1f} ms" for r in r4)
                 + f" | {verdict(lost0 and p99ok)}{' (0 lost met)' if lost0 and not p99ok else ''} |")
    b8, b1 = pick(input="jpeg", phase="sync", cameras=8), pick(input="jpeg", phase="sync", cameras=1)
    if b8 and b1:
        ratio = b8[0]["device_ms_per_frame"] / b1[0]["device_ms_per_frame"]
        lines.append(f"| GPU time per frame at batch 8 <= 0.5 x batch 1 | JPEG synchronised: "
                     f"{b8[0]['device_ms_per_frame']:.2f} ms at mean batch {b8[0]['mean_batch']:.1f} vs "
                     f"{b1[0]['device_ms_per_frame']:.2f} ms ({ratio:.2f} x) | {verdict(ratio <= 0.5)} |")
    one = [s[id(r)]["worst_p50_ms"] for r in pick(input="jpeg", cameras=1)]
    before = next((r["latency_ms"]["p50"] for r in _json("results/bench/ros_e2e_1080p_final.json")["runs"]
                   if r["backend"] == "cuda" and r["input"] == "jpeg" and r["size"] == "1920x1080"), None)
    if one:
        lines.append(f"| one camera no slower than before; JPEG 1080p p50 <= 5.0 ms goal | {min(one):.2f}-{max(one):.2f} ms"
                     + (f" (issue 14's bench: {before:.2f} ms)" if before else "") + f" | {verdict(max(one) <= 5.0)} |")
    return "\n".join(lines)


def _rng(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}"


def _recovery_faults(files: tuple[str, ...]) -> str:
    """Fault → detections again per recovery-bench run (one row per JSON file; ``respawner`` absent: launch, the
    bench's default then): the faults' totals in order and the
    steps' ranges over them (seconds; each file's ``respawn`` section)."""
    steps = (("exit", "exit"), ("delay", "delay"), ("interpreter + imports", ("interpreter", "imports")),
             ("node", "node"), ("pipeline", "pipeline"), ("DDS match", "matched"), ("inference", "inference"))
    lines = ["| run (results/bench/) | respawn by | delay s | fault after frames | fault → detections again, s | "
             + " | ".join(name for name, _ in steps) + " |",
             "| --- | --- | ---: | ---: | --- |" + " ---: |" * len(steps)]
    for rel in files:
        doc = _json(f"results/bench/{rel}.json")
        rs = doc["respawn"]
        faults = [f["seconds"] for f in rs["faults"]]
        args = rs.get("launch_arguments") or ""
        args = args if isinstance(args, str) else " ".join(args)
        who = rs.get("respawner", "launch") + (" with `warm_standby:=true`" if "warm_standby:=true" in args else "")
        cells = []
        for _, key in steps:
            keys = key if isinstance(key, tuple) else (key,)
            cells.append(_rng([max(0.0, sum(f[k] for k in keys)) for f in faults]))
        lines.append(f"| `{rel}` ({doc.get('backend', '?')}) | {who} | {rs['respawn_delay_s']:g} | "
                     f"{rs.get('fault_after_frames', '–')} | " + ", ".join(f"{f['total']:.2f}" for f in faults)
                     + " | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def recovery_standby() -> str:
    """The warm standby against launch's respawn on the 2-core CPU machine (recovery bench JSON files)."""
    return _recovery_faults(("recovery_standby", "recovery_launch_standby", "recovery_standby_fault_after_10",
                             "recovery"))


def recovery_h200() -> str:
    """The warm standby and the plain restart on the H200, torch engine (recovery bench JSON files)."""
    return _recovery_faults(("recovery_h200_standby_delay0.5", "recovery_h200_standby_delay0",
                             "recovery_h200_standby", "recovery_h200"))


def blocks_table() -> str:
    """This list: every generated block, the files holding it and the first line of its function's docstring."""
    used: dict[str, list[str]] = {}
    for path in doc_files():
        for name in OPEN.findall(path.read_text()):
            used.setdefault(name, []).append(str(path.relative_to(ROOT)))
    lines = ["| block | in | built from |", "| --- | --- | --- |"]
    for name, fn in GENERATORS.items():
        where = ", ".join(f"`{w}`" for w in dict.fromkeys(used.get(name, []))) or "(unused)"
        doc = " ".join((fn.__doc__ or "").split("\n\n")[0].split())
        doc = re.sub(r":\w+:`", "`", doc).replace("``", "`")
        lines.append(f"| `{name}` | {where} | {doc} |")
    return "\n".join(lines)


def jpeg_batch() -> str:
    """Batched GPU JPEG decode on the H200, per nvImageCodec backend and batch size: one list call against one call
    per JPEG (results/bench/jpeg_batch.json, `python -m vrt_ros.bench.stages.jpeg_batch`)."""
    doc = _json("results/bench/jpeg_batch.json")
    lines = ["| backends | JPEGs | one list call ms (p90) | one call per JPEG ms (p90) | speed-up |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, b in doc["backends"].items():
        for r in b.get("rows", []):
            lines.append(f"| {name} | {r['batch']} | {r['list_ms']['median']:.2f} ({r['list_ms']['p90']:.2f}) | "
                         f"{r['single_ms']['median']:.2f} ({r['single_ms']['p90']:.2f}) | {r['speedup']:.2f}x |")
    return "\n".join(lines)


def cameras_targets_35() -> str:
    """Issue 35's many-camera target rows on the H200 (three runs each, the node's defaults), met or missed
    (results/bench/cameras_targets_h200.json, `scripts/gpu_issue35_bench.sh`)."""
    from vrt_ros.bench.cameras.cameras_targets import target_table

    return "\n".join(target_table(_json("results/bench/cameras_targets_h200.json"))).strip()


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
    "recovery-standby": recovery_standby,
    "recovery-h200": recovery_h200,
    "cameras-targets": cameras_targets,
    "jpeg-batch": jpeg_batch,
    "cameras-targets-35": cameras_targets_35,
    "docs-blocks": blocks_table,
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
