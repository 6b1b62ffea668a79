"""What every model head shares: the decoded-candidates value type, input defaults and the :class:`Head` base.

A head knows one output layout: it checks the engine's output shapes once at start-up, precomputes what the
decode needs (grids, strides, buffers), and turns raw output tensors into :class:`Candidates` in
**engine-input pixels**. Thresholding again, NMS, top-k and the mapping to source pixels are shared and live in
:func:`vrt_ros.boxes.postprocess.finish`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from vrt_ros.errors import ConfigError, ModelError
from vrt_ros.types import Detections, InputSpec, TensorInfo


@dataclass
class Candidates:
    """Decoded detections of one frame before NMS, in engine-input pixels.

    Attributes:
        boxes: (M, 4) float32 x1, y1, x2, y2 in engine-input pixels (continuous coordinates).
        scores: (M,) float32 confidences (sigmoid outputs, normally in [0, 1]).
        class_ids: (M,) int32 class indices.
        keypoints: (M, K, 3) float32 x, y in engine-input pixels and confidence; K = 0 for heads without keypoints.
        extras: (M, E) float32 values carried through NMS to :attr:`Detections.extras` (``yolov8_seg``: the 32 mask
            coefficients; ``yolov8_obb``: the angle in radians, which also makes NMS rotated); None = E = 0.
    """

    boxes: np.ndarray
    scores: np.ndarray
    class_ids: np.ndarray
    keypoints: np.ndarray
    extras: np.ndarray | None = None

    @staticmethod
    def empty(num_keypoints: int = 0, num_extras: int = 0) -> "Candidates":
        """No candidates, with the right dtypes and shapes (those of :meth:`Detections.empty`)."""
        d = Detections.empty(num_keypoints, num_extras)
        return Candidates(d.boxes, d.scores, d.class_ids, d.keypoints, d.extras)

    def __len__(self) -> int:
        return int(self.boxes.shape[0])


@dataclass(frozen=True)
class InputDefaults:
    """Preprocessing a model family was trained with; used for every ``model.*`` parameter left unset.

    Attributes:
        channel_order: "bgr" or "rgb", order of the tensor's planes.
        mean, std: per tensor channel, pixel units (0..255): ``(pixel - mean) / std``.
        pad_value: letterbox fill, pixel units.
        align: "top_left" or "center" (see :func:`vrt_ros.boxes.geometry.letterbox`).
        resize: "letterbox" or "stretch" (``model.resize``'s default for the family).
    """

    channel_order: str
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    pad_value: float
    align: str
    resize: str = "letterbox"

    def input_spec(self, width: int, height: int, dtype: str = "float32") -> InputSpec:
        """The :class:`~vrt_ros.types.InputSpec` for an engine input of ``width`` x ``height`` pixels."""
        return InputSpec(
            width=width,
            height=height,
            channel_order=self.channel_order,
            mean=self.mean,
            std=self.std,
            pad_value=self.pad_value,
            align=self.align,
            dtype=dtype,
            resize=self.resize,
        )


def shapes_text(outputs: Sequence[TensorInfo]) -> str:
    """Engine outputs as ``name[d0,d1,...]`` joined by ", " (for error messages)."""
    return ", ".join(f"{o.name!r}[{','.join(str(d) for d in o.shape)}]" for o in outputs) or "no outputs"


def dim_is(actual: int, expected: int) -> bool:
    """True when a model dim equals ``expected`` or is dynamic (negative, not yet fixed)."""
    return actual < 0 or actual == expected


def grid_cells(width: int, height: int, strides: Sequence[int]) -> int:
    """Number of prediction cells of a multi-stride grid: ``sum((height // s) * (width // s))``."""
    return sum((height // s) * (width // s) for s in strides)


@dataclass(frozen=True)
class GpuDecode:
    """How the GPU path decodes a head: its decode kernel and that kernel's head-specific arguments.

    Every decode kernel (``kernels/<module>.cu``) takes the head's own parameters first and ends with the shared
    candidate sink ``float threshold, float* cand, int cand_stride, int capacity, int* count``, which the GPU
    postprocess fills (:mod:`vrt_ros.gpu.postprocess`); candidate rows are ``x1, y1, x2, y2, score, class, -, -``
    then ``x, y, score`` per keypoint, in engine-input pixels.

    Attributes:
        entry: the kernel's ``extern "C"`` entry name.
        grid: ``(n,)`` for one thread per cell/row (1-D launch), or ``(w, h)`` for one thread per heatmap pixel
            (2-D launch). Their product is the most candidates a frame can give (the candidate capacity).
        args: ``fn(outputs, tables) -> {parameter name: value}``: the kernel's head-specific arguments by name,
            from the engine output device addresses (engine order) and the device addresses of ``tables``.
        tables: constant float32 arrays uploaded once at start-up (e.g. YOLOX's cell grid), by name.
        module: the kernel source's stem (``kernels/decode.cu``).
    """

    entry: str
    grid: tuple[int, ...]
    args: Callable[[Sequence[int], Mapping[str, int]], dict[str, int | float]]
    tables: Mapping[str, np.ndarray] = field(default_factory=dict)
    module: str = "decode"


class Head:
    """Base class of the model heads: one output layout, its numpy reference decode and its GPU decode kernel.

    Subclasses set the class attributes and implement :meth:`_check` (raise :class:`ModelError` for shapes
    they cannot decode), :meth:`matches`, :meth:`decode` and, for the GPU path, :meth:`gpu_decode`.

    Class attributes:
        name: registry key, the value of the ``model.head`` parameter.
        keypoint_names: names of the K keypoints per detection (empty when the head has none).
        num_classes: classes the model scores (from the output shape), or None where the layout does not say
            (end2end). Set at construction.
        applies_nms: False when the model already ran NMS (end-to-end exports) or needs none (DETR).
        oriented: candidates are oriented boxes, the angle in ``extras[:, 0]`` (rotated NMS, ``theta`` published).
        has_masks: the head makes instance masks (:meth:`label_mask`).
        INPUT_DEFAULTS: preprocessing the model family expects; readable before construction.
        RESIZES: the ``model.resize`` values the head accepts.
        SCORE_ACTIVATIONS: the ``model.score_activation`` values the head accepts; the first is the default unless
            ``_check`` sets :attr:`score_activation` from the layout. Heads whose scores are already probabilities
            accept only ``none``.

    Args:
        outputs: the engine's output tensors, in engine order.
        input_spec: the engine input (only ``width`` and ``height`` matter to heads).

    Raises:
        ModelError: the outputs do not have this head's layout; the message names the shapes seen and expected.
    """

    name: ClassVar[str] = ""
    keypoint_names: tuple[str, ...] = ()
    num_classes: int | None = None
    applies_nms: ClassVar[bool] = True
    oriented: ClassVar[bool] = False
    has_masks: ClassVar[bool] = False
    INPUT_DEFAULTS: ClassVar[InputDefaults]
    RESIZES: ClassVar[tuple[str, ...]] = ("letterbox", "stretch")
    SCORE_ACTIVATIONS: ClassVar[tuple[str, ...]] = ("none",)
    score_activation: str = "none"

    def __init__(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        self.outputs = tuple(outputs)
        self.input_spec = input_spec
        self._check(self.outputs, input_spec)

    @property
    def num_keypoints(self) -> int:
        """K, the number of keypoints per detection (0 when none)."""
        return len(self.keypoint_names)

    @property
    def num_extras(self) -> int:
        """E, the per-candidate values carried through NMS (``Candidates.extras``; 0 for most heads)."""
        return 0

    @property
    def label_count(self) -> int | None:
        """Classes a labels file must name (``model.labels``): :attr:`num_classes`, None where the layout does not
        say."""
        return self.num_classes

    @classmethod
    def default_input(cls) -> InputDefaults:
        """The preprocessing defaults of this model family (same as ``cls.INPUT_DEFAULTS``)."""
        return cls.INPUT_DEFAULTS

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        """Whether the outputs look like this head's layout (used by ``model.head: auto``)."""
        raise NotImplementedError

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        raise NotImplementedError

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        """Turn raw engine outputs into candidates in engine-input pixels.

        Args:
            outputs: the engine outputs, in engine order, shapes as checked at construction (float32 or float16).
            score_threshold: candidates scoring below it are dropped here already.

        Returns:
            :class:`Candidates` (not yet NMS-ed, not clipped, may contain NaN/Inf rows from a broken engine).
        """
        raise NotImplementedError

    def set_score_activation(self, name: str) -> None:
        """Apply ``model.score_activation`` (empty: keep the head's default).

        Raises:
            ConfigError: a value this head does not accept (the message names the parameter and the choices).
        """
        if not name:
            return
        if name not in self.SCORE_ACTIVATIONS:
            raise ConfigError(f"model.score_activation {name!r} does not apply to head {self.name!r}, whose outputs are "
                              f"{'probabilities' if self.SCORE_ACTIVATIONS == ('none',) else 'scores'}: use one of "
                              f"{list(self.SCORE_ACTIVATIONS)} or leave it empty")
        self.score_activation = name

    def label_mask(self, dets: Detections, outputs: Sequence[np.ndarray], lb, params, dtype: type,
                   out: np.ndarray | None = None) -> np.ndarray:
        """The instance-label image of a frame (heads with ``has_masks`` only)."""
        raise ModelError(f"head {self.name!r} makes no masks")

    def gpu_decode(self) -> GpuDecode | None:
        """The GPU decode of this head (its kernel and arguments), or None when it has none (the GPU path then
        refuses the model at start-up and ``backend: auto`` falls back to the CPU path)."""
        return None

    def _error(self, expected: str) -> ModelError:
        """A :class:`ModelError` naming the shapes seen and this head's expected layout."""
        return ModelError(
            f"model outputs {shapes_text(self.outputs)} do not fit head {self.name!r}: expected {expected} "
            f"for an engine input of {self.input_spec.width}x{self.input_spec.height} (set model.head to the "
            f"model's family, or check the exported model)"
        )

    def _check_runtime(self, outputs: Sequence[np.ndarray]) -> None:
        """Cheap per-frame check that the arrays have the shapes seen at start-up."""
        if len(outputs) != len(self.outputs):
            raise ModelError(f"head {self.name!r} expected {len(self.outputs)} output arrays, got {len(outputs)}")
        for arr, info in zip(outputs, self.outputs):
            if arr.ndim != len(info.shape) or any(d >= 0 and d != a for a, d in zip(arr.shape, info.shape)):
                raise ModelError(
                    f"engine output {info.name!r} has shape {tuple(arr.shape)}, expected {tuple(info.shape)} "
                    f"(head {self.name!r})"
                )


def as_float32(arr: np.ndarray) -> np.ndarray:
    """``arr`` as float32 (no copy when it already is)."""
    return np.asarray(arr, dtype=np.float32)
