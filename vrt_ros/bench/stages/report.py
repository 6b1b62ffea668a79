"""The benchmark's outputs: the targets, the JSON document and the markdown tables."""

from __future__ import annotations

import json
from pathlib import Path

from vrt_ros.bench.stages.runner import ROW_TITLES, ROWS

STAGE_TITLES = ("host_copy", "h2d", "preprocess", "inference", "postprocess", "d2h")
TARGET_SIZE = "1920x1080"


def _f(x, fmt: str = "{:.3f}") -> str:
    return "–" if x is None else fmt.format(x)


def _spread(c: dict, name: str) -> tuple[float, list[float] | None] | None:
    """A derived value of one configuration and its ``[min, max]`` over the repeats (None for one run), or None
    when it was not measured."""
    v = c["derived"].get(name)
    if v is None:
        return None
    rng = (c.get("derived_range") or {}).get(name)
    return v, (rng if rng and c.get("repeats", 1) > 1 else None)


def ratio_text(c: dict, name: str, fmt: str = "{:.2f}") -> str:
    """A derived value of one configuration as ``median (min–max)`` over the repeats (the median alone for one)."""
    got = _spread(c, name)
    if got is None:
        return "–"
    v, rng = got
    return fmt.format(v) if rng is None else f"{fmt.format(v)} ({fmt.format(rng[0])}–{fmt.format(rng[1])})"


#: README summary: (row key, column title) of the performance table, in order.
README_COLUMNS = (
    ("vrt_ros_gpu", "vrt_ros GPU"),
    ("torch_gpu", "Ultralytics-style node, torch on the GPU, same engine"),
    ("typical_captured", "typical Python node, same engine"),
    ("typical_eager", "typical node, eager PyTorch"),
    ("vrt_ros_cpu", "vrt_ros CPU (ONNX Runtime)"),
)
_README_RATIO = {"torch_gpu": "speedup_vs_torch_gpu", "typical_captured": "speedup_vs_captured",
                 "typical_eager": "speedup_vs_eager"}
_MODEL_TITLES = {"yolox_nano": "YOLOX-nano", "centerface": "CenterFace"}


def readme_table(doc: dict, size: str = TARGET_SIZE) -> list[str]:
    """The README's performance table at ``size`` (lines of markdown), generated from a benchmark document.

    Cells: p50 / p99 ms; for the peers also how many times slower than vrt_ros's GPU pipeline, as the median and
    range over the repeats of ratios taken within each run. The CPU path: p50 only.
    """
    reps = doc["settings"].get("repeats", 1)
    head = f"| {size} | " + " | ".join(t for _, t in README_COLUMNS) + " |"
    lines = [head, "| --- | " + " | ".join("---:" for _ in README_COLUMNS) + " |"]
    for c in doc["configs"]:
        if c["size"] != size:
            continue
        cells = []
        for key, _ in README_COLUMNS:
            r = c.get(key, {})
            if "wall_ms" not in r:
                cells.append("–")
            elif key == "vrt_ros_cpu":
                cells.append(f"{r['wall_ms']['p50']:.1f}")
            else:
                cell = f"{r['wall_ms']['p50']:.2f} / {r['wall_ms']['p99']:.2f}"
                got = _spread(c, _README_RATIO[key]) if key in _README_RATIO else None
                if got is not None:
                    v, rng = got
                    cell += f" ({v:.2f}×" + (f", {rng[0]:.2f}–{rng[1]:.2f})" if rng else ")")
                cells.append(cell)
        lines.append(f"| {_MODEL_TITLES.get(c['model'], c['model'])}, {c['encoding']} | " + " | ".join(cells) + " |")
    lines.append(f"\nRatios: peer p50 ÷ vrt_ros GPU p50 within one run; median (range) of {reps} runs.")
    return lines


def targets(configs: list[dict]) -> list[dict]:
    """Issue 5's targets against the measured configurations (``met`` is None when nothing was measured)."""
    out = []

    def add(name: str, limit: str, values: list[tuple[str, float | None]], ok) -> None:
        measured = [(where, v) for where, v in values if v is not None]
        out.append({
            "target": name,
            "limit": limit,
            "values": {where: v for where, v in measured},
            "met": all(ok(v) for _, v in measured) if measured else None,
        })

    def where(c: dict) -> str:
        return f"{c['model']} {c['size']} {c['encoding']}"

    big_bgr = [c for c in configs if c["size"] == TARGET_SIZE and c["encoding"] == "bgr8"]
    big = [c for c in configs if c["size"] == TARGET_SIZE]
    add("overhead beyond (engine alone + pinned H2D), 1920x1080 bgr8, p50", "≤ 0.35 ms",
        [(where(c), c["derived"]["overhead_beyond_limit_ms"]) for c in big_bgr], lambda v: v <= 0.35)
    add("p99 ÷ p50 of the vrt_ros GPU pipeline, every size", "≤ 1.2",
        [(where(c), c["derived"]["p99_over_p50"]) for c in configs], lambda v: v <= 1.2)
    add("typical node (same captured engine) p50 ÷ vrt_ros p50, 1920x1080", "≥ 2.5",
        [(where(c), c["derived"]["speedup_vs_captured"]) for c in big], lambda v: v >= 2.5)
    add("typical node (eager module) p50 ÷ vrt_ros p50, 1920x1080", "≥ 7",
        [(where(c), c["derived"]["speedup_vs_eager"]) for c in big], lambda v: v >= 7)
    add("allocations per frame after warm-up (runtime + torch allocator)", "0",
        [(where(c), c.get("vrt_ros_gpu", {}).get("allocs_per_frame")) for c in configs], lambda v: v == 0)
    add("host synchronisations per frame", "exactly 1",
        [(where(c), c.get("vrt_ros_gpu", {}).get("syncs_per_frame")) for c in configs], lambda v: v == 1)
    return out


def write_json(doc: dict, path: Path) -> None:
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")


def markdown(doc: dict) -> str:
    """The markdown report: header (date, GPU, driver, versions, command), tables, targets, notes."""
    gpu = doc["gpu"]
    lines = [
        f"# vrt_ros benchmark — {doc['date']}",
        "",
        f"- command: `{doc['command']}`",
        f"- GPU: {gpu.get('name', 'unavailable')}" + (
            f" ({gpu.get('arch')}), driver {gpu.get('driver')}, CUDA driver API {gpu.get('cuda_driver_api')},"
            f" clocks SM {gpu.get('clocks_sm')} / memory {gpu.get('clocks_mem')}" if "name" in gpu else f" — {gpu.get('reason')}"
        ),
        f"- host: {doc['host']['cpu_count']} CPUs, {doc['host']['platform']}, Python {doc['host']['python']}",
        "- libraries: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()),
        f"- frames: {doc['settings']['frames']} measured per GPU row and configuration after {doc['settings']['warmup']} warm-up"
        f" (eager baseline {doc['settings']['eager_frames']}; CPU path {doc['settings']['cpu_frames']} after"
        f" {doc['settings']['cpu_warmup']}), rotating over {doc['distinct_frames']} distinct real frames: "
        + "; ".join(doc["sources"]),
        "- times in ms; wall = message bytes in → detections ready (host clock); frames/s = 1000 ÷ mean wall.",
        "- messages: " + {
            "fresh": "fresh (`--message fresh`): each frame's bytes are written into the message buffer just before it "
                     "is handed over (outside the clock), as rclpy's deserialisation does right before a callback",
            "cold": "cold (`--message cold`): the pre-built frames in rotation, read from main memory (slowest case)",
        }.get(doc["settings"].get("message", "cold"), doc["settings"].get("message", "cold")),
        "",
        "## Summary (the README's table)",
        "",
        *readme_table(doc),
        "",
        "## Per frame, end to end inside the process",
        "",
        "| model | size | encoding | path | p50 | p99 | frames/s | syncs/frame | allocs/frame | detections/frame |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    reasons_shown: set[str] = set()  # a long reason (e.g. no CUDA here) is printed once, then referred to
    for c in doc["configs"]:
        for key in ROWS:
            r = c.get(key, {})
            head = f"| {c['model']} | {c['size']} | {c['encoding']} | {ROW_TITLES[key]} |"
            if "unavailable" in r:
                why = r["unavailable"]
                text = f"unavailable: {why}" if why not in reasons_shown else "unavailable (as above)"
                reasons_shown.add(why)
                lines.append(head + f" {text} | | | | | |")
                continue
            w = r["wall_ms"]
            allocs = r.get("allocs_per_frame", r.get("torch_allocs_per_frame"))
            lines.append(
                head + f" {_f(w['p50'])} | {_f(w['p99'])} | {_f(w['fps'], '{:.0f}')} | {_f(r.get('syncs_per_frame'), '{:.2f}')} |"
                f" {_f(allocs, '{:.2f}')} | {_f(r['detections_per_frame'], '{:.1f}')} |"
            )
    lines += [
        "",
        "allocs/frame: vrt_ros = device + pinned allocations counted by the GPU runtime plus torch caching-allocator",
        "allocations; baselines = torch caching-allocator allocations only (numpy's host allocations are not counted).",
    ]
    if any("unavailable" not in c.get("vrt_ros_gpu", {"unavailable": ""}) for c in doc["configs"]):
        lines += _gpu_sections(doc)
    else:
        why = gpu.get("reason") or "the GPU rows did not run"
        lines += ["", f"GPU stages, limits, upload variants and the targets are not measured here: {why}."]
    lines += ["", "## Notes", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    return "\n".join(lines)


def _gpu_sections(doc: dict) -> list[str]:
    """Per-stage times, the limits, the upload variants and the targets (only when the GPU rows ran)."""
    lines: list[str] = []
    lines += [
        "",
        "## vrt_ros GPU pipeline per stage (CUDA events, p50 / p99)",
        "",
        "| model | size | encoding | " + " | ".join(STAGE_TITLES) + " | wall |",
        "| --- | --- | --- | " + " | ".join("---:" for _ in STAGE_TITLES) + " | ---: |",
    ]
    for c in doc["configs"]:
        r = c.get("vrt_ros_gpu", {})
        if "unavailable" in r:
            continue
        cells = [f"{_f(r['stages_ms'][s]['p50'])} / {_f(r['stages_ms'][s]['p99'])}" for s in STAGE_TITLES]
        lines.append(f"| {c['model']} | {c['size']} | {c['encoding']} | " + " | ".join(cells)
                     + f" | {_f(r['wall_ms']['p50'])} / {_f(r['wall_ms']['p99'])} |")
    lines += [
        "",
        "host_copy: frame start to the H2D being enqueued (validation + copy of the message into pinned memory, host",
        "side, stream idle); postprocess: decode + sort + NMS + finalize kernels; d2h: the result rows to pinned memory.",
        "",
        "## Against the limits (p50)",
        "",
        "| model | size | encoding | vrt_ros total | engine alone | pinned H2D alone | overhead = total − engine |"
        " total − (engine + H2D) | total ÷ (engine + H2D) | p99 ÷ p50 | × vs Ultralytics-style (torch GPU) |"
        " × vs typical (captured) | × vs typical (eager) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in doc["configs"]:
        lim, d = c.get("limits"), c["derived"]
        if not lim:
            continue
        lines.append(
            f"| {c['model']} | {c['size']} | {c['encoding']} | {_f(c['vrt_ros_gpu']['wall_ms']['p50'])} |"
            f" {_f(lim['engine_alone_ms']['p50'])} | {_f(lim['h2d_pinned_ms']['p50'])} | {ratio_text(c, 'overhead_ms', '{:.3f}')} |"
            f" {ratio_text(c, 'overhead_beyond_limit_ms', '{:.3f}')} | {ratio_text(c, 'total_over_limit')} |"
            f" {ratio_text(c, 'p99_over_p50')} | {ratio_text(c, 'speedup_vs_torch_gpu')} |"
            f" {ratio_text(c, 'speedup_vs_captured')} | {ratio_text(c, 'speedup_vs_eager')} |"
        )
    reps = doc["settings"].get("repeats", 1)
    lines += [
        "",
        f"Rows: the run (of {reps}) with the median p50 of that row. Derived values: median (min–max) over the runs, each"
        " taken between rows of one run." if reps > 1 else "One run (`--repeats 1`).",
    ]
    up_rows = [c for c in doc["configs"] if c.get("upload")]
    if up_rows:
        variants = list(up_rows[0]["upload"])
        lines += [
            "",
            "## Getting the frame's bytes to the GPU: the pipeline's way and cheap alternatives (p50 ms, measured only)",
            "",
            "| size | encoding | bytes | " + " | ".join(variants) + " |",
            "| --- | --- | ---: | " + " | ".join("---:" for _ in variants) + " |",
        ]
        seen = set()
        for c in up_rows:
            k = (c["size"], c["encoding"])
            if k in seen:
                continue
            seen.add(k)
            lines.append(f"| {c['size']} | {c['encoding']} | {c['frame_bytes']} | "
                         + " | ".join(_f(c["upload"][v]["p50"]) for v in variants) + " |")
        lines += [
            "",
            "pinned_h2d: the copy alone (events); host_copy: np.copyto into pinned alone; copy_then_h2d: what the",
            "pipeline does; chunked_pipelined: 4 chunks, each chunk's H2D overlapping the next chunk's host copy;",
            "threaded_copy: the host copy on 4 threads, then the H2D; pageable_h2d: H2D straight from the message bytes.",
            "Each variant is timed to the copy's completion (one sync); none of them is in the pipeline.",
        ]
    lines += ["", "## Targets", "", "| target | limit | measured | met |", "| --- | --- | --- | --- |"]
    for t in doc["targets"]:
        vals = "; ".join(f"{k}: {v:.3f}" for k, v in t["values"].items()) or "not measured"
        met = {True: "yes", False: "**no**", None: "not measured"}[t["met"]]
        lines.append(f"| {t['target']} | {t['limit']} | {vals} | {met} |")
    return lines
