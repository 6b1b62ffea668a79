"""The one small interface between the node and the backends: ``process(frame) -> Detections``.

Backends (:mod:`vrt_ros.inference.backends.cpu`, :mod:`vrt_ros.inference.backends.cuda`) are built from validated parameter values
(:mod:`vrt_ros.settings.config`) by :func:`make_pipeline`, which sits above them (the arrows point down: this module imports
the backends, never the reverse). The model set-up every backend shares (engine input size, head selection, the
preprocessing spec) lives below them, in :mod:`vrt_ros.model.model_setup`.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from vrt_ros.errors import BackendUnavailable, ConfigError, ModelError
from vrt_ros.heads.base import Head
from vrt_ros.inference.batch_serial import SlotResult, process_frame, process_serially
from vrt_ros.model.model_setup import Log
from vrt_ros.types import BatchFrame, Detections, ImageSpec, InputSpec, PostprocessParams


class Pipeline(Protocol):
    """What the node needs from a backend.

    Attributes:
        name: "cpu" or "cuda" (plus engine), for logs and diagnostics.
        input_spec: the engine input (size, channel order, normalisation).
        head: the model head (``keypoint_names``, ``num_keypoints``).
        last_timings: ms per stage of the last frame or batch (e.g. preprocess, inference, postprocess); after
            :meth:`process_batch` the stages are the whole batch's (every frame of it shares them) and
            ``batch_size`` is the number of frames that went through the engine. Whichever call ran last: a caller
            sharing the pipeline reads its own call's from the result (``Detections.timings``, the same values).
        max_batch: most frames :meth:`process_batch` runs through the engine in one call (>= 1). 1 on the CPU path
            and for models fixed at batch 1; larger batches are then run frame by frame.
    """

    name: str
    input_spec: InputSpec
    head: Head
    last_timings: dict[str, float]
    max_batch: int

    def process(self, spec: ImageSpec, data: Any) -> Detections:
        """Detect on a raw frame (``data``: buffer protocol, ``spec.height * spec.step`` bytes at least): a batch of one
        through :meth:`process_batch` (one path; the node calls only :meth:`process_batch`).

        Raises:
            FrameError: the frame is invalid (the caller drops and counts it).
        """

    def process_bgr(self, image: np.ndarray) -> Detections:
        """Detect on a decoded (H, W, 3) uint8 BGR image."""

    def process_batch(self, frames: Sequence[BatchFrame], masks: Sequence[bool] | None = None,
                      depth: Sequence[Any] | None = None) -> list[SlotResult]:
        """Detect on 1 to :attr:`max_batch` frames (of any cameras, sizes and kinds, raw and compressed mixed) in one
        engine call: the one path of every frame (a frame alone is a batch of one).

        Args:
            frames: :class:`~vrt_ros.types.RawFrame`, :class:`~vrt_ros.types.CompressedFrame` or
                :class:`~vrt_ros.types.BgrFrame` values; their buffers must stay alive until this returns.
            masks: segmentation heads: per frame, whether to assemble its instance-label image
                (``Detections.label_mask``: the frame's own array, never a buffer the pipeline reuses); None: the
                parameters' ``want_masks`` for every frame. Ignored by heads without masks.
            depth: per frame, a :class:`vrt_ros.depth.stats.DepthJob` or None; a pipeline with ``takes_depth``
                (the GPU path) returns each such frame's per-box depth statistic as its ``depth_stats``, computed
                with the batch (others ignore it: the node computes the CPU reference). None: no statistic.

        Returns:
            One entry per frame, in order: its :class:`~vrt_ros.types.Detections` (each frame's depend on that
            frame only, equal to processing it alone), or the :class:`~vrt_ros.errors.FrameError` of a frame that
            is invalid (an input fault: that slot only is dropped; the others are processed).

        Raises:
            ValueError: more than :attr:`max_batch` frames.
            any other exception: the engine (or the GPU) failed for the whole batch; nothing is left queued.
        """

    def set_postprocess(self, params: PostprocessParams) -> None:
        """Change thresholds; takes effect on the next frame."""

    def close(self) -> None:
        """Release engines and buffers."""


def make_pipeline(values: Mapping[str, Any], log: Log = print) -> Pipeline:
    """Build the backend the ``backend`` parameter asks for.

    ``auto`` tries the GPU path first and falls back to the CPU path on ANY failure to bring it up (missing
    library, no device, model conversion, engine build, outputs the GPU decode cannot read, a CUDA error at
    start-up, a kernel compile or argument error), logging which and why in one line (:func:`failure_reason`);
    only a :class:`ConfigError` is raised at once, since the CPU path would fail on the same parameter.
    ``cuda`` is strict: any such failure stops start-up with that reason.

    Raises:
        ConfigError, ModelError: bad parameters or model (start-up errors naming the parameter or file).
        BackendUnavailable: ``backend: cuda`` and the GPU path cannot start here (the message says why).
    """
    backend = values["backend"]
    if backend in ("auto", "cuda"):
        try:
            from vrt_ros.inference.backends.cuda import CudaPipeline  # imports cuda-python lazily

            pipe = CudaPipeline(values, log=log)
            log(f"backend: {pipe.name} (GPU path)")
            return pipe
        except ConfigError:
            raise
        except Exception as e:
            reason = failure_reason(e)
            if backend == "cuda":
                if isinstance(e, ModelError):
                    raise
                raise BackendUnavailable(f"backend 'cuda' cannot run here: {reason}") from e
            log(f"backend auto: GPU path failed to start ({reason}); using the CPU path (ONNX Runtime)")
    from vrt_ros.inference.backends.cpu import CpuPipeline

    pipe = CpuPipeline(values, log=log)
    log(f"backend: {pipe.name}")
    return pipe


_CALL_LOCKS: "weakref.WeakKeyDictionary[Any, threading.Lock]" = weakref.WeakKeyDictionary()
_CALL_LOCKS_GUARD = threading.Lock()


def call_lock(pipeline: Any) -> threading.Lock:
    """The one lock of ``pipeline`` that each of its users (a node's worker) holds around applying its own
    postprocess parameters (:meth:`Pipeline.set_postprocess`) and running its call(s): the parameters are pipeline
    state, so with several nodes on one pipeline a node's call would otherwise run with the parameters another node
    set last. The same lock for every caller with the same pipeline object (kept while the pipeline lives); a new
    lock for a pipeline that cannot be weakly referenced."""
    with _CALL_LOCKS_GUARD:
        try:
            lock = _CALL_LOCKS.get(pipeline)
            if lock is None:
                lock = _CALL_LOCKS[pipeline] = threading.Lock()
        except TypeError:  # no weak reference to it: it cannot be found again, so it is not shared through here
            lock = threading.Lock()
        return lock


def failure_reason(exc: BaseException, limit: int = 300) -> str:
    """One line naming why the GPU path did not start: the exception type (unless it is a vrt_ros error whose
    message says it all) and the first line of its message, at most ``limit`` characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    line = text if isinstance(exc, BackendUnavailable) and text else f"{name}: {text}" if text else name
    return line if len(line) <= limit else line[: limit - 3] + "..."


__all__ = ["Pipeline", "SlotResult", "call_lock", "failure_reason", "make_pipeline", "process_frame", "process_serially"]
