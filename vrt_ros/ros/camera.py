"""Per-camera state of the detector node (:mod:`vrt_ros.ros.node`): its frame counters and the
subscriptions, publishers, newest-frame slot, latency window, warning state and tracker of one camera."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from std_msgs.msg import Header

from vrt_ros.ros.diagnostics import LatencyWindow, PeriodSnapshot
from vrt_ros.types import TrackerParams


@dataclass
class CameraCounters:
    """Frame counters of one camera.

    Attributes:
        received: frames delivered to the callback.
        processed: frames whose detections were published.
        dropped: dropped frames by reason (``superseded``, ``stale``, ``engine_error``, ``inactive`` and the
            :class:`~vrt_ros.errors.FrameError` reasons such as ``short_data``, ``unknown_encoding``).
        last_timings: ms per pipeline stage of the last processed frame.
        last_age_ms: header stamp to publish of the last processed frame, ms (on the node's clock).
        last_callback_ms: the last processed frame's time from reaching the callback to published, ms.
        batch_sizes: processed frames by the size of the batch they ran in (batching pipelines only).
        depth: with ``depth.enabled``: 3D arrays ``published`` and the refusal reasons (``depth_unpaired``, ...,
            :data:`vrt_ros.depth.reasons.REASONS`), counted per frame, and ``box_no_valid_depth`` per box.
    """

    received: int = 0
    processed: int = 0
    dropped: Counter = field(default_factory=Counter)
    last_timings: dict[str, float] = field(default_factory=dict)
    last_age_ms: float = float("nan")
    last_callback_ms: float = float("nan")
    batch_sizes: Counter = field(default_factory=Counter)
    depth: Counter = field(default_factory=Counter)

    def copy(self) -> "CameraCounters":
        return CameraCounters(
            self.received,
            self.processed,
            Counter(self.dropped),
            dict(self.last_timings),
            self.last_age_ms,
            self.last_callback_ms,
            Counter(self.batch_sizes),
            Counter(self.depth),
        )


class Camera:
    """Subscriptions, publishers, newest-frame slot, counters and tracker of one camera.

    Args:
        name: the camera's namespace.
        tracking: the tracker settings with ``tracking.enabled`` (one :class:`~vrt_ros.tracking.ByteTracker` for
            this camera, driven by the node's worker thread only), else None.
        track_ids: the node's id counters by camera name (:class:`~vrt_ros.tracking.ids.TrackIds`, kept for the
            node's life so a cleanup and configure never gives an id again); this camera's is added when missing.
            None: a counter of its own.
        transport: ``"raw"`` (``<cam>/image_raw``, sensor_msgs/Image) or ``"compressed"``
            (``<cam>/image_raw/compressed``, sensor_msgs/CompressedImage): how this camera's frames arrive.
    """

    def __init__(self, name: str, tracking: TrackerParams | None = None, track_ids: dict | None = None,
                 transport: str = "raw") -> None:
        if transport not in ("raw", "compressed"):
            raise ValueError(f"camera {name!r}: transport must be 'raw' or 'compressed', got {transport!r}")
        self.name = name
        self.transport = transport
        self.group = MutuallyExclusiveCallbackGroup()
        self.slot_lock = threading.Lock()  # guards the counters, latencies and warning state
        self.slot: Any = None  # (message, time.monotonic() when it reached the callback); guarded by FrameSlots.cond
        self.counters = CameraCounters()
        self.latencies = LatencyWindow()
        self.period = PeriodSnapshot()
        self.last_frame_mono = float("-inf")
        self.last_error = ""
        self.last_warning: dict[str, tuple[float, int]] = {}  # reason -> (monotonic time logged, suppressed since)
        self.sub = None
        self.pub_detections = None
        self.pub_keypoints = None
        self.pub_label_info = None
        self.pub_debug = None
        self.pub_mask = None  # <cam>/instance_mask, segmentation heads only
        self.tracker = None
        self.stamp_delay_ns: int | None = None  # the last stamped frame's arrival (ROS clock) minus its stamp
        if tracking is not None:  # imported only then: SciPy's optimiser adds ~0.2 s and many objects to the GC's heap
            from vrt_ros.tracking import ByteTracker
            from vrt_ros.tracking.ids import TrackIds

            ids = TrackIds() if track_ids is None else track_ids.setdefault(name, TrackIds())
            self.tracker = ByteTracker(tracking, ids)

    def reset_tracks(self) -> None:
        """Forget this camera's tracks (on activate and deactivate); ids already given are not given again."""
        if self.tracker is not None:
            self.tracker.reset()

    def tracking_time(self, stamp_ns: int, arrived: float, ros_now_ns: int) -> tuple[int, bool]:
        """The time a frame is tracked at, and whether it is an estimate: the header stamp; for an unstamped frame
        (stamp 0) its arrival on the node's ROS clock, moved back by the delay from stamp to arrival of this camera's
        last stamped frame when there was one (an estimate on the stream's own timeline: it never resets the tracks,
        :meth:`vrt_ros.tracking.ByteTracker.update`).

        Args:
            stamp_ns: the header stamp, ns (0: unset).
            arrived: ``time.monotonic()`` when the frame reached the callback, s.
            ros_now_ns: the node's ROS clock now, ns (``use_sim_time``: the simulated clock).
        """
        arrival_ns = ros_now_ns - int((time.monotonic() - arrived) * 1e9)
        if stamp_ns > 0:
            self.stamp_delay_ns = arrival_ns - stamp_ns
            return stamp_ns, False
        if self.stamp_delay_ns is None:
            return arrival_ns, False
        return arrival_ns - self.stamp_delay_ns, True


def throttled(last_warning: dict[str, tuple[float, int]], key: str, now: float, period_s: float) -> int | None:
    """Log throttling per camera and key: None when ``key`` was logged less than ``period_s`` ago (counted as
    suppressed), else the number suppressed since the last report (and ``now`` becomes the last report). Call under
    the camera's ``slot_lock``."""
    last, suppressed = last_warning.get(key, (float("-inf"), 0))
    if now - last < period_s:
        last_warning[key] = (last, suppressed + 1)
        return None
    last_warning[key] = (now, 0)
    return suppressed


def header_stamp_ns(header: Header) -> int:
    """A ``std_msgs/Header`` stamp as integer ns since the epoch."""
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)
