"""The many-camera bench's own side (:mod:`vrt_ros.bench.cameras.cameras_e2e`): its subscriber of every camera's
detections and of the node's ``/diagnostics`` (:class:`Listener`), and the node process's CPU time
(:func:`process_cpu_s`).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from vrt_ros.bench.transport.e2e_probe import NODE_NAME


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (``/proc/<pid>/stat`` fields 14, 15), None where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class Listener:
    """The bench's rclpy node: every camera's detections (stamp -> receipt ns) and the node's /diagnostics."""

    def __init__(self, context, namespace: str, cameras: list[str]) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from vision_msgs.msg import Detection2DArray

        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=200, reliability=ReliabilityPolicy.RELIABLE)
        self.node = Node(f"vrt_cameras_bench_{os.getpid()}", namespace=namespace, context=context)
        self.lock = threading.Lock()
        self.received: dict[str, dict[int, int]] = {c: {} for c in cameras}  # stamp -> middleware receipt, ns
        self.called: dict[str, dict[int, int]] = {c: {} for c in cameras}  # stamp -> this process's callback, ns
        self.status: dict[str, dict[str, str]] = {}
        self.names = {f"{namespace}/{NODE_NAME}: {c}": c for c in cameras}
        self.detections = [self.node.create_subscription(Detection2DArray, f"{c}/detections",
                                                         lambda m, info, c=c: self._on_detections(c, m, info), qos)
                           for c in cameras]
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, qos)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self.stopping.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def _on_detections(self, cam: str, msg, info) -> None:
        """Two receipt times per detections message: the middleware's (``received_timestamp`` of the message info:
        when this process's DDS reader got it, wall clock ns; the measure of the report) and this callback's (later
        by this Python executor's queue: eight cameras' messages are called one after another)."""
        now = time.time_ns()
        stamp = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
        got = int(info.get("received_timestamp") or 0)  # rclpy's message info: a dict; 0 where the rmw sets none
        with self.lock:
            self.received[cam][stamp] = got if 0 < got <= now else now  # no middleware time: the callback's
            self.called[cam][stamp] = now

    def _on_diagnostics(self, msg) -> None:
        with self.lock:
            for st in msg.status:
                cam = self.names.get(st.name)
                if cam is not None:
                    self.status[cam] = {kv.key: kv.value for kv in st.values}

    def subscribed(self, topics: list[str]) -> bool:
        """The node's subscriptions to ``topics`` are known here (the graph), and this process's subscription to
        every camera's detections has matched the node's publisher: until then the node's answers to the first
        frames could be published before this process takes them (discovery is not ordered between the two)."""
        return all(self.node.count_subscribers(t) >= 1 for t in topics) and \
            all(sub.get_publisher_count() >= 1 for sub in self.detections)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=2)
        self.executor.shutdown(timeout_sec=1)
        self.node.destroy_node()
