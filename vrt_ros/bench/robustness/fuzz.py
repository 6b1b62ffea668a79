"""A fuzz campaign against the running node (issue 33): no message a publisher sends may end it or go uncounted.

``python -m vrt_ros.bench.robustness.fuzz --model M.onnx [--messages 20000] [--kinds raw,raw_bytes,compressed,depth,batch]
[--backend cpu] [--out results/fuzz]``

Per input kind, a ``detector_node`` runs in its own process (``python -m vrt_ros.ros.main``, so a crash is seen) and
this process publishes hypothesis-generated messages (:mod:`vrt_ros.bench.robustness.fuzz_msgs`) at it, a good frame after
every ``--good-every`` of them, waiting for each good frame's detections (lock-step):

- ``raw``: fuzzed ``sensor_msgs/Image``s;
- ``raw_bytes``: ``input.raw_subscription`` on, fuzzed Images and byte-level mutations of a real serialized frame,
  published as serialized bytes;
- ``compressed``: fuzzed ``CompressedImage``s (real JPEG/PNG mutated or cut, random bytes, odd formats);
- ``depth``: ``depth.enabled``, fuzzed depth Images and ``CameraInfo``s (each paired by stamp with a good colour
  frame), and fuzzed colour Images;
- ``batch``: two cameras, ``engine.max_batch`` 2, ``input.batch_wait_ms`` 20: fuzzed Images on both.

Every message carries its id as its header stamp (seconds), so an answer names the frame it answers. At the end
(from the node's ``/diagnostics``, per camera): the node is alive, every good frame answered, ``received`` equals
the messages sent, ``processed`` equals the answers seen, each dropped frame counted under a reason (``processed +
dropped == received``), ``engine_error`` 0; with depth, every processed frame's 3D output published or refused
under a depth reason, ``depth_internal_error`` 0. Resident memory of the node process (``/proc/<pid>/statm``) is
sampled at each good frame: the largest sample of the last quarter may exceed the largest of the first quarter
(after the first good frame) by at most ``--rss-bound-mib`` (default 32 MiB). Then SIGINT: exit status 0.
Prints the figures and writes ``fuzz_<backend>_<kinds or all>.json`` / ``.md`` into ``--out``. Exit status 0 when
every check holds, 1 otherwise. Superseded frames (a newer one arrived before the worker took it, the node's
newest-frame policy) are counted under ``superseded``; ``--gap-ms`` keeps them few.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from vrt_ros.bench.transport.ros_e2e import _stop

KINDS = ("raw", "raw_bytes", "compressed", "depth", "batch")
REPO = Path(__file__).resolve().parents[3]


def _params(folder: Path, kind: str, model: Path, backend: str) -> Path:
    cams = "[a, b]" if kind == "batch" else "[camera]"
    extra = {"raw_bytes": "      raw_subscription: true\n", "compressed": "      compressed: true\n",
             "batch": "      batch_wait_ms: 20.0\n"}.get(kind, "")
    text = (f"/**:\n  ros__parameters:\n    backend: {backend}\n    model:\n      path: {model}\n"
            f"    cameras: {cams}\n    diagnostics_period_s: 0.5\n    engine:\n      max_consecutive_failures: 3\n"
            + ("      max_batch: 2\n" if kind == "batch" else "")
            + f"    input:\n      qos: reliable\n      depth: 100\n{extra}"
            + ("    depth:\n      enabled: true\n      max_skew_ms: 0.0\n" if kind == "depth" else ""))
    path = folder / f"fuzz_{kind}.yaml"
    path.write_text(text)
    return path


class Driver:
    """The campaign's side of DDS: publishers, the answers (detections per camera, by stamp) and /diagnostics."""

    def __init__(self, ctx: Any, ns: str, kind: str) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from sensor_msgs.msg import CameraInfo, CompressedImage, Image
        from vision_msgs.msg import Detection2DArray

        from vrt_ros.ros.qos import make_qos

        qos = make_qos("reliable", 100)
        self.node = Node("fuzz_driver", context=ctx, namespace=ns)
        self.ns = ns
        self.cams = ["a", "b"] if kind == "batch" else ["camera"]
        self.lock = threading.Lock()
        self.answers: dict[str, list[int]] = {c: [] for c in self.cams}
        self.diag: dict[str, dict[str, str]] = {}
        self.pubs = {}
        for cam in self.cams:
            if kind == "compressed":
                self.pubs[cam] = self.node.create_publisher(CompressedImage, f"{cam}/image_raw/compressed", qos)
            else:
                self.pubs[cam] = self.node.create_publisher(Image, f"{cam}/image_raw", qos)
            self.node.create_subscription(Detection2DArray, f"{cam}/detections",
                                          lambda m, c=cam: self._answer(c, m), qos)
        if kind == "depth":
            self.depth_pub = self.node.create_publisher(Image, "camera/depth/image_raw", qos)
            self.info_pub = self.node.create_publisher(CameraInfo, "camera/camera_info", qos)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diagnostics, 10)
        self.executor = SingleThreadedExecutor(context=ctx)
        self.executor.add_node(self.node)
        self._spin = threading.Thread(target=self.executor.spin, daemon=True)
        self._spin.start()

    def _answer(self, cam: str, msg: Any) -> None:
        with self.lock:
            self.answers[cam].append(int(msg.header.stamp.sec))

    def _diagnostics(self, msg: Any) -> None:
        for status in msg.status:  # /diagnostics is global: only this campaign's node (<ns>/<node>: <camera>)
            node, _, cam = status.name.rpartition(": ")
            if node.startswith(self.ns + "/") and cam in self.cams:
                with self.lock:
                    self.diag[cam] = {kv.key: kv.value for kv in status.values}

    def answered(self, cam: str, seq: int) -> bool:
        with self.lock:
            return seq in self.answers[cam][-64:] or seq in self.answers[cam]

    def wait(self, cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.002)
        return cond()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()


def run_kind(kind: str, n: int, args: argparse.Namespace, folder: Path) -> dict:
    """One node process of ``kind``, ``n`` fuzzed messages (plus the good frames); the figures and checks."""
    import rclpy
    from rclpy.context import Context

    from vrt_ros.bench.robustness.fuzz_campaign import Campaign

    ns = f"/fuzz{os.getpid()}_{kind}"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "vrt_ros.ros.main", "--executor", args.executor, "--ros-args", "-r", f"__ns:={ns}",
           "--params-file", str(_params(folder, kind, args.model, args.backend))]
    log_path = Path(args.logs or folder) / f"node_{args.backend}_{kind}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    ctx = Context()
    rclpy.init(context=ctx)
    driver = Driver(ctx, ns, kind)
    started = time.monotonic()
    try:
        campaign = Campaign(driver, kind, proc, args)
        campaign.run(n)
        result = campaign.finish()
    finally:
        driver.close()
        ctx.try_shutdown()
        _stop(proc)  # SIGINT, as Ctrl-C: the node's normal shutdown (status 0), killed if it hangs
        log.close()
    result["exit_status"] = proc.returncode
    result["seconds"] = round(time.monotonic() - started, 1)
    tail = log_path.read_text(errors="replace").splitlines()
    result["summary_lines"] = [ln for ln in tail if "summary:" in ln][-4:]
    result["checks"]["clean_exit_after_sigint"] = proc.returncode == 0
    result["ok"] = all(result["checks"].values())
    result["log_tail"] = [] if result["ok"] else tail[-30:]
    return result


def main(argv: list[str] | None = None) -> int:
    from vrt_ros.bench.common import say, write_result
    from vrt_ros.bench.robustness.fuzz_report import markdown

    p = argparse.ArgumentParser(prog="python -m vrt_ros.bench.robustness.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, required=True, help="ONNX model the node runs")
    p.add_argument("--backend", default="cpu", choices=["cpu", "cuda", "auto"])
    p.add_argument("--messages", type=int, default=20000, help="fuzzed messages in all, split over the kinds")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    p.add_argument("--good-every", type=int, default=3, help="a good frame after every N fuzzed messages")
    p.add_argument("--gap-ms", type=float, default=4.0, help="pause after each fuzzed message, ms (lets the node take "
                   "it before the next one supersedes it)")
    p.add_argument("--answer-timeout", type=float, default=20.0, help="longest wait for a good frame's answer, s")
    p.add_argument("--executor", default="events", choices=["events", "single", "multi"], help="the node's executor")
    p.add_argument("--rss-bound-mib", type=float, default=32.0)
    p.add_argument("--seed", type=int, default=33)
    p.add_argument("--domain-id", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "71")))
    p.add_argument("--out", default="results/fuzz")
    p.add_argument("--logs", default=None, help="folder for the node processes' logs (default: a temporary one; the "
                   "JSON keeps the last 30 lines of a node whose checks failed)")
    args = p.parse_args(argv)
    try:
        import hypothesis  # noqa: F401 - the generator; a test extra, not a runtime requirement
    except ImportError:
        p.error("needs hypothesis: pip install 'hypothesis>=6.100,<7' (requirements/test.txt, or the bench-fuzz extra)")
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"  # before rclpy starts, here and in the node
    os.environ["ROS_DOMAIN_ID"] = str(args.domain_id)
    args.model = args.model.resolve()
    kinds = [k for k in args.kinds.split(",") if k]
    if not kinds or any(k not in KINDS for k in kinds):
        p.error(f"--kinds: each of {KINDS}")
    per = [args.messages // len(kinds) + (i < args.messages % len(kinds)) for i in range(len(kinds))]
    started = time.time()
    results = {}
    with tempfile.TemporaryDirectory(prefix="vrt_fuzz_") as tmp:
        for kind, n in zip(kinds, per):
            say(f"fuzz: {kind}: {n} fuzzed messages")
            results[kind] = run_kind(kind, n, args, Path(tmp))
            say(f"fuzz: {kind}: {'ok' if results[kind]['ok'] else 'FAILED'} in {results[kind]['seconds']} s")
    out = {"command": " ".join(["python -m vrt_ros.bench.robustness.fuzz", *(argv if argv is not None else sys.argv[1:])]),
           "backend": args.backend, "model": args.model.name, "seed": args.seed, "good_every": args.good_every,
           "gap_ms": args.gap_ms, "rss_bound_mib": args.rss_bound_mib, "wall_s": round(time.time() - started, 1),
           "messages_fuzzed": sum(r["fuzzed"] for r in results.values()),
           "messages_sent": sum(r["sent"] for r in results.values()),
           "ok": all(r["ok"] for r in results.values()), "kinds": results}
    write_result(args.out, f"fuzz_{args.backend}_{'_'.join(kinds) if len(kinds) < len(KINDS) else 'all'}", out,
                 markdown(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
