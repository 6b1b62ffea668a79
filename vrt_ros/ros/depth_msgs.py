"""Message conversion for the depth input (:mod:`vrt_ros.ros.depth_input`): ``sensor_msgs/Image`` (depth) and
``sensor_msgs/CameraInfo`` into the core's values, and 3D boxes into ``vision_msgs/Detection3DArray``: serialized by
:mod:`vrt_ros.ros.cdr` for the node (:func:`detections_3d_cdr`: 0.19 ms at 100 boxes against 2.6 ms for building and
converting the message, ``python -m vrt_ros.bench.outputs.writer_3d``), or as the rclpy message (:func:`detections_3d_msg`,
the reference the serialized bytes are tested against)."""

from __future__ import annotations

import math
from typing import Sequence

from sensor_msgs.msg import CameraInfo as CameraInfoMsg
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose

from vrt_ros.depth.boxes3d import Boxes3D
from vrt_ros.depth.camera_model import CameraInfo
from vrt_ros.depth.image import DepthImage
from vrt_ros.model.labels import class_name
from vrt_ros.ros import cdr
from vrt_ros.ros.camera import header_stamp_ns
from vrt_ros.types import Detections


def depth_image(msg: Image) -> DepthImage:
    """A depth ``sensor_msgs/Image`` as a :class:`~vrt_ros.depth.image.DepthImage` (a view of ``msg.data``, no
    copy; nothing is validated here)."""
    return DepthImage(width=int(msg.width), height=int(msg.height), encoding=str(msg.encoding), step=int(msg.step),
                      data=memoryview(msg.data).toreadonly(), is_bigendian=bool(msg.is_bigendian),
                      frame_id=str(msg.header.frame_id), stamp_ns=header_stamp_ns(msg.header))


def camera_info(msg: CameraInfoMsg) -> CameraInfo:
    """The fields of a ``sensor_msgs/CameraInfo`` the camera model uses."""
    roi = msg.roi
    return CameraInfo(width=int(msg.width), height=int(msg.height), distortion_model=str(msg.distortion_model),
                      d=tuple(float(v) for v in msg.d), k=tuple(float(v) for v in msg.k),
                      p=tuple(float(v) for v in msg.p), frame_id=str(msg.header.frame_id),
                      binning_x=int(msg.binning_x), binning_y=int(msg.binning_y),
                      roi=(int(roi.x_offset), int(roi.y_offset), int(roi.width), int(roi.height)))


def detections_3d_msg(header: Header, dets: Detections, boxes: Boxes3D, labels: Sequence[str],
                      ids: Sequence[str] | None = None) -> Detection3DArray:
    """A frame's ``vision_msgs/Detection3DArray``.

    Args:
        header: the colour frame's header (stamp and optical frame unchanged), also on every detection.
        dets: the frame's 2D detections (class, score).
        boxes: their 3D boxes (metres, optical frame; only detections with valid depth).
        labels: class names by index (decimal index without a name).
        ids: the 2D detections' ids (track ids: decimal strings of :mod:`vrt_ros.tracking.ids`' format, as on
            ``detections``); None: the index in the frame, as on ``detections``.

    Returns:
        One ``Detection3D`` per 3D box: ``bbox.center.position`` = ``results[0].pose.pose.position`` = the centre,
        orientation the box's ``yaw`` about the optical axis (identity for axis-aligned boxes), ``bbox.size`` the
        size along the box's axes; ``results[0].hypothesis`` the 2D detection's class and score;
        ``id`` the 2D detection's id. The pose covariance is left zero (unknown).
    """
    out = Detection3DArray()
    out.header = header
    names = tuple(labels)
    class_ids = dets.class_ids.reshape(-1).tolist()
    scores = dets.scores.reshape(-1).tolist()
    for i, c, s, yaw in zip(boxes.index.tolist(), boxes.centres.tolist(), boxes.sizes.tolist(), boxes.yaw.tolist()):
        det = Detection3D()
        det.header = header
        det.id = str(i) if ids is None else str(ids[i])
        det.bbox.center.position.x, det.bbox.center.position.y, det.bbox.center.position.z = c
        det.bbox.center.orientation.z, det.bbox.center.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
        det.bbox.size.x, det.bbox.size.y, det.bbox.size.z = s
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id = class_name(names, int(class_ids[i]))
        hyp.hypothesis.score = float(scores[i])
        hyp.pose.pose = det.bbox.center
        det.results = [hyp]
        out.detections.append(det)
    return out


def detections_3d_cdr(header, dets: Detections, boxes: Boxes3D, labels: Sequence[str],
                      ids: Sequence[str] | None = None) -> bytes:
    """:func:`detections_3d_msg` serialized (the bytes ``rclpy.serialization.serialize_message`` gives for it), for
    ``publisher.publish(bytes)``: a few µs per box instead of rclpy's per-field message building and conversion.

    Args:
        header: the colour frame's header: a ``std_msgs/Header``, or one read from the serialized image
            (:mod:`vrt_ros.ros.cdr_read`): anything with ``stamp.sec``, ``stamp.nanosec`` and ``frame_id``.
        dets, boxes, labels, ids: as for :func:`detections_3d_msg`.
    """
    head = cdr.header_bytes(int(header.stamp.sec), int(header.stamp.nanosec), str(header.frame_id))
    names = tuple(labels)
    class_ids = dets.class_ids.reshape(-1).tolist()
    scores = dets.scores.reshape(-1).tolist()
    items = [(str(i) if ids is None else str(ids[i]), x, y, z, math.sin(yaw / 2), math.cos(yaw / 2), sx, sy, sz,
              class_name(names, int(class_ids[i])), float(scores[i]))
             for i, (x, y, z), (sx, sy, sz), yaw in zip(boxes.index.tolist(), boxes.centres.tolist(),
                                                        boxes.sizes.tolist(), boxes.yaw.tolist())]
    return cdr.detection3d_array(head, items)
