"""The recovery bench's helpers (:mod:`vrt_ros.bench.restart.recovery`): the camera and listener in the bench's process, the
node process's output read as time marks, the temporary colcon workspace with the probe as ``detector_node``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from vrt_ros.bench.restart.recovery_probe import WRAPPER

REPO = Path(__file__).resolve().parents[3]
#: A probe time mark line: ``RECOVERY <name> <wall time, s>``.
MARK = re.compile(r"RECOVERY (\w+) (\d+\.\d+)")
_DIED = re.compile(r"process has died \[pid \d+, exit code (-?\d+)")
#: The --warm-standby supervisor's lines (vrt_ros.ros.standby): a child's end, the next one's start.
_STANDBY_ENDED = re.compile(r"standby: node process \d+ ended with status (\d+); restart \d+ in ([\d.]+) s")
_STANDBY_NEXT = re.compile(r"standby: (standby process \d+ takes over|no standby ready)")
#: The supervisor's line after a take-over line when ``go`` failed or went unanswered: a cold start follows.
_STANDBY_FAILED = re.compile(r"standby: standby process \d+ did not take over")
#: Shared photos tried for the camera's frame, in order (VRT_SHARED_DIR or ../shared).
PHOTOS = ("data/images/darknet_horses.jpg", "data/images/astronaut.png")


def parts(marks: dict[str, float], spec) -> dict[str, float | None]:
    """Each component's seconds (``spec``: (key, from mark, to mark), None where a mark is missing), and ``total``
    (the first component's first mark to the last one's last mark, s)."""
    out = {key: (marks[b] - marks[a]) if a in marks and b in marks else None for key, a, b in spec}
    first, last = spec[0][1], spec[-1][2]
    out["total"] = marks[last] - marks[first] if first in marks and last in marks else None
    return out


def params_file(folder: Path, model: Path, backend: str) -> Path:
    """The node's parameter file: ``backend``, ``model``, one camera ``camera``, reliable input of depth 1."""
    path = folder / "recovery.yaml"
    path.write_text(f"/**:\n  ros__parameters:\n    backend: {backend}\n    model:\n      path: {model}\n"
                    "    cameras: [camera]\n    input:\n      qos: reliable\n      depth: 1\n")
    return path


def _frame(image: str | None) -> np.ndarray:
    """The camera's 640x480 BGR frame: ``image``, else a shared photo, else a test pattern."""
    import cv2

    shared = Path(os.environ.get("VRT_SHARED_DIR", REPO.parent / "shared"))
    for path in ([Path(image)] if image else [shared / p for p in PHOTOS]):
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if bgr is not None:
            return cv2.resize(bgr, (640, 480))
    if image:
        raise FileNotFoundError(f"--image {image}: not readable")
    y, x = np.mgrid[0:480, 0:640]
    return np.dstack([(x * 255 // 639), (y * 255 // 479), np.full_like(x, 128)]).astype(np.uint8)


class Camera:
    """A camera publishing one frame at ``rate`` Hz on ``<ns>/camera/image_raw`` and a listener recording when each
    ``<ns>/camera/detections`` message and each fatal ERROR of ``/diagnostics`` arrive and when the camera's
    publisher matched a subscription (``time.time()``), in its own rclpy context; a context manager."""

    def __init__(self, image: str | None, rate: float) -> None:
        self.namespace = f"/recovery_{os.getpid()}"
        self._bgr, self._period = _frame(image), 1.0 / rate
        self._lock = threading.Lock()
        self._detections: list[float] = []
        self._errors: list[float] = []
        self._matched: list[float] = []
        self._stop = threading.Event()

    def __enter__(self) -> "Camera":
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.event_handler import PublisherEventCallbacks
        from rclpy.node import Node
        from sensor_msgs.msg import Image
        from vision_msgs.msg import Detection2DArray

        from vrt_ros.ros import dds
        from vrt_ros.ros.qos import make_qos

        dds.apply("auto")  # 640x480 frames need the large shared-memory segment
        self._error_level = DiagnosticStatus.ERROR  # a bytes value in rclpy
        self._ctx = Context()
        rclpy.init(context=self._ctx)
        self._node = Node("recovery_camera", namespace=self.namespace, context=self._ctx)
        self._pub = self._node.create_publisher(Image, "camera/image_raw", make_qos("reliable", 1),
                                                event_callbacks=PublisherEventCallbacks(matched=self._on_matched))
        self._node.create_subscription(Detection2DArray, "camera/detections", self._on_detections,
                                       make_qos("reliable", 10))
        self._node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, make_qos("reliable", 50))
        msg = Image()
        msg.header.frame_id = "camera"
        msg.height, msg.width = self._bgr.shape[:2]
        msg.encoding, msg.step, msg.data = "bgr8", self._bgr.shape[1] * 3, self._bgr.tobytes()
        self._msg = msg
        self._executor = SingleThreadedExecutor(context=self._ctx)
        self._executor.add_node(self._node)
        self._threads = [threading.Thread(target=self._spin, daemon=True), threading.Thread(target=self._publish, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5.0)
        self._executor.shutdown()
        self._node.destroy_node()
        self._ctx.try_shutdown()

    def _spin(self) -> None:
        while not self._stop.is_set() and self._ctx.ok():
            self._executor.spin_once(timeout_sec=0.05)

    def _publish(self) -> None:
        while not self._stop.wait(self._period):
            self._msg.header.stamp = self._node.get_clock().now().to_msg()
            self._pub.publish(self._msg)

    def _on_detections(self, msg) -> None:
        with self._lock:
            self._detections.append(time.time())

    def _on_matched(self, info) -> None:
        if info.current_count_change > 0:
            with self._lock:
                self._matched.append(time.time())

    def _on_diagnostics(self, msg) -> None:
        now = time.time()
        if any(s.level == self._error_level and s.name.startswith(self.namespace) and "fatal" in s.message
               for s in msg.status):
            with self._lock:
                self._errors.append(now)

    def reset(self) -> None:
        with self._lock:
            self._detections.clear()
            self._errors.clear()
            self._matched.clear()

    def _first_after(self, series: list[float], t: float, timeout_s: float) -> float | None:
        end = time.time() + timeout_s
        while True:
            with self._lock:
                later = [x for x in series if x > t]
            if later or time.time() >= end:
                return later[0] if later else None
            time.sleep(0.02)

    def first_detection_after(self, t: float, timeout_s: float) -> float | None:
        """When the first detections message after ``t`` arrived (waiting up to ``timeout_s``); None if none."""
        return self._first_after(self._detections, t, timeout_s)

    def first_match_after(self, t: float) -> float | None:
        """When the camera's publisher first matched a subscription after ``t``; None if it did not."""
        return self._first_after(self._matched, t, 0.0)

    def first_error_after(self, t: float) -> float | None:
        """When the first fatal ERROR on /diagnostics after ``t`` arrived; None if none."""
        return self._first_after(self._errors, t, 0.0)


class Output:
    """A process's merged output read by a thread, each line with the time it was read."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc) -> None:
        for line in proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def join(self) -> None:
        self._thread.join(10.0)

    def text(self) -> str:
        return "\n".join(line for _, line in list(self.lines))

    def instances(self) -> list[dict[str, float]]:
        """Per process start (launch's ``process started`` line or the ``--warm-standby`` supervisor's take-over
        line, or the first mark without either): its marks, ``started_seen``, and ``exit_seen`` / ``exit_code`` from
        launch's ``process has died`` line or the supervisor's ``ended with status`` line (with the restart delay
        it says, ``restart_delay_s``). A take-over line followed by the supervisor's ``did not take over`` line
        (``go`` failed or went unanswered) starts no instance: the cold start's line that follows does."""
        out: list[dict[str, float]] = []
        for t, line in list(self.lines):
            if "process started with pid" in line or _STANDBY_NEXT.search(line):
                out.append({"started_seen": t})
            elif _STANDBY_FAILED.search(line) and out and "exit_seen" not in out[-1]:
                out.pop()  # that take-over did not happen: the cold start's line follows
            elif (e := _STANDBY_ENDED.search(line)) is not None and out:
                out[-1].update(exit_seen=t, exit_code=int(e.group(1)), restart_delay_s=float(e.group(2)))
            elif (m := MARK.search(line)) is not None:
                if not out:
                    out.append({})
                out[-1][m.group(1)] = float(m.group(2))
            elif (d := _DIED.search(line)) is not None and out:
                out[-1].update(exit_seen=t, exit_code=int(d.group(1)))
        return out


def interrupt(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Ctrl-C to the process group (as a terminal does), SIGKILL after ``timeout_s``."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def build_workspace(folder: Path, env: dict[str, str], fault_after: int) -> dict[str, str]:
    """``colcon build`` of this checkout into ``folder`` (as test/test_launch_real.py does), the installed
    ``detector_node`` replaced by the probe with ``--fault-after fault_after``; the environment that sources it.

    Raises:
        FileNotFoundError: colcon or ros2 missing from the venv (``make test`` installs the launch stack).
        RuntimeError: the build failed (its output).
    """
    bin_dir = Path(sys.executable).parent
    for tool in ("colcon", "ros2"):
        if not (bin_dir / tool).exists():
            raise FileNotFoundError(f"{bin_dir / tool} missing: the launch stack is installed by `make test`")
    (folder / "src").mkdir()
    (folder / "src" / "vrt_ros").symlink_to(REPO)
    env = dict(env, PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    build = subprocess.run([str(bin_dir / "colcon"), "build", "--base-paths", "src", "--event-handlers",
                            "console_direct-", "console_cohesion-"], cwd=folder, env=env, capture_output=True,
                           text=True, timeout=600)
    if build.returncode != 0:
        raise RuntimeError(f"colcon build failed:\n{build.stdout[-2000:]}{build.stderr[-2000:]}")
    prefix = folder / "install" / "vrt_ros"
    site = next(prefix.glob("lib/python3*/site-packages"))
    node = prefix / "lib" / "vrt_ros" / "detector_node"
    node.write_text(WRAPPER.format(python=sys.executable, fault_after=fault_after))
    node.chmod(0o755)
    env.update(AMENT_PREFIX_PATH=f"{prefix}{os.pathsep}{sys.prefix}",
               PYTHONPATH=f"{site}{os.pathsep}{env.get('PYTHONPATH', '')}")
    return env
