"""Plain value types shared by every layer (numpy only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vrt_ros.boxes.kinds import BoxGeometry


@dataclass(frozen=True)
class ImageSpec:
    """Geometry and pixel format of a raw image, as in ``sensor_msgs/Image``.

    Attributes:
        width: pixels per row.
        height: rows.
        encoding: ROS encoding string (a key of :data:`vrt_ros.intake.encodings.ENCODINGS`).
        step: bytes per row including padding (``>= width * bytes_per_pixel``).
        is_bigendian: byte order of multi-byte samples (honoured for 16-bit encodings).
    """

    width: int
    height: int
    encoding: str
    step: int
    is_bigendian: bool = False


@dataclass(frozen=True)
class Letterbox:
    """Mapping between source pixels and engine-input pixels (aspect-preserving resize plus padding).

    A source pixel centre ``x_src`` lands at ``x_in = x_src * scale_x + pad_x`` (same for y); the content
    occupies ``resized_width`` x ``resized_height`` input pixels starting at ``(pad_x, pad_y)``. Built only by
    :func:`vrt_ros.boxes.geometry.letterbox`, which holds the formula. A ``stretch`` resize (DETR-family models) is the
    same mapping with no padding and the content filling the input (``scale_x != scale_y`` in general).

    Attributes:
        src_width, src_height: source image size in pixels.
        dst_width, dst_height: engine input size in pixels.
        resized_width, resized_height: size of the resized content inside the input, pixels.
        pad_x, pad_y: offset of the content in the input, pixels (integers, stored as int).
        scale_x, scale_y: input pixels per source pixel (``resized / src``; equal up to rounding).
    """

    src_width: int
    src_height: int
    dst_width: int
    dst_height: int
    resized_width: int
    resized_height: int
    pad_x: int
    pad_y: int
    scale_x: float
    scale_y: float


@dataclass
class Detections:
    """Detections of one frame, in source image pixels.

    Attributes:
        boxes: (N, 4) float32, x1, y1, x2, y2 in source pixels: axis-aligned boxes clipped to the image; oriented
            boxes (``theta`` set) the rectangle in its own axes, not clipped.
        scores: (N,) float32 in [0, 1].
        class_ids: (N,) int32 class indices.
        keypoints: (N, K, 3) float32 (x, y in source pixels, confidence in [0, 1]); K = 0 for heads without keypoints.
        extras: (N, E) float32 per-detection values a head carries through NMS (E = 0 for most heads): the
            ``yolov8_seg`` mask coefficients, the ``yolov8_obb`` angle before it becomes ``theta``.
        theta: (N,) float32 rotation of oriented boxes in radians (``yolov8_obb``, ``end2end_obb``), else None: it
            says the boxes' kind (:attr:`geometry`, :attr:`rotated`). Then ``boxes`` are the rectangle in its own
            axes: centre ``((x1 + x2) / 2, (y1 + y2) / 2)``, size ``x2 - x1`` along the direction ``theta`` and
            ``y2 - y1`` across it (convention in :mod:`vrt_ros.boxes.rotated`). Consumers never read it to decide how to
            treat a box: they use :meth:`corners`, :meth:`pixels`, :meth:`iou`, :meth:`bbox2d` (and the tracker and
            depth :attr:`geometry`), so a new head that sets ``theta`` is handled everywhere.
        label_mask: (src_height, src_width) uint8 or uint16 instance-label image (``yolov8_seg``, made only when
            asked for): pixel = detection index + 1, 0 = background, the higher-scored detection where masks
            overlap (:mod:`vrt_ros.boxes.masks`); else None.
        timings: ms per pipeline stage of the call that made these detections (``preprocess``, ``inference``, ...;
            a batch's stages and ``batch_size`` for every frame of it): the call's own dict, so with several nodes on
            one pipeline each frame's stages are its own (the pipeline's ``last_timings`` is whichever call ran last).
        depth_stats: (N, 4) float32 per-box depth statistic of a call that came with a depth job (the GPU path,
            :meth:`vrt_ros.inference.backends.cuda.CudaPipeline.process`; layout of :func:`vrt_ros.depth.stats.box_stats`,
            rows in the order of ``boxes``), else None.
    """

    boxes: np.ndarray
    scores: np.ndarray
    class_ids: np.ndarray
    keypoints: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 3), np.float32))
    extras: np.ndarray | None = None
    theta: np.ndarray | None = None
    label_mask: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)
    depth_stats: np.ndarray | None = None

    @staticmethod
    def empty(num_keypoints: int = 0, num_extras: int = 0) -> "Detections":
        """An empty result with the right dtypes and shapes."""
        return Detections(
            boxes=np.zeros((0, 4), np.float32),
            scores=np.zeros((0,), np.float32),
            class_ids=np.zeros((0,), np.int32),
            keypoints=np.zeros((0, num_keypoints, 3), np.float32),
            extras=np.zeros((0, num_extras), np.float32),
        )

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    # --- geometry: what every consumer asks of the boxes (the formulas: vrt_ros.boxes.kinds) ---------------------------
    @property
    def geometry(self) -> "BoxGeometry":
        """The kind of these boxes, :data:`vrt_ros.boxes.kinds.ROTATED` when ``theta`` is set, else
        :data:`vrt_ros.boxes.kinds.AXIS_ALIGNED`; its methods are the operations below."""
        from vrt_ros.boxes.kinds import geometry_of

        return geometry_of(self.theta)

    @property
    def rotated(self) -> bool:
        """Whether the boxes are turned by ``theta`` (oriented boxes), else along the image axes."""
        return self.theta is not None

    def angles(self) -> np.ndarray:
        """(N,) radians: ``theta``, or float32 zeros for axis-aligned boxes."""
        return self.geometry.angles(len(self), self.theta)

    def bbox2d(self) -> np.ndarray:
        """(N, 5) float64 ``vision_msgs/BoundingBox2D`` fields: centre x, centre y, ``size_x``, ``size_y`` (source
        pixels) and ``center.theta`` (radians, 0 for axis-aligned boxes) (:meth:`vrt_ros.boxes.kinds.BoxGeometry.bbox2d`)."""
        return self.geometry.bbox2d(self.boxes, self.theta)

    def corners(self) -> np.ndarray:
        """(N, 4, 2) float32 corners (x, y) in source pixels, each box's in the order of its outline
        (:meth:`vrt_ros.boxes.kinds.BoxGeometry.corners`)."""
        return self.geometry.corners(self.boxes, self.theta)

    def pixels(self, i: int, width: int, height: int, scale: float = 1.0
               ) -> tuple[int, int, int, int, "np.ndarray | None"]:
        """The pixels box ``i`` covers in an image of ``width`` x ``height`` with ``scale`` of its pixels per source
        pixel: those whose centre is inside the box (the rule of the depth statistic and ``kernels/depth.cu``;
        :meth:`vrt_ros.boxes.kinds.BoxGeometry.cover`).

        Returns:
            ``(x0, x1, y0, y1, mask)``: the box's pixels are in ``image[y0:y1, x0:x1]``; ``mask`` ((y1 - y0,
            x1 - x0) bool) says which, None when all of them.

        Raises:
            IndexError: ``i`` not in ``range(len(self))``.
        """
        if not 0 <= i < len(self):
            raise IndexError(f"box {i} of {len(self)}")
        theta = float(self.angles()[i])
        return self.geometry.cover(np.asarray(self.boxes[i]), theta, scale, width, height)

    def pixel_mask(self, i: int, width: int, height: int, scale: float = 1.0) -> np.ndarray:
        """(height, width) bool: the pixels box ``i`` covers (:meth:`pixels`) as a whole-image mask (a new array)."""
        x0, x1, y0, y1, mask = self.pixels(i, width, height, scale)
        out = np.zeros((height, width), bool)
        out[y0:y1, x0:x1] = True if mask is None else mask
        return out

    def iou(self, other: "Detections") -> np.ndarray:
        """(len(self), len(other)) float32 overlap in [0, 1] of every box here with every box of ``other``, in
        source pixels. Both axis-aligned: the area IoU (:func:`vrt_ros.boxes.kinds.iou_matrix`). Either rotated: the
        probabilistic IoU of the rotated NMS and the tracker (Llerena et al. 2021, arXiv:2106.06072, as Ultralytics'
        ``batch_probiou``; :func:`vrt_ros.boxes.rotated.probiou_pairs`), an axis-aligned set counting as turned by 0; it is
        not the polygon IoU (:mod:`vrt_ros.boxes.rotated` says how they differ)."""
        from vrt_ros.boxes.kinds import common_geometry

        return common_geometry(self.theta, other.theta).iou(self.boxes, self.theta, other.boxes, other.theta)


@dataclass(frozen=True)
class InputSpec:
    """How a frame becomes the engine input tensor.

    ``tensor[c, y, x] = (pixel[y, x, channel_order[c]] - mean[c]) / std[c]`` with pixels in 0..255, after a
    bilinear letterbox into ``width`` x ``height`` filled with ``pad_value`` (in pixel units, before normalising).

    Attributes:
        width, height: engine input size, pixels.
        channel_order: "bgr" or "rgb", the order of the tensor's three planes.
        mean, std: per tensor channel, in pixel units (0..255).
        pad_value: letterbox fill, pixel units.
        align: "top_left" (YOLOX, CenterFace) or "center" (Ultralytics) placement of the resized content.
        dtype: engine input dtype, "float32" or "float16".
        resize: "letterbox" (keep the aspect ratio, pad) or "stretch" (fill the input, both axes scaled on their
            own; RT-DETR / D-FINE / RF-DETR are trained so).
    """

    width: int
    height: int
    channel_order: str = "bgr"
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    pad_value: float = 114.0
    align: str = "top_left"
    dtype: str = "float32"
    resize: str = "letterbox"


@dataclass(frozen=True)
class PostprocessParams:
    """Thresholds applied after decoding; may change between frames (runtime parameters).

    Attributes:
        score_threshold: minimum score kept; a value above 1 keeps nothing.
        nms_iou: IoU above which the lower-scored of two boxes is suppressed.
        class_agnostic: suppress across classes instead of per class.
        max_detections: at most this many detections per frame (highest scores first).
        keypoint_threshold: keypoints with lower confidence are still published, with their confidence;
            consumers filter on it. Used by the debug drawing.
        mask_threshold: a mask pixel is on where ``sigmoid(logit) > mask_threshold`` (segmentation heads).
        want_masks: assemble the instance-label image this frame (only while someone subscribes to it).
    """

    score_threshold: float = 0.35
    nms_iou: float = 0.45
    class_agnostic: bool = False
    max_detections: int = 100
    keypoint_threshold: float = 0.5
    mask_threshold: float = 0.5
    want_masks: bool = False


@dataclass(frozen=True)
class TrackerParams:
    """Settings of the tracker :class:`vrt_ros.tracking.ByteTracker` (parameters ``tracking.*``;
    :func:`vrt_ros.settings.config.tracker_params`).

    Attributes:
        high_score: detections scoring at least this enter the first association and start tracks, [0, 1].
        low_score: detections from this up to ``high_score`` enter only the second association, [0, high_score].
        min_hits: matched frames in a row (the birth frame included) after which a track is confirmed, >= 1.
        max_lost_s: a track unmatched for longer than this is removed, seconds; a stamp gap larger than this resets
            the tracker, > 0.
        min_iou: the first association's IoU gate, (0, 1].
    """

    high_score: float = 0.5
    low_score: float = 0.1
    min_hits: int = 2
    max_lost_s: float = 1.5
    min_iou: float = 0.2

    def __post_init__(self) -> None:
        """Raises ValueError: a setting out of its range (the parameter schema checks them before)."""
        if not 0.0 <= self.low_score <= self.high_score <= 1.0:
            raise ValueError(f"need 0 <= low_score <= high_score <= 1, got low_score {self.low_score}, high_score {self.high_score}")
        if self.min_hits < 1 or not self.max_lost_s > 0.0 or not 0.0 < self.min_iou <= 1.0:
            raise ValueError(f"need min_hits >= 1, max_lost_s > 0, 0 < min_iou <= 1, got {self}")


@dataclass(frozen=True)
class TensorInfo:
    """Name, shape and dtype of one engine input or output.

    Attributes:
        name: tensor name in the model.
        shape: dims; -1 for a dynamic dim not yet fixed.
        dtype: numpy dtype name, e.g. "float32", "float16".
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"


# --- frames of a batch (Pipeline.process_batch) ---------------------------------------------------------------
@dataclass(frozen=True)
class RawFrame:
    """A ``sensor_msgs/Image`` frame: geometry + the bytes (buffer protocol, ``spec.height * spec.step`` at least).

    The bytes must stay alive and unchanged until :meth:`vrt_ros.inference.pipeline.Pipeline.process_batch` returns."""

    spec: ImageSpec
    data: object


@dataclass(frozen=True)
class CompressedFrame:
    """A ``sensor_msgs/CompressedImage`` frame: its ``format`` field and payload (buffer protocol)."""

    format: str
    data: object


@dataclass(frozen=True)
class BgrFrame:
    """A decoded (H, W, 3) uint8 BGR image."""

    image: np.ndarray


#: One slot of a batch.
BatchFrame = RawFrame | CompressedFrame | BgrFrame
