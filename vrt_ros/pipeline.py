"""The one small interface between the node and the backends: ``process(frame) -> Detections``.

Backends (:mod:`vrt_ros.backends.cpu`, :mod:`vrt_ros.backends.cuda`) are built from validated parameter values
(:mod:`vrt_ros.config`) by :func:`make_pipeline`. This module also holds the model set-up every backend shares:
engine input size, head selection and the preprocessing spec.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from vrt_ros.errors import BackendUnavailable, ConfigError, ModelError
from vrt_ros.heads import HEADS, select_head
from vrt_ros.heads.base import Head
from vrt_ros.types import Detections, ImageSpec, InputSpec, PostprocessParams, TensorInfo

Log = Callable[[str], None]
#: Engine input dtypes the preprocessing writes.
FLOAT_INPUTS = ("float32", "float16")


class Pipeline(Protocol):
    """What the node needs from a backend.

    Attributes:
        name: "cpu" or "cuda" (plus engine), for logs and diagnostics.
        input_spec: the engine input (size, channel order, normalisation).
        head: the model head (``keypoint_names``, ``num_keypoints``).
        last_timings: ms per stage of the last frame (e.g. preprocess, inference, postprocess).
    """

    name: str
    input_spec: InputSpec
    head: Head
    last_timings: dict[str, float]

    def process(self, spec: ImageSpec, data: Any) -> Detections:
        """Detect on a raw frame (``data``: buffer protocol, ``spec.height * spec.step`` bytes at least).

        Raises:
            FrameError: the frame is invalid (the caller drops and counts it).
        """

    def process_bgr(self, image: np.ndarray) -> Detections:
        """Detect on a decoded (H, W, 3) uint8 BGR image."""

    def set_postprocess(self, params: PostprocessParams) -> None:
        """Change thresholds; takes effect on the next frame."""

    def close(self) -> None:
        """Release engines and buffers."""


def engine_input_size(engine_input: TensorInfo, values: Mapping[str, Any]) -> tuple[int, int]:
    """Engine input (width, height) in pixels from the model's NCHW input and ``model.input_width/height``.

    Raises:
        ConfigError: dynamic dims without ``model.input_width/height``, or parameters contradicting fixed dims.
    """
    _, _, h, w = engine_input.shape
    pw, ph = int(values["model.input_width"]), int(values["model.input_height"])
    size = []
    for dim, param, pname in ((w, pw, "model.input_width"), (h, ph, "model.input_height")):
        if dim < 0 and param == 0:
            raise ConfigError(f"{pname}: the model's input {engine_input.name!r} has a dynamic size {engine_input.shape}; set {pname}")
        if dim >= 0 and param not in (0, dim):
            raise ConfigError(f"{pname} = {param} contradicts the model's fixed input {engine_input.name!r} {engine_input.shape}")
        size.append(param or dim)
    return size[0], size[1]


def model_setup(values: Mapping[str, Any], engine_input: TensorInfo, outputs: Sequence[TensorInfo],
                metadata: Mapping[str, str] | None = None) -> tuple[Head, InputSpec]:
    """Select the head and build the preprocessing spec (parameters override the head's defaults).

    ``metadata`` (the model's custom metadata, e.g. Ultralytics' ``task``) helps ``model.head: auto`` tell
    layouts apart that have the same shapes.

    Raises:
        ConfigError: input size parameters (see :func:`engine_input_size`).
        ModelError: an input that is not float32/float16 (the preprocessing writes normalised floats; a uint8
            or int32 input would be fed float data), or outputs that fit no head, or several (``model.head: auto``).
    """
    width, height = engine_input_size(engine_input, values)
    dtype = engine_input.dtype
    if dtype not in FLOAT_INPUTS:
        raise ModelError(
            f"model input {engine_input.name!r} is {dtype}; vrt_ros feeds normalised {' or '.join(FLOAT_INPUTS)} "
            "images (export the model with a float input, e.g. without a built-in uint8 preprocessing stage)"
        )
    probe = InputSpec(width=width, height=height, dtype=dtype)
    head = select_head(str(values["model.head"]), outputs, probe, metadata)
    d = type(head).INPUT_DEFAULTS
    spec = InputSpec(
        width=width,
        height=height,
        channel_order=values["model.channel_order"] or d.channel_order,
        mean=tuple(values["model.mean"]) or d.mean,
        std=tuple(values["model.std"]) or d.std,
        pad_value=values["model.pad_value"] if values["model.pad_value"] >= 0 else d.pad_value,
        align=values["model.align"] or d.align,
        dtype=dtype,
    )
    return head, spec


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
            from vrt_ros.backends.cuda import CudaPipeline  # imports cuda-python lazily

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
    from vrt_ros.backends.cpu import CpuPipeline

    pipe = CpuPipeline(values, log=log)
    log(f"backend: {pipe.name}")
    return pipe


def failure_reason(exc: BaseException, limit: int = 300) -> str:
    """One line naming why the GPU path did not start: the exception type (unless it is a vrt_ros error whose
    message says it all) and the first line of its message, at most ``limit`` characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    line = text if isinstance(exc, BackendUnavailable) and text else f"{name}: {text}" if text else name
    return line if len(line) <= limit else line[: limit - 3] + "..."


__all__ = ["HEADS", "Pipeline", "engine_input_size", "make_pipeline", "model_setup", "ModelError"]
