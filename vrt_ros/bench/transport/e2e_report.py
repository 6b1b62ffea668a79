"""Reporting side of the end-to-end bench (:mod:`vrt_ros.bench.transport.ros_e2e`): the markdown report, issue 14's targets
table, and the versions and GPU named in the report's header."""

from __future__ import annotations

import subprocess

from vrt_ros.bench.common import library_versions

#: Backend name of the zero-work relay row (the transport floor, :mod:`vrt_ros.bench.transport.relay`).
FLOOR = "floor"


def diagnostics_window() -> int:
    try:
        from vrt_ros.ros.diagnostics import WINDOW
    except ImportError:
        return 512
    return WINDOW


def _fmt(d: dict | None, key: str = "p50") -> str:
    return "–" if not d or key not in d else f"{d[key]:.2f}"


def markdown(doc: dict) -> str:
    """The report: header (date, machine, versions, command, settings), the table, notes."""
    st = doc["settings"]
    lines = [
        f"# vrt_ros end to end through ROS — {doc['date']}",
        "",
        f"- command: `{doc['command']}`",
        f"- machine: {doc['host']['platform']}, {doc['host']['cpu_count']} CPUs; GPU: {doc.get('gpu') or 'not used'}",
        "- libraries: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()),
        f"- model: `{doc['model']}`; frames: {doc['distinct_frames']} distinct real frames, bgr8, "
        f"{st['rate_hz']:g} Hz, {st['warmup']} warm-up + {st['frames']} measured per row; node input QoS "
        f"{st.get('input_qos', 'reliable')} depth {st.get('input_depth', 5)}"
        + (f" (node parameters {', '.join(st['node_params'])})" if st.get("node_params") else "") + ", "
        f"bench publisher reliable depth {st.get('publisher_depth', 1)}; "
        f"node and bench in separate processes, ROS_DOMAIN_ID {st['domain_id']}, discovery LOCALHOST",
        f"- DDS (`--dds-profile {st.get('dds_profile', 'auto')}`, both processes): {st.get('dds', 'not recorded')}",
        "",
        "| backend | input | size | frame MB | received / sent | stamp→receipt p50 / p99 ms | node callback→publish p50 / p99 ms "
        "| node stamp→publish p50 / p99 ms | node inference p50 ms | node callbacks / frames sent (warm-up incl.) "
        "| node drops |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in doc["runs"]:
        node = r.get("node") or {}
        drops = ", ".join(f"{k} {v}" for k, v in sorted((node.get("dropped_by_reason") or {}).items()) if v) or "0"
        if r.get("error"):
            drops = f"error: {r['error']}" if not node else f"{drops} (error: {r['error']})"
        lat = r.get("latency_ms")
        inference = (node.get("stages_ms") or {}).get("inference")
        lines.append(
            f"| {r['backend']} | {r.get('input', 'raw')} | {r['size']} | {r['frame_bytes'] / 1e6:.2f} | {r['received']} / {r['sent']} "
            f"| **{_fmt(lat)}** / {_fmt(lat, 'p99')} | {_fmt(node.get('callback_ms'))} / {_fmt(node.get('callback_ms'), 'p99')} "
            f"| {_fmt(node.get('age_ms'))} / {_fmt(node.get('age_ms'), 'p99')} | {_fmt(inference)} "
            f"| {node.get('received', '–')} / {r.get('warmup_sent', 0) + r['sent']} | {drops} |")
    lines += ["", *[f"- {n}" for n in doc["notes"]], ""]
    lines += targets_table(doc["runs"])
    return "\n".join(lines)


def _row(runs: list[dict], backend: str, size: str, kind: str) -> dict | None:
    for r in runs:
        if r["backend"] == backend and r["size"] == size and r.get("input", "raw") == kind and r.get("latency_ms"):
            return r
    return None


def _pipeline_ms(row: dict) -> float | None:
    """The node's in-process pipeline time, p50 ms (its ``total`` stage: host wall time of one ``process``)."""
    total = ((row.get("node") or {}).get("stages_ms") or {}).get("total")
    return total.get("p50") if total else None


def targets_table(runs: list[dict], size: str = "1920x1080") -> list[str]:
    """Issue 14's targets, met / missed, from the rows of this run (markdown lines; none without ``size`` rows).

    Targets (ms, stamp → detections received in another process): cuda jpeg p50 <= 5; cuda raw p50 <= 9 and
    <= floor raw p50 + pipeline + 0.5; p99 <= 1.3 x p50 for the cuda rows; no frame lost in any row; the node's
    callback → publish within 0.5 ms of its pipeline time at every size (cuda rows).
    """
    if not any(r["size"] == size for r in runs):
        return []
    out = [f"## Targets (issue 14, {size} unless said)", "", "| target | measured | verdict |", "| --- | --- | --- |"]

    def add(what: str, value: float | None, ok: bool | None, fmt: str) -> None:
        verdict = "not measured" if value is None or ok is None else ("met" if ok else "**missed**")
        out.append(f"| {what} | {fmt.format(value) if value is not None else '–'} | {verdict} |")

    jpeg, raw = _row(runs, "cuda", size, "jpeg"), _row(runs, "cuda", size, "raw")
    floor = _row(runs, "floor-worker", size, "raw") or _row(runs, FLOOR, size, "raw")  # the node answers from a worker
    p = lambda r, q="p50": r["latency_ms"][q] if r else None  # noqa: E731
    add("cuda jpeg: stamp→received p50 ≤ 5 ms", p(jpeg), p(jpeg) is not None and p(jpeg) <= 5.0, "{:.2f} ms")
    add("cuda raw: stamp→received p50 ≤ 9 ms", p(raw), p(raw) is not None and p(raw) <= 9.0, "{:.2f} ms")
    if raw and floor and _pipeline_ms(raw) is not None:
        excess = p(raw) - p(floor) - _pipeline_ms(raw)
        add(f"cuda raw − {floor['backend']} raw ({p(floor):.2f} ms) − pipeline ({_pipeline_ms(raw):.2f} ms) ≤ 0.5 ms", excess,
            excess <= 0.5, "{:.2f} ms")
    else:
        add("cuda raw within floor + pipeline + 0.5 ms", None, None, "")
    for r in (raw, jpeg):
        if r:
            ratio = p(r, "p99") / p(r)
            add(f"cuda {r['input']}: p99 ≤ 1.3 × p50", ratio, ratio <= 1.3, "{:.2f} ×")
    lost = sum(r["sent"] - r["received"] for r in runs)
    add("no frame lost (all rows, all sizes)", float(lost), lost == 0, "{:.0f} lost")
    for r in runs:
        cb = ((r.get("node") or {}).get("callback_ms") or {}).get("p50")
        if r["backend"] == "cuda" and cb is not None and _pipeline_ms(r) is not None:
            gap = cb - _pipeline_ms(r)
            add(f"cuda {r.get('input', 'raw')} {r['size']}: node callback→publish − pipeline ≤ 0.5 ms", gap, gap <= 0.5,
                "{:.2f} ms")
    return out + [""]


def versions() -> dict[str, str]:
    from importlib import metadata

    out = library_versions(("numpy", "opencv-python-headless", "onnxruntime", "torch", "cuda-core", "rosbags"))
    try:
        import rclpy  # noqa: F401  (ROS edge: version of the wheels in use)

        out["rclpy"] = metadata.version("rclpy")
    except Exception:
        out["rclpy"] = "unknown version"
    return out


def gpu_name() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().replace("\n", "; ") or None if out.returncode == 0 else None
