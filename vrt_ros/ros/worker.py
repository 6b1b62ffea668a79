"""The detector node's worker: one thread that takes the cameras' newest frames, runs them through the pipeline and
publishes each camera's results (:mod:`vrt_ros.ros.node` owns the ROS wiring around it).

The steps, each a method so that a step can change without the others:

- :meth:`Worker.offer` (the subscription callback): store a frame as its camera's newest and wake the thread; a
  frame still waiting is replaced (dropped, reason ``superseded``).
- :meth:`Worker.take`: which frames to process next, and when: blocks until a camera has a frame; returns the
  next camera's (cameras in turn) or, when the pipeline takes batches (``max_batch`` > 1), up to ``max_batch``
  cameras' frames in turn, waiting at most ``input.batch_wait_ms`` for cameras expected in that time
  (:class:`vrt_ros.batching.BatchPlanner`); ``[]`` once stopped.
- :meth:`Worker.process`: a list of taken frames: drop the stale ones, decode on the CPU where needed (outside the
  pipeline lock, so cameras decode in parallel), run the pipeline under the pipeline lock (one
  ``process_batch`` call for a batch: an input fault drops its slot only, an engine failure drops every frame of
  the batch as ``engine_error`` and counts once toward ``engine.max_consecutive_failures``), then :meth:`publish`.
- :meth:`Worker.publish`: one frame's detections (and keypoints, instance mask, debug image) on its camera's
  publishers, and the camera's counters and latencies; with tracking on, the camera's tracker first gives them their
  track ids (:func:`vrt_ros.tracking.output.track_frame`).
- :meth:`Worker.fault`: one failed frame, by the fault table (:mod:`vrt_ros.faults`): an input fault is dropped
  and counted under its reason; an engine fault is counted (``engine_error``) and goes to the
  :class:`~vrt_ros.faults.FaultPolicy`, which says when it is fatal: the worker then takes no further frame and
  calls ``on_fatal(reason)`` (the node decides what happens to it).
- :meth:`Worker.drop`: a dropped frame: counted by reason, logged at most once per camera and reason every
  :data:`~vrt_ros.ros.camera_log.WARN_THROTTLE_S` seconds.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vrt_ros.batching import BatchPlanner
from vrt_ros.faults import DECODE, ENGINE_ERROR, INPUT, PIPELINE, READ, FaultPolicy, classify
from vrt_ros.pipeline import Pipeline, call_lock
from vrt_ros.ros.camera import Camera, header_stamp_ns
from vrt_ros.ros.camera_log import WARN_THROTTLE_S, drop_frame  # noqa: F401 (WARN_THROTTLE_S: documented here)
from vrt_ros.ros.convert import compressed_to_bgr, debug_image_msg, detections_to_cdr, image_view, keypoints_to_cdr
from vrt_ros.ros.instance_mask import MaskRequests, instance_mask_msg
from vrt_ros.types import BatchFrame, BgrFrame, CompressedFrame, Detections, PostprocessParams, RawFrame



@dataclass
class Frame:
    """One frame taken from a camera's slot.

    Attributes:
        cam: its camera.
        msg: the ``sensor_msgs/Image`` or ``CompressedImage``.
        arrived: ``time.monotonic()`` when it reached the callback, s.
        stamp_ns: its header stamp, ns since the epoch (0: unset).
        bgr: the CPU-decoded image (HxWx3 uint8) of a compressed frame the pipeline does not decode itself.
        depth: with depth input, its paired depth or the refusal (:meth:`vrt_ros.ros.depth_input.DepthInputs.pair`).
    """

    cam: Camera
    msg: Any
    arrived: float
    stamp_ns: int = 0
    bgr: np.ndarray | None = None
    depth: Any = None


class Worker:
    """The worker thread of one node and the steps it runs (module docstring).

    Args:
        name: the thread's name.
        cameras: the node's cameras, in parameter order (their publishers already made).
        pipeline: the pipeline frames go through (may be shared with other nodes).
        labels: class names for the detection messages.
        keypoint_names: the head's keypoint names (empty: no keypoints topic).
        compressed: at least one camera sends ``CompressedImage`` (its ``transport``): the pipeline's GPU decode is
            used for those cameras' frames, each frame decided by its camera's transport.
        faults: the engine fault policy (kept across start/stop: deactivating does not reset the count).
        logger: the node's ROS logger.
        clock: the node's clock (header stamp ages: ``input.max_age_ms``).
        on_fatal: called once, from the worker thread, with the reason when a fault is fatal.
        max_age_ms: ``input.max_age_ms`` (0: no stale check); the node updates :attr:`max_age_ms`.
        keypoint_threshold: ``keypoint_threshold`` for the debug image; the node updates it.
        score_threshold: ``score_threshold``, the published minimum with tracking on (the pipeline then keeps lower
            scores for the tracker); the node updates it.
        readers: with ``input.raw_subscription``, by camera transport (``raw``, ``compressed``): reads the
            serialized bytes the subscription delivers into a message (:func:`vrt_ros.ros.cdr_read.read_image`,
            ``read_compressed``); None: messages arrive typed.
        postprocess: the postprocess parameters the pipeline starts with (masks are switched on per frame from
            them, or asked per frame of a batch: :class:`~vrt_ros.ros.instance_mask.MaskRequests`).
        mask_encoding: ``mono8`` or ``mono16`` for ``<cam>/instance_mask``.
        depth: the node's depth input and 3D output (:class:`vrt_ros.ros.depth_input.DepthInputs`); None: no depth.
        batch_wait_ms: ``input.batch_wait_ms``: longest wait for other cameras' frames to join a batch.

    Attributes:
        max_batch: frames per pipeline call (the pipeline's ``max_batch``; 1 for pipelines without batches).
        batch_sizes: batches run, by size (the batch-size histogram on /diagnostics).
    """

    def __init__(self, name: str, cameras: Sequence[Camera], pipeline: Pipeline, *, labels: Sequence[str],
                 keypoint_names: Sequence[str], compressed: bool, faults: FaultPolicy, logger: Any, clock: Any,
                 on_fatal: Callable[[str], None], max_age_ms: float = 0.0, keypoint_threshold: float = 0.5,
                 score_threshold: float = 0.35, readers: Mapping[str, Callable[[bytes], Any]] | None = None,
                 postprocess: PostprocessParams | None = None, mask_encoding: str = "mono8",
                 batch_wait_ms: float = 0.0, depth: Any = None) -> None:
        self.name = name
        self.cameras = list(cameras)
        self.pipeline = pipeline
        self.labels = labels
        self.keypoint_names = tuple(keypoint_names)
        self.compressed = compressed
        self.faults = faults
        self.max_age_ms = max_age_ms
        self.keypoint_threshold = keypoint_threshold
        self.score_threshold = score_threshold
        self._logger = logger
        self._clock = clock
        self._on_fatal = on_fatal
        self._readers = readers
        self.depth = depth
        self._gpu_decode = getattr(pipeline, "process_compressed", None) if compressed else None
        self._pipeline_lock = call_lock(pipeline)  # shared with every other node on this pipeline
        self._pending_postprocess = None
        self._masks = MaskRequests(pipeline, postprocess)
        self.mask_encoding = mask_encoding
        self._work = threading.Condition()  # guards every camera's slot and _stopping; notified when a frame arrives
        self._stopping = True
        self._turn = 0
        self._fatal_reported = False  # on_fatal called (once per worker)
        self._thread: threading.Thread | None = None
        self.max_batch = max(1, int(getattr(pipeline, "max_batch", 1) or 1))
        self._planner = BatchPlanner(len(self.cameras), self.max_batch, batch_wait_ms)
        self._index = {id(cam): i for i, cam in enumerate(self.cameras)}
        self.batch_sizes: Counter = Counter()
        self._batch_wait_ms = 0.0  # the last batch's wait for other cameras, ms

    # ------------------------------------------------------------------------------------------- thread
    def start(self) -> None:
        """Start taking frames (a new thread)."""
        with self._work:
            self._stopping = False
        thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        thread.start()
        self._thread = thread  # only a started thread: stop() joins it (a stop during start() found none to join)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop after the current frame (which completes and is published); waits for the thread unless called from
        it. Frames still waiting stay in their slots (:meth:`discard_waiting`)."""
        with self._work:
            self._stopping = True
            self._work.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)

    @property
    def stopping(self) -> bool:
        """True once stopped, or after a fatal fault: no further frame is taken."""
        return self._stopping

    def discard_waiting(self, reason: str) -> None:
        """Drop the frames still waiting in the slots, counted under ``reason`` (not logged)."""
        with self._work:
            for cam in self.cameras:
                if cam.slot is not None:
                    cam.slot = None
                    with cam.slot_lock:
                        cam.counters.dropped[reason] += 1

    def set_postprocess(self, params: Any) -> None:
        """Postprocess parameters to apply before the next frame (applied under the pipeline lock)."""
        with self._pipeline_lock:
            self._pending_postprocess = params

    def _run(self) -> None:
        while True:
            frames = self.take()
            if not frames:
                return
            try:
                self.process(frames)
            except Exception as exc:  # publishing during shutdown, or a bug: the worker must not die
                if self._stopping:
                    return
                for frame in frames:
                    self.drop(frame.cam, "internal_error", f"{type(exc).__name__}: {exc}", error=True)

    # ------------------------------------------------------------------------------------------- steps
    def offer(self, cam: Camera, msg: Any) -> None:
        """Subscription callback: store the frame as this camera's newest and wake the worker (never blocks long).
        With ``readers`` (raw subscription) the bytes are read here by the camera's transport's reader (header,
        geometry, a view of the pixels: about 0.05 ms at 1080p); bytes it refuses are counted as received and dropped under their reason (the fault
        table's read stage: whatever the reader raises is an input fault)."""
        fault = None
        if self._readers is not None:
            try:
                msg = self._readers[cam.transport](msg)
            except Exception as exc:  # noqa: BLE001 - classified by the fault table
                fault = exc
        now = time.monotonic()
        with self._work:
            with cam.slot_lock:
                cam.counters.received += 1
                cam.last_frame_mono = now
                if fault is None and cam.slot is not None:
                    cam.counters.dropped["superseded"] += 1
            if fault is None:
                cam.slot = (msg, now)
                self._planner.arrived(self._index[id(cam)], now)
                self._work.notify()
        if fault is not None:
            self.fault(cam, fault, READ)
            return
        # Yield the GIL: the woken worker takes the frame now instead of after the executor's own Python loop
        # (callback -> worker 0.46 -> 0.12 ms p50 measured with 1080p frames, issue 14).
        time.sleep(0)

    def take(self) -> list[Frame]:
        """Block until a camera has a frame; the next camera's in turn (one frame), or for a batching pipeline up
        to ``max_batch`` cameras' frames (see the module docstring); ``[]`` once stopping."""
        cameras = self.cameras
        with self._work:
            while True:
                while not self._stopping and all(c.slot is None for c in cameras):
                    self._work.wait()
                if self._stopping:
                    return []
                if self.max_batch == 1:
                    break
                frames = self._take_batch()
                if frames or self._stopping:
                    return frames
                # the waiting frames were discarded while the batch waited: wait for the next one
            for k in range(len(cameras)):
                cam = cameras[(self._turn + k) % len(cameras)]
                if cam.slot is not None:
                    self._turn = (self._turn + k + 1) % len(cameras)
                    break
            (msg, arrived), cam.slot = cam.slot, None
        return [Frame(cam, msg, arrived, header_stamp_ns(msg.header))]

    def _take_batch(self) -> list[Frame]:
        """Under ``_work``, with a frame waiting: wait as the planner says (new frames wake it), then take the
        planner's pick of the waiting cameras' frames."""
        cameras, planner = self.cameras, self._planner
        started = time.monotonic()
        while True:
            ready = [i for i, c in enumerate(cameras) if c.slot is not None]
            if self._stopping or not ready:
                return []
            now = time.monotonic()
            wait = planner.wait_s(ready, min(cameras[i].slot[1] for i in ready), now)
            if wait <= 0:
                break
            self._work.wait(timeout=wait)
        self._batch_wait_ms = (time.monotonic() - started) * 1e3
        taken = []
        for i in planner.pick(ready):
            cam = cameras[i]
            (msg, arrived), cam.slot = cam.slot, None
            taken.append(Frame(cam, msg, arrived, header_stamp_ns(msg.header)))
        return taken

    def process(self, frames: Sequence[Frame]) -> None:
        """Drop the stale frames, decode the rest where the pipeline does not, run them through the pipeline (under
        the pipeline lock) and publish each one's results; a failed frame goes to :meth:`fault`."""
        ready = [f for f in frames if not self._stale(f) and self._decode(f)]
        if self.depth is not None:
            for frame in ready:
                self.depth.pair(frame)
        done: list[tuple[Frame, Detections, dict[str, float]]] = []
        with self._pipeline_lock:
            if ready and self._pending_postprocess is not None:
                self._masks.set_params(self._pending_postprocess)  # applied with each call (MaskRequests.before)
                self._pending_postprocess = None
            if self.max_batch > 1:
                if ready:
                    self._masks.before()
                done = self._infer_batch(ready) if ready else []
                ready = []
            for frame in ready:
                try:
                    self._masks.before(frame.cam)
                    dets = self._infer(frame)
                except Exception as exc:  # noqa: BLE001 - classified by the fault table
                    self.fault(frame.cam, exc)
                    continue
                self.faults.success()
                done.append((frame, dets, dict(dets.timings)))  # the call's own: the pipeline may be shared
        for frame, dets, timings in done:
            self.publish(frame, dets, timings)

    def _infer_batch(self, frames: Sequence[Frame]) -> list[tuple[Frame, Detections, dict[str, float]]]:
        """One ``process_batch`` call for ``frames``; input faults drop their slot, an engine failure the batch
        (counted once by the fault policy). Returns the processed frames with the batch's timings (plus
        ``batch_wait``, ms)."""
        masks = self._masks.for_batch([f.cam for f in frames])  # None: the pipeline's own want_masks (no masks)
        try:
            batch = [self._batch_frame(f) for f in frames]
            results = self.pipeline.process_batch(batch) if masks is None else self.pipeline.process_batch(batch, masks)
        except Exception as exc:  # noqa: BLE001 - the whole batch failed: every frame dropped, ONE failure counted
            self.fault_batch([f.cam for f in frames], exc)
            return []
        # the call's own stages (every frame of the batch shares them), not the pipeline's last call's
        timings = dict(next((r.timings for r in results if isinstance(r, Detections)), {}))
        timings["batch_wait"] = self._batch_wait_ms
        size = int(timings.pop("batch_size", len(frames)))
        done = []
        for frame, result in zip(frames, results):
            if isinstance(result, BaseException):
                self.fault(frame.cam, result)
                continue
            done.append((frame, result, timings))
        if done:
            self.faults.success()
            self.batch_sizes[size] += 1
            for frame, _, _ in done:
                with frame.cam.slot_lock:
                    frame.cam.counters.batch_sizes[size] += 1
        return done

    def _batch_frame(self, frame: Frame) -> BatchFrame:
        """The frame as the pipeline's batch value (raw view, compressed payload for the GPU decode, or BGR)."""
        msg = frame.msg
        if self._gpu_decode is not None and frame.cam.transport == "compressed":
            return CompressedFrame(str(msg.format), msg.data)
        if frame.bgr is not None:
            return BgrFrame(frame.bgr)
        return RawFrame(*image_view(msg))

    def _stale(self, frame: Frame) -> bool:
        max_age_ms = self.max_age_ms
        if max_age_ms > 0 and frame.stamp_ns > 0:
            age_ms = (self._clock.now().nanoseconds - frame.stamp_ns) / 1e6
            if age_ms > max_age_ms:
                self.drop(frame.cam, "stale",
                          f"header stamp is {age_ms:.0f} ms old, more than input.max_age_ms {max_age_ms:g}")
                return True
        return False

    def _decode(self, frame: Frame) -> bool:
        """CPU-decode a compressed frame the pipeline does not decode itself (the GPU path decodes JPEGs on its
        stream); False when it failed (handled by :meth:`fault`)."""
        if frame.cam.transport == "compressed" and self._gpu_decode is None:
            try:
                frame.bgr = compressed_to_bgr(frame.msg)
            except Exception as exc:  # noqa: BLE001 - classified by the fault table
                self.fault(frame.cam, exc, DECODE)
                return False
        return True

    def _infer(self, frame: Frame) -> Detections:
        msg = frame.msg
        if self._gpu_decode is not None and frame.cam.transport == "compressed":
            return self._gpu_decode(str(msg.format), msg.data)
        if frame.bgr is not None:
            return self.pipeline.process_bgr(frame.bgr)
        spec, data = image_view(msg)
        if self.depth is not None:  # the GPU path computes the depth statistic inside the frame's sync
            return self.depth.infer(self.pipeline, frame, spec, data)
        return self.pipeline.process(spec, data)

    def publish(self, frame: Frame, dets: Detections, timings: dict[str, float]) -> None:
        """Publish one frame's detections (its header unchanged) on its camera's topics and count it as processed.

        Args:
            frame: the frame (its camera, message and arrival time).
            dets: its detections, in source pixels.
            timings: ms per pipeline stage.
        """
        cam, header = frame.cam, frame.msg.header
        ids = None
        if cam.tracker is not None:
            dets, ids = self._track(frame, dets)
        # serialized here (vrt_ros.ros.cdr): rclpy's per-field message building and conversion cost ~20 us a detection
        cam.pub_detections.publish(detections_to_cdr(dets, header, self.labels, ids))
        if cam.pub_keypoints is not None:
            cam.pub_keypoints.publish(keypoints_to_cdr(dets, header, self.keypoint_names, ids))
        if cam.pub_mask is not None and dets.label_mask is not None and cam.pub_mask.get_subscription_count() > 0:
            cam.pub_mask.publish(instance_mask_msg(dets.label_mask, header, self.mask_encoding))
        if cam.pub_debug is not None and cam.pub_debug.get_subscription_count() > 0:  # drawn only when watched
            cam.pub_debug.publish(debug_image_msg(frame.msg, frame.bgr, dets, cam.transport == "compressed",
                                                  self.labels, self.keypoint_threshold))
        stamp_ns = frame.stamp_ns
        age_ms = (self._clock.now().nanoseconds - stamp_ns) / 1e6 if stamp_ns > 0 else float("nan")
        callback_ms = (time.monotonic() - frame.arrived) * 1e3
        with cam.slot_lock:
            cam.counters.processed += 1
            cam.counters.last_timings = timings
            cam.counters.last_age_ms = age_ms
            cam.counters.last_callback_ms = callback_ms
            for stage, ms in timings.items():
                cam.latencies.add(stage, ms)
            cam.latencies.add("callback", callback_ms)
            cam.latencies.add("age", age_ms)
        if self.depth is not None:  # after the 2D outputs: 3D never delays them
            self.depth.publish(frame, dets, ids)

    def _track(self, frame: Frame, dets: Detections) -> tuple[Detections, list[str]]:
        """The camera's tracking step: track ids for the detections it publishes. Time is the header stamp (an
        unstamped frame: its arrival on the ROS clock, :meth:`Camera.tracking_time`); a reset on a jump is logged."""
        from vrt_ros.tracking.output import track_frame  # only with tracking on (camera.py imports it then)

        cam = frame.cam
        stamp_ns, estimated = cam.tracking_time(frame.stamp_ns, frame.arrived, self._clock.now().nanoseconds)
        dets, ids = track_frame(cam.tracker, stamp_ns, dets, self.score_threshold, estimated)
        if cam.tracker.reset_reason is not None:
            self._logger.info(f"camera '{cam.name}': tracks reset, {cam.tracker.reset_reason}; new tracks get new ids")
        return dets, ids

    # ------------------------------------------------------------------------------------------- faults
    def fault(self, cam: Camera, exc: BaseException, stage: str = PIPELINE) -> None:
        """One frame of ``cam`` failed with ``exc`` in ``stage`` (:data:`~vrt_ros.faults.READ`,
        :data:`~vrt_ros.faults.DECODE` or :data:`~vrt_ros.faults.PIPELINE`), classified by the fault table (:func:`vrt_ros.faults.classify`): an input
        fault is dropped under its reason and leaves the fault policy alone; an engine fault is counted
        (``engine_error``) and goes to the fault policy; a fatal one stops the worker and calls ``on_fatal``."""
        fault = classify(exc, stage)
        if fault.kind == INPUT:
            self.drop(cam, fault.reason, fault.message)
            return
        self.drop(cam, ENGINE_ERROR, fault.message, error=True)
        fatal = self.faults.failure(exc)
        if fatal is not None and not self._fatal_reported:
            self._fatal_reported = True
            with self._work:
                self._stopping = True
                self._work.notify_all()
            self._on_fatal(fatal)

    def fault_batch(self, cams: Sequence[Camera], exc: BaseException) -> None:
        """A whole batch failed with ``exc``: classified once by the fault table; every frame is dropped under its
        verdict, but the fault policy hears of an engine fault once (one engine call failed, not ``len(cams)``)."""
        fault = classify(exc, PIPELINE)
        if fault.kind == INPUT:
            for cam in cams:
                self.drop(cam, fault.reason, fault.message)
            return
        for cam in cams[:-1]:
            self.drop(cam, ENGINE_ERROR, f"{fault.message} (batch of {len(cams)})", error=True)
        self.fault(cams[-1], exc, PIPELINE)

    def drop(self, cam: Camera, reason: str, message: str, error: bool = False) -> None:
        """Count and log (throttled) a dropped frame of ``cam`` (:func:`vrt_ros.ros.camera_log.drop_frame`)."""
        drop_frame(cam, reason, message, self._logger, error)
