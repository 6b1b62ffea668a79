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
from vrt_ros.errors import BackendUnavailable, ModelError
from vrt_ros.gpu import cuda_unavailable_reason
from vrt_ros.types import Detections, ImageSpec, PostprocessParams

STAGES = ("upload", "preprocess", "inference", "postprocess")


def _load_engine(values: Mapping[str, Any], runtime, log):
    """The GPU engine for ``model.path``: TensorRT when it can run here (required for serialized engines), else torch.

    Raises:
        BackendUnavailable: neither engine can run this model here; the message gives both reasons.
    """
    path = str(values["model.path"])
    is_onnx = path.lower().endswith(".onnx")
    try:
        from vrt_ros.engines.tensorrt import TensorRtEngine, tensorrt_unavailable_reason

        trt_reason = tensorrt_unavailable_reason()
    except ImportError as exc:
        trt_reason = f"vrt_ros.engines.tensorrt not importable: {exc}"
    if trt_reason is None:
        try:
            return TensorRtEngine.from_values(values, runtime.device_id, gpu_name=runtime.name,
                                              compute_capability=runtime.arch, log=log)
        except BackendUnavailable as exc:  # e.g. a lean runtime that cannot build from ONNX
            if not is_onnx:
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
    return TorchEngine(path, runtime.device_id)


class CudaPipeline:
    """GPU pipeline with the interface of :class:`vrt_ros.backends.cpu.CpuPipeline`.

    Args:
        values: validated parameter values (``model.*``, ``engine.device``, ``engine.cache_dir``, thresholds).
        log: where start-up messages go.
        engine: a ready GPU engine (``inputs``, ``outputs``, ``enqueue(stream, input_ptr, output_ptrs)``);
            default: built from ``model.path`` (TensorRT for .engine/.plan, else torch).
        candidate_capacity: most candidates per frame kept for NMS.

    Raises:
        BackendUnavailable: no CUDA device / cuda-python, or no GPU engine for the model.
        ModelError, ConfigError: as the CPU pipeline.
    """

    def __init__(
        self,
        values: Mapping[str, Any],
        log=print,
        *,
        engine=None,
        candidate_capacity: int = 4096,
        camera: str = "camera",
    ) -> None:
        reason = cuda_unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        from vrt_ros.config import postprocess_params
        from vrt_ros.gpu.library import KernelLibrary
        from vrt_ros.gpu.postprocess import GpuPostprocessor
        from vrt_ros.gpu.preprocess import GpuPreprocessor
        from vrt_ros.gpu.runtime import GpuRuntime
        from vrt_ros.gpu.upload import Uploader
        from vrt_ros.pipeline import model_setup

        device = int(values.get("engine.device", 0))
        self.runtime = rt = GpuRuntime.get(device)
        cache = str(values.get("engine.cache_dir", "") or "")
        self.library = KernelLibrary.shared(rt.arch, (cache + "/kernels") if cache else None)
        self.engine = engine if engine is not None else _load_engine(values, rt, log)
        rt.make_current()  # torch may have changed the current context
        if len(self.engine.inputs) != 1:
            raise ModelError(f"the GPU pipeline needs a model with one input, got {[i.name for i in self.engine.inputs]}")
        self.head, self.input_spec = model_setup(values, self.engine.inputs[0], self.engine.outputs)
        self.stream = rt.create_stream()
        self._pre = GpuPreprocessor(self.library, self.input_spec)
        self._post = GpuPostprocessor(rt, self.library, self.head, self.stream, candidate_capacity)
        self._upload = Uploader(rt, camera)
        self._input = rt.alloc_device(self._pre.output_nbytes, self.stream)
        self._outputs = [
            rt.alloc_device(int(np.prod(o.shape)) * np.dtype(o.dtype).itemsize, self.stream) for o in self.engine.outputs
        ]
        self._output_ptrs = tuple(o.ptr for o in self._outputs)  # also the postprocess cache key, as is
        self._events = [rt.timing_event() for _ in range(len(STAGES) + 1)]
        self._params: PostprocessParams = postprocess_params(values)
        self._lock = threading.Lock()  # one frame at a time on this pipeline's stream
        self.last_timings: dict[str, float] = {}
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
        log(f"{self.name}: kernels compiled {self.library.stats.compiled}, loaded from cache {self.library.stats.disk_hits}")

    def set_postprocess(self, params: PostprocessParams) -> None:
        """Change thresholds; the next frame uses them."""
        self._params = params

    def process(self, spec: ImageSpec, data: Any, stamp_ns: int | None = None) -> Detections:
        """Detect on a raw frame (see :meth:`vrt_ros.pipeline.Pipeline.process`).

        Raises:
            FrameError: invalid frame (nothing is enqueued).
        """
        with self._lock:
            t0 = time.perf_counter()
            self.runtime.make_current()
            self._events[0].record(self.stream)
            src_ptr, enc, uploaded = self._upload.upload(spec, data, self.stream)
            return self._finish(t0, "upload", src_ptr, enc, uploaded)

    def process_compressed(self, fmt: str, data: Any) -> Detections:
        """Detect on a ``sensor_msgs/CompressedImage`` payload.

        JPEGs are decoded by nvImageCodec on this pipeline's stream into device memory, which the preprocess kernel
        reads directly (first stage ``decode`` instead of ``upload``); PNG and anything the GPU decoder refuses are
        decoded on the CPU and uploaded, counted per reason in :attr:`decode_stats`.

        Args:
            fmt: the message's ``format`` field (e.g. ``"jpeg"``, ``"bgr8; jpeg compressed bgr8"``).
            data: the payload (buffer protocol).

        Raises:
            FrameError: empty, truncated, undecodable or unsupported payloads (nothing is enqueued).
        """
        with self._lock:
            t0 = time.perf_counter()
            self.runtime.make_current()
            if self._router is None:
                self._router = self._make_router()
            self._events[0].record(self.stream)
            image, self._decoded_info = self._router.decode(fmt, data, self.stream)  # info kept until the sync
            if isinstance(image, np.ndarray):  # decoded on the CPU (counted by the router)
                h, w = image.shape[:2]
                bgr = ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3)
                return self._finish(t0, "upload", *self._upload.upload(bgr, image, self.stream))
            spec = ImageSpec(width=image.width, height=image.height, encoding=image.encoding, step=image.pitch)
            return self._finish(t0, "decode", image.ptr, ENCODINGS[image.encoding], spec)

    @property
    def decode_stats(self) -> dict[str, int]:
        """Compressed frames decoded on the GPU (``gpu``) and on the CPU per reason (``cpu.<reason>``)."""
        return self._router.stats() if self._router is not None else {"gpu": 0}

    def _make_router(self):
        from vrt_ros.compressed_route import CompressedRouter
        from vrt_ros.gpu.jpeg import make_decoder

        return CompressedRouter(make_decoder(self.runtime.device_id, self._log), log=self._log)

    def _finish(self, t0: float, first_stage: str, src_ptr: int, enc, image: ImageSpec) -> Detections:
        """Preprocess → engine → postprocess → the frame's one sync, from the image at ``src_ptr`` on the device.

        ``first_stage`` names the work between events 0 and 1 (``upload`` or ``decode``). Called under the lock.
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
        ev[4].record(s)
        self.runtime.sync(s)  # the frame's one synchronisation
        dets = self._post.read()
        timings = {(first_stage if i == 0 else name): ev[i + 1].elapsed_ms(ev[i]) for i, name in enumerate(STAGES)}
        timings["total"] = (time.perf_counter() - t0) * 1e3
        self.last_timings = timings
        self.frames += 1
        return dets

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
            self.runtime.make_current()
            self.stream.sync()
            self._upload.close(self.stream)
            if self._router is not None and self._router.decoder is not None:
                self._router.decoder.close()
            self._post.close(self.stream)
            self._input.close(self.stream)
            for o in self._outputs:
                o.close(self.stream)
            for e in self._events:
                e.close()
            if hasattr(self.engine, "close"):
                self.engine.close()
            self.stream.sync()
            self.stream.close()
            self.stream = None
