"""``DetectorNode``: camera frames in, ``vision_msgs`` detections out (DESIGN.md, "Node behaviour").

Per camera ``<cam>`` (parameter ``cameras``, relative to the node's namespace):

- subscribes ``<cam>/image_raw`` (``sensor_msgs/Image``), or ``<cam>/image_raw/compressed``
  (``sensor_msgs/CompressedImage``) when ``input.compressed`` is true, with the ``input.qos`` preset and
  ``input.depth``; an incompatible publisher is reported by a warning naming both sides;
- publishes ``<cam>/detections`` and, for heads with keypoints, ``<cam>/keypoints`` (``Detection2DArray``, the
  input header unchanged, also when empty), ``<cam>/label_info`` (``LabelInfo``, transient local) and, with
  ``debug_image: true``, ``<cam>/debug_image`` (bgr8, drawn only while someone subscribes).

Each ``diagnostics_period_s`` the node publishes ``/diagnostics`` (one status per camera: rates, counters, latency
percentiles per stage, backend; see :mod:`vrt_ros.ros.diagnostics`).

Frames are processed by one worker thread per node (cameras in turn), never in the executor's callbacks: the
callback only stores the frame, so callbacks never block, and the pipeline (ONNX Runtime, or CUDA with its context)
is always driven from the same thread. Only the newest frame per camera is processed: a frame that arrives while
the previous one of that camera still waits replaces it (the replaced frame is counted as dropped, reason
``superseded``); frames whose header stamp is older than
``input.max_age_ms`` are dropped (``stale``). Bad frames raise :class:`~vrt_ros.errors.FrameError` in the core and
are dropped with a warning (at most one per camera and reason every :data:`WARN_THROTTLE_S` seconds), counted under
the error's reason; the node keeps running. Counters per camera:
:meth:`DetectorNode.counters`. Engine failures go through a :class:`~vrt_ros.faults.FaultPolicy`: a CUDA error that
poisons the context, or ``engine.max_consecutive_failures`` failures in a row, is fatal: the node logs an ERROR,
publishes ERROR on ``/diagnostics``, stops taking frames and shuts its context down, and ``main()`` exits with
:data:`~vrt_ros.faults.EXIT_FATAL` so the launch file's ``respawn`` restarts the process (:attr:`DetectorNode.fatal_error`).
Python logging of the core reaches the node's ROS logger (:mod:`vrt_ros.ros.log_bridge`).

The node is composable: ``DetectorNode(**kwargs)`` passes rclpy ``Node`` keyword arguments through (``context``,
``namespace``, ``parameter_overrides``, ``cli_args``, ...), never calls ``rclpy.init`` and never spins.

Its start is a sequence of steps: :meth:`~DetectorNode._setup_node` (parameters, ``/diagnostics``),
:meth:`~DetectorNode._configure` (model, pipeline, publishers) and :meth:`~DetectorNode._activate` (subscriptions,
worker); :meth:`~DetectorNode._deactivate` and :meth:`~DetectorNode._cleanup` undo the last two. The plain node runs
the first three in its constructor; the managed node (:mod:`vrt_ros.ros.lifecycle_node`) runs them on its lifecycle
transitions.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.logging import get_logger
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray, LabelInfo

from vrt_ros.config import postprocess_params
from vrt_ros.engines.onnxruntime import check_model_file
from vrt_ros.errors import ConfigError, FrameError
from vrt_ros.faults import EXIT_FATAL, FaultPolicy
from vrt_ros.labels import load_labels
from vrt_ros.pipeline import Pipeline, make_pipeline
from vrt_ros.ros.camera import Camera, CameraCounters, header_stamp_ns
from vrt_ros.ros.camera_log import CHECK_PERIOD_S, CameraLog, drop_hint
from vrt_ros.ros.convert import (compressed_to_bgr, debug_image_msg, detections_to_cdr, image_view, keypoints_to_cdr,
                                 label_info_msg)
from vrt_ros.ros import log_bridge
from vrt_ros.ros.diagnostics import ENGINE_ERROR, camera_statuses, mark_fatal
from vrt_ros.ros.params import NodeParameters
from vrt_ros.ros.qos import latched_qos, make_qos, resolve_topic, subscription_qos_events

#: Parameters whose runtime change alters the postprocessing thresholds.
_POSTPROCESS_PARAMS = frozenset(
    {"score_threshold", "nms_iou", "class_agnostic_nms", "max_detections", "keypoint_threshold"}
)
#: Seconds between two warnings about dropped frames of one camera and one reason (the drops in between are
#: counted and reported with the next warning). Throttled per camera and reason rather than with rclpy's
#: ``throttle_duration_sec``, which is keyed by call site: one camera's fault would hide another's.
WARN_THROTTLE_S = 5.0
#: Output QoS depth (reliable, volatile): matches reliable and best-effort subscribers.
OUTPUT_DEPTH = 10


class DetectorNode(Node):
    """The detector node; one instance serves one or more cameras with one pipeline.

    Args:
        node_name: ROS node name.
        pipeline: an already built pipeline to use instead of building one from the parameters (tests, or
            several nodes sharing one engine); the node then does not close it.
        **kwargs: passed to ``rclpy.node.Node`` (``context``, ``namespace``, ``parameter_overrides``,
            ``cli_args``, ``use_global_arguments``, ...).

    Raises:
        ConfigError: a bad parameter value or unknown parameter (names the parameter), or an unreadable labels file.
        ModelError: a missing or unusable model file (names the file).
        BackendUnavailable: ``backend: cuda`` where the GPU path cannot run.
    """

    #: The managed node's method saying why the schema's read-only parameters cannot change now (None: they can);
    #: None here: the plain node keeps them read-only for its whole life.
    _read_only_reason = None

    def __init__(self, node_name: str = "vrt_detector", *, pipeline: Pipeline | None = None, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._pipeline: Pipeline | None = None
        self._owns_pipeline = pipeline is None
        self._cameras: dict[str, Camera] = {}
        self._worker: threading.Thread | None = None
        self.fatal_error: str | None = None  # why the node stopped (a fatal fault); None while it runs
        log_bridge.attach(self.get_logger())
        try:
            self._setup(pipeline)
        except BaseException:
            self.destroy_node()
            raise

    # ----------------------------------------------------------------------------------------------- set-up
    def _setup(self, pipeline: Pipeline | None) -> None:
        """The plain node's start: every step at once."""
        self._setup_node()
        self._configure(pipeline)
        self._activate()

    def _setup_node(self) -> None:
        """What the node has in every state: its parameters, the worker's lock, ``/diagnostics`` and its timer."""
        self._params = NodeParameters(self, on_change=self._on_parameters_changed, read_only_reason=self._read_only_reason)
        values = self._params.values
        self._pipeline_lock = threading.Lock()
        self._pending_postprocess = None
        self._work = threading.Condition()  # guards every camera's slot; notified when a frame arrives
        self._stopping = False
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", make_qos("reliable", 10))
        self._diagnostics_last = time.monotonic()
        self._started = self._diagnostics_last
        self._diagnostics_timer = self.create_timer(
            float(values["diagnostics_period_s"]),
            self.publish_diagnostics,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )

    def _configure(self, pipeline: Pipeline | None) -> None:
        """Load the model and build the pipeline (engine, kernels, buffers) from the current parameters; create the
        output publishers. Raises as the class says; what it made before raising is released by :meth:`_cleanup`."""
        values = self._params.values
        if pipeline is None:  # the model file first: the most common start-up mistake, reported before the labels
            check_model_file(values["model.path"])
        self._labels = load_labels(values["model.labels"])
        self._pending_postprocess = None
        self._max_age_ms = float(values["input.max_age_ms"])
        self._faults = FaultPolicy(int(values["engine.max_consecutive_failures"]))
        self._pipeline = pipeline if pipeline is not None else make_pipeline(values, log=self.get_logger().info)
        self._pipeline.set_postprocess(postprocess_params(values))
        self._keypoint_names = tuple(getattr(self._pipeline.head, "keypoint_names", ()))
        self._keypoint_threshold = float(values["keypoint_threshold"])
        self._compressed = bool(values["input.compressed"])
        cameras = list(values["cameras"])
        if len(set(cameras)) != len(cameras):
            raise ConfigError(f"parameter 'cameras' lists a camera twice: {cameras}")
        self._in_qos = make_qos(values["input.qos"], int(values["input.depth"]))
        out_qos = make_qos("reliable", OUTPUT_DEPTH)
        for name in cameras:
            cam = Camera(name)
            self._cameras[name] = cam
            cam.pub_detections = self._create_output(Detection2DArray, f"{name}/detections", out_qos)
            if self._keypoint_names:
                cam.pub_keypoints = self._create_output(Detection2DArray, f"{name}/keypoints", out_qos)
            cam.pub_label_info = self._create_output(LabelInfo, f"{name}/label_info", latched_qos())
            if values["debug_image"]:
                cam.pub_debug = self._create_output(Image, f"{name}/debug_image", make_qos("reliable", 1))
        self.get_logger().info(
            f"pipeline {getattr(self._pipeline, 'name', type(self._pipeline).__name__)}; cameras {cameras} "
            f"({'compressed' if self._compressed else 'raw'} input, QoS {values['input.qos']} depth {values['input.depth']})"
        )

    def _create_output(self, msg_type: Any, topic: str, qos: Any) -> Any:
        """A publisher of the node's outputs (the managed node makes lifecycle publishers)."""
        return self.create_publisher(msg_type, topic, qos)

    def _activate(self) -> None:
        """Publish each camera's label info, subscribe to the cameras and start the worker."""
        for cam in self._cameras.values():
            self._publish_label_info(cam, float(self._params.values["score_threshold"]))
        for name, cam in self._cameras.items():
            topic = f"{name}/image_raw/compressed" if self._compressed else f"{name}/image_raw"
            msg_type = CompressedImage if self._compressed else Image
            cam.sub = self.create_subscription(
                msg_type,
                topic,
                lambda msg, cam=cam: self._on_frame(cam, msg),
                self._in_qos,
                callback_group=cam.group,
                event_callbacks=subscription_qos_events(self, resolve_topic(self, topic), self._in_qos),
            )
        self._stopping = False
        self._started = time.monotonic()
        self._worker = threading.Thread(target=self._work_loop, name=f"{self.get_name()}_worker", daemon=True)
        self._worker.start()
        # drops, silent cameras and the summary in the node's own log (steady clock: also with use_sim_time)
        self._camera_log = CameraLog(self._cameras.values(), self.get_logger().warning, self.get_logger().info,
                                     started=self._started)
        self._camera_log_timer = self.create_timer(CHECK_PERIOD_S, self._camera_log.tick,
                                                   callback_group=MutuallyExclusiveCallbackGroup(),
                                                   clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _deactivate(self) -> None:
        """Stop taking frames: unsubscribe, let the frame in flight complete (it is published), then drop the frames
        still waiting (counted as ``inactive``). Keeps the pipeline and publishers."""
        for cam in self._cameras.values():
            if cam.sub is not None:
                self.destroy_subscription(cam.sub)
                cam.sub = None
        self._stop_worker()
        self._end_camera_log()
        with self._work:
            for cam in self._cameras.values():
                if cam.slot is not None:
                    cam.slot = None
                    with cam.slot_lock:
                        cam.counters.dropped["inactive"] += 1

    def _cleanup(self) -> None:
        """Undo :meth:`_configure`: destroy the output publishers and close the pipeline if this node built it (the
        engine, the device and pinned buffers and the stream go with it)."""
        cameras, self._cameras = self._cameras, {}
        for cam in cameras.values():
            for pub in (cam.pub_detections, cam.pub_keypoints, cam.pub_label_info, cam.pub_debug):
                if pub is not None:
                    self.destroy_publisher(pub)
        self._release_pipeline()

    def _release_pipeline(self) -> None:
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None and self._owns_pipeline:
            pipeline.close()

    def _publish_label_info(self, cam: Camera, threshold: float) -> None:
        header = Header()
        header.stamp = self.get_clock().now().to_msg()
        cam.pub_label_info.publish(label_info_msg(self._labels, threshold, header))

    def _on_parameters_changed(self, changed: dict[str, Any]) -> None:
        values = self._params.values
        if _POSTPROCESS_PARAMS & changed.keys():
            with self._pipeline_lock:
                self._pending_postprocess = postprocess_params(values)
            self._keypoint_threshold = float(values["keypoint_threshold"])
        if "input.max_age_ms" in changed:
            self._max_age_ms = float(values["input.max_age_ms"])
        if "score_threshold" in changed:
            for cam in self._cameras.values():
                self._publish_label_info(cam, float(values["score_threshold"]))

    # ------------------------------------------------------------------------------------------- frames
    def _on_frame(self, cam: Camera, msg: Any) -> None:
        """Subscription callback: store the frame as this camera's newest and wake the worker (never blocks long)."""
        now = time.monotonic()
        with self._work:
            with cam.slot_lock:
                cam.counters.received += 1
                cam.last_frame_mono = now
                if cam.slot is not None:
                    cam.counters.dropped["superseded"] += 1
            cam.slot = (msg, now)
            self._work.notify()
        # Yield the GIL: the woken worker takes the frame now instead of after the executor's own Python loop
        # (callback -> worker 0.46 -> 0.12 ms p50 measured with 1080p frames, issue 14).
        time.sleep(0)

    def _work_loop(self) -> None:
        """The worker thread: take the newest frame of each camera in turn and process it, until stopped."""
        cameras = list(self._cameras.values())
        turn = 0
        while True:
            with self._work:
                while not self._stopping and all(c.slot is None for c in cameras):
                    self._work.wait()
                if self._stopping:
                    return
                for k in range(len(cameras)):
                    cam = cameras[(turn + k) % len(cameras)]
                    if cam.slot is not None:
                        turn = (turn + k + 1) % len(cameras)
                        break
                frame, cam.slot = cam.slot, None
            try:
                self._process(cam, *frame)
            except Exception as exc:  # publishing during shutdown, or a bug: the worker must not die
                if self._stopping:
                    return
                self._drop(cam, "internal_error", f"{type(exc).__name__}: {exc}", error=True)
            if self.fatal_error is not None:
                return

    def _drop(self, cam: Camera, reason: str, message: str, error: bool = False) -> None:
        with cam.slot_lock:
            cam.counters.dropped[reason] += 1
            if error:
                cam.last_error = message
            now = time.monotonic()
            last, suppressed = cam.last_warning.get(reason, (float("-inf"), 0))
            if now - last < WARN_THROTTLE_S:
                cam.last_warning[reason] = (last, suppressed + 1)
                return
            cam.last_warning[reason] = (now, 0)
        more = f" ({suppressed} more since the last report)" if suppressed else ""
        text = f"camera '{cam.name}': frame dropped ({reason}): {message}{more}; {drop_hint(reason)}"
        if error:  # one call site per severity: rclpy raises ValueError when a call site changes severity
            self.get_logger().error(text)
        else:
            self.get_logger().warning(text)

    def _process(self, cam: Camera, msg: Any, arrived: float) -> None:
        header = msg.header
        stamp_ns = header_stamp_ns(header)
        max_age_ms = self._max_age_ms
        if max_age_ms > 0 and stamp_ns > 0:
            age_ms = (self.get_clock().now().nanoseconds - stamp_ns) / 1e6
            if age_ms > max_age_ms:
                self._drop(cam, "stale", f"header stamp is {age_ms:.0f} ms old, more than input.max_age_ms {max_age_ms:g}")
                return
        bgr = gpu_decode = None
        try:
            if self._compressed:  # the GPU path decodes JPEGs itself, on its stream; else decoded here
                gpu_decode = getattr(self._pipeline, "process_compressed", None)
                if gpu_decode is None:
                    bgr = compressed_to_bgr(msg)  # decoded outside the pipeline lock: cameras decode in parallel
            else:
                spec, data = image_view(msg)
            with self._pipeline_lock:
                if self._pending_postprocess is not None:
                    self._pipeline.set_postprocess(self._pending_postprocess)
                    self._pending_postprocess = None
                if gpu_decode is not None:
                    dets = gpu_decode(str(msg.format), msg.data)
                else:
                    dets = self._pipeline.process_bgr(bgr) if bgr is not None else self._pipeline.process(spec, data)
                timings = dict(self._pipeline.last_timings)
        except FrameError as exc:
            self._drop(cam, exc.reason, str(exc))
            return
        except Exception as exc:  # an engine failure: counted; fatal only as the fault policy says
            self._drop(cam, ENGINE_ERROR, f"{type(exc).__name__}: {exc}", error=True)
            fatal = self._faults.failure(exc)
            if fatal is not None:
                self._on_fatal(fatal)
            return
        self._faults.success()
        # serialized here (vrt_ros.ros.cdr): rclpy's per-field message building and conversion cost ~20 us a detection
        cam.pub_detections.publish(detections_to_cdr(dets, header, self._labels))
        if cam.pub_keypoints is not None:
            cam.pub_keypoints.publish(keypoints_to_cdr(dets, header, self._keypoint_names))
        if cam.pub_debug is not None and cam.pub_debug.get_subscription_count() > 0:
            self._publish_debug(cam, msg, bgr, dets)
        age_ms = (self.get_clock().now().nanoseconds - stamp_ns) / 1e6 if stamp_ns > 0 else float("nan")
        callback_ms = (time.monotonic() - arrived) * 1e3
        with cam.slot_lock:
            cam.counters.processed += 1
            cam.counters.last_timings = timings
            cam.counters.last_age_ms = age_ms
            cam.counters.last_callback_ms = callback_ms
            for stage, ms in timings.items():
                cam.latencies.add(stage, ms)
            cam.latencies.add("callback", callback_ms)
            cam.latencies.add("age", age_ms)

    def _on_fatal(self, reason: str) -> None:
        """Stop for good: ERROR in the log and on /diagnostics, no more frames, the context shut down."""
        self.fatal_error = reason
        self.get_logger().error(f"fatal: {reason}; stopping (exit status {EXIT_FATAL}; the launch file's respawn restarts it)")
        with self._work:
            self._stopping = True
        try:
            self.publish_diagnostics()
            self._diagnostics_pub.wait_for_all_acked(Duration(seconds=1.0))  # delivered before the process goes
        finally:
            self.context.try_shutdown()

    def _publish_debug(self, cam: Camera, msg: Any, bgr, dets) -> None:
        """Publish the frame with its detections drawn (called only while someone subscribes)."""
        cam.pub_debug.publish(debug_image_msg(msg, bgr, dets, self._compressed, self._labels, self._keypoint_threshold))

    # ------------------------------------------------------------------------------------------- diagnostics
    def diagnostics(self) -> DiagnosticArray:
        """One status per camera (see :mod:`vrt_ros.ros.diagnostics`); advances the per-period counters."""
        now = time.monotonic()
        period_s, self._diagnostics_last = now - self._diagnostics_last, now
        backend = str(getattr(self._pipeline, "name", type(self._pipeline).__name__))
        out = DiagnosticArray()
        out.header.stamp = self.get_clock().now().to_msg()
        # compressed input on the GPU path: frames decoded on the GPU, and on the CPU per reason (the pipeline's
        # totals, shared by its cameras), e.g. decode.gpu, decode.cpu.png
        decode = dict(getattr(self._pipeline, "decode_stats", None) or {}) if self._compressed else {}
        statuses = camera_statuses(self.get_fully_qualified_name(), backend, self._cameras.values(), now, period_s,
                                   self._started, dict(getattr(self._pipeline, "stats", None) or {}), decode)
        if self.fatal_error is not None:
            mark_fatal(statuses, self.fatal_error)
        out.status = statuses
        return out

    def publish_diagnostics(self) -> None:
        """Publish :meth:`diagnostics` on ``/diagnostics`` (called by the node's timer each period)."""
        self._diagnostics_pub.publish(self.diagnostics())

    # ------------------------------------------------------------------------------------------- queries
    @property
    def cameras(self) -> tuple[str, ...]:
        """Camera namespaces served, in parameter order."""
        return tuple(self._cameras)

    @property
    def pipeline(self) -> Pipeline:
        """The pipeline frames go through."""
        return self._pipeline

    def counters(self) -> dict[str, CameraCounters]:
        """A consistent copy of every camera's counters."""
        out = {}
        for name, cam in self._cameras.items():
            with cam.slot_lock:
                out[name] = cam.counters.copy()
        return out

    def _stop_worker(self) -> None:
        """Stop the worker after its current frame (which completes and is published)."""
        worker, self._worker = getattr(self, "_worker", None), None
        if worker is not None:
            with self._work:
                self._stopping = True
                self._work.notify_all()
            worker.join(timeout=30.0)

    def _end_camera_log(self) -> None:
        """Stop the camera log's timer and log its per-camera summary (on deactivate and at shutdown)."""
        timer, self._camera_log_timer = getattr(self, "_camera_log_timer", None), None
        if timer is not None:
            self.destroy_timer(timer)
        camera_log, self._camera_log = getattr(self, "_camera_log", None), None
        if camera_log is not None:
            # after Ctrl-C the context is gone: log under a child name that has no /rosout publisher
            camera_log.summary(None if self.context.ok() else get_logger(f"{self.get_logger().name}.summary").info)

    def destroy_node(self) -> None:
        """Stop the worker (after its current frame), destroy the ROS entities, close the pipeline if this node built it."""
        self._stop_worker()
        self._end_camera_log()
        log_bridge.detach(self.get_logger())
        super().destroy_node()
        self._release_pipeline()
