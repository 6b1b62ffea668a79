"""The CUDA pipeline: the whole frame on one stream, one host synchronisation per frame.

H2D (pinned staging) -> preprocess kernel -> engine.enqueue -> decode -> sort -> NMS -> finalize -> D2H (pinned),
then exactly one stream synchronisation, then the detections are read from pinned memory. Compressed JPEG frames
replace the H2D by the GPU JPEG decode into device memory (:mod:`vrt_ros.gpu.jpeg`). Timing events (created once,
timing enabled) bracket the stages: ``upload`` (``decode`` for GPU-decoded frames), ``preprocess``, ``inference``,
``postprocess`` (ms, read after the sync), plus ``total`` host wall time.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping

import numpy as np

from vrt_ros.encodings import ENCODINGS
from vrt_ros.errors import BackendUnavailable, ConfigError, FrameError, ModelError
from vrt_ros.gpu import cuda_device_count, cuda_unavailable_reason
from vrt_ros.model_file import is_onnx_model
from vrt_ros.types import Detections, ImageSpec, PostprocessParams

STAGES = ("upload", "preprocess", "inference", "postprocess")


def _load_engine(values: Mapping[str, Any], runtime, log):
    """The GPU engine for ``model.path``: TensorRT when it can run here (required for serialized engines), else torch.

    ``engine.tensorrt_flavour`` "auto" takes TensorRT, else TensorRT for RTX where it runs on this GPU (skipped on
    others, e.g. the H200, the reason going into the one "GPU engine: torch" line), else torch; a forced flavour
    that cannot run here fails with the reason instead of falling back.

    Raises:
        BackendUnavailable: neither engine can run this model here; the message gives both reasons.
    """
    path = str(values["model.path"])
    is_onnx = is_onnx_model(path)  # by content, not by name
    flavour = str(values.get("engine.tensorrt_flavour", "auto") or "auto")
    try:
        from vrt_ros.engines.tensorrt import TensorRtEngine, tensorrt_unavailable_reason

        trt_reason = tensorrt_unavailable_reason(flavour=flavour, compute_capability=runtime.arch, gpu_name=runtime.name)
    except ImportError as exc:
        trt_reason = f"vrt_ros.engines.tensorrt not importable: {exc}"
    if trt_reason is not None and flavour != "auto":
        raise BackendUnavailable(f"engine.tensorrt_flavour '{flavour}' cannot run here: {trt_reason}")
    if trt_reason is None:
        try:
            return TensorRtEngine.from_values(values, runtime.device_id, gpu_name=runtime.name,
                                              compute_capability=runtime.arch, log=log)
        except BackendUnavailable as exc:  # e.g. a lean runtime that cannot build from ONNX
            if not is_onnx or flavour != "auto":
                raise
            trt_reason = str(exc)
    if not is_onnx:
        from vrt_ros.engines.tensorrt import read_engine_file

        read_engine_file(path)  # a missing or garbage file gets its own start-up error (HC-09) first
        raise BackendUnavailable(f"serialized TensorRT engine {path} needs TensorRT: {trt_reason}")
    try:
        from vrt_ros.engines.torch import TorchEngine
    except ImportError as exc:
        raise BackendUnavailable(
            f"no GPU engine for {path}: TensorRT unavailable ({trt_reason}); torch not importable ({exc})"
        ) from exc
    log(f"GPU engine: torch (TensorRT unavailable: {trt_reason})")
    return TorchEngine(path, runtime.device_id, fp16=bool(values.get("engine.fp16", False)))


class CudaPipeline:
    """GPU pipeline with the interface of :class:`vrt_ros.backends.cpu.CpuPipeline`.

    Frames are serialised by a lock (one frame at a time on the pipeline's stream), so one pipeline may serve
    several nodes or threads; each frame's detections depend on that frame only. Every exit from
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

    Raises:
        BackendUnavailable: no CUDA device / cuda-python, or no GPU engine for the model.
        ModelError, ConfigError: as the CPU pipeline, and engine inputs/outputs the GPU path cannot feed or read;
            ConfigError also for an ``engine.device`` this machine does not have.
        GpuError, KernelCompileError, KernelArgumentError, or an engine's own error: anything else that stops the
            GPU path from starting (``backend: auto`` then falls back to the CPU path). What was allocated is freed.
    """

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
        from vrt_ros.config import postprocess_params
        from vrt_ros.gpu.library import KernelLibrary
        from vrt_ros.gpu.depth import GpuDepthStats
        from vrt_ros.gpu.postprocess import MAX_DETECTIONS_CAPACITY, RESULT_HEADER, GpuPostprocessor
        from vrt_ros.gpu.preprocess import GpuPreprocessor
        from vrt_ros.gpu.runtime import GpuRuntime
        from vrt_ros.gpu.upload import Uploader
        from vrt_ros.model_setup import model_setup

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
                self.engine = _load_engine(values, rt, log)
            rt.make_current()  # torch may have changed the current context
            if len(self.engine.inputs) != 1:
                raise ModelError(f"the GPU pipeline needs a model with one input, got {[i.name for i in self.engine.inputs]}")
            self.head, self.input_spec = model_setup(values, self.engine.inputs[0], self.engine.outputs)
            self.stream = rt.create_stream()
            self._pre = GpuPreprocessor(self.library, self.input_spec)
            self._post = GpuPostprocessor(rt, self.library, self.head, self.stream, candidate_capacity)
            self._upload = Uploader(rt, camera)
            self._depth = GpuDepthStats(rt, self.library, self.stream, MAX_DETECTIONS_CAPACITY)
            self._result_header = RESULT_HEADER
            input_words = -(-self._pre.output_nbytes // 4)  # whole 32-bit words: zeroed below
            self._input = rt.alloc_device(4 * input_words, self.stream)
            for o in self.engine.outputs:
                self._outputs.append(rt.alloc_device(int(np.prod(o.shape)) * np.dtype(o.dtype).itemsize, self.stream))
            self._output_ptrs = tuple(o.ptr for o in self._outputs)  # also the postprocess cache key, as is
            for _ in range(len(STAGES) + 1):
                self._events.append(rt.timing_event())
            self._pre.check_launches()
            self._post.check_launches(self._output_ptrs)
            self._depth.check_launches(self._post.result_ptr, RESULT_HEADER, self._post.out_stride)
            # one inference at start-up (on a zeroed input, never on memory nothing wrote: NaNs or denormals there
            # can make an engine misbehave or run slowly; the outputs are not read): an engine that fails on its
            # first execution fails here, where `backend: auto` can still fall back to the CPU, not on the first
            # frame (where it would count towards the fault policy and end the process)
            rt.memset32(self._input.ptr, 0, input_words, self.stream)
            self.engine.enqueue(self.stream, self._input.ptr, self._output_ptrs)
            rt.sync(self.stream)  # start-up work done; a fault in it surfaces here, not in the first frame
        except BaseException:
            self._release()
            raise
        self._params: PostprocessParams = postprocess_params(values)
        self._lock = threading.Lock()  # one frame at a time on this pipeline's stream
        self.last_timings: dict[str, float] = {}
        #: the last frame's per-box depth statistic ((N, 4) float32, vrt_ros.depth.stats.box_stats' layout) when
        #: it came with a depth job, else None
        self.last_depth_stats = None
        self.frames = 0
        self._log = log
        self._decoded_info = None  # the last GPU-decoded frame's parsed stream (alive until its sync)
        # compressed input: the GPU JPEG decoder is detected and started now when the node takes compressed
        # frames (logged), else on the first compressed frame
        self._router = self._make_router() if values.get("input.compressed") else None
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
        """Detect on a raw frame (see :meth:`vrt_ros.pipeline.Pipeline.process`).

        With ``depth`` (a :class:`vrt_ros.depth.stats.DepthJob`), the depth frame is uploaded and the per-box
        statistic computed on the stream after the postprocess, inside the frame's one synchronisation
        (:mod:`vrt_ros.gpu.depth`); it is in :attr:`last_depth_stats`.

        Raises:
            FrameError: invalid frame (nothing is enqueued).
            GpuError, or the engine's error: the frame failed; its queued work was synchronised first.
        """
        with self._lock:
            t0 = time.perf_counter()
            self.runtime.make_current()
            try:
                self._events[0].record(self.stream)
                src_ptr, enc, uploaded = self._upload.upload(spec, data, self.stream)
                return self._finish(t0, "upload", src_ptr, enc, uploaded, depth)
            except FrameError:
                raise  # raised before any copy was queued (validation comes first)
            except BaseException:
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
            try:
                self._events[0].record(self.stream)
                image, self._decoded_info = self._router.decode(fmt, data, self.stream)  # info kept until the sync
                if isinstance(image, np.ndarray):  # decoded on the CPU (counted by the router)
                    h, w = image.shape[:2]
                    bgr = ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3)
                    return self._finish(t0, "upload", *self._upload.upload(bgr, image, self.stream))
                spec = ImageSpec(width=image.width, height=image.height, encoding=image.encoding, step=image.pitch)
                return self._finish(t0, "decode", image.ptr, ENCODINGS[image.encoding], spec)
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

        return CompressedRouter(make_decoder(self.runtime.device_id, self._log), log=self._log)

    def _finish(self, t0: float, first_stage: str, src_ptr: int, enc, image: ImageSpec, depth: Any = None) -> Detections:
        """Preprocess → engine → postprocess → the frame's one sync, from the image at ``src_ptr`` on the device.

        ``first_stage`` names the work between events 0 and 1 (``upload`` or ``decode``). Called under the lock;
        the caller drains the stream when this raises.
        """
        s = self.stream
        ev = self._events
        params = self._params
        ev[1].record(s)
        lb = self._pre.enqueue(s, src_ptr, image, enc, self._input.ptr)
        ev[2].record(s)
        self.engine.enqueue(s, self._input.ptr, self._output_ptrs)
        ev[3].record(s)
        self._post.enqueue(s, self._output_ptrs, lb, params)
        if depth is not None:  # the depth statistic over the result's rows, before the one sync
            self._depth.enqueue(s, depth, self._post.result_ptr, self._result_header, self._post.out_stride,
                                params.max_detections)
        ev[4].record(s)
        self.runtime.sync(s)  # the frame's one synchronisation
        dets = self._post.read()
        self.last_depth_stats = self._depth.read(len(dets)) if depth is not None else None
        timings = {(first_stage if i == 0 else name): ev[i + 1].elapsed_ms(ev[i]) for i, name in enumerate(STAGES)}
        timings["total"] = (time.perf_counter() - t0) * 1e3
        self.last_timings = timings
        self.frames += 1
        return dets

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
        s = self.stream
        router, self._router = getattr(self, "_router", None), None
        if router is not None and router.decoder is not None:
            try:
                router.decoder.close()
            except Exception:
                pass
        parts = [self._upload, self._post, self._depth]
        for part in parts:
            if part is not None:
                try:
                    part.close(s)
                except Exception:
                    pass
        for b in [self._input, *self._outputs]:
            if b is not None:
                try:
                    b.close(s)
                except Exception:
                    pass
        for e in self._events:
            try:
                e.close()
            except Exception:
                pass
        if self.engine is not None and hasattr(self.engine, "close"):
            try:
                self.engine.close()
            except Exception:
                pass
        if s is not None:
            try:
                s.sync()
                s.close()
            except Exception:
                pass
        self.stream = None
        self._upload = self._post = self._input = self._depth = None
        self._outputs, self._events = [], []
