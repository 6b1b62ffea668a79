"""Many cameras into one node (issue 21): one publisher process per camera, the node batching their frames.

Usage::

    python -m vrt_ros.bench.cameras.cameras_e2e --model M.onnx --cameras 1,2,4,8 [--sizes 1920x1080] [--inputs raw,jpeg]
        [--phase stagger,sync] [--batching on,off] [--backend cuda] [--rate 30] [--frames 300] [--warmup-s 3]
        [--repeats 3] [--out results/bench] [--name cameras_e2e] [--label "H200"] [--param NAME:=VALUE ...]
        [--node-arg=--executor=events ...]
    python -m vrt_ros.bench.cameras.cameras_e2e --targets [--only jpeg8_sync,mixed_sync,...] [--repeats 3] [--frames 150]
        [--budget-s 540] [--shrink 1] [--backend cuda] [--label "H200"] [--param NAME:=VALUE ...]

Each row: one detector node process (``python -m vrt_ros.ros.main``, cameras ``cam0 .. cam<N-1>``, input QoS
reliable depth 1, ``engine.max_batch`` N with ``--batching on`` and 1 with ``off``, ``input.batch_wait_ms`` 0
unless ``--param`` says otherwise; backend ``floor``: the zero-work relay with N cameras), and one
:mod:`vrt_ros.bench.cameras.camera_pub` process per camera on its own schedule at ``--rate`` (frames prepared before the
run; ``--phase sync``: every camera's frames at the same instants, as hardware-triggered rigs; ``stagger``: camera
k offset by k / (N x rate)). This process subscribes every camera's detections (stamp -> received, per camera) and
``/diagnostics`` (the node's batch-size histogram, stage times and counters), and reads the node process's CPU
time from ``/proc``. With ``--batching on`` the model is made dynamic-batch first (``vrt_ros.tools.batch_model``'s
rewrite, checked against the batch-1 model with ONNX Runtime; kept in ``$XDG_CACHE_HOME/vrt_ros/models``) unless
it already is.

``--targets``: issue 35's target rows instead of the matrix (:mod:`vrt_ros.bench.cameras.cameras_targets`: 8 x 1080p JPEG
synchronised and staggered, 4 x 1080p raw synchronised, 8 raw staggered, a mixed rig of 3 JPEG 1080p + 2 raw 720p +
1 yuv422 640x480 cameras in one node (``input.compressed_cameras``), 1 JPEG 1080p), each ``--repeats`` times
(default 3, interleaved), 150 measured frames a camera after 2 s of warm-up by default; ``<name>`` defaults to
``cameras_targets``, whose markdown starts with the targets met or missed, per-camera and per-stage tables.
``--budget-s``: no run is started that would end past it (estimated from the longest run so far).

``--repeats R``: each row R times; the JSON keeps every run, the markdown shows each. Writes ``<name>.json``,
``<name>.md`` and ``<name>_node.log`` into ``--out`` (``--append``: the rows are added to an existing JSON, for a
matrix run in parts); the scaling curve is drawn from the JSON by
``python -m vrt_ros.bench.cameras.scaling_plot``. DDS stays on this machine (LOCALHOST, ``--domain-id``). Exit status 0
when every row ran, 1 when a row failed (no node, no detections), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vrt_ros.bench.cameras.cameras_report import (camera_figures, device_ms_per_frame, histogram, markdown, mean_batch,
                                                 percentiles, stage_figures)
from vrt_ros.bench.cameras.listener import Listener, process_cpu_s
from vrt_ros.bench.common import parse_size, say
from vrt_ros.bench.transport.e2e_probe import NAMESPACE
from vrt_ros.bench.transport.e2e_report import gpu_name, versions
from vrt_ros.bench.transport.ros_e2e import _env_domain, _stop, ros_environment

SETTLE_S = 1.5  # after the last measured frame: late detections, final diagnostics
PUBLISHER_EXIT_S = 10.0  # a publisher's teardown after its stamps are written (a hang there is killed, not waited)
MATRIX_DEFAULTS = {"frames": 300, "warmup_s": 3.0, "repeats": 1, "name": "cameras_e2e"}
TARGET_DEFAULTS = {"frames": 150, "warmup_s": 2.0, "repeats": 3, "name": "cameras_targets"}


def node_command(backend: str, model: Path, cameras: list[str], compressed: bool | list[str], batching: bool,
                 namespace: str, params: list[str], node_args: list[str] = ()) -> list[str]:
    """The node's (or, for ``floor``, the relay's) command line for one row. ``compressed``: True for every camera
    on JPEG (``input.compressed``), or the names of the JPEG cameras of a mixed rig (``input.compressed_cameras``;
    the others raw)."""
    mixed = isinstance(compressed, list)
    if backend == "floor":
        if mixed:
            raise ValueError("the floor relay takes one transport for all its cameras")
        return [sys.executable, "-m", "vrt_ros.bench.transport.relay", "--namespace", namespace, "--cameras", ",".join(cameras)] \
            + (["--compressed"] if compressed else [])
    cmd = [sys.executable, "-m", "vrt_ros.ros.main", *node_args, "--ros-args", "-r", f"__ns:={namespace}",
           "-p", f"backend:={backend}", "-p", f"model.path:={model}", "-p", f"cameras:=[{', '.join(cameras)}]",
           "-p", "input.qos:=reliable", "-p", "input.depth:=1", "-p", "diagnostics_period_s:=0.5",
           "-p", f"engine.max_batch:={len(cameras) if batching else 1}"]
    if mixed and compressed:
        cmd += ["-p", f"input.compressed_cameras:=[{', '.join(compressed)}]"]
    elif compressed and not mixed:
        cmd += ["-p", "input.compressed:=true"]
    for item in params:
        cmd += ["-p", item]
    return cmd


def camera_specs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Per camera ``{"input": "jpeg"|"raw", "size": (w, h), "encoding": "bgr8"|"yuv422"}``: the row's own
    ``camera_specs`` (a mixed rig), else ``cameras`` alike of the row's ``size`` and ``input`` (raw: bgr8)."""
    if spec.get("camera_specs"):
        return [dict(c) for c in spec["camera_specs"]]
    return [{"input": spec["input"], "size": tuple(spec["size"]), "encoding": "bgr8"}] * spec["cameras"]


def run_row(ctx, spec: dict[str, Any], model: Path, args, env: dict[str, str], log, tmp: Path) -> dict[str, Any]:
    """One row: the node, N publishers, the measured frames, the figures."""
    specs = camera_specs(spec)
    n = len(specs)
    cameras = [f"cam{k}" for k in range(n)]
    jpeg = [c for c, cs in zip(cameras, specs) if cs["input"] == "jpeg"]
    compressed: bool | list[str] = len(jpeg) == n if len(jpeg) in (0, n) else jpeg
    topics = [f"{c}/image_raw/compressed" if cs["input"] == "jpeg" else f"{c}/image_raw"
              for c, cs in zip(cameras, specs)]
    w, h = specs[0]["size"]
    row: dict[str, Any] = {"backend": spec["backend"], "cameras": n,
                           "size": f"{w}x{h}" if all(cs["size"] == specs[0]["size"] for cs in specs) else "mixed",
                           "input": spec.get("input") or "mixed", "phase": spec["phase"], "batching": spec["batching"],
                           "rate_hz": args.rate, "node_args": list(args.node_arg)}
    if spec.get("camera_specs"):
        row["camera_specs"] = {c: {"input": cs["input"], "size": "{}x{}".format(*cs["size"]),
                                   "encoding": cs["encoding"]} for c, cs in zip(cameras, specs)}
    started = time.monotonic()
    listener = Listener(ctx, args.namespace, cameras)
    cmd = node_command(spec["backend"], model, cameras, compressed, spec["batching"], args.namespace,
                       args.param + list(spec.get("params", ())), args.node_arg)
    log.write(f"\n===== {row}: {shlex.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    pubs: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + args.start_timeout
        while not listener.subscribed(topics) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        if not listener.subscribed(topics):
            row["error"] = (f"node did not subscribe to every camera, or its detections did not reach this process "
                            f"(exit {proc.poll()})")
            return row
        period_ms = 1e3 / args.rate
        go = tmp / "go"
        for k, (cam, cs) in enumerate(zip(cameras, specs)):
            offset = 0.0 if spec["phase"] == "sync" else k * period_ms / n
            pubs.append(subprocess.Popen(
                [sys.executable, "-m", "vrt_ros.bench.cameras.camera_pub", "--camera", cam,
                 "--size", "{}x{}".format(*cs["size"]),
                 "--rate", str(args.rate), "--go", str(go), "--ready", str(tmp / f"{cam}.ready"),
                 "--warmup-s", str(args.warmup_s), "--offset-ms", f"{offset:.3f}",
                 "--frames", str(args.frames), "--out", str(tmp / f"{cam}.json"), "--namespace", args.namespace,
                 "--first", str(k)] + (["--compressed"] if cs["input"] == "jpeg" else ["--encoding", cs["encoding"]])
                + (["--shared", str(args.shared)] if args.shared else [])
                + [a for d in args.images for a in ("--images", str(d))], env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + args.start_timeout
        while not all((tmp / f"{c}.ready").is_file() for c in cameras) and time.monotonic() < deadline:
            if any(p.poll() is not None for p in pubs):
                row["error"] = "a camera publisher ended before the start (see the log)"
                return row
            time.sleep(0.02)
        start_ns = time.time_ns() + 200_000_000  # every publisher is ready: all start together
        (tmp / "go.part").write_text(f"{start_ns}\n")
        (tmp / "go.part").rename(go)
        _sleep_until_ns(start_ns + int(args.warmup_s * 1e9))  # the measured frames begin
        cpu0, t0 = process_cpu_s(proc.pid), time.monotonic()
        row["publishers_killed"] = wait_publishers(pubs, [tmp / f"{c}.json" for c in cameras],
                                                   args.frames / args.rate + 60)
        time.sleep(SETTLE_S)
        cpu1, t1 = process_cpu_s(proc.pid), time.monotonic()
        with listener.lock:
            received = {c: dict(v) for c, v in listener.received.items()}
            called = {c: dict(v) for c, v in listener.called.items()}
            status = {c: dict(v) for c, v in listener.status.items()}
        detail, total = {}, 0
        for cam in cameras:
            sent_file = tmp / f"{cam}.json"
            if not sent_file.is_file():
                row["error"] = f"publisher {cam} wrote no stamps (see the log)"
                return row
            sent_doc = json.loads(sent_file.read_text())
            detail[cam] = camera_figures(sent_doc["stamps_ns"], received[cam])
            detail[cam]["callback_latency_ms"] = camera_figures(sent_doc["stamps_ns"], called[cam])["latency_ms"]
            # the publisher's own share of stamp -> received (its stamp is taken just before publish)
            detail[cam]["publish_ms"] = percentiles(sent_doc.get("publish_ms", []))
            total += detail[cam]["received"]
        row["cameras_detail"] = detail
        measured_s = args.frames / args.rate
        row["frames_per_s"] = total / measured_s
        row["node_cpu_percent"] = (100.0 * (cpu1 - cpu0) / (t1 - t0)) if cpu0 is not None and cpu1 is not None else None
        first = status.get(cameras[0], {})
        hist = histogram(first)
        row["batch_sizes"] = hist
        row["frames_per_batch"] = {c: float(status.get(c, {}).get("batch.frames_per_batch", "nan")) for c in cameras}
        stages = {k[: -len("_ms_p50")]: float(v) for k, v in first.items() if k.endswith("_ms_p50")}
        row["stages_ms_p50"] = stages
        row["stages_by_camera"] = {c: stage_figures(status.get(c, {})) for c in cameras}
        row["device_ms_per_frame"] = device_ms_per_frame(stages, hist) if spec["backend"] != "floor" else None
        row["mean_batch"] = mean_batch(hist)
        row["node_counters"] = {c: {k: status.get(c, {}).get(k) for k in ("received", "processed", "dropped")}
                                for c in cameras}
        if total == 0:
            row["error"] = "no detections received"
    finally:
        for p in pubs:
            if p.poll() is None:
                p.kill()
        row["node_exit"] = _stop(proc)
        listener.close()
        row["wall_s"] = round(time.monotonic() - started, 1)
    return row


def wait_publishers(pubs: list[subprocess.Popen], outs: list[Path], timeout_s: float,
                    exit_grace_s: float = PUBLISHER_EXIT_S) -> list[int]:
    """Wait until every publisher wrote its stamps file (``outs``, the end of its measured frames) or ended, at
    most ``timeout_s``; then give each ``exit_grace_s`` to end (its DDS teardown) and kill the ones still running.
    A publisher whose teardown hangs costs the row nothing (its stamps are written first); one killed before writing
    them makes the row's error ("wrote no stamps"). Never raises :class:`subprocess.TimeoutExpired`.

    Returns:
        the indices of the publishers killed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not all(o.is_file() or p.poll() is not None for p, o in zip(pubs, outs)):
        time.sleep(0.05)
    killed = []
    grace_end = time.monotonic() + exit_grace_s
    for k, p in enumerate(pubs):
        try:
            p.wait(timeout=max(0.0, grace_end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            killed.append(k)
    return killed


def _row_line(row: dict[str, Any]) -> str:
    if row.get("error"):
        return f"error: {row['error']}"
    parts = []
    for cam, d in row["cameras_detail"].items():
        lat = d["latency_ms"] or {}
        parts.append(f"{cam} {d['received']}/{d['sent']} p50 {lat.get('p50', float('nan')):.1f} "
                     f"p99 {lat.get('p99', float('nan')):.1f} ms")
    killed = f"; publishers killed after their frames (teardown hung): {row['publishers_killed']}" \
        if row.get("publishers_killed") else ""
    return "; ".join(parts) + f"; batches {row.get('batch_sizes')}{killed}"


def _sleep_until_ns(t_ns: int) -> None:
    while (left := t_ns - time.time_ns()) > 0:
        time.sleep(left / 1e9)


def batch_model_for(model: Path, out: Path) -> Path:
    """``model`` when its input batch is already dynamic or > 1, else its dynamic-batch copy in the folder ``out``
    (a cache, never the results folder: models are not committed), checked against it with ONNX Runtime on noise
    frames by the tool (its check on real frames is the README's step)."""
    import onnx

    from vrt_ros.tools import batch_model

    m = onnx.load(str(model), load_external_data=False)
    d0 = m.graph.input[0].type.tensor_type.shape.dim[0]
    if not (d0.HasField("dim_value") and d0.dim_value == 1):
        return model
    target = out / f"{model.stem}_dynamic_batch.onnx"
    if not target.is_file() and batch_model.main([str(model), str(target), "--batch", "dynamic"]) != 0:
        raise SystemExit(f"cameras_e2e: {model} could not be made dynamic-batch (see above)")
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.cameras.cameras_e2e", description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="ONNX model (default <shared>/models/yolox_nano.onnx)")
    ap.add_argument("--cameras", default="1,2,4,8", help="comma-separated camera counts")
    ap.add_argument("--sizes", default="1920x1080")
    ap.add_argument("--inputs", default="raw,jpeg", help="raw (bgr8 Image) and/or jpeg (CompressedImage)")
    ap.add_argument("--phase", default="stagger,sync", help="stagger and/or sync")
    ap.add_argument("--batching", default="on", help="on and/or off (engine.max_batch N or 1)")
    ap.add_argument("--backend", default="cuda", help="cuda, cpu or floor (comma-separated)")
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--frames", type=int, default=None, help="measured frames per camera (default 300; --targets 150)")
    ap.add_argument("--warmup-s", type=float, default=None,
                    help="seconds of frames before the measured ones (default 3; --targets 2)")
    ap.add_argument("--repeats", type=int, default=None, help="runs of each row (default 1; --targets 3)")
    ap.add_argument("--targets", action="store_true",
                    help="issue 35's target rows (vrt_ros.bench.cameras.cameras_targets) instead of the matrix; --backend's "
                         "first, batching on; --cameras/--sizes/--inputs/--phase/--batching are not used")
    ap.add_argument("--only", default=None, help="--targets: these rows only (comma-separated keys)")
    ap.add_argument("--shrink", type=int, default=1,
                    help="--targets: every camera's width and height divided by this (a smoke test's small frames)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no run that would end past this many seconds from the start (estimated from the "
                         "runs so far); the runs not started are listed in the JSON")
    ap.add_argument("--shared", type=Path, default=None)
    ap.add_argument("--images", action="append", default=[], type=Path, help="extra photo folder (repeatable)")
    ap.add_argument("--param", action="append", default=[], help="extra node parameter NAME:=VALUE")
    ap.add_argument("--node-arg", action="append", default=[],
                    help="extra option of the node's command line, e.g. --node-arg=--executor=events (repeatable)")
    ap.add_argument("--domain-id", type=int, default=_env_domain())
    ap.add_argument("--namespace", default=NAMESPACE)
    ap.add_argument("--start-timeout", type=float, default=180.0)
    ap.add_argument("--label", default="", help="what machine the figures are from (the report's title)")
    ap.add_argument("--out", type=Path, default=Path("results/bench"))
    ap.add_argument("--name", default=None, help="output file stem (default cameras_e2e; --targets cameras_targets)")
    ap.add_argument("--append", action="store_true",
                    help="add the rows to <out>/<name>.json instead of starting it anew (a matrix run in parts)")
    args = ap.parse_args(argv)
    mode = TARGET_DEFAULTS if args.targets else MATRIX_DEFAULTS
    for key, value in mode.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    try:
        counts = [int(c) for c in args.cameras.split(",") if c]
        sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    except (ValueError, argparse.ArgumentTypeError) as exc:
        ap.error(str(exc))
    inputs, phases = args.inputs.split(","), args.phase.split(",")
    batching = [b == "on" for b in args.batching.split(",")]
    backends = args.backend.split(",")
    if (not counts or min(counts) < 1 or set(inputs) - {"raw", "jpeg"} or set(phases) - {"stagger", "sync"}
            or set(args.batching.split(",")) - {"on", "off"} or args.frames < 1 or args.rate <= 0
            or args.repeats < 1 or args.shrink < 1):
        ap.error("bad --cameras/--inputs/--phase/--batching/--frames/--rate/--repeats/--shrink")
    if args.targets:
        from vrt_ros.bench.cameras import cameras_targets

        try:
            todo = cameras_targets.jobs(cameras_targets.select(args.only), args.repeats, backends[0], args.shrink)
        except ValueError as exc:
            ap.error(str(exc))
        batching = [True]
    else:
        todo = [{"backend": backend, "size": (w, h), "input": inp, "cameras": n, "phase": phase, "batching": on,
                 "repeat": rep} for backend, (w, h), inp, n, phase, on, rep in itertools.product(
                     backends, sizes, inputs, counts, phases, batching, range(args.repeats))
                if backend != "floor" or on]  # the relay does not batch
    from vrt_ros.bench.cli import _default_shared

    args.shared = args.shared or _default_shared()
    model = args.model or (args.shared / "models" / "yolox_nano.onnx" if args.shared else None)
    if model is None or not Path(model).is_file():
        say(f"no model (--model, or <shared>/models/yolox_nano.onnx): {model}")
        return 2
    env = ros_environment(args.domain_id)
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")})
    args.out.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vrt_ros" / "models"
    cache.mkdir(parents=True, exist_ok=True)
    batched = batch_model_for(Path(model), cache) if any(batching) else Path(model)
    import rclpy

    doc: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m vrt_ros.bench.cameras.cameras_e2e " + shlex.join(sys.argv[1:] if argv is None else argv),
        "machine_label": args.label, "host": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
        "gpu": gpu_name() if "cuda" in backends else None, "versions": versions(), "model": str(model),
        "batch_model": str(batched), "runs": [],
        "notes": ["stamp -> received: header stamp (publisher's wall clock just before publish) to the bench "
                  "subscriber's middleware receipt of the detections (the message info's received_timestamp, "
                  "wall clock; the callback's time where the middleware gives none); frames lost = measured frames "
                  "sent - detections received, per camera. callback_latency_ms: to the bench's Python callback "
                  "instead (later by its executor's queue; the measure of the runs before 2026-12-03 13:40 UTC).",
                  "device ms / frame: the batch's stage p50s (upload/decode, preprocess, inference, postprocess; CUDA "
                  "events on the GPU path, host times on the CPU path) divided by the mean batch size.",
                  "frames/s: detections received over the measured time (frames / rate); node CPU %: the node "
                  "process's user + system CPU time over the measured wall time."]}
    if args.targets and args.shrink > 1:
        doc["notes"].append(f"--shrink {args.shrink}: every camera's width and height divided by {args.shrink} (a "
                            "smoke test): the target rows' titles name the sizes the targets are for, not these.")
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    status = 0
    json_path, md_path = args.out / f"{args.name}.json", args.out / f"{args.name}.md"
    if args.append and json_path.is_file():
        old = json.loads(json_path.read_text())
        doc["runs"] = old.get("runs", [])
        doc["command"] = f"{old.get('command', '')}; {doc['command']}"
    report = _report(args.targets)
    started, walls = time.monotonic(), []
    try:
        with open(args.out / f"{args.name}_node.log", "w") as log:
            for k, spec in enumerate(todo):
                if args.budget_s is not None and walls and \
                        time.monotonic() - started + max(walls) > args.budget_s:
                    doc["not_run"] = [_spec_text(s) for s in todo[k:]]
                    say(f"budget of {args.budget_s:g} s: {len(todo) - k} run(s) not started")
                    status = 1
                    break
                with tempfile.TemporaryDirectory() as tmp:
                    row = run_row(ctx, spec, batched if spec["batching"] else Path(model), args, env, log, Path(tmp))
                walls.append(row.get("wall_s", 0.0))
                row.update({k: spec[k] for k in ("repeat", "target") if k in spec})
                doc["runs"].append(row)
                status = 1 if row.get("error") else status
                say(f"[{time.monotonic() - started:.0f} s] {_spec_text(spec)}: {_row_line(row)}")
                json_path.write_text(json.dumps(doc, indent=1) + "\n")
                md_path.write_text(report(doc))
    finally:
        rclpy.try_shutdown(context=ctx)
    json_path.write_text(json.dumps(doc, indent=1) + "\n")  # with the runs not started, if any
    md_path.write_text(report(doc))
    print(report(doc))
    return status


def _report(targets: bool):
    """The markdown of a document: the rows, and with ``targets`` the target tables first."""
    if not targets:
        return markdown
    from vrt_ros.bench.cameras import cameras_targets

    return lambda doc: "\n".join(cameras_targets.markdown(doc)) + "\n" + markdown(doc)


def _spec_text(spec: dict[str, Any]) -> str:
    w, h = spec["size"]
    return (f"{spec.get('target', '')} {spec['backend']} {spec['cameras']} x {w}x{h} {spec['input']} {spec['phase']} "
            f"batching {'on' if spec['batching'] else 'off'} (repeat {spec.get('repeat', 0)})").strip()


if __name__ == "__main__":
    sys.exit(main())
