"""The CUDA pipeline: the whole frame (or batch of frames) on one stream, one host synchronisation per call.

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
(:mod:`vrt_ros.buffer_budget`; a label image is taken with its frame's staging), and what a call returns (label
images included) is copied out of the reused buffers before the lock is released.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping, Sequence

import numpy as np

from vrt_ros.backends.gpu_engine import load_engine
from vrt_ros.backends.gpu_release import release_quietly
from vrt_ros.batch_serial import SlotResult, check_batch
from vrt_ros.buffer_budget import MIB, ByteBudget
from vrt_ros.encodings import ENCODINGS
from vrt_ros.errors import BackendUnavailable, ConfigError, FrameError, ModelError
from vrt_ros.gpu import cuda_device_count, cuda_unavailable_reason
from vrt_ros.model_file import onnx_metadata
from vrt_ros.types import BatchFrame, BgrFrame, CompressedFrame, Detections, ImageSpec, PostprocessParams, RawFrame

STAGES = ("upload", "preprocess", "inference", "postprocess")


class CudaPipeline:
    """GPU pipeline with the interface of :class:`vrt_ros.backends.cpu.CpuPipeline`.

    Frames are serialised by a lock (one frame at a time on the pipeline's stream), so one pipeline may serve
    several nodes or threads; each frame's detections depend on that frame only, and what a call returns (stage
    times and depth statistic included: ``Detections.timings``, ``depth_stats``) is the call's own. Every exit from
    :meth:`process`, error or not, leaves nothing queued on the stream: a failing frame is synchronised before the
    error propagates, so the next frame never overwrites or frees memory a copy still reads.

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
        max_batch: most frames per :meth:`process_batch` (:func:`vrt_ros.model_setup.resolve_max_batch`).
        batch_sizes: the engine batch sizes prepared at start-up (see the module docstring).

    Raises:
        BackendUnavailable: no CUDA device / cuda-python, or no GPU engine for the model.
        ModelError, ConfigError: as the CPU pipeline, and engine inputs/outputs the GPU path cannot feed or read;
            ConfigError also for an ``engine.device`` this machine does not have.
        GpuError, KernelCompileError, KernelArgumentError, or an engine's own error: anything else that stops the
            GPU path from starting (``backend: auto`` then falls back to the CPU path). What was allocated is freed.
    """

    #: :meth:`process` takes a depth job and returns its statistic with the call's detections (``depth_stats``)
    takes_depth = True

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
        from vrt_ros.config import any_compressed, postprocess_params
        from vrt_ros.gpu.library import KernelLibrary
        from vrt_ros.gpu.depth import GpuDepthStats
        from vrt_ros.gpu.postprocess import MAX_DETECTIONS_CAPACITY, RESULT_HEADER, THETA_COLUMN, GpuPostprocessor
        from vrt_ros.gpu.preprocess import GpuPreprocessor
        from vrt_ros.gpu.runtime import GpuRuntime
        from vrt_ros.gpu.upload import Uploader, use_mapped
        from vrt_ros.masks import label_dtype
        from vrt_ros.model_setup import check_single_input, model_setup, resolve_max_batch

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
                                        THETA_COLUMN if self.head.oriented else -1)
            self._result_header = RESULT_HEADER
            self._in_slot = self._pre.output_nbytes
            input_words = -(-self._in_slot * slots // 4)  # whole 32-bit words: zeroed below
            self._input = rt.alloc_device(4 * input_words, self.stream)
            per_slot = [int(np.prod(o.shape[1:])) * np.dtype(o.dtype).itemsize for o in self.engine.outputs]
            for nbytes in per_slot:
                self._outputs.append(rt.alloc_device(nbytes * slots, self.stream))
            self._output_ptrs = tuple(o.ptr for o in self._outputs)  # also the postprocess cache key, as is
            # each batch slot's outputs: every output's base + slot x its bytes per slot (slot 0: the bases)
            self._slot_outputs = [tuple(o.ptr + j * n for o, n in zip(self._outputs, per_slot))
                                  for j in range(self.max_batch)]
            for _ in range(len(STAGES) + 1):
                self._events.append(rt.timing_event())
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
                self._enqueue_engine(size)
            rt.sync(self.stream)  # start-up work done; a fault in it surfaces here, not in the first frame
        except BaseException:
            self._release()
            raise
        self._params: PostprocessParams = postprocess_params(values)
        self._lock = threading.Lock()  # one frame at a time on this pipeline's stream
        self.last_timings: dict[str, float] = {}  # the last call's (each call's own: Detections.timings)
        self.frames = 0
        self._log = log
        self._decoded_info = None  # the last GPU-decoded frame's parsed stream (alive until its sync)
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

    def _enqueue_engine(self, frames: int) -> None:
        """The engine on ``frames`` slots, padded to the next prepared batch size (a fixed batch: its size)."""
        if self._engine_batch > 0:
            self.engine.enqueue(self.stream, self._input.ptr, self._output_ptrs)
            return
        size = next(b for b in self.batch_sizes if b >= frames)
        self.engine.enqueue(self.stream, self._input.ptr, self._output_ptrs, batch=size)

    def process(self, spec: ImageSpec, data: Any, stamp_ns: int | None = None, depth: Any = None) -> Detections:
        """Detect on a raw frame (see :meth:`vrt_ros.pipeline.Pipeline.process`).

        With ``depth`` (a :class:`vrt_ros.depth.stats.DepthJob`), the depth frame is uploaded and the per-box
        statistic computed on the stream after the postprocess, inside the frame's one synchronisation
        (:mod:`vrt_ros.gpu.depth`); it is the result's ``depth_stats`` (the call's own array).

        Raises:
            FrameError: invalid frame, or over ``engine.frame_buffers_mb`` (nothing of it is left queued).
            GpuError, or the engine's error: the frame failed; its queued work was synchronised first.
        """
        with self._lock:
            t0 = time.perf_counter()
            self.runtime.make_current()
            self.frame_budget.begin()
            source = None
            try:
                self._events[0].record(self.stream)
                source = self._upload.upload(spec, data, self.stream)
                self._reserve(0, source, self._params.want_masks)
                return self._single(t0, "upload", source, depth)
            except BaseException as exc:  # an invalid frame is refused before any copy is queued (nothing to wait for)
                if source is not None or not isinstance(exc, FrameError):
                    self._drain()
                raise

    def process_compressed(self, fmt: str, data: Any) -> Detections:
        """Detect on a ``sensor_msgs/CompressedImage`` payload.

        JPEGs are decoded by nvImageCodec on this pipeline's stream into device memory, which the preprocess kernel
        reads directly (first stage ``decode`` instead of ``upload``); PNG and anything the GPU decoder refuses are
        decoded on the CPU and uploaded, counted per reason in :attr:`decode_stats`.

        Args:
            fmt: the message's ``format`` field (e.g. ``"jpeg"``, ``"bgr8; jpeg compressed bgr8"``).
            data: the payload (buffer protocol).

        Raises:
            FrameError: empty, truncated, undecodable or unsupported payloads.
        """
        with self._lock:
            t0 = time.perf_counter()
            self.runtime.make_current()
            if self._router is None:
                self._router = self._make_router()
            self.frame_budget.begin()
            try:
                self._events[0].record(self.stream)
                infos: list = []
                source, gpu = self._decoded(fmt, data, 0, infos)
                self._decoded_info = infos  # kept until the sync
                self._reserve(0, source, self._params.want_masks)
                return self._single(t0, "decode" if gpu else "upload", source)
            except BaseException:  # a GPU decode may have queued work before refusing: wait for it either way
                self._drain()
                raise

    @property
    def decode_stats(self) -> dict[str, int]:
        """Compressed frames decoded on the GPU (``gpu``) and on the CPU per reason (``cpu.<reason>``)."""
        return self._router.stats() if self._router is not None else {"gpu": 0}

    def _make_router(self):
        from vrt_ros.compressed_route import CompressedRouter
        from vrt_ros.gpu.jpeg import make_decoder

        return CompressedRouter(make_decoder(self.runtime.device_id, self._log, self.max_batch), log=self._log)

    def _decoded(self, fmt: str, data: Any, slot: int, infos: list) -> tuple[tuple, bool]:
        """Decode a compressed frame for batch ``slot``: on the GPU into device memory (its parsed stream appended
        to ``infos``, to keep alive until the sync), else on the CPU and uploaded. Returns ``((device_ptr,
        encoding, geometry), decoded_on_the_gpu)``.

        Raises:
            FrameError: an undecodable payload (nothing of it is left for the preprocess to read).
        """
        image, info = self._router.decode(fmt, data, self.stream, slot=slot)
        if isinstance(image, np.ndarray):  # decoded on the CPU (counted by the router)
            h, w = image.shape[:2]
            bgr = ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3)
            return self._upload.upload(bgr, image, self.stream, slot), False
        infos.append(info)
        spec = ImageSpec(width=image.width, height=image.height, encoding=image.encoding, step=image.pitch)
        return (image.ptr, ENCODINGS[image.encoding], spec), True

    def _reserve(self, slot: int, source: tuple, masks: bool) -> None:
        """With masks for this frame: its label image now, with its staging (FrameError when over the bound)."""
        if masks:
            self._post.reserve_masks(slot, source[2].height, source[2].width, self.stream)

    def _single(self, t0: float, first_stage: str, source: tuple, depth: Any = None) -> Detections:
        (dets,) = self._finish(t0, first_stage, [source], depth=depth)
        return dets

    def _finish(self, t0: float, first_stage: str, sources: list[tuple],
                masks: Sequence[bool] | None = None, depth: Any = None) -> list[Detections]:
        """Preprocess → engine → postprocess → the one sync, from the device images ``sources`` (``(ptr, encoding,
        geometry)`` per batch slot, in slot order); ``masks``: per slot, assemble its label image (None: the
        parameters' ``want_masks``); with ``depth`` (one frame) also its depth statistic.

        ``first_stage`` names the work between events 0 and 1 (``upload`` or ``decode``). Called under the lock;
        the caller drains the stream when this raises.
        """
        s = self.stream
        ev = self._events
        params = self._params
        ev[1].record(s)
        lbs = [self._pre.enqueue(s, ptr, image, enc, self._input.ptr + j * self._in_slot)
               for j, (ptr, enc, image) in enumerate(sources)]
        ev[2].record(s)
        if lbs:
            self._enqueue_engine(len(lbs))
        ev[3].record(s)
        for j, lb in enumerate(lbs):
            self._post.enqueue_slot(s, self._slot_outputs[j], lb, params, j, None if masks is None else masks[j])
        if depth is not None and lbs:  # slot 0's depth statistic over its result's rows, before the one sync
            self._depth.enqueue(s, depth, self._post.result_ptr, self._result_header, self._post.out_stride,
                                params.max_detections)
        if lbs:
            self._post.copy_back(s, len(lbs))  # every slot's result in one copy
        ev[4].record(s)
        self.runtime.sync(s)  # the frame's (batch's) one synchronisation
        dets = self._post.read_batch() if lbs else []
        if depth is not None and dets:
            dets[0].depth_stats = self._depth.read(len(dets[0]))
        timings = {(first_stage if i == 0 else name): ev[i + 1].elapsed_ms(ev[i]) for i, name in enumerate(STAGES)}
        timings["total"] = (time.perf_counter() - t0) * 1e3
        for d in dets:  # the call's own dict (a batch's frames share it)
            d.timings = timings
        self.last_timings = timings
        self.frames += len(lbs)
        return dets

    def process_batch(self, frames: Sequence[BatchFrame], masks: Sequence[bool] | None = None) -> list[SlotResult]:
        """Detect on up to :attr:`max_batch` frames in one engine call and one sync (module docstring; see
        :meth:`vrt_ros.pipeline.Pipeline.process_batch`, also for ``masks``).

        Raises:
            ValueError: more than :attr:`max_batch` frames.
            GpuError, or the engine's error: the batch failed; its queued work was synchronised first.
        """
        check_batch(frames, self.max_batch)
        with self._lock:
            t0 = time.perf_counter()
            self.runtime.make_current()
            if self._router is None and any(isinstance(f, CompressedFrame) for f in frames):
                self._router = self._make_router()
            results: list = [None] * len(frames)
            taken, sources, infos, gpu = [], [], [], False
            wants = [self._params.want_masks if masks is None else bool(m) for m in (masks or frames)]
            self.frame_budget.begin()
            try:
                self._events[0].record(self.stream)
                for i, frame in enumerate(frames):
                    try:
                        source, on_gpu = self._stage(frame, len(sources), infos)
                        self._reserve(len(sources), source, wants[i])
                    except FrameError as exc:  # this slot only: the others go on
                        results[i] = exc
                        continue
                    gpu = gpu or on_gpu
                    taken.append(i)
                    sources.append(source)
                dets = self._finish(t0, "decode" if gpu else "upload", sources, [wants[i] for i in taken])
            except BaseException:
                self._drain()
                raise
            finally:
                infos.clear()  # the parsed streams lived until the sync (or the drain)
            for i, d in zip(taken, dets):
                results[i] = d
            self.last_timings["batch_size"] = float(len(sources))
            return results

    def _stage(self, frame: BatchFrame, slot: int, infos: list) -> tuple[tuple, bool]:
        """Upload or GPU-decode one batch frame into ``slot``'s staging: ``((ptr, encoding, geometry), on_gpu)``."""
        if isinstance(frame, RawFrame):
            return self._upload.upload(frame.spec, frame.data, self.stream, slot), False
        if isinstance(frame, BgrFrame):
            image = np.ascontiguousarray(frame.image, dtype=np.uint8)
            h, w = image.shape[:2]
            return self._upload.upload(ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), image,
                                       self.stream, slot), False
        if isinstance(frame, CompressedFrame):
            return self._decoded(frame.format, frame.data, slot, infos)
        raise TypeError(f"a batch frame is a RawFrame, CompressedFrame or BgrFrame, not {type(frame).__name__}")

    def _drain(self) -> None:
        """Wait for whatever a failed frame queued (its own error, e.g. a poisoned context, is the caller's to raise)."""
        try:
            self.runtime.sync(self.stream)
        except Exception:  # the frame's original error propagates; a sticky CUDA error repeats on the next call
            pass

    def process_bgr(self, image: np.ndarray) -> Detections:
        """Detect on a decoded (H, W, 3) uint8 BGR image."""
        image = np.ascontiguousarray(image, dtype=np.uint8)
        h, w = image.shape[:2]
        return self.process(ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), image)

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
