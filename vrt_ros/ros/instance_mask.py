"""The ``<cam>/instance_mask`` output of segmentation heads: when to ask the pipeline for masks, and the message.

``sensor_msgs/Image`` with the source frame's size and header: pixel = the detection's index in that frame's
``detections`` array + 1 (not its ``id``, which becomes a track id with tracking), 0 = background; where masks
overlap, the higher-scored detection owns the pixel (:mod:`vrt_ros.boxes.masks`). ``mono8``, or ``mono16`` (little-endian)
when the start-up ``max_detections`` exceeds 254; the encoding is fixed at start-up so it never changes
mid-stream (a later, larger ``max_detections`` leaves detections past 255 unlabelled in ``mono8``).

Masks cost a pass over every detection's box, so the pipeline assembles them only for frames of cameras whose
``instance_mask`` (or ``debug_image``, which draws them) has a subscriber (:class:`MaskRequests`): one frame at a
time or a batch, through ``process_batch``'s per-frame ``masks``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from vrt_ros.boxes.masks import label_dtype
from vrt_ros.types import PostprocessParams


def mask_encoding(max_detections: int) -> str:
    """``mono8`` when labels fit a byte (at most 254 detections), else ``mono16``."""
    return "mono8" if label_dtype(max_detections) is np.uint8 else "mono16"


def instance_mask_msg(labels: np.ndarray, header: Header, encoding: str) -> Image:
    """Wrap a (H, W) uint8/uint16 label image as ``encoding`` (one copy into the message).

    Raises:
        ValueError: the label image's dtype does not match ``encoding``.
    """
    dtype = np.uint8 if encoding == "mono8" else np.dtype("<u2")
    if labels.dtype.itemsize != np.dtype(dtype).itemsize:
        raise ValueError(f"instance mask of dtype {labels.dtype} cannot be published as {encoding}")
    labels = np.ascontiguousarray(labels, dtype=dtype)
    msg = Image()
    msg.header = header
    msg.height, msg.width = int(labels.shape[0]), int(labels.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = int(labels.shape[1]) * labels.itemsize
    msg.data = labels.tobytes()
    return msg


def _watched(pub: Any) -> bool:
    return pub is not None and pub.get_subscription_count() > 0


class MaskRequests:
    """Applies the node's postprocess parameters to the pipeline before each of its calls, with ``want_masks`` on for
    frames whose camera's mask or debug image is watched, off else. Every call, not only on a change: the pipeline
    may be shared with other nodes, whose parameters it holds after their calls (the worker holds the pipeline's
    :func:`~vrt_ros.inference.pipeline.call_lock` around this and the call).

    Args:
        pipeline: the node's pipeline (its ``set_postprocess``).
        params: the postprocess parameters in force (:meth:`set_params` when they change); None: the pipeline's own
            are left alone.
    """

    def __init__(self, pipeline: Any, params: PostprocessParams | None) -> None:
        self._pipeline = pipeline
        self._params = params

    def set_params(self, params: PostprocessParams) -> None:
        """The node's new parameters (``want_masks`` from them is replaced per frame); applied from the next call."""
        self._params = params

    def for_batch(self, cams: Sequence[Any]) -> list[bool] | None:
        """Per frame of a batch (its camera), whether to assemble its label image (``process_batch``'s ``masks``);
        None when no camera has an ``instance_mask`` publisher (a head without masks)."""
        if self._params is None or all(getattr(cam, "pub_mask", None) is None for cam in cams):
            return None
        return [_watched(cam.pub_mask) or _watched(cam.pub_debug) for cam in cams]

    def before(self) -> None:
        """Call under the pipeline's call lock before each ``process_batch`` (whose masks are asked per frame,
        :meth:`for_batch`): the node's parameters onto the pipeline, every call."""
        if self._params is None:
            return
        self._pipeline.set_postprocess(self._params)
