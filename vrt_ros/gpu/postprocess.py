"""GPU postprocess: per-head decode kernel, then sort, NMS and finalize, all enqueued on the pipeline's stream.

The device buffers are sized once at construction (candidate capacity, max detections, batch slots); a frame
allocates nothing. The result (count + rows) is copied asynchronously into pinned memory; :meth:`GpuPostprocessor.read`
turns it into :class:`~vrt_ros.types.Detections` after the pipeline's single stream synchronisation.

Batches: each slot's decode reads its own slot of the engine outputs and its finalize writes its own region of the
result buffer (``slot * stride``, stride = one slot's header and rows at the frame's ``max_detections``, 256-byte
aligned), so every slot has its own counts and results; the candidate, order, kept and NMS-mask buffers are shared
by the slots, which run one after the other in stream order (one launch sequence per slot, with the slot's
pointers). One D2H copies every slot's result (:meth:`GpuPostprocessor.copy_back`), and :meth:`read_batch`
splits it after the batch's one sync.
The numpy references are :mod:`vrt_ros.heads`, :mod:`vrt_ros.boxes.nms` and :mod:`vrt_ros.boxes.postprocess`.

Heads whose candidates carry extras (``Head.num_extras``: mask coefficients, an angle) get them in the candidate
rows after the keypoints, the rotated NMS mask (``kernels/rotated_nms.cu``) when ``Head.oriented``, and
``finalize_extras`` (``kernels/finalize_extras.cu``: rows with ``theta`` and the extras) instead of ``finalize``;
segmentation heads then assemble the label image when the frame asks for it (:mod:`vrt_ros.gpu.masks`). In a
batch, those stages run per slot like finalize (the slot's result region, prototypes and label image, in stream
order before the batch's one sync); each asking slot's label image is copied back on the same stream.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from cuda.core import LaunchConfig, Stream, launch

from vrt_ros.boxes.geometry import letterbox
from vrt_ros.errors import ModelError
from vrt_ros.gpu.launch import cfg_1d, cfg_2d
from vrt_ros.gpu.library import KernelLibrary
from vrt_ros.gpu.masks import GpuMasks
from vrt_ros.gpu.runtime import GpuRuntime
from vrt_ros.heads import HEADS
from vrt_ros.heads.base import Head
from vrt_ros.pools.keyed_cache import CAPACITY, KeyedCache
from vrt_ros.types import Detections, Letterbox, PostprocessParams

log = logging.getLogger(__name__)

POST = "postprocess"
ROTATED = "rotated_nms"
EXTRAS = "finalize_extras"
CAND_HEADER = 8  # floats before the keypoints in a candidate row (kernels/decode.cu)
RESULT_HEADER = 4  # 32-bit words before the result rows (kernels/postprocess.cu)
THETA_COLUMN = 6  # finalize_extras rows: x1, y1, x2, y2, score, class, theta, extras (kernels/finalize_extras.cu)
RESULT_ALIGN = 256  # bytes: each batch slot's result region starts at a multiple of this
WORD_BITS = 64
BLOCK = 256
# Upper bound of the max_detections parameter (vrt_ros.settings.config); the result buffer holds this many rows.
MAX_DETECTIONS_CAPACITY = 1000
#: Device memory the NMS mask (``capacity * ceil(capacity / 64) * 8`` bytes) may take with the default capacity:
#: 256 MiB holds every cell of YOLOv8/YOLOX at 1280x1280 (33600 cells, 135 MiB) and up to 46336 cells (CenterFace
#: at 1024x704: 45056 cells); larger heads are capped (logged at start-up; overflowing frames counted).
NMS_MASK_BUDGET_BYTES = 256 * 2**20


def _aligned(nbytes: int) -> int:
    return -(-int(nbytes) // RESULT_ALIGN) * RESULT_ALIGN


def mask_nbytes(capacity: int) -> int:
    """Bytes of the NMS suppression bitmask for ``capacity`` candidates (one 64-bit word per 64 columns a row)."""
    return capacity * ((capacity + WORD_BITS - 1) // WORD_BITS) * 8


def default_capacity(items: int, budget: int = NMS_MASK_BUDGET_BYTES) -> int:
    """The candidate capacity used when none is given: every item the head's decode can produce (so NMS sees
    exactly the CPU reference's candidates), unless their NMS mask would exceed ``budget`` bytes; then the
    largest capacity whose mask fits (frames with more candidates above the threshold keep a subset, counted)."""
    if mask_nbytes(items) <= budget:
        return items
    lo, hi = 1, items
    while lo < hi:  # the largest c with mask_nbytes(c) <= budget
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if mask_nbytes(mid) <= budget else (lo, mid - 1)
    return lo


class _Decoder:
    """One head's decode launch, from the head's :class:`~vrt_ros.heads.base.GpuDecode` (its kernel, launch grid,
    constant tables uploaded here once, and its arguments by name). The kernel's shared tail (threshold and the
    candidate sink) is filled by :class:`GpuPostprocessor`."""

    def __init__(self, head: Head, rt: GpuRuntime, stream: Stream) -> None:
        spec = head.gpu_decode()
        if spec is None:
            gpu_heads = sorted(n for n, h in HEADS.items() if h.gpu_decode is not Head.gpu_decode)
            raise ModelError(f"head {head.name!r} has no GPU decode (GPU heads: {gpu_heads})")
        self.head = head
        self.module, self.entry, self.grid = spec.module, spec.entry, tuple(int(g) for g in spec.grid)
        #: most candidates one frame can produce (one per cell, row or heatmap pixel): the candidate capacity.
        self.items = int(np.prod(self.grid))
        self._args = spec.args
        self._tables = {}
        for name, table in spec.tables.items():
            table = np.ascontiguousarray(table, dtype=np.float32)
            buf = self._tables[name] = rt.alloc_device(table.nbytes, stream)
            staging = rt.alloc_pinned(table.nbytes)
            staging.array[:] = table.view(np.uint8).ravel()
            rt.h2d(buf.ptr, staging.ptr, table.nbytes, stream)
            rt.sync(stream)  # start-up only: the staging buffer must outlive the copy
            staging.close()

    def config(self) -> LaunchConfig:
        return cfg_1d(self.grid[0], BLOCK) if len(self.grid) == 1 else cfg_2d(*self.grid)

    def args(self, outputs: Sequence[int]) -> dict[str, int | float]:
        """The decode kernel's head-specific arguments by parameter name (``outputs``: engine output addresses)."""
        return self._args(outputs, {name: buf.ptr for name, buf in self._tables.items()})

    def close(self, stream: Stream) -> None:
        for buf in self._tables.values():
            buf.close(stream)


class GpuPostprocessor:
    """Decode + NMS + finalize for one head, with buffers sized once.

    Args:
        runtime: the process's GPU runtime.
        library: the kernel library.
        head: the model head (layout, keypoints, ``applies_nms``).
        stream: the pipeline's stream (start-up uploads go on it).
        capacity: most candidates kept per frame before NMS. Default (None): the most the head's decode can
            produce (one per cell, row or heatmap pixel), so every candidate above the threshold is stored and
            NMS sees exactly the CPU reference's set, for any count, unless that NMS mask would exceed
            :data:`NMS_MASK_BUDGET_BYTES` (:func:`default_capacity`; logged). A smaller value saves the NMS mask's
            ``capacity**2 / 8`` bytes but keeps an arbitrary subset when more candidates pass: such frames are
            counted in :attr:`overflows` and logged.
        mask_dtype: label image dtype of segmentation heads (np.uint8 mono8 / np.uint16 mono16, fixed at start-up).
        max_batch: batch slots whose results the result buffers hold.
        budget: optional :class:`~vrt_ros.pools.buffer_budget.ByteBudget` bounding the label images (with the staging).

    Attributes:
        overflows: frames whose candidates above the threshold exceeded ``capacity`` (0 with the default).

    Raises:
        ModelError: the head has no GPU decode.
    """

    def __init__(self, runtime: GpuRuntime, library: KernelLibrary, head: Head, stream: Stream,
                 capacity: int | None = None, max_batch: int = 1, mask_dtype: type = np.uint8,
                 budget=None) -> None:
        if output_float_dtypes := [o.dtype for o in head.outputs if o.dtype != "float32"]:
            raise ModelError(f"GPU decode reads float32 engine outputs; head {head.name!r} outputs are {output_float_dtypes}")
        self._rt = runtime
        self.head = head
        self._decoder = _Decoder(head, runtime, stream)
        items = int(self._decoder.items)
        self.capacity = max(1, default_capacity(items) if capacity is None else int(capacity))
        if capacity is None and self.capacity < items:
            log.warning("head %s: %d candidate cells would need a %.0f MiB NMS mask; capacity capped at %d "
                        "(%.0f MiB): frames with more candidates above the score threshold keep a subset, counted as "
                        "candidate_overflows on /diagnostics", head.name, items, mask_nbytes(items) / 2**20,
                        self.capacity, mask_nbytes(self.capacity) / 2**20)
        self.overflows = 0
        self.num_keypoints = head.num_keypoints
        self.num_extras = int(head.num_extras)
        self.cand_stride = CAND_HEADER + 3 * self.num_keypoints + self.num_extras
        # finalize_extras rows: box, score, class, theta, extras (its heads have no keypoints)
        self.out_stride = 7 + self.num_extras if self.num_extras else 6 + 3 * self.num_keypoints
        self.words = (self.capacity + WORD_BITS - 1) // WORD_BITS
        nms_kernel = (ROTATED, "nms_mask_rotated") if head.oriented else (POST, "nms_mask")
        final_kernel = (EXTRAS, "finalize_extras") if self.num_extras else (POST, "finalize")
        kernels = [(self._decoder.module, self._decoder.entry), (POST, "rank_by_score"), nms_kernel,
                   (POST, "nms_reduce"), final_kernel]
        self._k_decode, self._k_rank, self._k_mask, self._k_reduce, self._k_final = (
            library.kernel(m, e) for m, e in kernels)
        self._sig_decode, self._sig_rank, self._sig_mask, self._sig_reduce, self._sig_final = (
            library.signature(m, e) for m, e in kernels)
        rt = runtime
        self._cand = rt.alloc_device(self.capacity * self.cand_stride * 4, stream)
        self._counts = rt.alloc_device(4 * 4, stream)  # [0] candidates, [1] kept
        self._order = rt.alloc_device(self.capacity * 4, stream)
        self._kept = rt.alloc_device(self.capacity * 4, stream)
        self._mask = rt.alloc_device(mask_nbytes(self.capacity), stream)
        self.max_batch = max(1, int(max_batch))
        self.result_nbytes = _aligned((RESULT_HEADER + MAX_DETECTIONS_CAPACITY * self.out_stride) * 4)  # one slot
        self._result = rt.alloc_device(self.result_nbytes * self.max_batch, stream)
        self._host = rt.alloc_pinned(self.result_nbytes * self.max_batch)
        self._masks = None
        if head.has_masks:
            _, p, ph, pw = head.outputs[head.proto_index].shape
            self._masks = GpuMasks(rt, library, num_masks=int(p), proto_w=int(pw), proto_h=int(ph),
                                   input_w=head.input_spec.width, input_h=head.input_spec.height,
                                   out_stride=self.out_stride, coef_offset=7, max_detections=MAX_DETECTIONS_CAPACITY,
                                   label_dtype=mask_dtype, max_batch=self.max_batch, stream=stream, budget=budget)
        # Launch configurations and constant arguments, built once.
        self._cfg_decode = self._decoder.config()
        self._cfg_rank = LaunchConfig(grid=(self.capacity + BLOCK - 1) // BLOCK, block=BLOCK, shmem_size=2 * BLOCK * 4)
        self._cfg_mask = cfg_1d(self.capacity * self.words, BLOCK)
        self._cfg_reduce = LaunchConfig(grid=1, block=BLOCK, shmem_size=self.words * 8)
        self._cfg_final = LaunchConfig(grid=1, block=BLOCK, shmem_size=BLOCK * 4)
        # the candidate buffer as the decode, rank and NMS kernels name it
        self._sink = dict(cand=self._cand.ptr, cand_stride=self.cand_stride, capacity=self.capacity, count=self._counts.ptr)
        self._count_ptr = self._counts.ptr
        self._kept_count_ptr = self._counts.ptr + 4
        self._stride = 0  # bytes per slot of the last batch's results
        self._slots_back = 0
        # every launch's arguments per (outputs, letterbox, thresholds, slot)
        self._launches = KeyedCache(CAPACITY * self.max_batch)

    def enqueue(self, stream: Stream, outputs: Sequence[int], lb: Letterbox, params: PostprocessParams) -> None:
        """Enqueue decode, sort, NMS, finalize and the D2H copy of the result for one frame (the launches'
        arguments are built once per outputs, letterbox and thresholds).

        Args:
            stream: the pipeline's stream.
            outputs: device addresses of the engine outputs, in engine order.
            lb: the frame's letterbox.
            params: thresholds of this frame.
        """
        self.enqueue_slot(stream, outputs, lb, params, 0)
        self.copy_back(stream, 1)

    def enqueue_slot(self, stream: Stream, outputs: Sequence[int], lb: Letterbox, params: PostprocessParams,
                     slot: int, masks: bool | None = None) -> None:
        """Enqueue decode, sort, NMS and finalize of one batch slot (no copy back: :meth:`copy_back`), and for a
        segmentation head the slot's label image and its copy (:class:`~vrt_ros.gpu.masks.GpuMasks`).

        Args:
            stream: the pipeline's stream.
            outputs: device addresses of THIS slot's engine outputs (each output's base + slot x its slot size).
            lb: the slot's frame's letterbox.
            params: thresholds (the same for every slot of a batch).
            slot: 0 .. ``max_batch`` - 1; its result goes to ``slot`` x stride in the result buffer.
            masks: assemble this slot's label image (None: ``params.want_masks``); ignored by heads without masks.
        """
        if not 0 <= slot < self.max_batch:
            raise ValueError(f"slot {slot} outside 0..{self.max_batch - 1}")
        rt = self._rt
        decode, rank, mask, reduce, final, stride = self._launches.get(
            (tuple(outputs), lb, params, slot), lambda: self._prepare(outputs, lb, params, slot))
        rt.memset32(self._counts.ptr, 0, 4, stream)
        launch(stream, self._cfg_decode, self._k_decode, *decode)
        launch(stream, self._cfg_rank, self._k_rank, *rank)
        if mask is not None:
            launch(stream, self._cfg_mask, self._k_mask, *mask)
        launch(stream, self._cfg_reduce, self._k_reduce, *reduce)
        launch(stream, self._cfg_final, self._k_final, *final)
        if self._masks is not None:  # the slot's label image, from its finalized rows and its prototypes
            if params.want_masks if masks is None else masks:
                self._masks.enqueue(stream, self._result.ptr + slot * stride, outputs[self.head.proto_index], lb,
                                    params, slot)
            else:
                self._masks.skip(slot)
        self._stride = stride

    def reserve_masks(self, slot: int, height: int, width: int, stream: Stream) -> None:
        """Take ``slot``'s label image for a ``height`` x ``width`` frame now, with its staging, before anything of
        the frame is enqueued (segmentation heads; nothing for others).

        Raises:
            FrameError: (reason ``frame_too_large``) it does not fit the budget: drop the frame.
        """
        if self._masks is not None:
            self._masks.images.get(slot, height, width, stream)

    def copy_back(self, stream: Stream, slots: int) -> None:
        """Enqueue the one D2H copy of slots ``0 .. slots - 1``'s results into pinned memory."""
        self._slots_back = slots
        self._rt.d2h(self._host.ptr, self._result.ptr, slots * self._stride, stream)

    def _prepare(self, outputs: Sequence[int], lb: Letterbox, params: PostprocessParams, slot: int = 0) -> tuple:
        """The argument tuples of decode, rank, NMS mask (None when the head applies no NMS), reduce and finalize,
        and the slot stride of the results, for one set of outputs, letterbox, thresholds and slot."""
        max_det = max(0, min(int(params.max_detections), MAX_DETECTIONS_CAPACITY))
        stride = _aligned((RESULT_HEADER + max_det * self.out_stride) * 4)
        sink, order, apply_nms = self._sink, self._order.ptr, bool(self.head.applies_nms)
        decode = self._sig_decode.args(**self._decoder.args(outputs), threshold=params.score_threshold, **sink)
        rank = self._sig_rank.args(**sink, order=order)
        rotated = dict(angle_offset=CAND_HEADER + 3 * self.num_keypoints) if self.head.oriented else {}
        mask = self._sig_mask.args(
            **sink, order=order, iou_threshold=params.nms_iou, class_agnostic=bool(params.class_agnostic),
            words=self.words, mask=self._mask.ptr, **rotated,
        ) if apply_nms else None
        reduce = self._sig_reduce.args(
            count=sink["count"], capacity=self.capacity, mask=self._mask.ptr, words=self.words, apply_nms=apply_nms,
            kept=self._kept.ptr, kept_count=self._kept_count_ptr,
        )
        per_row = (dict(num_extras=self.num_extras, oriented=bool(self.head.oriented)) if self.num_extras
                   else dict(num_keypoints=self.num_keypoints))
        final = self._sig_final.args(
            cand=sink["cand"], cand_stride=self.cand_stride, order=order, kept=self._kept.ptr,
            kept_count=self._kept_count_ptr, count=sink["count"], **per_row,
            pad_x=lb.pad_x, pad_y=lb.pad_y, scale_x=lb.scale_x, scale_y=lb.scale_y, src_w=lb.src_width,
            src_h=lb.src_height, max_detections=max_det, result=self._result.ptr + slot * stride,
        )
        return decode, rank, mask, reduce, final, stride

    @property
    def slot_stride(self) -> int:
        """Bytes from one batch slot's result to the next, as of the last :meth:`enqueue_slot` (slot ``j``'s result
        at :attr:`result_ptr` + ``j`` x this)."""
        return self._stride

    @property
    def result_ptr(self) -> int:
        """Device address of slot 0's result (int32 count, then :data:`RESULT_HEADER` - 1 words, then rows of
        :attr:`out_stride` floats: x1, y1, x2, y2, score, class, keypoints); read by later kernels on the stream
        (the depth statistic, :mod:`vrt_ros.gpu.depth`)."""
        return self._result.ptr

    def check_launches(self, outputs: Sequence[int]) -> None:
        """Build the arguments of every launch for ``outputs`` and a nominal letterbox and thresholds, and check each
        against its kernel's ``extern "C"`` signature (start-up; nothing is launched).

        Raises:
            KernelArgumentError: an argument tuple does not match its kernel's signature.
        """
        spec = self.head.input_spec
        self._prepare(outputs, letterbox(spec.width, spec.height, spec.width, spec.height), PostprocessParams())

    def read(self) -> Detections:
        """The last frame's detections, from pinned memory (call after the stream's synchronisation)."""
        return self._read_slot(0)

    def read_batch(self) -> list[Detections]:
        """Every slot's detections of the last batch (:meth:`copy_back`), after the stream's synchronisation."""
        return [self._read_slot(j) for j in range(self._slots_back)]

    def _read_slot(self, slot: int) -> Detections:
        base = slot * self._stride
        header = self._host.array[base : base + RESULT_HEADER * 4].view(np.int32)
        n, found = int(header[0]), int(header[1])
        if found > self.capacity:
            self.overflows += 1
            if self.overflows == 1 or self.overflows % 1000 == 0:
                log.warning(
                    "%d candidates above the score threshold, only %d kept for NMS (frames so far: %d; raise the "
                    "score threshold, or leave the candidate capacity at its default)", found, self.capacity,
                    self.overflows,
                )
        rows = self._host.array[base + RESULT_HEADER * 4 : base + self._stride]
        rows = rows[: (rows.nbytes // (4 * self.out_stride)) * 4 * self.out_stride].view(np.float32)
        rows = rows.reshape(-1, self.out_stride)[:n]
        k = self.num_keypoints
        if self.num_extras:
            return Detections(
                boxes=rows[:, 0:4].copy(), scores=rows[:, 4].copy(), class_ids=rows[:, 5].astype(np.int32),
                keypoints=np.zeros((n, 0, 3), np.float32), extras=rows[:, 7:].copy(),
                theta=rows[:, THETA_COLUMN].copy() if self.head.oriented else None,
                label_mask=self._masks.read(slot) if self._masks is not None else None,
            )
        return Detections(
            boxes=rows[:, 0:4].copy(),
            scores=rows[:, 4].copy(),
            class_ids=rows[:, 5].astype(np.int32),
            keypoints=rows[:, 6:].reshape(n, k, 3).copy(),
        )

    def close(self, stream: Stream) -> None:
        """Free the buffers (after the stream's last frame completed)."""
        self._decoder.close(stream)
        if self._masks is not None:
            self._masks.close(stream)
        for b in (self._cand, self._counts, self._order, self._kept, self._mask, self._result):
            b.close(stream)
        self._host.close()
