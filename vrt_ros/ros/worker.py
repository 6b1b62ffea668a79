"""The detector node's worker: one thread that takes the cameras' newest frames, runs them through the pipeline and
publishes each camera's results (:mod:`vrt_ros.ros.node` owns the ROS wiring around it).

One route, for one frame or ``max_batch``: every batch of taken frames, a frame alone being a batch of one, goes to
the pipeline in one ``process_batch`` call. The steps, each in the module that owns it:

- :meth:`Worker.offer` (the subscription callback): store a frame as its camera's newest and wake the thread; a
  frame still waiting is replaced (dropped, reason ``superseded``) (:class:`~vrt_ros.ros.frame_taking.FrameSlots`).
- taking: blocks until a camera has a frame, then takes up to ``max_batch`` cameras' frames in turn, waiting at most
  ``input.batch_wait_ms`` for cameras expected in that time (:class:`vrt_ros.inference.batching.BatchPlanner`); ``[]`` once
  stopped (:meth:`FrameSlots.take <vrt_ros.ros.frame_taking.FrameSlots.take>`).
- :meth:`Worker.process`: drop the stale frames, CPU-decode the compressed ones the pipeline does not decode
  (outside the pipeline lock, so nodes sharing a pipeline decode in parallel), pair depth with one
  ``depth.wait_ms`` deadline for the whole batch (:mod:`vrt_ros.ros.batch_input`,
  :meth:`vrt_ros.ros.depth_input.DepthInputs.pair_batch`), run ONE ``process_batch`` under the pipeline lock (an
  input fault drops its slot only, an engine failure drops every frame of the batch as ``engine_error`` and counts
  once toward ``engine.max_consecutive_failures``), then :meth:`publish` each frame.
- :meth:`Worker.publish`: one frame's detections (and keypoints, instance mask, debug image) on its camera's
  publishers, and the camera's counters and latencies; with tracking on, the camera's tracker first gives them their
  track ids (:func:`vrt_ros.tracking.output.track_frame`).
- faults and drops: :class:`vrt_ros.ros.worker_faults.FaultHandler` (the fault table, the fault policy, throttled
  logs).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Callable, Mapping, Sequence

from vrt_ros.faults import READ, FaultPolicy
from vrt_ros.inference.pipeline import Pipeline, call_lock
from vrt_ros.ros.batch_input import BatchInput, batch_frame
from vrt_ros.ros.camera import Camera
from vrt_ros.ros.convert import debug_image_msg, detections_to_cdr, keypoints_to_cdr
from vrt_ros.ros.frame_taking import Frame, FrameSlots
from vrt_ros.ros.instance_mask import MaskRequests, instance_mask_msg
from vrt_ros.ros.worker_faults import FaultHandler
from vrt_ros.types import Detections, PostprocessParams

__all__ = ["Frame", "Worker"]


class Worker:
    """The worker thread of one node and the steps it runs (module docstring).

    Args:
        name: the thread's name.
        cameras: the node's cameras, in parameter order (their publishers already made; each camera's ``transport``
            says what its frames are: one batch may hold raw and compressed frames).
        pipeline: the pipeline frames go through (may be shared with other nodes).
        labels: class names for the detection messages.
        keypoint_names: the head's keypoint names (empty: no keypoints topic).
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
        max_batch: most frames per pipeline call (the pipeline's ``max_batch``; 1 for pipelines without batches).
        batch_sizes: batches run, by size (the batch-size histogram on /diagnostics).
        slots: the cameras' frame slots and the batch planner (:class:`~vrt_ros.ros.frame_taking.FrameSlots`).
    """

    def __init__(self, name: str, cameras: Sequence[Camera], pipeline: Pipeline, *, labels: Sequence[str],
                 keypoint_names: Sequence[str], faults: FaultPolicy, logger: Any, clock: Any,
                 on_fatal: Callable[[str], None], max_age_ms: float = 0.0, keypoint_threshold: float = 0.5,
                 score_threshold: float = 0.35, readers: Mapping[str, Callable[[bytes], Any]] | None = None,
                 postprocess: PostprocessParams | None = None, mask_encoding: str = "mono8",
                 batch_wait_ms: float = 0.0, depth: Any = None) -> None:
        self.name = name
        self.cameras = list(cameras)
        self.pipeline = pipeline
        self.labels = labels
        self.keypoint_names = tuple(keypoint_names)
        self.faults = faults
        self.max_age_ms = max_age_ms
        self.keypoint_threshold = keypoint_threshold
        self.score_threshold = score_threshold
        self._logger = logger
        self._clock = clock
        self._readers = readers
        self.depth = depth
        self._pipeline_lock = call_lock(pipeline)  # shared with every other node on this pipeline
        self._pending_postprocess = None
        self._masks = MaskRequests(pipeline, postprocess)
        self.mask_encoding = mask_encoding
        self.max_batch = max(1, int(getattr(pipeline, "max_batch", 1) or 1))
        self.slots = FrameSlots(self.cameras, self.max_batch, batch_wait_ms)
        self._faults = FaultHandler(faults, logger, self.slots.stop, on_fatal)
        self.fault, self.fault_batch, self.drop = self._faults.fault, self._faults.fault_batch, self._faults.drop
        self._input = BatchInput(clock, self.drop, self.fault)
        # the pipeline decodes compressed frames itself (GPU path): asked once, not per batch
        self._gpu_decodes = bool(getattr(pipeline, "decodes_compressed", False))
        self._thread: threading.Thread | None = None
        self.batch_sizes: Counter = Counter()

    # ------------------------------------------------------------------------------------------- thread
    def start(self) -> None:
        """Start taking frames (a new thread)."""
        self.slots.start()
        thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        thread.start()
        self._thread = thread  # only a started thread: stop() joins it (a stop during start() found none to join)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop after the current batch (which completes and is published); waits for the thread unless called from
        it. Frames still waiting stay in their slots (:meth:`discard_waiting`)."""
        self.slots.stop()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)

    @property
    def stopping(self) -> bool:
        """True once stopped, or after a fatal fault: no further frame is taken."""
        return self.slots.stopping

    def discard_waiting(self, reason: str) -> None:
        """Drop the frames still waiting in the slots, counted under ``reason`` (not logged)."""
        self.slots.discard(reason)

    def set_postprocess(self, params: Any) -> None:
        """Postprocess parameters to apply before the next batch (applied under the pipeline lock)."""
        with self._pipeline_lock:
            self._pending_postprocess = params

    def _run(self) -> None:
        while True:
            frames = self.slots.take()
            if not frames:
                return
            try:
                self.process(frames)
            except Exception as exc:  # publishing during shutdown, or a bug: the worker must not die
                if self.slots.stopping:
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
        self.slots.put(cam, None if fault is not None else msg, time.monotonic())
        if fault is not None:
            self.fault(cam, fault, READ)
            return
        # Yield the GIL: the woken worker takes the frame now instead of after the executor's own Python loop
        # (callback -> worker 0.46 -> 0.12 ms p50 measured with 1080p frames, issue 14).
        time.sleep(0)

    def process(self, frames: Sequence[Frame]) -> None:
        """Run taken frames (1 .. ``max_batch``) as ONE ``process_batch`` call (module docstring): stale frames and
        failed CPU decodes are dropped first, depth paired with one deadline for the batch; an input fault drops its
        slot, an engine failure the batch (counted once by the fault policy); then each frame is published with the
        batch's stage times (plus ``batch_wait``, ms)."""
        ready = self._input.ready(frames, self.max_age_ms, self._gpu_decodes)
        if not ready:
            return
        if self.depth is not None:
            self.depth.pair_batch(ready)
        with self._pipeline_lock:
            if self._pending_postprocess is not None:
                self._masks.set_params(self._pending_postprocess)  # applied with each call (MaskRequests.before)
                self._pending_postprocess = None
            self._masks.before()
            done = self._infer(ready)
        for frame, dets, timings in done:
            self.publish(frame, dets, timings)

    def _infer(self, frames: Sequence[Frame]) -> list[tuple[Frame, Detections, dict[str, float]]]:
        """The one ``process_batch`` call for ``frames`` (under the pipeline lock). Returns the processed frames with
        the call's own stage times (every frame of the batch shares them), not the pipeline's last call's."""
        masks = self._masks.for_batch([f.cam for f in frames])  # None: the pipeline's own want_masks (no masks)
        try:
            batch = [batch_frame(f) for f in frames]
            if self.depth is not None:
                results = self.depth.process_batch(self.pipeline, frames, batch, masks)
            elif masks is None:
                results = self.pipeline.process_batch(batch)
            else:
                results = self.pipeline.process_batch(batch, masks)
        except Exception as exc:  # noqa: BLE001 - the whole batch failed: every frame dropped, ONE failure counted
            self.fault_batch([f.cam for f in frames], exc)
            return []
        timings = dict(next((r.timings for r in results if isinstance(r, Detections)), {}))
        timings["batch_wait"] = self.slots.batch_wait_ms
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
