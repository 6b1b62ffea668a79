"""GPU instance-mask assembly (``kernels/masks.cu``) for segmentation heads, enqueued after finalize on the
frame's stream, before its one sync. The numpy reference, with the same order of operations, is
:mod:`vrt_ros.boxes.masks`.

Buffers: the per-detection logits (``max_masks`` x PH x PW float32, made once: ``max_masks`` is the most
detections a frame can label within :data:`LOGITS_BUDGET_BYTES`), and per (slot, frame size) a device label image
and its pinned host copy, in a bounded pool (:class:`~vrt_ros.gpu.label_images.LabelImages`, bounded in bytes with
the staging sets by the pipeline's budget). What :meth:`GpuMasks.read` returns is a copy owned by the caller, made
while the pipeline still holds its lock: a published mask never reads a buffer another frame may overwrite.

Batches (issue 21): :meth:`GpuMasks.enqueue` takes the slot's result region, prototypes and geometry, so a batched
postprocess calls it once per slot with that slot's pointers, as it does finalize; each slot needs its own label
image (``slot`` keys the buffers).
"""

from __future__ import annotations

import logging

import numpy as np
from cuda.core import LaunchConfig, Stream, launch

from vrt_ros.boxes.masks import logit_threshold
from vrt_ros.gpu.label_images import LabelImages
from vrt_ros.gpu.launch import cfg_2d
from vrt_ros.gpu.library import KernelLibrary
from vrt_ros.gpu.runtime import GpuRuntime
from vrt_ros.pools.keyed_cache import CAPACITY, KeyedCache
from vrt_ros.types import Letterbox, PostprocessParams

log = logging.getLogger(__name__)

MODULE = "masks"
BLOCK = 256
#: Device memory the per-detection logits may take (160x160 prototypes: 1310 detections; the cap is 1000).
LOGITS_BUDGET_BYTES = 128 * 2**20


class GpuMasks:
    """Mask logits + label image of one segmentation head's frames.

    Args:
        runtime, library: the GPU runtime and kernel library.
        num_masks, proto_w, proto_h: the prototype output ``[1, num_masks, proto_h, proto_w]``.
        input_w, input_h: engine input size, pixels.
        out_stride, coef_offset: result row length and the coefficients' offset in it (``finalize_extras``).
        max_detections: the most result rows a frame has (the postprocess' capacity).
        label_dtype: np.uint8 (mono8) or np.uint16 (mono16), fixed at start-up.
        max_batch: batch slots (each has its own label images and its own pending result).
        stream: for the start-up allocations.
        budget: optional :class:`~vrt_ros.pools.buffer_budget.ByteBudget` bounding the label images' bytes.
    """

    def __init__(self, runtime: GpuRuntime, library: KernelLibrary, *, num_masks: int, proto_w: int, proto_h: int,
                 input_w: int, input_h: int, out_stride: int, coef_offset: int, max_detections: int,
                 label_dtype: type, stream: Stream, max_batch: int = 1, budget=None) -> None:
        self._rt = runtime
        plane = proto_w * proto_h
        self.max_masks = max(1, min(int(max_detections), LOGITS_BUDGET_BYTES // (plane * 4)))
        if self.max_masks < max_detections:
            log.warning("masks: %dx%d prototypes, logits for at most %d detections a frame (later ones unmasked)",
                        proto_w, proto_h, self.max_masks)
        self.label_dtype = np.dtype(label_dtype)
        self._label_bytes = self.label_dtype.itemsize
        self._max_labels = int(np.iinfo(self.label_dtype).max)
        self._num_masks, self._pw, self._ph = int(num_masks), int(proto_w), int(proto_h)
        self._in_w, self._in_h = int(input_w), int(input_h)
        self._out_stride, self._coef_offset = int(out_stride), int(coef_offset)
        self._logits = runtime.alloc_device(self.max_masks * plane * 4, stream)
        self._k_logits = library.kernel(MODULE, "mask_logits")
        self._k_labels = library.kernel(MODULE, "mask_labels")
        self._sig_logits = library.signature(MODULE, "mask_logits")
        self._sig_labels = library.signature(MODULE, "mask_labels")
        self._cfg_logits = LaunchConfig(grid=((plane + BLOCK - 1) // BLOCK, self.max_masks), block=BLOCK)
        self.images = LabelImages(runtime, self._label_bytes, max_batch, budget)  # (slot, src_h, src_w) -> labels
        self._launches = KeyedCache(CAPACITY * max(1, int(max_batch)))  # (result, protos, letterbox, threshold,
        # label image) -> launch arguments
        # per slot: (pinned buffer, shape) of the label image enqueued since the last read, or None
        self._last: list[tuple | None] = [None] * max(1, int(max_batch))

    def _prepare(self, result_ptr: int, protos_ptr: int, lb: Letterbox, threshold: float, dev_ptr: int) -> tuple:
        logits = self._sig_logits.args(
            result=result_ptr, out_stride=self._out_stride, coef_offset=self._coef_offset, num_masks=self._num_masks,
            protos=protos_ptr, proto_w=self._pw, proto_h=self._ph, max_masks=self.max_masks, logits=self._logits.ptr)
        labels = self._sig_labels.args(
            result=result_ptr, out_stride=self._out_stride, logits=self._logits.ptr, proto_w=self._pw,
            proto_h=self._ph, max_masks=self.max_masks, pad_x=lb.pad_x, pad_y=lb.pad_y, scale_x=lb.scale_x,
            scale_y=lb.scale_y, input_w=self._in_w, input_h=self._in_h, src_w=lb.src_width, src_h=lb.src_height,
            threshold_logit=max(-3.0e38, min(3.0e38, logit_threshold(threshold))), label_bytes=self._label_bytes,
            max_labels=self._max_labels, labels=dev_ptr)
        return logits, labels, cfg_2d(lb.src_width, lb.src_height)

    def enqueue(self, stream: Stream, result_ptr: int, protos_ptr: int, lb: Letterbox, params: PostprocessParams,
                slot: int = 0) -> None:
        """Enqueue the logits, the label image and its D2H copy for one frame (or batch slot).

        Args:
            stream: the pipeline's stream.
            result_ptr: the frame's finalize_extras result region (device).
            protos_ptr: the frame's prototype output (device).
            lb: the frame's geometry.
            params: ``mask_threshold``.
            slot: batch slot (its own label image).

        Raises:
            FrameError: (reason ``frame_too_large``) the label image does not fit the budget; reserve it with the
                frame's staging (:meth:`LabelImages.get`) so this cannot happen after the engine was enqueued.
        """
        dev, host = self.images.get(slot, lb.src_height, lb.src_width, stream)
        logits, labels, cfg = self._launches.get(
            (result_ptr, protos_ptr, lb, float(params.mask_threshold), dev.ptr),
            lambda: self._prepare(result_ptr, protos_ptr, lb, params.mask_threshold, dev.ptr))
        launch(stream, self._cfg_logits, self._k_logits, *logits)
        launch(stream, cfg, self._k_labels, *labels)
        nbytes = lb.src_width * lb.src_height * self._label_bytes
        self._rt.d2h(host.ptr, dev.ptr, nbytes, stream)
        self._last[slot] = (host, (lb.src_height, lb.src_width))

    def skip(self, slot: int = 0) -> None:
        """This frame of ``slot`` assembles no label image (:meth:`read` then returns None for it)."""
        self._last[slot] = None

    def read(self, slot: int = 0) -> np.ndarray | None:
        """The label image last enqueued for ``slot``, after the stream's synchronisation: a (src_height, src_width)
        array of :attr:`label_dtype` copied out of the reused pinned image, so it belongs to that frame whatever the
        pipeline runs next (call it under the pipeline's lock); None when that slot's last frame assembled none."""
        last = self._last[slot]
        if last is None:
            return None
        host, shape = last
        self._last[slot] = None
        n = shape[0] * shape[1]
        return host.array[: n * self._label_bytes].view(self.label_dtype).reshape(shape).copy()

    def close(self, stream: Stream) -> None:
        """Free the buffers (after the stream's last frame completed)."""
        self._logits.close(stream)
        self.images.close(stream)
