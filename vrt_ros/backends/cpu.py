"""The CPU pipeline: numpy/OpenCV preprocessing, ONNX Runtime, numpy decode and NMS (the reference path)."""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping

import numpy as np

from vrt_ros import frames
from vrt_ros.config import postprocess_params
from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine
from vrt_ros.keyed_cache import KeyedCache
from vrt_ros.masks import label_dtype
from vrt_ros.model_setup import Log, engine_input_size, model_setup
from vrt_ros.postprocess import finish
from vrt_ros.preprocess import CpuPreprocessor
from vrt_ros.types import Detections, ImageSpec, PostprocessParams


class CpuPipeline:
    """Reference pipeline on the CPU.

    Frames are serialised by a lock: the converted frame and the input tensor are buffers reused between frames,
    so one pipeline may serve several nodes or threads and each frame's detections depend on that frame only.

    Args:
        values: validated parameter values (:func:`vrt_ros.config.validate`).
        log: where start-up messages go.

    Raises:
        ModelError: model file missing or unusable, or outputs fitting no head.
        ConfigError: input size parameters inconsistent with the model.
    """

    def __init__(self, values: Mapping[str, Any], log: Log = print) -> None:
        self.engine = OnnxRuntimeEngine(values["model.path"], int(values["engine.threads"]))
        outputs = self.engine.outputs
        if any(d < 0 for o in outputs for d in o.shape):
            outputs = self._concrete_outputs(values)
        self.head, self.input_spec = model_setup(values, self.engine.inputs[0], outputs, self.engine.metadata)
        self.name = f"cpu (onnxruntime, head {self.head.name}, input {self.input_spec.width}x{self.input_spec.height})"
        self._pre = CpuPreprocessor(self.input_spec)
        self._bgr: np.ndarray | None = None
        self._params = postprocess_params(values)
        #: instance-label image dtype, fixed at start-up from max_detections (mono8 up to 254, else mono16).
        self.mask_dtype = label_dtype(int(values["max_detections"]))
        self._labels = KeyedCache(4)  # frame size -> reused label image
        self.last_timings: dict[str, float] = {}
        self._lock = threading.Lock()

    def _concrete_outputs(self, values: Mapping[str, Any]):
        """Output shapes of a dynamic model, from one run at the configured input size."""
        from vrt_ros.types import TensorInfo

        w, h = engine_input_size(self.engine.inputs[0], values)
        outs = self.engine.run(np.zeros((1, 3, h, w), np.float32))
        return [TensorInfo(o.name, tuple(a.shape), o.dtype) for o, a in zip(self.engine.outputs, outs)]

    def set_postprocess(self, params: PostprocessParams) -> None:
        """Change thresholds; the next frame uses them."""
        self._params = params

    def process(self, spec: ImageSpec, data: Any) -> Detections:
        """Detect on a raw frame (see :meth:`vrt_ros.pipeline.Pipeline.process`)."""
        with self._lock:
            t0 = time.perf_counter()
            self._bgr = frames.to_bgr(spec, data, self._bgr)
            return self._run(self._bgr, t0)

    def process_bgr(self, image: np.ndarray) -> Detections:
        """Detect on a decoded (H, W, 3) uint8 BGR image."""
        with self._lock:
            return self._run(image, time.perf_counter())

    def _run(self, bgr: np.ndarray, t0: float) -> Detections:
        params = self._params
        tensor, lb = self._pre(bgr)
        t1 = time.perf_counter()
        outs = self.engine.run(tensor)
        t2 = time.perf_counter()
        head = self.head
        dets = finish(head.decode(outs, params.score_threshold), lb, params, head.applies_nms, head.oriented)
        t3 = time.perf_counter()
        self.last_timings = {"preprocess": (t1 - t0) * 1e3, "inference": (t2 - t1) * 1e3, "postprocess": (t3 - t2) * 1e3}
        if head.has_masks and params.want_masks:
            shape = (lb.src_height, lb.src_width)
            buf = self._labels.get(shape, lambda: np.zeros(shape, self.mask_dtype))
            dets.label_mask = head.label_mask(dets, outs, lb, params, self.mask_dtype, buf)
            self.last_timings["masks"] = (time.perf_counter() - t3) * 1e3
        return dets

    def close(self) -> None:
        """Release the ONNX Runtime session."""
        self.engine = None  # type: ignore[assignment]
