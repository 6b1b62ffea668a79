"""The CPU pipeline: numpy/OpenCV preprocessing, ONNX Runtime, numpy decode and NMS (the reference path).

One path: :meth:`CpuPipeline.process_batch` is the only route (a frame alone is a batch of one; ``process`` and
``process_bgr`` wrap it). Batches of more than one frame when ``engine.max_batch`` > 1 or the model's batch is fixed
above 1 (``engine.max_batch`` 0 with a dynamic batch runs frame by frame here): each frame is letterboxed into its slot of
one (B, 3, H, W) input and ONNX Runtime runs once; a model fixed at batch N > 1 always gets N slots (unused ones keep their last content and
are not decoded), a dynamic-batch model gets as many as there are frames. Each slot's outputs are decoded alone.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping, Sequence

import numpy as np

from vrt_ros.boxes.masks import label_dtype
from vrt_ros.boxes.postprocess import finish
from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine
from vrt_ros.errors import FrameError
from vrt_ros.inference.batch_serial import SlotResult, batch_of_one, check_batch
from vrt_ros.intake import frames
from vrt_ros.intake.compressed import decode_compressed
from vrt_ros.intake.preprocess import CpuPreprocessor
from vrt_ros.model.model_setup import Log, engine_input_size, model_setup, resolve_max_batch
from vrt_ros.settings.config import postprocess_params
from vrt_ros.types import BatchFrame, BgrFrame, CompressedFrame, Detections, ImageSpec, PostprocessParams, RawFrame


class CpuPipeline:
    """Reference pipeline on the CPU.

    Frames are serialised by a lock: the converted frame and the input tensor are buffers reused between frames,
    so one pipeline may serve several nodes or threads and each frame's detections depend on that frame only. What
    a call returns (the label image of masks included) is the call's own, never a reused buffer, so it stays that
    frame's after the lock is released; so are its stage times (``Detections.timings``; :attr:`last_timings`, the
    last call's, is for a caller that is the pipeline's only one).

    Args:
        values: validated parameter values (:func:`vrt_ros.settings.config.validate`).
        log: where start-up messages go.

    Attributes:
        max_batch: frames per :meth:`process_batch` (:func:`vrt_ros.model.model_setup.resolve_max_batch`).

    Raises:
        ModelError: model file missing or unusable, or outputs fitting no head.
        ConfigError: input size parameters inconsistent with the model, or ``engine.max_batch`` above its batch.
    """

    def __init__(self, values: Mapping[str, Any], log: Log = print) -> None:
        self.engine = OnnxRuntimeEngine(values["model.path"], int(values["engine.threads"]))
        outputs = self.engine.outputs
        if any(d < 0 for o in outputs for d in o.shape):
            outputs = self._concrete_outputs(values)
        self.head, self.input_spec = model_setup(values, self.engine.inputs[0], outputs, self.engine.metadata)
        self.name = f"cpu (onnxruntime, head {self.head.name}, input {self.input_spec.width}x{self.input_spec.height})"
        self._pre = CpuPreprocessor(self.input_spec)
        self._model_batch = int(self.engine.inputs[0].shape[0])  # -1: dynamic
        # a dynamic batch runs frame by frame unless engine.max_batch asks for more: ONNX Runtime on the CPU takes
        # N times as long for N frames (measured, results/bench/issue21.md), so waiting frames would only wait longer
        self.max_batch = resolve_max_batch(values, self.engine.inputs[0], log, dynamic_default=1)
        slots = max(self.max_batch, self._model_batch)
        self._batch = np.zeros((slots, 3, self.input_spec.height, self.input_spec.width), np.float32)
        self._slot_bgr: list[np.ndarray | None] = [None] * self.max_batch  # per-slot conversion targets, reused
        self._params = postprocess_params(values)
        #: instance-label image dtype, fixed at start-up from max_detections (mono8 up to 254, else mono16).
        self.mask_dtype = label_dtype(int(values["max_detections"]))
        self.last_timings: dict[str, float] = {}
        self._lock = threading.Lock()

    def _concrete_outputs(self, values: Mapping[str, Any]):
        """Output shapes of a dynamic model, from one run at the configured input size."""
        from vrt_ros.types import TensorInfo

        w, h = engine_input_size(self.engine.inputs[0], values)
        batch = max(1, int(self.engine.inputs[0].shape[0]))
        outs = self.engine.run(np.zeros((batch, 3, h, w), np.float32))
        return [TensorInfo(o.name, tuple(a.shape), o.dtype) for o, a in zip(self.engine.outputs, outs)]

    def set_postprocess(self, params: PostprocessParams) -> None:
        """Change thresholds; the next frame uses them."""
        self._params = params

    def process(self, spec: ImageSpec, data: Any) -> Detections:
        """Detect on a raw frame: :meth:`process_batch` of one frame (see :meth:`vrt_ros.inference.pipeline.Pipeline.process`).

        Raises:
            FrameError: the frame is invalid.
        """
        return batch_of_one(self.process_batch([RawFrame(spec, data)]))

    def process_bgr(self, image: np.ndarray) -> Detections:
        """Detect on a decoded (H, W, 3) uint8 BGR image: :meth:`process_batch` of one frame."""
        return batch_of_one(self.process_batch([BgrFrame(image)]))

    def _decode(self, outs, slot: int, lb, params: PostprocessParams) -> Detections:
        """Detections of one slot of the engine's outputs (boxes, ``theta`` of oriented heads, extras)."""
        outs = [o[slot : slot + 1] for o in outs]
        head = self.head
        return finish(head.decode(outs, params.score_threshold), lb, params, head.applies_nms, head.oriented)

    def _label(self, dets: Detections, outs, slot: int, lb, params: PostprocessParams) -> None:
        """``dets.label_mask`` of engine slot ``slot`` (segmentation heads): a new label image owned by this frame's
        detections (a reused one would be overwritten by the next frame while the caller still publishes it)."""
        outs = [o[slot : slot + 1] for o in outs]
        dets.label_mask = self.head.label_mask(dets, outs, lb, params, self.mask_dtype, None)

    def process_batch(self, frames: Sequence[BatchFrame], masks: Sequence[bool] | None = None,
                      depth: Sequence[Any] | None = None) -> list[SlotResult]:
        """Detect on 1 to :attr:`max_batch` frames with one ONNX Runtime call (see
        :meth:`vrt_ros.inference.pipeline.Pipeline.process_batch`, also for ``masks``); every frame's ``timings`` are the
        batch's stages (``masks``: the label images, apart from ``postprocess``). ``depth`` is accepted for the
        interface and ignored: on the CPU path the node computes the depth statistic with the CPU reference."""
        check_batch(frames, self.max_batch)
        with self._lock:
            params = self._params
            t0 = time.perf_counter()
            results: list[SlotResult | None] = [None] * len(frames)
            slots = []  # (frame index, letterbox) per engine slot
            for i, frame in enumerate(frames):
                try:
                    bgr = self._slot_image(len(slots), frame)
                except FrameError as exc:
                    results[i] = exc
                    continue
                tensor, lb = self._pre(bgr)
                self._batch[len(slots)] = tensor[0]
                slots.append((i, lb))
            t1 = time.perf_counter()
            outs = []
            if slots:
                n = self._model_batch if self._model_batch > 0 else len(slots)
                outs = self.engine.run(self._batch[:n])
            t2 = time.perf_counter()
            mask_s = 0.0
            for j, (i, lb) in enumerate(slots):
                results[i] = dets = self._decode(outs, j, lb, params)
                if self.head.has_masks and (params.want_masks if masks is None else masks[i]):
                    tm = time.perf_counter()
                    self._label(dets, outs, j, lb, params)
                    mask_s += time.perf_counter() - tm
            t3 = time.perf_counter()
            timings = {"preprocess": (t1 - t0) * 1e3, "inference": (t2 - t1) * 1e3,
                       "postprocess": (t3 - t2 - mask_s) * 1e3, "batch_size": float(len(slots))}
            if mask_s:
                timings["masks"] = mask_s * 1e3
            for i, _ in slots:
                results[i].timings = timings  # type: ignore[union-attr]
            self.last_timings = timings
            return results  # type: ignore[return-value]

    def _slot_image(self, slot: int, frame: BatchFrame) -> np.ndarray:
        """The frame as BGR (raw frames converted into the slot's reused array)."""
        if isinstance(frame, RawFrame):
            self._slot_bgr[slot] = frames.to_bgr(frame.spec, frame.data, self._slot_bgr[slot])
            return self._slot_bgr[slot]
        if isinstance(frame, BgrFrame):
            return frame.image
        if isinstance(frame, CompressedFrame):
            return decode_compressed(frame.format, frame.data)
        raise TypeError(f"a batch frame is a RawFrame, CompressedFrame or BgrFrame, not {type(frame).__name__}")

    def close(self) -> None:
        """Release the ONNX Runtime session."""
        self.engine = None  # type: ignore[assignment]

