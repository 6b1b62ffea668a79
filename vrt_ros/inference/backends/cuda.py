"""The CUDA pipeline: a batch of 1 .. ``max_batch`` frames on one stream, one host synchronisation per batch.

One path: :meth:`CudaPipeline.process_batch` is the only route through the GPU; a frame alone is a batch of one
(:meth:`~CudaPipeline.process`, :meth:`~CudaPipeline.process_bgr` and :meth:`~CudaPipeline.process_compressed` are
thin wrappers over it). Its staging is :mod:`vrt_ros.inference.backends.cuda_staging` (raw slots' host copies at the same
time, a batch's JPEGs in one decoder call), the rest :mod:`vrt_ros.inference.backends.cuda_run` (engine, postprocess, depth
statistic per slot, the one sync).

H2D (pinned staging) -> preprocess kernel -> engine.enqueue -> decode -> sort -> NMS -> finalize -> D2H (pinned),
then exactly one stream synchronisation, then the detections are read from pinned memory. Compressed JPEG frames
replace the H2D by the GPU JPEG decode into device memory (:mod:`vrt_ros.gpu.jpeg`). Timing events (created once,
timing enabled) bracket the stages: ``upload`` (``decode`` for GPU-decoded frames), ``preprocess``, ``inference``,
``postprocess`` (ms, read after the sync), plus ``total`` host wall time.

Batches (:meth:`CudaPipeline.process_batch`, up to ``max_batch`` frames of any cameras): every frame's upload (or
GPU decode) into its slot's staging, then every frame's letterbox into its slot ``j`` of the ``[N, 3, H, W]``
input (the kernel's destination is ``input + j * slot bytes``), ONE engine call with batch N, then decode / NMS /
finalize per slot (each reading its slot of the outputs and writing its own result region), ONE D2H of every
slot's result and ONE sync; the stage times are the batch's. Batch sizes prepared at start-up (each run once
there: a torch engine captures one CUDA graph per size, a TensorRT engine sets each shape once): a model of fixed
batch N: N (smaller batches padded: the unused slots hold stale input and are not decoded); a dynamic-batch model:
1 and ``max_batch`` (2 .. ``max_batch`` - 1 padded to ``max_batch``). Everything is allocated at start-up for
``max_batch`` slots, except the staging of a new (slot, frame geometry) and the label image of a new (slot, frame
size), allocated on its first frame: after that, no allocation for any batch size <= ``max_batch``.

Those per-geometry buffers (device + pinned) stay within ``engine.frame_buffers_mb`` for any sequence of frame sizes
(:mod:`vrt_ros.pools.buffer_budget`; a label image is taken with its frame's staging), and what a call returns (label
images included) is copied out of the reused buffers before the lock is released.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping, Sequence

import numpy as np

from vrt_ros.errors import BackendUnavailable, ConfigError
from vrt_ros.gpu import cuda_device_count, cuda_unavailable_reason
from vrt_ros.inference.backends.cuda_run import STAGES, BatchRun
from vrt_ros.inference.backends.cuda_staging import stage_batch
from vrt_ros.inference.backends.gpu_engine import load_engine
from vrt_ros.inference.backends.gpu_release import release_quietly
from vrt_ros.inference.batch_serial import SlotResult, batch_of_one, check_batch
from vrt_ros.model.model_file import onnx_metadata
from vrt_ros.pools.buffer_budget import MIB, ByteBudget
from vrt_ros.types import BatchFrame, BgrFrame, CompressedFrame, Detections, ImageSpec, PostprocessParams, RawFrame

__all__ = ["STAGES", "CudaPipeline"]


class CudaPipeline:
    """GPU pipeline with the interface of :class:`vrt_ros.inference.backends.cpu.CpuPipeline`.

    Frames are serialised by a lock (one frame at a time on the pipeline's stream), so one pipeline may serve
    several nodes or threads; each frame's detections depend on that frame only, and what a call returns (stage
    times and depth statistic included: ``Detections.timings``, ``depth_stats``) is the call's own. Every exit from
    :meth:`process_batch`, error or not, leaves nothing queued on the stream: a failing batch is synchronised before
    the error propagates, so the next batch never overwrites or frees memory a copy still reads.

    At start-up every kernel launch's arguments (a nominal frame of each encoding, and the postprocess of the
    engine's outputs) are checked against the kernels' ``extern "C"`` signatures (:mod:`vrt_ros.gpu.signatures`).

    Args:
        values: validated parameter values (``model.*``, ``engine.device``, ``engine.cache_dir``, thresholds).
        log: where start-up messages go.
        engine: a ready GPU engine (``inputs``, ``outputs``, ``enqueue(stream, input_ptr, output_ptrs)``);
            default: built from ``model.path`` (TensorRT for .engine/.plan, else torch).
        candidate_capacity: most candidates per frame kept for NMS; default (None): all a frame can produce, so
            the kept set is exactly the CPU reference's (see :class:`vrt_ros.gpu.postprocess.GpuPostprocessor`).
        camera: name for the staging log lines.

    Attributes:
        stats: counters for diagnostics: ``candidate_overflows`` (frames with more candidates than the capacity).
        max_batch: most frames per :meth:`process_batch` (:func:`vrt_ros.model.model_setup.resolve_max_batch`).
        batch_sizes: the engine batch sizes prepared at start-up (see the module docstring).

    Raises:
        BackendUnavailable: no CUDA device / cuda-python, or no GPU engine for the model.
        ModelError, ConfigError: as the CPU pipeline, and engine inputs/outputs the GPU path cannot feed or read;
            ConfigError also for an ``engine.device`` this machine does not have.
        GpuError, KernelCompileError, KernelArgumentError, or an engine's own error: anything else that stops the
            GPU path from starting (``backend: auto`` then falls back to the CPU path). What was allocated is freed.
    """

    #: :meth:`process_batch` takes a depth job per frame and returns each statistic with that frame's detections
    takes_depth = True
    #: compressed frames are decoded by the pipeline itself (GPU JPEG decode): the node passes them as they came
    decodes_compressed = True

    def __init__(
        self,
        values: Mapping[str, Any],
        log=print,
        *,
        engine=None,
        candidate_capacity: int | None = None,
        camera: str = "camera",
    ) -> None:
        reason = cuda_unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        from vrt_ros.settings.config import any_compressed, postprocess_params
        from vrt_ros.gpu.library import KernelLibrary
        from vrt_ros.gpu.depth import GpuDepthStats
        from vrt_ros.gpu.postprocess import MAX_DETECTIONS_CAPACITY, RESULT_HEADER, THETA_COLUMN, GpuPostprocessor
        from vrt_ros.gpu.preprocess import GpuPreprocessor
        from vrt_ros.gpu.runtime import GpuRuntime
        from vrt_ros.gpu.upload import Uploader, use_mapped
        from vrt_ros.boxes.masks import label_dtype
        from vrt_ros.model.model_setup import check_single_input, model_setup, resolve_max_batch

        self.stream = None
        self._upload = self._post = self._input = self._depth = None
        self._outputs: list = []
        self._events: list = []
        self.engine = engine
        device = int(values.get("engine.device", 0))
        count = cuda_device_count()
        if device >= count:  # a wrong robot YAML, not a missing GPU: no CPU fallback
            raise ConfigError(f"engine.device: CUDA device {device} does not exist here (this machine has {count} CUDA "
                              f"device(s), indices 0..{count - 1}; CUDA_VISIBLE_DEVICES applies)")
        self.runtime = rt = GpuRuntime.get(device)
        try:
            cache = str(values.get("engine.cache_dir", "") or "")
            self.library = KernelLibrary.shared(rt.arch, (cache + "/kernels") if cache else None)
            if self.engine is None:
                self.engine = load_engine(values, rt, log)
            rt.make_current()  # torch may have changed the current context
            check_single_input(f"model {values['model.path']}", self.engine.inputs)
            inp = self.engine.inputs[0]
            self.head, self.input_spec = model_setup(values, inp, self.engine.outputs,
                                                     onnx_metadata(values["model.path"]))
            self.max_batch = resolve_max_batch(values, inp, log)
            self._engine_batch = int(inp.shape[0])  # -1: dynamic
            self.batch_sizes = (self._engine_batch,) if self._engine_batch > 0 else tuple(sorted({1, self.max_batch}))
            slots = max(self.max_batch, self._engine_batch)
            self.stream = rt.create_stream()
            self.frame_budget = ByteBudget(int(values.get("engine.frame_buffers_mb", 1024)) * MIB,
                                           "engine.frame_buffers_mb")
            self._pre = GpuPreprocessor(self.library, self.input_spec, self.max_batch)
            self._post = GpuPostprocessor(rt, self.library, self.head, self.stream, candidate_capacity, self.max_batch,
                                          mask_dtype=label_dtype(int(values.get("max_detections", 100))),
                                          budget=self.frame_budget)
            self._upload = Uploader(rt, camera, self.max_batch, use_mapped(values, rt, log), self.frame_budget)
            self._depth = GpuDepthStats(rt, self.library, self.stream, MAX_DETECTIONS_CAPACITY,
                                        THETA_COLUMN if self.head.oriented else -1, self.max_batch)
            in_slot = self._pre.output_nbytes
            input_words = -(-in_slot * slots // 4)  # whole 32-bit words: zeroed below
            self._input = rt.alloc_device(4 * input_words, self.stream)
            per_slot = [int(np.prod(o.shape[1:])) * np.dtype(o.dtype).itemsize for o in self.engine.outputs]
            for nbytes in per_slot:
                self._outputs.append(rt.alloc_device(nbytes * slots, self.stream))
            self._output_ptrs = tuple(o.ptr for o in self._outputs)  # also the postprocess cache key, as is
            for _ in range(len(STAGES) + 1):
                self._events.append(rt.timing_event())
            # each batch slot's outputs: every output's base + slot x its bytes per slot (slot 0: the bases)
            self._run = BatchRun(rt, self.stream, self.engine, self._engine_batch, self.batch_sizes, self._pre,
                                 self._post, self._depth, self._events, self._input.ptr, in_slot, self._output_ptrs,
                                 [tuple(o.ptr + j * n for o, n in zip(self._outputs, per_slot))
                                  for j in range(self.max_batch)], RESULT_HEADER)
            self._pre.check_launches()
            self._post.check_launches(self._output_ptrs)
            self._depth.check_launches(self._post.result_ptr, RESULT_HEADER, self._post.out_stride)
            # one inference per prepared batch size at start-up (on a zeroed input, never on memory nothing wrote:
            # NaNs or denormals there can make an engine misbehave or run slowly; the outputs are not read): an
            # engine that fails on its first execution fails here, where `backend: auto` can still fall back to the
            # CPU, not on the first frame (where it would count towards the fault policy and end the process); a
            # torch engine captures its CUDA graph of each size here
            rt.memset32(self._input.ptr, 0, input_words, self.stream)
            for size in self.batch_sizes:
                self._run.enqueue_engine(size)
            rt.sync(self.stream)  # start-up work done; a fault in it surfaces here, not in the first frame
        except BaseException:
            self._release()
            raise
        self._params: PostprocessParams = postprocess_params(values)
        self._lock = threading.Lock()  # one frame at a time on this pipeline's stream
        self.last_timings: dict[str, float] = {}  # the last call's (each call's own: Detections.timings)
        self.frames = 0
        self._log = log
        # compressed input: the GPU JPEG decoder is detected and started now when any of the node's cameras takes
        # compressed frames (logged), else on the first compressed frame
        self._router = self._make_router() if any_compressed(values) else None
        if self.max_batch > 1:
            log(f"batches: up to {self.max_batch} frames per engine call; engine batch sizes prepared at start-up "
                f"{list(self.batch_sizes)} (smaller batches padded to the next); staging for up to "
                f"{self._upload.max_sets} (slot, frame geometry) sets")
        self.name = (
            f"cuda ({rt.name}, engine {getattr(self.engine, 'name', type(self.engine).__name__)}, head {self.head.name}, "
            f"input {self.input_spec.width}x{self.input_spec.height})"
        )
        log(f"{self.name}: kernels compiled {self.library.stats.compiled}, loaded from cache {self.library.stats.disk_hits}; "
            f"candidate capacity {self._post.capacity}")

    @property
    def stats(self) -> dict[str, int]:
        """Counters for diagnostics (see the class docstring)."""
        return {"candidate_overflows": self._post.overflows}

    def set_postprocess(self, params: PostprocessParams) -> None:
        """Change thresholds; the next frame uses them."""
        self._params = params

    def process(self, spec: ImageSpec, data: Any, stamp_ns: int | None = None, depth: Any = None) -> Detections:
        """Detect on a raw frame: :meth:`process_batch` of one frame (see :meth:`vrt_ros.inference.pipeline.Pipeline.process`).

        With ``depth`` (a :class:`vrt_ros.depth.stats.DepthJob`), the per-box depth statistic is computed on the
        stream inside the frame's one synchronisation (:mod:`vrt_ros.gpu.depth`): the result's ``depth_stats``.

        Raises:
            FrameError: invalid frame, or over ``engine.frame_buffers_mb`` (nothing of it is left queued).
            GpuError, or the engine's error: the frame failed; its queued work was synchronised first.
        """
        return batch_of_one(self.process_batch([RawFrame(spec, data)], depth=[depth]))

    def process_compressed(self, fmt: str, data: Any) -> Detections:
        """Detect on a ``sensor_msgs/CompressedImage`` payload: :meth:`process_batch` of one frame.

        JPEGs are decoded by nvImageCodec on this pipeline's stream into device memory, which the preprocess kernel
        reads directly (first stage ``decode`` instead of ``upload``); PNG and anything the GPU decoder refuses are
        decoded on the CPU and uploaded, counted per reason in :attr:`decode_stats`.

        Args:
            fmt: the message's ``format`` field (e.g. ``"jpeg"``, ``"bgr8; jpeg compressed bgr8"``).
            data: the payload (buffer protocol).

        Raises:
            FrameError: empty, truncated, undecodable or unsupported payloads.
        """
        return batch_of_one(self.process_batch([CompressedFrame(fmt, data)]))

    def process_bgr(self, image: np.ndarray) -> Detections:
        """Detect on a decoded (H, W, 3) uint8 BGR image: :meth:`process_batch` of one frame."""
        return batch_of_one(self.process_batch([BgrFrame(image)]))

    @property
    def decode_stats(self) -> dict[str, int]:
        """Compressed frames decoded on the GPU (``gpu``) and on the CPU per reason (``cpu.<reason>``)."""
        return self._router.stats() if self._router is not None else {"gpu": 0}

    def _make_router(self):
        from vrt_ros.intake.compressed_route import CompressedRouter
        from vrt_ros.gpu.jpeg import make_decoder

        return CompressedRouter(make_decoder(self.runtime.device_id, self._log, self.max_batch, budget=self.frame_budget),
                               log=self._log)

    def _router_now(self):
        if self._router is None:
            self._router = self._make_router()
        return self._router

    def _reserve(self, slot: int, source: tuple, masks: bool) -> None:
        """With masks for this frame: its label image now, with its staging (FrameError when over the bound)."""
        if masks:
            self._post.reserve_masks(slot, source[2].height, source[2].width, self.stream)

    def process_batch(self, frames: Sequence[BatchFrame], masks: Sequence[bool] | None = None,
                      depth: Sequence[Any] | None = None) -> list[SlotResult]:
        """Detect on 1 to :attr:`max_batch` frames (of any kinds: raw, JPEG, BGR) in one engine call and one sync
        (module docstring; see :meth:`vrt_ros.inference.pipeline.Pipeline.process_batch`, also for ``masks``).

        Args:
            depth: per frame, a :class:`vrt_ros.depth.stats.DepthJob` or None: that frame's per-box depth statistic
                is computed on the stream over its slot's result rows, inside the batch's one synchronisation, and
                returned as its ``depth_stats`` (the call's own array); None: no statistic.

        Raises:
            ValueError: more than :attr:`max_batch` frames, or ``masks`` / ``depth`` not one per frame.
            GpuError, or the engine's error: the batch failed; its queued work was synchronised first.
        """
        check_batch(frames, self.max_batch)
        if (masks is not None and len(masks) != len(frames)) or (depth is not None and len(depth) != len(frames)):
            raise ValueError(f"process_batch: masks and depth need one entry per frame ({len(frames)})")
        with self._lock:
            t0 = time.perf_counter()
            self.runtime.make_current()
            params = self._params
            wants = [params.want_masks if masks is None else bool(m) for m in (masks or frames)]
            self.frame_budget.begin()
            staged = None
            try:
                self._events[0].record(self.stream)
                staged = stage_batch(frames, self._upload, self._router_now, self.stream, self._reserve, wants)
                jobs = [None if depth is None else depth[i] for i in staged.taken]
                if staged.taken:
                    dets, timings = self._run.run(t0, "decode" if staged.gpu_decoded else "upload", staged.sources,
                                                  params, [wants[i] for i in staged.taken], jobs)
                else:  # every frame refused: no engine call; a sync only when an upload or decode was queued
                    dets, timings = [], {}
                    if staged.enqueued:
                        self.runtime.sync(self.stream)
            except BaseException:
                self._drain()
                raise
            finally:
                if staged is not None:
                    staged.infos.clear()  # the parsed streams lived until the sync (or the drain)
            results: list = [staged.faults.get(i) for i in range(len(frames))]
            for i, d in zip(staged.taken, dets):
                results[i] = d
            self.last_timings = timings
            self.frames += len(dets)
            return results

    def _drain(self) -> None:
        """Wait for whatever a failed batch queued (its own error, e.g. a poisoned context, is the caller's to raise)."""
        try:
            self.runtime.sync(self.stream)
        except Exception:  # the batch's original error propagates; a sticky CUDA error repeats on the next call
            pass

    def close(self) -> None:
        """Release the buffers (waits for the stream first)."""
        with self._lock:
            if self.stream is None:
                return
            try:
                self.runtime.make_current()
            except Exception:  # a poisoned context: free what can be freed below, raise nothing
                pass
            self._drain()
            self._release()

    def _release(self) -> None:
        """Free whatever exists (also after a failed start-up); errors of a poisoned context are ignored."""
        router, self._router = getattr(self, "_router", None), None
        release_quietly(self.stream, router, [self._upload, self._post, self._depth], [self._input, *self._outputs],
                        self._events, self.engine)
        self.stream = None
        self._upload = self._post = self._input = self._depth = None
        self._outputs, self._events = [], []

