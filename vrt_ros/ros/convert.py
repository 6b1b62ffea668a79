"""Conversion between ROS messages and vrt_ros value types (the message contract of DESIGN.md).

Inbound: ``sensor_msgs/Image`` becomes an :class:`~vrt_ros.types.ImageSpec` plus a zero-copy ``memoryview`` of
``msg.data`` (validation, ``step`` handling and colour conversion belong to :mod:`vrt_ros.intake.frames`);
``sensor_msgs/CompressedImage`` is decoded by :mod:`vrt_ros.intake.compressed` into BGR pixels.

Outbound (vision_msgs 4.x):

- ``detections``: ``Detection2DArray`` with the input header unchanged; per detection ``id`` = its index in the frame
  as a decimal string, ``bbox.center.position`` and ``bbox.size_x/size_y`` in source pixels, one result whose
  ``hypothesis.class_id`` is the class name (or the decimal class index when there are no labels for it) and
  ``hypothesis.score`` in [0, 1]. The box fields are the detections' own (:meth:`~vrt_ros.types.Detections.bbox2d`):
  oriented boxes (``yolov8_obb``, ``end2end_obb``) set ``bbox.center.theta`` (radians, the long-side convention of
  :mod:`vrt_ros.boxes.rotated`: from image +x toward +y, in [-pi/2, pi/2), ``size_x >= size_y``), axis-aligned ones 0.
- ``instance_mask``: see :mod:`vrt_ros.ros.instance_mask`.
- ``keypoints``: ``Detection2DArray`` with one ``Detection2D`` per keypoint: bbox centre = keypoint position, size 0,
  ``class_id`` = keypoint name, score = keypoint confidence, ``id`` = the parent detection's ``id``.
- ``label_info``: ``LabelInfo`` mapping class index to name, plus the score threshold.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header
from vision_msgs.msg import (
    BoundingBox2D,
    Detection2D,
    Detection2DArray,
    LabelInfo,
    ObjectHypothesisWithPose,
    VisionClass,
)

from vrt_ros.intake import frames
from vrt_ros.model.labels import class_name
from vrt_ros.ros import cdr
from vrt_ros.types import Detections, ImageSpec


def image_view(msg: Image) -> tuple[ImageSpec, memoryview]:
    """Geometry of a raw image message and a zero-copy view of its pixel bytes.

    Args:
        msg: ``sensor_msgs/Image``; ``msg.data`` is not copied (rclpy stores it as ``array.array('B')``).

    Returns:
        ``(spec, data)``: spec with width/height in pixels, the encoding string, ``step`` in bytes and the byte order;
        ``data`` a read-only view of ``msg.data`` (uint8). Nothing is validated here: :mod:`vrt_ros.intake.frames` checks
        ``height * step <= len(data)`` and the encoding, raising :class:`~vrt_ros.errors.FrameError`.
    """
    spec = ImageSpec(
        width=int(msg.width),
        height=int(msg.height),
        encoding=str(msg.encoding),
        step=int(msg.step),
        is_bigendian=bool(msg.is_bigendian),
    )
    return spec, memoryview(msg.data).toreadonly()


def compressed_to_bgr(msg: CompressedImage) -> np.ndarray:
    """Decode a ``sensor_msgs/CompressedImage`` (jpeg, png) to BGR pixels.

    Args:
        msg: the compressed image; ``msg.format`` as published by image_transport (e.g. ``"jpeg"`` or
            ``"bgr8; jpeg compressed bgr8"``).

    Returns:
        (H, W, 3) uint8 BGR array.

    Raises:
        FrameError: empty, truncated or undecodable data, or an unsupported format (from
            :func:`vrt_ros.intake.compressed.decode_compressed`).
    """
    from vrt_ros.intake.compressed import decode_compressed  # OpenCV, imported when the first compressed frame comes

    return decode_compressed(str(msg.format), memoryview(msg.data))


def _detection(header: Header, det_id: str, cx: float, cy: float, w: float, h: float, name: str, score: float,
               theta: float = 0.0) -> Detection2D:
    d = Detection2D()
    d.header = header
    d.id = det_id
    bbox = BoundingBox2D()
    bbox.center.position.x = cx
    bbox.center.position.y = cy
    bbox.center.theta = theta
    bbox.size_x = w
    bbox.size_y = h
    d.bbox = bbox
    result = ObjectHypothesisWithPose()
    result.hypothesis.class_id = name
    result.hypothesis.score = score
    d.results = [result]
    return d


def _detection_items(dets: Detections, labels: Sequence[str], ids: Sequence[str] | None = None) -> list[tuple]:
    """``(id, centre x, centre y, size x, size y, class_id, score, theta)`` per detection: the ``BoundingBox2D``
    fields of its kind of box (:meth:`Detections.bbox2d`: source pixels, ``theta`` radians, 0 for axis-aligned
    boxes); ``id`` from ``ids`` (track ids), else the index in the frame."""
    bbox = dets.bbox2d().tolist()
    scores = np.asarray(dets.scores, dtype=np.float64).reshape(-1).tolist()
    class_ids = np.asarray(dets.class_ids).reshape(-1).tolist()
    names = tuple(labels)
    return [(str(i) if ids is None else ids[i], cx, cy, w, h, class_name(names, int(class_ids[i])), scores[i], theta)
            for i, (cx, cy, w, h, theta) in enumerate(bbox)]


def _keypoint_items(dets: Detections, keypoint_names: Sequence[str],
                    ids: Sequence[str] | None = None) -> list[tuple[str, float, float, float, float, str, float]]:
    """``(parent id, x, y, 0, 0, keypoint name, confidence)`` per keypoint of every detection; the parent's id as
    in :func:`_detection_items`."""
    kps = np.asarray(dets.keypoints, dtype=np.float64)
    names = tuple(keypoint_names)
    items = []
    if kps.ndim == 3 and kps.shape[0] and kps.shape[1]:
        labels = [class_name(names, k) for k in range(kps.shape[1])]
        for i, row in enumerate(kps.tolist()):
            parent = str(i) if ids is None else ids[i]
            for k, (x, y, conf) in enumerate(row):
                items.append((parent, x, y, 0.0, 0.0, labels[k], conf))
    return items


def detections_to_msg(dets: Detections, header: Header, labels: Sequence[str] = (),
                      ids: Sequence[str] | None = None) -> Detection2DArray:
    """Build the ``detections`` message of one frame.

    Args:
        dets: detections in source pixels (boxes (N, 4) xyxy float32, scores (N,), class_ids (N,) int32).
        header: the input image's header, copied unchanged into the array and every detection.
        labels: class names by index; indices without a name are published as decimal strings.
        ids: one ``Detection2D.id`` per detection (the track ids with tracking on: ``Detection2D.id`` is a string,
            the id in decimal, ``epoch_ms * 1000000 + n``, :mod:`vrt_ros.tracking.ids`); None: the index in the frame.

    Returns:
        ``vision_msgs/Detection2DArray`` with N detections (empty when N = 0, header still set).
    """
    out = Detection2DArray()
    out.header = header
    out.detections = [_detection(header, *item) for item in _detection_items(dets, labels, ids)]
    return out


def keypoints_to_msg(dets: Detections, header: Header, keypoint_names: Sequence[str],
                     ids: Sequence[str] | None = None) -> Detection2DArray:
    """Build the ``keypoints`` message of one frame: one ``Detection2D`` per keypoint of every detection.

    Args:
        dets: detections with ``keypoints`` (N, K, 3) float32: x, y in source pixels, confidence in [0, 1].
        header: the input image's header, copied unchanged.
        keypoint_names: K names (e.g. COCO ``left_eye``); missing names are published as the decimal index.
        ids: the parent detections' ids (as given to :func:`detections_to_msg`); None: their index in the frame.

    Returns:
        ``vision_msgs/Detection2DArray`` with N*K entries; each ``id`` is the parent detection's index as a string,
        bbox size is 0.
    """
    out = Detection2DArray()
    out.header = header
    out.detections = [_detection(header, *item) for item in _keypoint_items(dets, keypoint_names, ids)]
    return out


def _header_bytes(header: Header) -> bytes:
    return cdr.header_bytes(int(header.stamp.sec), int(header.stamp.nanosec), str(header.frame_id))


def detections_to_cdr(dets: Detections, header: Header, labels: Sequence[str] = (),
                      ids: Sequence[str] | None = None) -> bytes:
    """:func:`detections_to_msg` serialized (the same bytes as ``serialize_message`` of it), for ``publish(bytes)``:
    a few µs per detection instead of about 20 (:mod:`vrt_ros.ros.cdr`)."""
    return cdr.detection_array(_header_bytes(header), _detection_items(dets, labels, ids))


def keypoints_to_cdr(dets: Detections, header: Header, keypoint_names: Sequence[str],
                     ids: Sequence[str] | None = None) -> bytes:
    """:func:`keypoints_to_msg` serialized (the same bytes as ``serialize_message`` of it), for ``publish(bytes)``."""
    return cdr.detection_array(_header_bytes(header), _keypoint_items(dets, keypoint_names, ids))


def label_info_msg(labels: Sequence[str], threshold: float, header: Header | None = None) -> LabelInfo:
    """Build the ``label_info`` message: class index → name, and the score threshold.

    Args:
        labels: class names by index (may be empty when the model has no labels file).
        threshold: the current score threshold, [0, 1] (values above 1 keep nothing).
        header: optional header (stamp of publication, frame id of the camera).
    """
    msg = LabelInfo()
    if header is not None:
        msg.header = header
    classes = []
    for i, name in enumerate(labels):
        vc = VisionClass()
        vc.class_id = i
        vc.class_name = name
        classes.append(vc)
    msg.class_map = classes
    msg.threshold = float(threshold)
    return msg


def bgr_to_image_msg(image: np.ndarray, header: Header) -> Image:
    """Wrap an (H, W, 3) uint8 BGR array as a ``bgr8`` ``sensor_msgs/Image`` (one copy into the message)."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    msg = Image()
    msg.header = header
    msg.height, msg.width = int(image.shape[0]), int(image.shape[1])
    msg.encoding = "bgr8"
    msg.is_bigendian = 0
    msg.step = int(image.shape[1]) * 3
    msg.data = image.tobytes()
    return msg


def debug_image_msg(msg: Image | CompressedImage, bgr: np.ndarray | None, dets: Detections, compressed: bool,
                    labels: Sequence[str], keypoint_threshold: float) -> Image:
    """The ``debug_image``: a copy of the frame (``bgr``, or ``msg`` converted here when the pipeline did not keep
    a BGR image) with ``dets`` drawn (:func:`vrt_ros.boxes.draw.draw_detections`), as bgr8 with ``msg``'s header."""
    if bgr is None and compressed:
        canvas = compressed_to_bgr(msg)
    elif bgr is None:
        spec, data = image_view(msg)
        canvas = frames.to_bgr(spec, data)
    else:
        canvas = bgr.copy()
    from vrt_ros.boxes.draw import draw_detections  # OpenCV: only with debug_image, not at start-up (issue 27)

    draw_detections(canvas, dets, labels=labels, keypoint_threshold=keypoint_threshold)
    return bgr_to_image_msg(canvas, ros_header(msg.header))


def ros_header(header) -> Header:
    """``header`` as a ``std_msgs/Header`` (a header read from raw bytes, :mod:`vrt_ros.ros.cdr_read`, is copied)."""
    if isinstance(header, Header):
        return header
    out = Header(frame_id=str(header.frame_id))
    out.stamp.sec, out.stamp.nanosec = int(header.stamp.sec), int(header.stamp.nanosec)
    return out
