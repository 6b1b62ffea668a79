"""The node's depth input and 3D output (issue 25): per camera with depth, the registered depth image and
camera_info in, ``<cam>/detections_3d`` (``vision_msgs/Detection3DArray``) out.

Wiring (:class:`DepthInputs`, made by the node when ``depth.enabled``): per camera in ``depth.cameras`` (empty:
all), subscriptions to ``<cam>/<depth.topic>`` (``sensor_msgs/Image``, ``16UC1`` mm or ``32FC1`` m) and
``<cam>/<depth.camera_info_topic>`` (``sensor_msgs/CameraInfo``) with the colour input's QoS (``input.qos``,
``input.depth``), and a publisher of ``<cam>/detections_3d``. Depth frames go into the camera's
:class:`~vrt_ros.depth.pairing.DepthRing`; the newest camera_info is kept (its model rebuilt only when it changes).

Three steps the worker calls (:mod:`vrt_ros.ros.worker`):

- :meth:`DepthInputs.pair_batch` (before the batch's inference; waits at most ``depth.wait_ms`` for the whole batch,
  one deadline, never per frame in turn): per frame, the depth frame within ``depth.max_skew_ms`` of the colour
  stamp, checked against the colour frame and camera_info (:mod:`vrt_ros.depth.image`,
  :mod:`vrt_ros.depth.camera_model`); the result, or the refusal, is kept on the frame.
- :meth:`DepthInputs.process_batch`: the batch's pipeline call, with a depth job per paired frame for a GPU pipeline.
- :meth:`DepthInputs.publish` (after the 2D detections went out): the per-box statistic (the pipeline's, computed on
  the GPU per slot inside the batch's one sync, or the CPU reference :func:`vrt_ros.depth.stats.box_stats`), the
  3D boxes (:mod:`vrt_ros.depth.boxes3d`) and the ``Detection3DArray`` with the colour frame's header, published as
  its serialized bytes (:func:`vrt_ros.ros.depth_msgs.detections_3d_cdr`).

Counted per camera in ``CameraCounters.depth`` (``depth.<key>`` on ``/diagnostics``): ``published`` (arrays
published), every refusal reason of :data:`vrt_ros.depth.reasons.REASONS` (a refused frame publishes no 3D array;
its 2D detections are unaffected) and ``box_no_valid_depth`` (boxes without a 3D entry). Refusals are logged at
most once per camera and reason every :data:`~vrt_ros.ros.camera_log.WARN_THROTTLE_S` seconds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from sensor_msgs.msg import CameraInfo as CameraInfoMsg
from sensor_msgs.msg import Image
from vision_msgs.msg import Detection3DArray

from vrt_ros.depth import reasons
from vrt_ros.depth.boxes3d import boxes_3d
from vrt_ros.depth.camera_model import CameraModel, check_info_matches
from vrt_ros.depth.image import DepthImage, depth_scale
from vrt_ros.depth.pairing import DepthRing
from vrt_ros.depth.stats import DepthJob, box_stats
from vrt_ros.errors import FrameError
from vrt_ros.ros.camera import Camera, throttled
from vrt_ros.ros.camera_log import WARN_THROTTLE_S
from vrt_ros.ros.depth_msgs import camera_info, depth_image, detections_3d_cdr
from vrt_ros.ros.qos import subscription_qos_events, resolve_topic
from vrt_ros.types import Detections


@dataclass
class DepthPair:
    """A colour frame's checked depth: the depth image, depth pixels per colour pixel, the camera model, and the
    per-box statistic when the pipeline computed it on the GPU."""

    image: DepthImage
    scale: float
    model: CameraModel
    stats: Any = None
    boxes: Any = None  # the boxes the GPU statistic's rows belong to (the pipeline's detections)


class CameraDepth:
    """The depth state of one camera: its ring, newest camera_info and model, subscriptions and publisher."""

    def __init__(self, cam: Camera, ring_size: int) -> None:
        self.cam = cam
        self.ring = DepthRing(ring_size)
        self._lock = threading.Condition()
        self._info_msg: CameraInfoMsg | None = None
        self._model: tuple[Any, CameraModel | FrameError] | None = None  # (info, model or refusal), worker-side
        self.subs: list = []
        self.pub = None
        self.depth_topic = ""  # resolved when subscribed: named when a colour frame finds no depth
        self.depth_received = 0

    def on_depth(self, msg: Image) -> None:
        self.depth_received += 1
        self.ring.push(depth_image(msg).stamp_ns, msg)

    def on_info(self, msg: CameraInfoMsg) -> None:
        with self._lock:
            self._info_msg = msg
            self._lock.notify_all()

    def model(self, rectified: bool, wait_s: float = 0.0) -> tuple[Any, CameraModel]:
        """The newest camera_info's values and model (cached while it is unchanged); before the first camera_info,
        waits up to ``wait_s`` for it.

        Raises:
            FrameError: ``camera_info_missing``, or the model's refusal (:meth:`CameraModel.from_info`).
        """
        with self._lock:
            self._lock.wait_for(lambda: self._info_msg is not None, timeout=max(0.0, wait_s))
            msg = self._info_msg
        if msg is None:
            raise reasons.refuse(reasons.NO_CAMERA_INFO, f"camera '{self.cam.name}'")
        info = camera_info(msg)
        if self._model is None or self._model[0] != info:
            try:
                self._model = (info, CameraModel.from_info(info, rectified))
            except FrameError as exc:
                self._model = (info, exc)
        result = self._model[1]
        if isinstance(result, FrameError):
            raise result
        return info, result


class DepthInputs:
    """Depth subscriptions, pairing and 3D output of one node's cameras (module docstring).

    Args:
        node: the detector node (subscriptions, logger).
        cameras: the node's cameras by name.
        values: validated parameter values (``depth.*``).
        labels: class names for the 3D detections.
        create_output: the node's publisher factory (``(type, topic, qos) -> publisher``; lifecycle publishers in
            the managed node).
        out_qos: the outputs' QoS.
    """

    def __init__(self, node: Any, cameras: Mapping[str, Camera], values: Mapping[str, Any], labels: Sequence[str],
                 create_output: Callable[..., Any], out_qos: Any) -> None:
        chosen = list(values["depth.cameras"]) or list(cameras)  # validated: cameras of ``cameras`` (config.validate)
        self._node = node
        self._labels = tuple(labels)
        self.topic = str(values["depth.topic"]).strip("/")
        self.info_topic = str(values["depth.camera_info_topic"]).strip("/")
        self.max_skew_ns = int(round(float(values["depth.max_skew_ms"]) * 1e6))
        self.wait_s = float(values["depth.wait_ms"]) / 1e3
        self.range_m = tuple(float(v) for v in values["depth.range_m"])
        self.percentile = float(values["depth.percentile"])
        self.rectified = bool(values["depth.rectified"])
        self.cameras: dict[str, CameraDepth] = {}
        for name in chosen:
            cd = self.cameras[name] = CameraDepth(cameras[name], int(values["depth.ring_size"]))
            cd.pub = create_output(Detection3DArray, f"{name}/detections_3d", out_qos)

    # ------------------------------------------------------------------------------------------- ROS wiring
    def subscribe(self, qos: Any) -> None:
        """Subscribe to every depth camera's depth image and camera_info (the colour input's QoS)."""
        node = self._node
        for name, cd in self.cameras.items():
            cd.depth_topic = resolve_topic(node, f"{name}/{self.topic}")
            for msg_type, topic, callback in ((Image, f"{name}/{self.topic}", cd.on_depth),
                                              (CameraInfoMsg, f"{name}/{self.info_topic}", cd.on_info)):
                cd.subs.append(node.create_subscription(
                    msg_type, topic, callback, qos, callback_group=cd.cam.group,
                    event_callbacks=subscription_qos_events(node, resolve_topic(node, topic), qos)))

    def unsubscribe(self) -> None:
        """Destroy the subscriptions and forget the depth frames waiting in the rings."""
        for cd in self.cameras.values():
            for sub in cd.subs:
                self._node.destroy_subscription(sub)
            cd.subs = []
            cd.ring.clear()

    def destroy(self) -> None:
        """Destroy the publishers (the node's cleanup)."""
        self.unsubscribe()
        for cd in self.cameras.values():
            if cd.pub is not None:
                self._node.destroy_publisher(cd.pub)
                cd.pub = None

    # ------------------------------------------------------------------------------------------- worker steps
    def pair_batch(self, frames: Sequence[Any]) -> None:
        """Pair each frame of a batch with its depth (:meth:`pair`) under ONE ``depth.wait_ms`` deadline for the
        whole batch: a frame whose depth is late waits only what is left of it, so a batch never waits longer than
        ``depth.wait_ms`` however many of its frames wait."""
        deadline = time.monotonic() + self.wait_s
        for frame in frames:
            self.pair(frame, deadline)

    def pair(self, frame: Any, deadline: float | None = None) -> None:
        """Pair ``frame`` (a :class:`vrt_ros.ros.frame_taking.Frame`) with its depth, waiting until ``deadline``
        (monotonic s; None: ``depth.wait_ms`` from now) for a late one: sets ``frame.depth`` to a
        :class:`DepthPair`, or to the :class:`~vrt_ros.errors.FrameError` refusing it; nothing for a camera
        without depth."""
        cd = self.cameras.get(frame.cam.name)
        if cd is None:
            return
        try:
            frame.depth = self._pair(cd, frame, time.monotonic() + self.wait_s if deadline is None else deadline)
        except FrameError as exc:
            frame.depth = exc
        except Exception as exc:  # noqa: BLE001 - whatever a message makes the checks raise: no 3D, 2D unaffected
            frame.depth = reasons.refuse(reasons.INTERNAL, f"pairing: {type(exc).__name__}: {exc}")

    def _pair(self, cd: CameraDepth, frame: Any, deadline: float) -> DepthPair:
        colour_frame = str(frame.msg.header.frame_id)
        left = max(0.0, deadline - time.monotonic())
        msg = cd.ring.wait_match(frame.stamp_ns, self.max_skew_ns, left) if left > 0 \
            else cd.ring.match(frame.stamp_ns, self.max_skew_ns)
        if msg is None:
            raise reasons.refuse(reasons.UNPAIRED, f"colour stamp {frame.stamp_ns * 1e-9:.3f} s, {len(cd.ring)} depth "
                                 f"frame(s) in the ring ({cd.depth_received} received on {cd.depth_topic} since "
                                 f"start), depth.max_skew_ms {self.max_skew_ns / 1e6:g}")
        info, model = cd.model(self.rectified, deadline - time.monotonic())
        size = _colour_size(frame)
        # a JPEG the GPU decodes has no size before its inference: the camera_info's is the colour image's then
        width, height = size if size is not None else (info.width, info.height)
        check_info_matches(info, width, height, colour_frame)
        image = depth_image(msg)
        scale = depth_scale(image, width, height, colour_frame)
        image.array()  # encoding and size checked now, before the frame's inference
        return DepthPair(image, scale, model)

    def process_batch(self, pipeline: Any, frames: Sequence[Any], batch: Sequence[Any],
                      masks: Sequence[bool] | None) -> list:
        """Run a batch (``batch``: the pipeline's values of ``frames``) through ``pipeline.process_batch``; a GPU
        pipeline (``takes_depth``) also computes each paired frame's per-box statistic on its stream, per slot,
        before the batch's one sync (kept on ``frame.depth``), for little-endian depth with rows aligned to the
        pixel size (else the CPU statistic runs in :meth:`publish`). Each statistic is the call's own
        (``Detections.depth_stats``): with several nodes on one pipeline, never another frame's."""
        jobs = [self._job(f.depth) for f in frames] if getattr(pipeline, "takes_depth", False) else []
        kwargs = {} if masks is None else {"masks": masks}
        if not any(job is not None for job in jobs):
            return pipeline.process_batch(batch, **kwargs)
        results = pipeline.process_batch(batch, depth=jobs, **kwargs)
        for frame, dets in zip(frames, results):
            pair = frame.depth
            if isinstance(dets, Detections) and isinstance(pair, DepthPair) and dets.depth_stats is not None:
                pair.stats, pair.boxes = dets.depth_stats, dets.boxes
        return results

    def _job(self, pair: Any) -> DepthJob | None:
        """The GPU depth job of a frame's pairing result (None: refused, or not readable by the kernel)."""
        if isinstance(pair, DepthPair) and _gpu_readable(pair.image):
            return DepthJob(pair.image, pair.scale, self.range_m, self.percentile)
        return None

    def publish(self, frame: Any, dets: Detections, ids: Sequence[str] | None = None) -> None:
        """Publish ``frame``'s 3D detections, or count why not (module docstring).

        Args:
            frame: the processed frame (``frame.depth`` set by :meth:`pair`).
            dets: its 2D detections, source pixels.
            ids: the 2D detections' ids as published (None: index in the frame).
        """
        cd = self.cameras.get(frame.cam.name)
        if cd is None:
            return
        pair = getattr(frame, "depth", None)
        if not isinstance(pair, DepthPair):
            self._count(cd, pair.reason if isinstance(pair, FrameError) else reasons.UNPAIRED, str(pair))
            return
        try:
            stats = _rows_for(pair, dets.boxes)  # computed on the GPU with the frame, else here by the CPU reference
            if stats is None:
                stats = box_stats(pair.image.array(), pair.image.units_per_m, dets.boxes, pair.scale, self.range_m,
                                  self.percentile, theta=dets.theta)
            out = boxes_3d(dets.boxes, stats, pair.model, theta=dets.theta)
            # serialized here (vrt_ros.ros.cdr): rclpy's message building cost 2.3 ms at 100 boxes (issue 35)
            msg = detections_3d_cdr(frame.msg.header, dets, out, self._labels, ids)
        except Exception as exc:  # noqa: BLE001 - the 2D detections are out; count and log, keep running
            self._count(cd, reasons.INTERNAL, f"{type(exc).__name__}: {exc}")
            return
        cd.pub.publish(msg)
        with frame.cam.slot_lock:
            frame.cam.counters.depth["published"] += 1
            if out.no_depth:
                frame.cam.counters.depth[reasons.NO_VALID_DEPTH] += out.no_depth

    def _count(self, cd: CameraDepth, reason: str, message: str) -> None:
        cam = cd.cam
        with cam.slot_lock:
            cam.counters.depth[reason] += 1
            suppressed = throttled(cam.last_warning, f"depth.{reason}", time.monotonic(), WARN_THROTTLE_S)
        if suppressed is None:
            return
        more = f" ({suppressed} more since the last report)" if suppressed else ""
        self._node.get_logger().warning(f"camera '{cam.name}': no 3D detections ({reason}): {message}{more}")


def _rows_for(pair: DepthPair, boxes: Any) -> Any:
    """The GPU statistic's rows of ``boxes``: all of them, or, when a later step (tracking's score threshold) kept
    some of the pipeline's detections, the rows of those boxes; None when there is no GPU statistic or a box is not
    among the pipeline's (then the CPU statistic runs)."""
    if pair.stats is None:
        return None
    if len(pair.stats) == len(boxes) and np.array_equal(pair.boxes, boxes):
        return pair.stats
    index = {tuple(b): i for i, b in enumerate(np.asarray(pair.boxes).tolist())}
    rows = [index.get(tuple(b)) for b in np.asarray(boxes).tolist()]
    return None if any(r is None for r in rows) else pair.stats[rows]


def _gpu_readable(image: DepthImage) -> bool:
    """The GPU kernel reads native (little-endian) pixels from rows aligned to the pixel size; anything else (a
    big-endian or oddly padded depth image) gets the CPU statistic."""
    return not image.is_bigendian and image.step % (2 if image.encoding == "16UC1" else 4) == 0


def _colour_size(frame: Any) -> tuple[int, int] | None:
    """(width, height) of a frame's colour image: the message's, a CPU-decoded compressed frame's, or None for a
    compressed frame not decoded yet (the GPU path decodes it with its inference)."""
    if frame.bgr is not None:
        return int(frame.bgr.shape[1]), int(frame.bgr.shape[0])
    if hasattr(frame.msg, "width"):
        return int(frame.msg.width), int(frame.msg.height)
    return None
