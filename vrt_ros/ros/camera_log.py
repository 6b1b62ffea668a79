"""What the detector node says in its own log about its cameras: drops, silence, and a summary at shutdown.

``/diagnostics`` carries the same counters, but a user starting ``detector_node`` reads its log first (and in the
venv there is no ``ros2 topic echo``). Once per :data:`CHECK_PERIOD_S`, from a timer, never per frame,
:meth:`CameraLog.tick` reads each camera's counters and logs:

- frames ``superseded`` since the last report (the callback counts them without logging; a newer frame replaced one
  that was still waiting): at the first check that sees one, then at most once per :data:`DROP_LOG_PERIOD_S` per
  camera, with the number of frames
  received meanwhile and what to change (:data:`DROP_HINTS`); the other reasons are logged where they happen (the
  worker's ``Worker.drop``, throttled per camera and reason) with the same hints (:func:`drop_hint`);
- a camera that has received nothing for :data:`SILENT_AFTER_S` seconds (since start, or since its last frame),
  once, with the topic it listens on and what to check; and when frames arrive again. When nothing ever arrived
  although the topic has publishers (``publishers``: the node's ``get_publishers_info_by_topic``), it names them
  and the publisher's DDS profile: raw frames from a publisher without the large-frame Fast DDS profile never
  arrive (:mod:`vrt_ros.ros.dds`);

and :meth:`CameraLog.summary` (called by ``destroy_node``) logs one line per camera: frames received, processed,
dropped by reason, and the seconds since its last frame.

The cameras are duck-typed (:class:`vrt_ros.ros.camera.Camera`): ``name``, ``slot_lock``, ``counters`` (``received``,
``processed``, ``dropped``: a Counter by reason), ``last_frame_mono`` (monotonic s, ``-inf`` before the first frame)
and ``sub.topic_name`` (read once, at construction).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from vrt_ros.ros import dds

#: Seconds between two checks of the counters (the node's timer period).
CHECK_PERIOD_S = 1.0
#: Seconds between two warnings about dropped frames of one camera and one reason (the drops in between are
#: counted and reported with the next warning). Throttled per camera and reason rather than with rclpy's
#: ``throttle_duration_sec``, which is keyed by call site: one camera's fault would hide another's.
WARN_THROTTLE_S = 5.0
#: At most one ``superseded`` report per camera per this many seconds.
DROP_LOG_PERIOD_S = 10.0
#: A camera that received nothing for this many seconds is reported (as ``/diagnostics`` says WARN).
SILENT_AFTER_S = 5.0

_FRAME_FAULT = ("the publisher sends frames the node cannot read; fix the camera driver's encoding, step or size "
                "(supported encodings: docs/parameters.md, Topics)")
#: Reason → what to change, naming the parameter (appended to every drop message).
DROP_HINTS: dict[str, str] = {
    "superseded": (
        "the pipeline is slower than this camera (only the newest frame is processed; input.depth does not change "
        "that): on the CPU path set engine.threads to the cores free for the node (0: ONNX Runtime's default; more "
        "threads than free cores is slower), use backend: cuda, a smaller model (model.path), or a lower camera rate"
    ),
    "stale": ("raise input.max_age_ms (0: never drop by age); a replayed bag's old stamps are stale: use "
              "replay --clock with use_sim_time:=true, or input.max_age_ms 0"),
    "engine_error": "the engine failed: check model.path, model.head and backend (the error above says more)",
    "internal_error": "a bug in the node: please report it with this log",
    "corrupt_compressed": ("the camera's JPEG/PNG data is corrupt, or the camera is compressed (input.compressed, "
                           "input.compressed_cameras) but its publisher sends raw images"),
    "unsupported_format": ("a compressed camera (input.compressed, input.compressed_cameras) takes 8-bit JPEG or PNG; "
                           "leave a camera of raw images out of input.compressed_cameras (input.compressed: false)"),
    "oversized_image": ("the compressed header declares an image larger than any camera's (a corrupt header, or a "
                        "camera beyond the node's limit vrt_ros.intake.compressed.MAX_PIXELS)"),
    "bad_cdr": "the serialized message is damaged (input.raw_subscription reads the bytes as sensor_msgs/Image or "
               "CompressedImage by the camera's transport: check input.compressed / input.compressed_cameras match the topic's type)",
    "unsupported_cdr": "the publisher's middleware serializes in a form input.raw_subscription does not read: set "
                       "input.raw_subscription: false",
}


def drop_hint(reason: str) -> str:
    """What to change for a drop ``reason`` (a frame fault's hint for reasons without their own)."""
    return DROP_HINTS.get(reason, _FRAME_FAULT)


def _since(now: float, last: float, started: float) -> float:
    return now - (last if last > float("-inf") else started)


class _State:
    """What was last reported for one camera."""

    __slots__ = ("superseded", "received", "logged_at", "next_at", "silent")

    def __init__(self, started: float) -> None:
        self.superseded = 0
        self.received = 0
        self.logged_at = started  # the counts above are from this time
        self.next_at = started  # no report before this time (the first one comes at once)
        self.silent = False


class CameraLog:
    """Logs drops, silence and the shutdown summary of a node's cameras (see the module docstring).

    Args:
        cameras: the node's cameras (duck-typed, see the module docstring), in parameter order.
        warn, info: the node logger's ``warning`` and ``info``.
        started: monotonic time the node started, s.
        silent_after_s: report a camera that received nothing for this long, s.
        clock: monotonic clock (tests pass their own).
        publishers: topic -> its publishers' endpoint infos (``node_name``, ``node_namespace``); the node's
            ``get_publishers_info_by_topic``. Asked once, when a camera that never received a frame is reported.
    """

    def __init__(
        self,
        cameras: Iterable[Any],
        warn: Callable[[str], Any],
        info: Callable[[str], Any],
        *,
        started: float | None = None,
        silent_after_s: float = SILENT_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        publishers: Callable[[str], Sequence[Any]] | None = None,
    ) -> None:
        self._cameras = list(cameras)
        self._publishers = publishers
        self._warn, self._info, self._clock = warn, info, clock
        self._started = clock() if started is None else started
        self._silent_after_s = silent_after_s
        self._state = {cam.name: _State(self._started) for cam in self._cameras}
        self._topics = {cam.name: cam.sub.topic_name for cam in self._cameras}

    def tick(self) -> None:
        """Check every camera once; log what changed (the node's timer calls this every :data:`CHECK_PERIOD_S`)."""
        now = self._clock()
        for cam in self._cameras:
            with cam.slot_lock:
                received = cam.counters.received
                superseded = cam.counters.dropped.get("superseded", 0)
                last = cam.last_frame_mono
            st = self._state[cam.name]
            since = _since(now, last, self._started)
            if since >= self._silent_after_s and not st.silent:
                st.silent = True
                self._warn(self._silent(cam.name, since, received))
            elif since < self._silent_after_s and st.silent:
                st.silent = False
                self._info(f"camera '{cam.name}': frames arriving again on {self._topics[cam.name]}")
            if superseded > st.superseded and now >= st.next_at:
                self._warn(f"camera '{cam.name}': {superseded - st.superseded} of {received - st.received} frames "
                           f"dropped (superseded) in the last {now - st.logged_at:.0f} s, {superseded} since start: "
                           f"{drop_hint('superseded')}")
                st.superseded, st.received, st.logged_at, st.next_at = superseded, received, now, now + DROP_LOG_PERIOD_S

    def _silent(self, name: str, since: float, received: int) -> str:
        """The warning about a camera silent for ``since`` s (see the module docstring)."""
        topic = self._topics[name]
        head = f"camera '{name}': no frame received for {since:.0f} s"
        found = list(self._publishers(topic)) if self._publishers is not None and not received else []
        if not found:
            what = "since start" if received == 0 else "since its last frame"
            return (f"{head} ({what}) on {topic}: check that something publishes there (topic name, namespace, "
                    "remapping), the camera's transport (input.compressed, input.compressed_cameras), and input.qos "
                    "against the publisher's QoS")
        nodes = ", ".join(sorted({f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in found}))
        return (f"{head} (since start) on {topic}, although {len(found)} publisher(s) ({nodes}) publish there: "
                f"raw frames from a publisher whose Fast DDS has no large-frame profile never reach another process "
                f"(its shared-memory segment is smaller than one frame): {dds.publisher_fix()}; else check input.qos "
                "against the publisher's QoS")

    def summary(self, info: Callable[[str], Any] | None = None) -> list[str]:
        """Log (with ``info``, default the constructor's) and return one line per camera: received, processed,
        dropped by reason, time since the last frame."""
        now = self._clock()
        lines = []
        for cam in self._cameras:
            with cam.slot_lock:
                received, processed = cam.counters.received, cam.counters.processed
                dropped = {k: v for k, v in sorted(cam.counters.dropped.items()) if v}
                last = cam.last_frame_mono
            total = sum(dropped.values())
            reasons = f" ({', '.join(f'{k} {v}' for k, v in dropped.items())})" if dropped else ""
            when = "never" if received == 0 else f"{_since(now, last, self._started):.1f} s ago"
            lines.append(f"camera '{cam.name}' ({self._topics[cam.name]}): received {received}, processed {processed}, "
                         f"dropped {total}{reasons} in {now - self._started:.1f} s; last frame {when}")
        for line in lines:
            (info or self._info)(f"summary: {line}")
        return lines


def drop_frame(cam: Any, reason: str, message: str, logger: Any, error: bool = False) -> None:
    """Count a dropped frame of ``cam`` under ``reason``; log it on ``logger`` (ERROR with ``error``, else WARN), at
    most once per camera and reason every :data:`WARN_THROTTLE_S` s, with the count of the drops not logged since and
    what to change (:func:`drop_hint`)."""
    from vrt_ros.ros.camera import throttled

    with cam.slot_lock:
        cam.counters.dropped[reason] += 1
        if error:
            cam.last_error = message
        suppressed = throttled(cam.last_warning, reason, time.monotonic(), WARN_THROTTLE_S)
    if suppressed is None:
        return
    more = f" ({suppressed} more since the last report)" if suppressed else ""
    text = f"camera '{cam.name}': frame dropped ({reason}): {message}{more}; {drop_hint(reason)}"
    if error:  # one call site per severity: rclpy raises ValueError when a call site changes severity
        logger.error(text)
    else:
        logger.warning(text)
