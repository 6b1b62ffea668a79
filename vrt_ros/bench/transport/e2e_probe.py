"""Measurement side of the end-to-end bench (:mod:`vrt_ros.bench.transport.ros_e2e`): the bench's own rclpy node (paced
publisher, detections and ``/diagnostics`` subscribers) and the figures it derives (latency summary, loss runs, the
node's ``/diagnostics`` status as numbers).

ROS edge: rclpy and the message packages are imported inside the functions that use them only, so importing this
module never imports rclpy.
"""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

import numpy as np

NAMESPACE = "/vrt_e2e"
CAMERA = "camera"
NODE_NAME = "vrt_detector"


def latency_summary(ms: list[float]) -> dict[str, float] | None:
    """``{n, p50, p99, mean, min, max}`` of latencies in ms, or None when empty."""
    if not ms:
        return None
    a = np.asarray(ms, np.float64)
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "mean": float(a.mean()), "min": float(a.min()), "max": float(a.max())}


def loss_runs(answered: set[int], sent: int) -> list[tuple[int, int]]:
    """``(first index, length)`` of every run of consecutive frames (indices ``0 .. sent-1``) with no answer."""
    runs: list[tuple[int, int]] = []
    start = None
    for i in range(sent + 1):
        lost = i < sent and i not in answered
        if lost and start is None:
            start = i
        elif not lost and start is not None:
            runs.append((start, i - start))
            start = None
    return runs


def parse_node_status(values: dict[str, str]) -> dict[str, Any]:
    """The node's figures from one ``/diagnostics`` status (``KeyValue`` strings) as numbers.

    Returns:
        ``{"backend", "received", "processed", "dropped", "dropped_by_reason": {...}, "callback_ms": {p50, p99},
        "age_ms": {p50, p99}, "stages_ms": {stage: {p50, p99}}}``; series the node did not report are absent.
    """
    out: dict[str, Any] = {"backend": values.get("backend", "")}
    for key in ("received", "processed", "dropped"):
        if key in values:
            out[key] = int(values[key])
    out["dropped_by_reason"] = {k.split(".", 1)[1]: int(v) for k, v in values.items() if k.startswith("dropped.")}
    series: dict[str, dict[str, float]] = {}
    for k, v in values.items():
        for q in ("p50", "p99"):
            suffix = f"_ms_{q}"
            if k.endswith(suffix):
                series.setdefault(k[: -len(suffix)], {})[q] = float(v)
    for name in ("callback", "age"):
        if name in series:
            out[f"{name}_ms"] = series.pop(name)
    out["stages_ms"] = series
    return out


class BenchNode:
    """The bench's rclpy node: paced publisher, detections and diagnostics subscribers (ROS edge, rclpy inside)."""

    def __init__(self, context, namespace: str = NAMESPACE, publisher_depth: int = 10) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CompressedImage, Image
        from vision_msgs.msg import Detection2DArray

        self.namespace = namespace
        self.node = Node("vrt_e2e_bench", namespace=namespace, context=context)
        self.lock = threading.Lock()
        self.answered = 0  # detections matched to a frame sent, warm-up included
        self.last_answer = float("-inf")  # time.monotonic() of the last one
        self.sent: dict[int, int] = {}  # stamp ns -> frame index in the run (negative: warm-up)
        self.received: list[tuple[int, int, int, int]] = []  # (frame index, stamp ns, receipt ns, detections)
        self.publish_ms: list[float] = []  # how long each measured publish() call took (the publisher's own stalls)
        self.status: dict[str, str] | None = None  # latest /diagnostics values of the node's camera
        self.status_name = f"{namespace}/{NODE_NAME}: {CAMERA}"
        pub_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=publisher_depth, reliability=ReliabilityPolicy.RELIABLE)
        sub_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.image_cls, self.compressed_cls = Image, CompressedImage
        self.pub_raw = self.node.create_publisher(Image, f"{CAMERA}/image_raw", pub_qos)
        self.pub_compressed = self.node.create_publisher(CompressedImage, f"{CAMERA}/image_raw/compressed", pub_qos)
        self.pub = self.pub_raw  # the publisher of the current run
        self.node.create_subscription(Detection2DArray, f"{CAMERA}/detections", self._on_detections, sub_qos)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, sub_qos)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._spin, name="e2e_spin", daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        try:
            while not self.stopping.is_set():
                self.executor.spin_once(timeout_sec=0.05)
        except Exception:  # context shut down
            pass

    def _on_detections(self, msg) -> None:
        now = time.time_ns()
        stamp = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
        with self.lock:
            index = self.sent.get(stamp)
            if index is not None:
                self.answered += 1
                self.last_answer = time.monotonic()
                self.received.append((index, stamp, now, len(msg.detections)))

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            if status.name == self.status_name:
                with self.lock:
                    self.status = {kv.key: kv.value for kv in status.values}

    def reset(self) -> None:
        with self.lock:
            self.sent.clear()
            self.received.clear()
            self.publish_ms.clear()
            self.answered = 0
            self.status = None

    def make_messages(self, payloads: list[bytes], width: int, height: int, compressed: bool = False) -> list:
        """One ``sensor_msgs/Image`` (bgr8) per payload, or with ``compressed`` one ``sensor_msgs/CompressedImage``
        (format ``jpeg``, the payloads being JPEG files), built once (only the stamp changes per send); selects the
        matching publisher."""
        import array

        self.pub = self.pub_compressed if compressed else self.pub_raw
        msgs = []
        for data in payloads:
            if compressed:
                m = self.compressed_cls()
                m.header.frame_id = CAMERA
                m.format = "jpeg"
                m.data = array.array("B", data)
                msgs.append(m)
                continue
            m = self.image_cls()
            m.header.frame_id = CAMERA
            m.height, m.width, m.encoding, m.is_bigendian, m.step = height, width, "bgr8", 0, width * 3
            m.data = array.array("B", data)
            msgs.append(m)
        return msgs

    def wait_for_node(self, proc: subprocess.Popen, timeout_s: float) -> str:
        """Wait until the node subscribes to the frames and publishes detections; "" or why not."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return f"node exited with status {proc.returncode} before subscribing"
            if self.pub.get_subscription_count() >= 1 and self.node.count_publishers(
                    f"{self.namespace}/{CAMERA}/detections") >= 1:
                return ""
            time.sleep(0.05)
        return f"node did not subscribe within {timeout_s:g} s"

    def send(self, msgs: list, first_index: int, count: int, rate_hz: float, until=None) -> tuple[int, float]:
        """Publish up to ``count`` frames (rotating over ``msgs``) paced at ``rate_hz``, indices ``first_index``
        onwards (negative ones count down: warm-up), stopping early once ``until()`` is true (checked under the lock
        before each frame). Returns (frames sent, seconds it took)."""
        period = 1.0 / rate_hz
        t0 = time.perf_counter()
        step = -1 if first_index < 0 else 1
        sent = 0
        for i in range(count):
            if until is not None:
                with self.lock:
                    if until():
                        break
            due = t0 + i * period
            while True:
                left = due - time.perf_counter()
                if left <= 0:
                    break
                time.sleep(min(left, 0.002) if left > 0.002 else 0)
            msg = msgs[i % len(msgs)]
            stamp = time.time_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
            with self.lock:
                self.sent[stamp] = first_index + step * i
            t_pub = time.perf_counter()
            self.pub.publish(msg)
            if first_index >= 0:
                self.publish_ms.append((time.perf_counter() - t_pub) * 1e3)
            sent += 1
        return sent, time.perf_counter() - t0

    def wait_received(self, predicate, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if predicate():
                    return True
            time.sleep(0.01)
        with self.lock:
            return predicate()

    def close(self) -> None:
        """Stop spinning (joins the spin thread, which must not outlive the interpreter) and destroy the node."""
        self.stopping.set()
        self.thread.join(timeout=5.0)
        self.executor.shutdown(timeout_sec=5.0)
        self.node.destroy_node()
