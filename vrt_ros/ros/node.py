"""``DetectorNode``: camera frames in, ``vision_msgs`` detections out (DESIGN.md, "Node behaviour").

Per camera ``<cam>`` (parameter ``cameras``, relative to the node's namespace):

- subscribes ``<cam>/image_raw`` (``sensor_msgs/Image``), or ``<cam>/image_raw/compressed``
  (``sensor_msgs/CompressedImage``) when the camera's transport is compressed (``input.compressed`` true: every
  camera; else the cameras listed in ``input.compressed_cameras``: one node may mix them,
  :func:`vrt_ros.settings.config.camera_transports`), with the ``input.qos`` preset and ``input.depth``; an incompatible
  publisher is reported by a warning naming both sides;
- publishes ``<cam>/detections`` and, for heads with keypoints, ``<cam>/keypoints`` (``Detection2DArray``, the
  input header unchanged, also when empty), ``<cam>/label_info`` (``LabelInfo``, transient local) and, with
  ``debug_image: true``, ``<cam>/debug_image`` (bgr8, drawn only while someone subscribes); for segmentation heads
  ``<cam>/instance_mask`` (mono8/mono16 labels, made only while someone subscribes; :mod:`vrt_ros.ros.instance_mask`).

Each ``diagnostics_period_s`` the node publishes ``/diagnostics`` (one status per camera: rates, counters, latency
percentiles per stage, backend; see :mod:`vrt_ros.ros.diagnostics`).

Frames are processed by one worker thread per node (:mod:`vrt_ros.ros.worker`; cameras in turn), never in the executor's callbacks: the
callback only stores the frame, so callbacks never block, and the pipeline (ONNX Runtime, or CUDA with its context)
is always driven from the same thread. Only the newest frame per camera is processed: a frame that arrives while
the previous one of that camera still waits replaces it (the replaced frame is counted as dropped, reason
``superseded``); frames whose header stamp is older than
``input.max_age_ms`` are dropped (``stale``). Bad frames raise :class:`~vrt_ros.errors.FrameError` in the core and
are dropped with a warning (at most one per camera and reason every :data:`~vrt_ros.ros.camera_log.WARN_THROTTLE_S` seconds), counted under
the error's reason; the node keeps running. Counters per camera:
:meth:`DetectorNode.counters`. Engine failures go through a :class:`~vrt_ros.faults.FaultPolicy`: a CUDA error that
poisons the context, or ``engine.max_consecutive_failures`` failures in a row, is fatal: the node logs an ERROR,
publishes ERROR on ``/diagnostics`` (and keeps doing so) and stops taking frames (:attr:`DetectorNode.fatal_error`);
it never shuts its context down (a composed node is not the owner): ``main()`` sees the fatal node and exits with
:data:`~vrt_ros.faults.EXIT_FATAL` so the launch file's ``respawn`` restarts the process; a host application that
composes the node decides for itself (other nodes of its context keep running).
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
from typing import TYPE_CHECKING, Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.logging import get_logger
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray, LabelInfo

from vrt_ros.engines.onnxruntime import check_model_file
from vrt_ros.errors import ConfigError
from vrt_ros.faults import EXIT_FATAL, FaultPolicy
from vrt_ros.inference.pipeline import Pipeline, make_pipeline
from vrt_ros.model.labels import check_label_count, load_labels
from vrt_ros.ros import log_bridge
from vrt_ros.ros.camera import Camera, CameraCounters
from vrt_ros.ros.camera_log import CHECK_PERIOD_S, CameraLog
from vrt_ros.ros.cdr_read import read_compressed, read_image
from vrt_ros.ros.convert import label_info_msg
from vrt_ros.ros.diagnostics import camera_statuses, mark_fatal
from vrt_ros.ros.instance_mask import mask_encoding
from vrt_ros.ros.params import NodeParameters
from vrt_ros.ros.qos import latched_qos, make_qos, resolve_topic, subscription_qos_events
from vrt_ros.ros.wakeup import Wakeup
from vrt_ros.ros.worker import Worker
from vrt_ros.settings.config import camera_transports, postprocess_params, tracker_params

if TYPE_CHECKING:  # imported by _configure with depth.enabled only (it brings OpenCV): issue 27's import budget
    from vrt_ros.ros.depth_input import DepthInputs

#: Parameters whose runtime change alters the postprocessing thresholds.
_POSTPROCESS_PARAMS = frozenset(
    {"score_threshold", "nms_iou", "class_agnostic_nms", "max_detections", "keypoint_threshold", "mask_threshold"}
)
#: The input topic of a camera, relative to it, by its transport (:attr:`vrt_ros.ros.camera.Camera.transport`).
_TOPIC_SUFFIX = {"raw": "image_raw", "compressed": "image_raw/compressed"}
#: Output QoS depth (reliable, volatile): matches reliable and best-effort subscribers.
OUTPUT_DEPTH = 10
#: The longest wait for the fatal ERROR on /diagnostics to be acknowledged (s). Delivery on localhost takes
#: milliseconds, but Fast DDS acknowledges with its next heartbeat, so the wait mostly runs out (measured: with no
#: wait the ERROR was lost in 2 of 6 runs, and in every run of the managed node; with 0.1 s it arrived in each of
#: 10 faults in a row and 18 runs of the two fast-exit tests); a subscriber that never acknowledges must not delay
#: the exit. 0.1 s, not 0.25: a real illegal memory access on the H200 takes 0.15-0.20 s to reach the node as an
#: error, and fault to exit must stay within 0.5 s (issue 27).
FATAL_DELIVERY_S = 0.1


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
        self._worker: Worker | None = None  # made by _configure, started by _activate
        self._depth: DepthInputs | None = None  # with depth.enabled, made by _configure
        self._track_ids: dict = {}  # camera -> TrackIds, kept for the node's life (ids never given twice)
        self.fatal_error: str | None = None  # why the node stopped (a fatal fault); None while it runs
        #: set once the fatal ERROR is published (and acknowledged, or FATAL_DELIVERY_S passed): main() waits for it
        self.fatal_reported = threading.Event()
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
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", make_qos("reliable", 10))
        self._fatal_signal = Wakeup(self, self._unsubscribe)  # triggered by the worker on a fatal fault
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
        self._pipeline = pipeline if pipeline is not None else make_pipeline(values, log=self.get_logger().info)
        self._pipeline.set_postprocess(postprocess_params(values))
        head = self._pipeline.head
        check_label_count(self._labels, getattr(head, "label_count", None), values["model.labels"],
                          getattr(head, "name", "?"), self.get_logger().warning)
        keypoint_names = tuple(getattr(self._pipeline.head, "keypoint_names", ()))
        transports = camera_transports(values)
        self._compressed = "compressed" in transports.values()  # any camera: the GPU decoder, decode diagnostics
        cameras = list(values["cameras"])
        if len(set(cameras)) != len(cameras):
            raise ConfigError(f"parameter 'cameras' lists a camera twice: {cameras}")
        self._in_qos = make_qos(values["input.qos"], int(values["input.depth"]))
        out_qos = make_qos("reliable", OUTPUT_DEPTH)
        tracking = tracker_params(values)
        for name in cameras:
            cam = Camera(name, tracking, self._track_ids, transports[name])
            self._cameras[name] = cam
            cam.pub_detections = self._create_output(Detection2DArray, f"{name}/detections", out_qos)
            if keypoint_names:
                cam.pub_keypoints = self._create_output(Detection2DArray, f"{name}/keypoints", out_qos)
            cam.pub_label_info = self._create_output(LabelInfo, f"{name}/label_info", latched_qos())
            if values["debug_image"]:
                cam.pub_debug = self._create_output(Image, f"{name}/debug_image", make_qos("reliable", 1))
            if getattr(self._pipeline.head, "has_masks", False):
                cam.pub_mask = self._create_output(Image, f"{name}/instance_mask", make_qos("reliable", 1))
        if values["depth.enabled"]:
            from vrt_ros.ros.depth_input import DepthInputs

            self._depth = DepthInputs(self, self._cameras, values, self._labels, self._create_output, out_qos)
        self._worker = Worker(
            f"{self.get_name()}_worker", list(self._cameras.values()), self._pipeline, labels=self._labels,
            keypoint_names=keypoint_names,
            faults=FaultPolicy(int(values["engine.max_consecutive_failures"])), logger=self.get_logger(),
            clock=self.get_clock(), on_fatal=self._on_fatal, max_age_ms=float(values["input.max_age_ms"]),
            keypoint_threshold=float(values["keypoint_threshold"]), score_threshold=float(values["score_threshold"]),
            batch_wait_ms=float(values["input.batch_wait_ms"]),
            # input.raw_subscription: each camera's serialized messages read by its transport's reader
            readers={"raw": read_image, "compressed": read_compressed} if values["input.raw_subscription"] else None,
            postprocess=postprocess_params(values), mask_encoding=mask_encoding(int(values["max_detections"])),
            depth=self._depth)
        self._raw = bool(values["input.raw_subscription"])
        self.get_logger().info(
            f"pipeline {getattr(self._pipeline, 'name', type(self._pipeline).__name__)}; cameras "
            f"{', '.join(f'{c} ({_TOPIC_SUFFIX[transports[c]]})' for c in cameras)} "
            f"(QoS {values['input.qos']} depth {values['input.depth']}); 3D from depth: "
            f"{', '.join(self._depth.cameras) if self._depth is not None else 'off'}; tracking: "
            f"{'on' if tracking is not None else 'off'}"
        )

    def _create_output(self, msg_type: Any, topic: str, qos: Any) -> Any:
        """A publisher of the node's outputs (the managed node makes lifecycle publishers)."""
        return self.create_publisher(msg_type, topic, qos)

    def _activate(self) -> None:
        """Publish each camera's label info, subscribe to the cameras and start the worker."""
        for cam in self._cameras.values():
            self._publish_label_info(cam, float(self._params.values["score_threshold"]))
        for name, cam in self._cameras.items():
            topic = f"{name}/{_TOPIC_SUFFIX[cam.transport]}"
            msg_type = CompressedImage if cam.transport == "compressed" else Image
            cam.sub = self.create_subscription(
                msg_type,
                topic,
                lambda msg, cam=cam: self._worker.offer(cam, msg),
                self._in_qos,
                callback_group=cam.group,
                event_callbacks=subscription_qos_events(self, resolve_topic(self, topic), self._in_qos),
                raw=self._raw,
            )
        if self._depth is not None:
            self._depth.subscribe(self._in_qos)
        self._started = time.monotonic()
        for cam in self._cameras.values():
            cam.reset_tracks()
        self._worker.start()
        # drops, silent cameras and the summary in the node's own log (steady clock: also with use_sim_time)
        self._camera_log = CameraLog(self._cameras.values(), self.get_logger().warning, self.get_logger().info,
                                     started=self._started, publishers=self.get_publishers_info_by_topic)
        self._camera_log_timer = self.create_timer(CHECK_PERIOD_S, self._camera_log.tick,
                                                   callback_group=MutuallyExclusiveCallbackGroup(),
                                                   clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _deactivate(self) -> None:
        """Stop taking frames: unsubscribe, let the frame in flight complete (it is published), then drop the frames
        still waiting (counted as ``inactive``). Keeps the pipeline and publishers."""
        self._unsubscribe()
        if self._worker is not None:
            self._worker.stop()
        self._end_camera_log()
        if self._worker is not None:
            self._worker.discard_waiting("inactive")
        for cam in self._cameras.values():
            cam.reset_tracks()

    def _unsubscribe(self) -> None:
        """Destroy the camera subscriptions (executor thread: on deactivate, and after a fatal fault)."""
        for cam in self._cameras.values():
            if cam.sub is not None:
                self.destroy_subscription(cam.sub)
                cam.sub = None
        if self._depth is not None:
            self._depth.unsubscribe()

    def _cleanup(self, close_pipeline: bool = True) -> None:
        """Undo :meth:`_configure`: destroy the output publishers and close the pipeline if this node built it (the
        engine, the device and pinned buffers and the stream go with it). ``close_pipeline=False`` (a poisoned CUDA
        context, the process about to end): the pipeline is only let go of, kept referenced, never closed."""
        cameras, self._cameras = self._cameras, {}
        self._worker = None
        depth, self._depth = self._depth, None
        if depth is not None:
            depth.destroy()
        for cam in cameras.values():
            for pub in (cam.pub_detections, cam.pub_keypoints, cam.pub_label_info, cam.pub_debug, cam.pub_mask):
                if pub is not None:
                    self.destroy_publisher(pub)
        self._release_pipeline(close_pipeline)

    def _release_pipeline(self, close: bool = True) -> None:
        pipeline, self._pipeline = self._pipeline, None
        if not close:  # its destructors would each fail on the poisoned context: it goes with the process
            self._abandoned_pipeline = pipeline
        elif pipeline is not None and self._owns_pipeline:
            pipeline.close()

    def _publish_label_info(self, cam: Camera, threshold: float) -> None:
        header = Header()
        header.stamp = self.get_clock().now().to_msg()
        cam.pub_label_info.publish(label_info_msg(self._labels, threshold, header))

    def _on_parameters_changed(self, changed: dict[str, Any]) -> None:
        values = self._params.values
        worker = self._worker  # None while unconfigured: _configure reads the values
        if worker is not None and _POSTPROCESS_PARAMS & changed.keys():
            worker.set_postprocess(postprocess_params(values))
            worker.keypoint_threshold = float(values["keypoint_threshold"])
            worker.score_threshold = float(values["score_threshold"])
        if worker is not None and "input.max_age_ms" in changed:
            worker.max_age_ms = float(values["input.max_age_ms"])
        if "score_threshold" in changed:
            for cam in self._cameras.values():
                self._publish_label_info(cam, float(values["score_threshold"]))

    # ------------------------------------------------------------------------------------------- faults
    def _on_fatal(self, reason: str) -> None:
        """Worker thread, on a fatal fault (the worker takes no further frame): ERROR in the log and on
        /diagnostics, then wake the executor, which unsubscribes from the cameras. The process decision is ``main()``'s (or the host application's): the
        node never shuts down its context, which it does not own (a composed node next to others), and never from
        the worker thread (on rclpy 9 that destroys every node of the context, this one from its own worker)."""
        self.fatal_error = reason
        self.get_logger().error(f"fatal: {reason}; stopping (exit status {EXIT_FATAL}; the launch file's respawn restarts it)")
        try:
            self.publish_fatal_diagnostics()
        finally:
            self._fatal_signal.trigger()  # in the executor: unsubscribe; main() sees fatal_error and ends the process

    # ------------------------------------------------------------------------------------------- diagnostics
    def diagnostics(self) -> DiagnosticArray:
        """One status per camera (see :mod:`vrt_ros.ros.diagnostics`); advances the per-period counters."""
        now = time.monotonic()
        period_s, self._diagnostics_last = now - self._diagnostics_last, now
        backend = str(getattr(self._pipeline, "name", type(self._pipeline).__name__))
        out = DiagnosticArray()
        out.header.stamp = self.get_clock().now().to_msg()
        # compressed input (any camera) on the GPU path: frames decoded on the GPU, and on the CPU per reason (the
        # pipeline's totals, shared by its compressed cameras), e.g. decode.gpu, decode.cpu.png
        decode = dict(getattr(self._pipeline, "decode_stats", None) or {}) if self._compressed else {}
        statuses = camera_statuses(self.get_fully_qualified_name(), backend, self._cameras.values(), now, period_s,
                                   self._started, dict(getattr(self._pipeline, "stats", None) or {}), decode,
                                   dict(self._worker.batch_sizes) if self._worker is not None else None)
        if self.fatal_error is not None:
            mark_fatal(statuses, self.fatal_error)
        out.status = statuses
        return out

    def publish_diagnostics(self) -> None:
        """Publish :meth:`diagnostics` on ``/diagnostics`` (called by the node's timer each period)."""
        self._diagnostics_pub.publish(self.diagnostics())

    def publish_fatal_diagnostics(self) -> bool:
        """Publish :meth:`diagnostics` (ERROR, after a fatal fault) and wait, at most :data:`FATAL_DELIVERY_S`, until
        every ``/diagnostics`` subscriber has acknowledged it: the process may end right after (``main()`` waits for
        :attr:`fatal_reported`, which this sets).

        Returns:
            True when every subscriber acknowledged it in time (at once without subscribers).
        """
        try:
            self._diagnostics_pub.publish(self.diagnostics())
            return self._diagnostics_pub.wait_for_all_acked(Duration(nanoseconds=int(FATAL_DELIVERY_S * 1e9)))
        finally:
            self.fatal_reported.set()

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
        worker = getattr(self, "_worker", None)
        if worker is not None:
            worker.stop()
        self._end_camera_log()
        log_bridge.detach(self.get_logger())
        super().destroy_node()
        self._release_pipeline()
