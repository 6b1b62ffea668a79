"""End to end through ROS (issue 5): publisher → detector node (another process) → subscriber, latency and losses.

Usage::

    python -m vrt_ros.bench.transport.ros_e2e --model M.onnx [--backend cuda,cpu] [--sizes 640x480,1280x720,1920x1080]
                                    [--rate 30] [--frames 300] [--warmup 30] [--shared DIR] [--images DIR ...]
                                    [--domain-id 64] [--out results/bench] [--quick]

For each backend and size, the detector node runs in its own process, started as
``python -m vrt_ros.ros.main --ros-args -p backend:=B -p model.path:=M -p input.qos:=reliable -p input.depth:=1 ...``
(one fresh node per backend and size, so its ``/diagnostics`` latency window holds that size only). This process
(the bench) holds one rclpy node that

- publishes ``bgr8`` ``sensor_msgs/Image`` frames on ``<ns>/camera/image_raw`` (reliable, ``--publisher-depth``
  10 by default, as a camera driver's publisher; the node's input is reliable depth 1), paced at ``--rate`` Hz on
  an absolute schedule, each with ``header.stamp`` = the wall-clock time
  (``time.time_ns()``, the system clock that rclpy's ROS time also reads) taken just before ``publish``: so the
  latency includes the publisher's own serialisation;
- subscribes ``<ns>/camera/detections`` (``Detection2DArray``, reliable) and, for each array, records
  receipt time − header stamp (the node copies the input header unchanged), matched to the frame sent by stamp;
- subscribes ``/diagnostics`` and reads the node's own ``callback_ms_p50/p99`` (frame reaches the node's
  callback → detections published), ``age_ms_p50/p99`` (header stamp → published, on the node's clock), the
  per-stage percentiles, and the node's received/processed/dropped counters.

Frames: the real frames of the shared data (every frame of ``data/bags/*`` and every photo of ``data/images`` and of
``--images`` folders, see :func:`vrt_ros.bench.frames.load_sources`), resized to each size (``cv2.INTER_LINEAR``,
aspect not kept), sent in rotation. Warm-up: frames are sent at the same rate until the node has answered ``--warmup``
of them (the first ones can be lost while discovery completes, and the GPU node's first frames compile kernels and
capture graphs); they are excluded from the bench's own figures. The node's figures come from its ``/diagnostics`` window (the last
:data:`vrt_ros.ros.diagnostics.WINDOW` processed frames), which holds the warm-up frames too whenever
warm-up + measured frames ≤ that window (the JSON says how many frames the window held).

Writes ``ros_e2e.json`` and ``ros_e2e.md`` (``ros_e2e_quick.*`` with ``--quick``) and the node processes' console
output (``ros_e2e_node.log``) into ``--out``, and prints the markdown table. The JSON is rewritten after each run,
so a run cut short still leaves the finished rows.

DDS stays on this machine: ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and ``ROS_DOMAIN_ID=--domain-id`` are set in
this process's environment before rclpy is imported and passed to the node's process.

This is a ROS-edge tool: it imports ``rclpy`` and the message packages (``sensor_msgs``, ``vision_msgs``,
``diagnostic_msgs``), but only inside the functions that use them, so importing this module (and ``vrt_ros``)
never imports rclpy. Exit status: 0 when every run finished (frames may still have been lost: they are reported),
1 when a node failed to start or no detections came back for a run, 2 on bad arguments or no frames.

This module is the orchestration (settings, the node's command line and environment, one run per backend and size,
the command); the measurement is :mod:`vrt_ros.bench.transport.e2e_probe` and the report :mod:`vrt_ros.bench.transport.e2e_report`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vrt_ros.bench.common import parse_size, picker, say
from vrt_ros.bench.transport.e2e_probe import NAMESPACE, BenchNode, latency_summary, loss_runs, parse_node_status
from vrt_ros.bench.transport.e2e_report import FLOOR, diagnostics_window, gpu_name, markdown, versions
from vrt_ros.errors import ConfigError
from vrt_ros.ros import dds

DEFAULT_SIZES = "640x480,1280x720,1920x1080"
DEFAULT_DOMAIN_ID = 64
#: Relay variants by backend name: ``floor`` answers from the callback, ``floor-worker`` from a worker thread the
#: callback wakes (the node's hand-off).
FLOORS = {FLOOR: [], "floor-worker": ["--worker"]}
#: JPEG quality of the ``--compressed`` rows' frames.
JPEG_QUALITY = 90
#: ``--quick``: one small size, the CPU path, few frames (a check that the command runs).
QUICK = {"sizes": "640x480", "backend": "cpu", "frames": 50, "warmup": 5}


@dataclass
class Settings:
    """What one run publishes and how long it waits.

    Attributes:
        rate_hz: publishing rate, frames per second.
        frames: measured frames per run.
        warmup: frames sent (and awaited) before the measured ones, excluded from the bench's figures.
        start_timeout_s: longest wait for the node to subscribe (model load, engine build).
        drain_s: longest wait for the last detections after the last frame was sent, seconds.
        diagnostics_period_s: the node's ``diagnostics_period_s`` parameter.
        node_threads: the node process's executor threads (``--threads``; None: the node's default, 1).
        dds_profile: ``--dds-profile`` of both processes (``auto``, ``none`` or a file; see :mod:`vrt_ros.ros.dds`).
    """

    rate_hz: float = 30.0
    frames: int = 300
    warmup: int = 30
    start_timeout_s: float = 120.0
    drain_s: float = 5.0
    diagnostics_period_s: float = 0.5
    node_threads: int | None = None
    dds_profile: str = "auto"


def ros_environment(domain_id: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for both processes: ``base`` (default ``os.environ``) with DDS kept on localhost.

    Sets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and ``ROS_DOMAIN_ID``, and puts this repository first on
    ``PYTHONPATH`` so the node's process imports the same ``vrt_ros``.
    """
    env = dict(os.environ if base is None else base)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_DOMAIN_ID"] = str(int(domain_id))
    env["PYTHONUNBUFFERED"] = "1"
    repo = str(Path(__file__).resolve().parents[3])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([repo] + [p for p in paths if p != repo])
    return env


def node_command(model: Path, backend: str, st: Settings, labels: Path | None = None,
                 extra: tuple[str, ...] = (), namespace: str = NAMESPACE, threads: int | None = None,
                 compressed: bool = False) -> list[str]:
    """The detector node's command line (``python -m vrt_ros.ros.main [--threads N] --ros-args ...``), or for
    backend ``floor`` the zero-work relay's (``python -m vrt_ros.bench.transport.relay``, :data:`FLOOR`)."""
    if backend in FLOORS:  # the relay subscribes as the node would: input.qos / input.depth of --param apply
        qos, depth = _param(list(extra), "input.qos", "reliable"), _param(list(extra), "input.depth", "1")
        return [sys.executable, "-m", "vrt_ros.bench.transport.relay", "--dds-profile", st.dds_profile, "--namespace", namespace,
                "--qos", qos, "--depth", depth] + (["--compressed"] if compressed else []) + FLOORS[backend]
    cmd = [sys.executable, "-m", "vrt_ros.ros.main"] + (["--threads", str(threads)] if threads else []) + [
           "--dds-profile", st.dds_profile, "--ros-args", "-r", f"__ns:={namespace}",
           "-p", f"backend:={backend}", "-p", f"model.path:={model}", "-p", "input.qos:=reliable",
           "-p", "input.depth:=1", "-p", f"diagnostics_period_s:={st.diagnostics_period_s}"]
    if labels is not None:
        cmd += ["-p", f"model.labels:={labels}"]
    if compressed:
        cmd += ["-p", "input.compressed:=true"]
    for item in extra:
        cmd += ["-p", item]
    return cmd


def _stop(proc: subprocess.Popen) -> int | None:
    """SIGINT the node process (its normal shutdown), then kill it if it does not end."""
    import signal

    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    return proc.returncode


def run_one(bench: BenchNode, backend: str, width: int, height: int, payloads: list[bytes], model: Path,
            labels: Path | None, st: Settings, env: dict[str, str], log, say, extra: tuple[str, ...] = (),
            compressed: bool = False) -> dict:
    """One node process (or the relay, backend ``floor``), one backend, size and input kind (raw bgr8, or
    ``compressed``: the payloads are JPEGs): warm-up, measured frames, the node's final diagnostics."""
    row: dict[str, Any] = {"backend": backend, "size": f"{width}x{height}", "input": "jpeg" if compressed else "raw",
                           "frame_bytes": int(np.mean([len(p) for p in payloads])) if compressed else width * height * 3,
                           "sent": 0, "received": 0}
    bench.reset()
    msgs = bench.make_messages(payloads, width, height, compressed)
    cmd = node_command(model, backend, st, labels, extra, bench.namespace, st.node_threads, compressed)
    log.write(f"\n===== {backend} {row['input']} {width}x{height}: {shlex.join(cmd)}\n")
    log.flush()
    t_start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        why = bench.wait_for_node(proc, st.start_timeout_s)
        row["node_start_s"] = round(time.perf_counter() - t_start, 2)
        if why:
            row["error"] = why
            return row
        # warm-up (negative indices): paced frames until the node answered `warmup` of them. The first frames can
        # be lost while discovery completes on both sides, and the node's first frames build kernels / graphs.
        t_wait = time.perf_counter()
        limit = max(1, int(st.rate_hz * st.start_timeout_s))
        row["warmup_sent"], _ = bench.send(msgs, -1, limit, st.rate_hz, until=lambda: bench.answered >= max(1, st.warmup))
        row["warmup_s"] = round(time.perf_counter() - t_wait, 2)
        with bench.lock:
            row["warmup_received"] = bench.answered
        if row["warmup_received"] < max(1, st.warmup):
            row["error"] = f"node answered {row['warmup_received']} of {row['warmup_sent']} warm-up frames"
            return row
        time.sleep(0.2)  # late warm-up answers
        with bench.lock:
            bench.received.clear()
        sent, send_s = bench.send(msgs, 0, st.frames, st.rate_hz)
        row["sent"] = sent
        row["send_rate_hz"] = round(sent / send_s, 2) if send_s > 0 else None
        # until every frame is answered, or none was answered for a second (the rest are lost), at most drain_s
        end_send = time.monotonic()
        bench.wait_received(lambda: sum(r[0] >= 0 for r in bench.received) >= sent or (
            time.monotonic() - max(bench.last_answer, end_send) > 1.0), st.drain_s)
        with bench.lock:
            got = [r for r in bench.received if r[0] >= 0]
        row["received"] = len({r[0] for r in got})
        row["latency_ms"] = latency_summary([(now - stamp) / 1e6 for _, stamp, now, _ in got])
        row["detections_per_frame"] = round(float(np.mean([r[3] for r in got])), 3) if got else None
        runs = loss_runs({r[0] for r in got}, sent)
        row["longest_loss_run"] = max((n for _, n in runs), default=0)
        row["loss_runs"] = runs  # where the lost frames were: a few long bursts (stalls) or scattered
        row["publish_ms"] = latency_summary(bench.publish_ms)
        # the node's own figures once it processed every frame whose detections came back and accounted for every
        # frame it received (processed or dropped)

        def settled() -> bool:
            s = bench.status
            if s is None:
                return False
            processed, received = int(s.get("processed", 0)), int(s.get("received", 0))
            return processed >= bench.answered and processed + int(s.get("dropped", 0)) >= received

        if backend in FLOORS:  # the relay publishes no diagnostics
            status = None
        else:
            bench.wait_received(settled, max(3 * st.diagnostics_period_s, st.drain_s))
            with bench.lock:
                status = dict(bench.status) if bench.status is not None else None
        if backend in FLOORS:
            row["node"] = None
        elif status is None:
            row["node"] = None
            row["error"] = "no /diagnostics from the node"
        else:
            node = parse_node_status(status)
            node["window_frames"] = min(node.get("processed", 0), diagnostics_window())
            row["node"] = node
        if not got:
            row["error"] = row.get("error") or "no detections received"
    finally:
        t_stop = time.perf_counter()
        row["node_exit"] = _stop(proc)
        row["node_stop_s"] = round(time.perf_counter() - t_stop, 2)
    lat = row.get("latency_ms") or {}
    cb = (row.get("node") or {}).get("callback_ms") or {}
    say(f"{backend:>5} {row['input']:>4} {width}x{height}: {row['received']}/{row['sent']} received, stamp->receipt p50 "
        f"{lat.get('p50', float('nan')):.2f} p99 {lat.get('p99', float('nan')):.2f} ms; node callback->publish p50 "
        f"{cb.get('p50', float('nan')):.2f} p99 {cb.get('p99', float('nan')):.2f} ms")
    return row


def _env_domain() -> int:
    """``$ROS_DOMAIN_ID`` when it is set to an integer, else :data:`DEFAULT_DOMAIN_ID`."""
    try:
        return int(os.environ["ROS_DOMAIN_ID"])
    except (KeyError, ValueError):
        return DEFAULT_DOMAIN_ID


def _param(items: list[str], name: str, default: str) -> str:
    """The value of node parameter ``name`` in ``--param NAME:=VALUE`` items (the last wins), else ``default``."""
    value = default
    for item in items:
        key, sep, val = item.partition(":=")
        if sep and key == name:
            value = val
    return value


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; see the module docstring. Returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.transport.ros_e2e", description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="ONNX model (default <shared>/models/yolox_nano.onnx)")
    ap.add_argument("--labels", type=Path, default=None, help="labels file for the node (default: none, class ids)")
    ap.add_argument("--backend", default=None, help="comma-separated node backends, e.g. cuda,cpu (default cuda,cpu)")
    ap.add_argument("--sizes", default=None, help=f"comma-separated WIDTHxHEIGHT (default {DEFAULT_SIZES})")
    ap.add_argument("--rate", type=float, default=30.0, help="publishing rate, Hz (default 30)")
    ap.add_argument("--frames", type=int, default=None, help="measured frames per row (default 300)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up frames per row (default 30)")
    ap.add_argument("--shared", type=Path, default=None, help="folder laid out as ../shared (default $VRT_SHARED_DIR or ../shared)")
    ap.add_argument("--images", action="append", default=[], type=Path, help="extra photo folder (repeatable)")
    ap.add_argument("--domain-id", type=int, default=_env_domain(),
                    help=f"ROS_DOMAIN_ID of both processes (default: $ROS_DOMAIN_ID when set, else {DEFAULT_DOMAIN_ID})")
    ap.add_argument("--namespace", default=NAMESPACE, help=f"ROS namespace of the node and the bench (default {NAMESPACE})")
    ap.add_argument("--publisher-depth", type=int, default=10,
                    help="history depth of the bench's reliable image publisher (default 10; the node's input depth is 1)")
    ap.add_argument("--node-threads", type=int, default=None,
                    help="executor threads of the node process (its --threads; default the node's, 1: single-threaded)")
    ap.add_argument("--param", action="append", default=[], help="extra node parameter NAME:=VALUE (repeatable)")
    ap.add_argument("--start-timeout", type=float, default=120.0, help="seconds to wait for each node to subscribe")
    ap.add_argument("--compressed", action="store_true",
                    help=f"also a row per backend and size with the same frames as JPEG (quality {JPEG_QUALITY}), "
                         "published as sensor_msgs/CompressedImage (the node with input.compressed:=true)")
    ap.add_argument("--quick", action="store_true", help="CPU path, 640x480, 50 frames (a check that the command runs)")
    ap.add_argument("--out", type=Path, default=Path("results/bench"), help="folder for ros_e2e.json / ros_e2e.md")
    ap.add_argument("--name", default=None, help="stem of the output files (default ros_e2e, ros_e2e_quick with --quick)")
    dds.add_argument(ap)
    args = ap.parse_args(argv)

    pick = picker(args, QUICK)
    # DDS stays on this machine: set before rclpy is imported (below) and passed to the node's process. The node's
    # process gets the same --dds-profile; the environment it inherits is the one from before this process applied it.
    env = ros_environment(args.domain_id)
    try:
        dds_choice = dds.apply(args.dds_profile)
    except ConfigError as exc:
        ap.error(str(exc))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = env["ROS_AUTOMATIC_DISCOVERY_RANGE"]
    os.environ["ROS_DOMAIN_ID"] = env["ROS_DOMAIN_ID"]

    sizes = [parse_size(s) for s in pick("sizes", DEFAULT_SIZES).split(",") if s]
    backends = [b for b in pick("backend", "cuda,cpu").split(",") if b]
    st = Settings(rate_hz=args.rate, frames=pick("frames", 300), warmup=pick("warmup", 30),
                  start_timeout_s=args.start_timeout, node_threads=args.node_threads, dds_profile=args.dds_profile)
    if st.frames < 1 or st.warmup < 0 or st.rate_hz <= 0:
        ap.error("--frames must be >= 1, --warmup >= 0, --rate > 0")
    from vrt_ros.bench.cli import _default_shared
    from vrt_ros.bench.frames import load_sources

    shared = args.shared if args.shared is not None else _default_shared()
    model = args.model
    if model is None:
        if shared is None or not (shared / "models" / "yolox_nano.onnx").is_file():
            say(f"no --model and no shared folder with models/yolox_nano.onnx (looked at {shared})")
            return 2
        model = shared / "models" / "yolox_nano.onnx"
    labels = args.labels
    if labels is None and args.model is None and shared is not None and (shared / "models" / "coco80.names").is_file():
        labels = shared / "models" / "coco80.names"
    try:
        sources, source_notes = load_sources(shared if shared is not None and shared.is_dir() else None, args.images)
    except ValueError as exc:
        say(str(exc))
        return 2

    try:
        input_depth = int(_param(args.param, "input.depth", "5"))
    except ValueError:
        ap.error(f"--param input.depth:={_param(args.param, 'input.depth', '')} is not an integer")
    import cv2
    import rclpy

    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.name or ("ros_e2e_quick" if args.quick else "ros_e2e")
    doc: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m vrt_ros.bench.transport.ros_e2e " + shlex.join(sys.argv[1:] if argv is None else argv),
        "host": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "gpu": gpu_name() if any(b != "cpu" for b in backends) else None,
        "versions": versions(),
        "model": str(model),
        "settings": {**st.__dict__, "sizes": [f"{w}x{h}" for w, h in sizes], "backends": backends,
                     "domain_id": args.domain_id, "node_params": list(args.param),
                     "input_qos": _param(args.param, "input.qos", "reliable"),
                     "input_depth": input_depth,
                     "publisher_depth": args.publisher_depth, "encoding": "bgr8",
                     "compressed": bool(args.compressed), "jpeg_quality": JPEG_QUALITY,
                     "node_window": diagnostics_window(), "dds": dds_choice.reason},
        "sources": source_notes,
        "distinct_frames": len(sources),
        "runs": [],
        "notes": [
            "stamp→receipt: header stamp (wall clock just before publish, so the publisher's serialisation is "
            "included) to the bench's subscriber callback, in another process than the node; frames matched by stamp.",
            "node callback→publish and stamp→publish: the node's own /diagnostics percentiles (callback_ms, age_ms) "
            f"over its last {diagnostics_window()} processed frames, warm-up frames included when warm-up + measured ≤ that.",
            "One fresh node process per backend and size; frames lost = sent − received. Node drops are the node's "
            "own (superseded = a newer frame arrived while one waited); frames that never reached the node's "
            "callback (node callbacks < frames sent) were lost before it, in its DDS reader (input depth 1).",
            "backend floor: the zero-work relay (python -m vrt_ros.bench.transport.relay), subscribed as the node is (same QoS, "
            "executor, DDS profile), answering each frame from its callback with an empty Detection2DArray: the "
            "transport's own cost. input jpeg: the same frames as JPEG (quality "
            f"{JPEG_QUALITY}), published as CompressedImage; frame MB is then the mean JPEG size.",
            "frames sent (warm-up incl.) = warm-up frames sent until the node had answered --warmup of them (the "
            "first ones can be lost while discovery completes) + the measured frames.",
        ],
    }
    json_path, md_path = args.out / f"{stem}.json", args.out / f"{stem}.md"
    t0 = time.perf_counter()
    status = 0
    context = rclpy.Context()
    rclpy.init(context=context)
    bench = BenchNode(context, args.namespace, args.publisher_depth)
    try:
        with open(args.out / f"{stem}_node.log", "w") as log:
            for w, h in sizes:
                frames = [cv2.resize(s, (w, h), interpolation=cv2.INTER_LINEAR) for s in sources]
                inputs = [(False, [f.tobytes() for f in frames])]
                if args.compressed:
                    inputs.append((True, [cv2.imencode(".jpg", f, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])[1].tobytes()
                                          for f in frames]))
                for backend in backends:
                    for compressed, payloads in inputs:
                        row = run_one(bench, backend, w, h, payloads, model, labels, st, env, log, say,
                                      tuple(args.param), compressed)
                        doc["runs"].append(row)
                        if row.get("error"):
                            status = 1
                        doc["elapsed_s"] = round(time.perf_counter() - t0, 1)
                        json_path.write_text(json.dumps(doc, indent=1) + "\n")
                        md_path.write_text(markdown(doc))
    finally:
        bench.close()
        rclpy.try_shutdown(context=context)
    text = markdown(doc)
    md_path.write_text(text)
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    print(text)
    say(f"wrote {json_path} and {md_path} in {doc['elapsed_s']} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
