"""``/diagnostics`` for the detector node: one ``diagnostic_msgs/DiagnosticStatus`` per camera, each period.

Values per camera (``KeyValue``, strings as the message requires): ``backend``, ``input_rate_hz`` (frames received
per second over the last period), ``received``, ``processed``, ``dropped`` and ``dropped.<reason>`` (totals since
start), and latency percentiles over the last :data:`WINDOW` processed frames, in ms: ``<stage>_ms_p50`` /
``<stage>_ms_p99`` for each pipeline stage the backend reports (e.g. upload, preprocess, inference, postprocess;
CUDA events on the GPU path), ``callback_ms_p50/p99`` (frame taken by the callback → published) and
``age_ms_p50/p99`` (header stamp → published, on the node's clock).

Pipeline counters (``pipeline.<name>``, e.g. ``pipeline.candidate_overflows``: frames whose candidates above the
threshold exceeded the GPU buffer) follow.

Batches (a pipeline with ``max_batch`` > 1, issue 21): each camera's stage times are those of the batch its frame
ran in (the batch's CUDA events; ``total`` the batch's wall time), plus a ``batch_wait`` stage (ms the worker
waited for other cameras' frames, bounded by ``input.batch_wait_ms``); ``batch.frames_per_batch`` is the mean size
of the batches this camera's frames ran in, and ``batch.size.<n>`` the node's batches of each size since start
(the batch-size histogram, the same on every camera's status).

Level: ERROR when the node stopped on a fatal fault (:func:`mark_fatal`) or the engine failed during the period; WARN when no frame arrived for :data:`NO_INPUT_WARN_S`
seconds, or more than :data:`DROP_WARN_FRACTION` of the frames received during the period were dropped, or (with depth)
of the frames that reached the 3D output were refused (:func:`depth_level`); else OK.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

from vrt_ros.faults import ENGINE_ERROR  # noqa: F401 - the drop reason counted when the engine raised (level ERROR)

#: Processed frames kept per camera for the latency percentiles.
WINDOW = 512
#: WARN when more than this fraction of the frames received in a period was dropped (any reason).
DROP_WARN_FRACTION = 0.1
#: WARN when no frame arrived for this many seconds.
NO_INPUT_WARN_S = 5.0


@dataclass
class LatencyWindow:
    """The last :data:`WINDOW` latency samples per series (pipeline stages, callback, age), ms."""

    series: dict[str, deque] = field(default_factory=dict)

    def add(self, name: str, ms: float) -> None:
        """Append one sample (NaN samples are ignored)."""
        if ms == ms:  # not NaN
            self.series.setdefault(name, deque(maxlen=WINDOW)).append(float(ms))

    def percentiles(self) -> dict[str, tuple[float, float]]:
        """``{name: (p50, p99)}`` in ms for every non-empty series."""
        out = {}
        for name, values in self.series.items():
            if values:
                p50, p99 = np.percentile(np.fromiter(values, np.float64, len(values)), (50, 99))
                out[name] = (float(p50), float(p99))
        return out


@dataclass
class PeriodSnapshot:
    """Counters at the previous diagnostics publication (to compute per-period rates and drops)."""

    received: int = 0
    dropped: int = 0
    engine_errors: int = 0
    depth_published: int = 0
    depth_refused: int = 0


def camera_status(
    name: str,
    backend: str,
    received: int,
    processed: int,
    dropped: dict[str, int],
    previous: PeriodSnapshot,
    period_s: float,
    since_last_frame_s: float,
    latencies: LatencyWindow,
    last_error: str = "",
    extra: dict[str, int] | None = None,
) -> DiagnosticStatus:
    """Build one camera's status.

    Args:
        name: status name, e.g. ``"vrt_detector: front"``.
        backend: the pipeline's name (also the ``hardware_id``).
        received, processed: totals since start.
        dropped: totals by reason since start.
        previous: totals at the previous publication.
        period_s: seconds since the previous publication.
        since_last_frame_s: seconds since the last frame arrived (inf when none ever did).
        latencies: recent latency samples.
        last_error: the last engine error message, shown with level ERROR.
        extra: the pipeline's counters, published as ``pipeline.<name>``.
    """
    total_dropped = int(sum(dropped.values()))
    engine_errors = int(dropped.get(ENGINE_ERROR, 0))
    got = received - previous.received
    lost = total_dropped - previous.dropped
    rate = got / period_s if period_s > 0 else 0.0
    level, message = DiagnosticStatus.OK, f"{rate:.1f} Hz in, {processed} processed"
    if engine_errors > previous.engine_errors:
        level, message = DiagnosticStatus.ERROR, f"engine failed on {engine_errors - previous.engine_errors} frame(s): {last_error}"
    elif since_last_frame_s >= NO_INPUT_WARN_S:
        when = "ever" if since_last_frame_s == float("inf") else f"for {since_last_frame_s:.1f} s"
        level, message = DiagnosticStatus.WARN, f"no frames received {when} (check the topic name and input.qos)"
    elif got > 0 and lost > DROP_WARN_FRACTION * got:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(dropped.items()) if v)
        level, message = DiagnosticStatus.WARN, f"{lost} of {got} frames dropped in the last {period_s:.1f} s ({reasons})"
    values = [
        ("backend", backend),
        ("input_rate_hz", f"{rate:.2f}"),
        ("received", str(received)),
        ("processed", str(processed)),
        ("dropped", str(total_dropped)),
    ]
    values += [(f"dropped.{reason}", str(n)) for reason, n in sorted(dropped.items())]
    values += [(f"pipeline.{k}", str(v)) for k, v in sorted((extra or {}).items())]
    for series, (p50, p99) in sorted(latencies.percentiles().items()):
        values += [(f"{series}_ms_p50", f"{p50:.2f}"), (f"{series}_ms_p99", f"{p99:.2f}")]
    status = DiagnosticStatus()
    status.level = level
    status.name = name
    status.message = message
    status.hardware_id = backend
    status.values = [KeyValue(key=k, value=v) for k, v in values]
    previous.received, previous.dropped, previous.engine_errors = received, total_dropped, engine_errors
    return status


def mark_fatal(statuses: list[DiagnosticStatus], reason: str) -> None:
    """Set every status to ERROR with the fatal reason (the node is stopping; see :mod:`vrt_ros.faults`)."""
    for st in statuses:
        st.level = DiagnosticStatus.ERROR
        st.message = f"stopped on a fatal fault: {reason}"
        st.values = [*st.values, KeyValue(key="fatal", value=reason)]


def camera_statuses(node_name: str, backend: str, cameras: Iterable[Any], now: float, period_s: float,
                    started: float, extra: dict[str, Any], decode: dict[str, Any],
                    batches: dict[int, int] | None = None) -> list[DiagnosticStatus]:
    """One :func:`camera_status` per camera of a node, named ``<node_name>: <camera>``.

    Args:
        node_name: the node's fully qualified name.
        backend: the pipeline's name.
        cameras: the node's :class:`vrt_ros.ros.camera.Camera` objects (read under each one's ``slot_lock``).
        now: ``time.monotonic()`` now, s.
        period_s: seconds since the last diagnostics.
        started: ``time.monotonic()`` when the node started, s (the "since last frame" of a camera with none yet).
        extra: the pipeline's counters (``pipeline.<name>`` values).
        decode: compressed frames decoded per place and reason (``decode.<key>`` values, e.g. ``decode.gpu``; the
            pipeline's totals), shown on the compressed cameras' statuses only (a camera's ``transport``).
        batches: the node's batches by size (``batch.size.<n>``); None or empty for a pipeline without batches.

    Every camera's status says its ``transport`` (``raw`` or ``compressed``). A camera with a tracker adds ``tracking.tracks`` (held: tentative, tracked and lost), ``tracking.confirmed`` and
    ``tracking.resets`` (resets on stamp jumps since start).
    """
    cameras = list(cameras)
    statuses = []
    for cam in cameras:
        with cam.slot_lock:
            sizes = dict(getattr(cam.counters, "batch_sizes", None) or {})
            last = cam.last_frame_mono if cam.last_frame_mono > float("-inf") else started
            since = now - last  # since the last frame, or since start when none arrived yet
            statuses.append(
                camera_status(f"{node_name}: {cam.name}", backend, cam.counters.received, cam.counters.processed,
                              dict(cam.counters.dropped), cam.period, period_s, since, cam.latencies, cam.last_error,
                              extra=extra)
            )
            if batches:
                statuses[-1].values = list(statuses[-1].values) + batch_values(sizes, batches)
    for cam, status in zip(cameras, statuses):
        transport = getattr(cam, "transport", "raw")
        status.values = list(status.values) + [KeyValue(key="transport", value=transport)]
        if transport == "compressed":
            status.values += [KeyValue(key=f"decode.{k}", value=str(v)) for k, v in decode.items()]
        with cam.slot_lock:
            depth = sorted(cam.counters.depth.items())  # 3D output (depth.enabled): published and refusal reasons
        status.values += [KeyValue(key=f"depth.{k}", value=str(v)) for k, v in depth]
        if depth:
            depth_level(status, dict(depth), cam.period, period_s)
        tracker = getattr(cam, "tracker", None)
        if tracker is not None:  # read from another thread: each value is one consistent read
            status.values += [KeyValue(key="tracking.tracks", value=str(len(tracker))),
                              KeyValue(key="tracking.confirmed", value=str(tracker.confirmed_count)),
                              KeyValue(key="tracking.resets", value=str(tracker.resets))]
    return statuses


def depth_level(status: DiagnosticStatus, depth: dict[str, int], previous: PeriodSnapshot, period_s: float) -> None:
    """WARN an otherwise OK camera status when more than :data:`DROP_WARN_FRACTION` of the frames that reached the
    3D output in the period were refused (no ``detections_3d``: ``depth.<reason>``, e.g. ``depth_unpaired`` when no
    depth frame came): the 2D detections still flow, so the camera's own drops do not show it."""
    from vrt_ros.depth.reasons import NO_VALID_DEPTH  # here: vrt_ros.depth is imported only with depth.enabled

    frame_keys = [k for k in depth if k != "published" and k != NO_VALID_DEPTH]  # NO_VALID_DEPTH counts boxes
    published = int(depth.get("published", 0))
    refused = int(sum(depth[k] for k in frame_keys))
    new_pub, new_ref = published - previous.depth_published, refused - previous.depth_refused
    previous.depth_published, previous.depth_refused = published, refused
    if status.level == DiagnosticStatus.OK and new_ref > 0 and new_ref > DROP_WARN_FRACTION * (new_pub + new_ref):
        reasons = ", ".join(f"{k}: {depth[k]}" for k in sorted(frame_keys) if depth[k])
        status.level = DiagnosticStatus.WARN
        status.message = (f"3D output refused for {new_ref} of {new_pub + new_ref} frames in the last {period_s:.1f} s "
                          f"({reasons}; see the depth.* values)")


def batch_values(camera_sizes: dict[int, int], batches: dict[int, int]) -> list[KeyValue]:
    """``batch.frames_per_batch`` (mean size of the batches of one camera's frames, from its frames counted per
    batch size) and the node's ``batch.size.<n>`` histogram."""
    frames = sum(camera_sizes.values())
    mean = sum(n * k for n, k in camera_sizes.items()) / frames if frames else 0.0
    out = [KeyValue(key="batch.frames_per_batch", value=f"{mean:.2f}")]
    out += [KeyValue(key=f"batch.size.{n}", value=str(k)) for n, k in sorted(batches.items())]
    return out
