"""YOLOv8 / YOLO11 detect head (Ultralytics ONNX export, anchor-free, no objectness).

Layout (../shared/models/SOURCES.md; Ultralytics ``ultralytics/nn/modules/head.py::Detect`` and
``ultralytics/utils/ops.py::non_max_suppression``):

- one output ``[1, 4 + nc, N]`` float32, channels first; ``N = sum((H // s) * (W // s))`` for strides 8, 16, 32
  (8400 at 640x640);
- channels: ``cx, cy, w, h`` in engine-input pixels, then ``nc`` class scores (already sigmoid);
- score = max class score, class = argmax.

Input: RGB, 0..1 (std 255), letterbox centred, pad 114 (Ultralytics ``LetterBox``).

A 56-channel output is also the YOLOv8-pose layout (``5 + 3*17``); ``auto`` tells them apart only by the output
name or the model's ``task`` metadata (see :func:`vrt_ros.heads.select_head`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, InputDefaults, as_float32, dim_is, grid_cells
from vrt_ros.types import InputSpec, TensorInfo

STRIDES = (8, 16, 32)

ULTRALYTICS_INPUT = InputDefaults(
    channel_order="rgb", mean=(0.0, 0.0, 0.0), std=(255.0, 255.0, 255.0), pad_value=114.0, align="center"
)


def channels_first_layout(outputs: Sequence[TensorInfo], input_spec: InputSpec) -> tuple[int, int] | None:
    """``(channels, cells)`` of a single ``[1, C, N]`` output whose N is the stride-8/16/32 cell count, else None."""
    if len(outputs) != 1 or len(outputs[0].shape) != 3:
        return None
    b, c, n = outputs[0].shape
    if not dim_is(b, 1) or c < 5 or n != grid_cells(input_spec.width, input_spec.height, STRIDES):
        return None
    return c, n


def check_cells(head: Head, n: int, expected: str) -> None:
    """Refuse a channels-first output whose anchor count ``n`` is not the stride-8/16/32 cell count of the engine
    input (a dynamic ``n`` passes; the arrays are checked when they arrive).

    A fixed N that is not the cell count is another layout (YOLOX's ``[1, N, 5 + C]`` read channels first has N = 85,
    an end-to-end ``[1, 300, 6]`` has N = 6): without this, such a model starts and decodes nothing on every frame.

    Raises:
        ModelError: naming the shapes seen, ``expected`` and the cell count.
    """
    cells = grid_cells(head.input_spec.width, head.input_spec.height, STRIDES)
    if not dim_is(n, cells):
        raise head._error(f"{expected}, N = {cells} (the cells of strides {STRIDES}); got N = {n}")


def boxes_from_cxcywh(cx: np.ndarray, cy: np.ndarray, w: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(M, 4) float32 x1, y1, x2, y2 from centre and size arrays."""
    hw, hh = w * 0.5, h * 0.5
    return np.stack([cx - hw, cy - hh, cx + hw, cy + hh], axis=1).astype(np.float32)


def decode_channels_first(out: np.ndarray, num_classes: int, score_threshold: float, extras: int = 0) -> Candidates:
    """The Ultralytics channels-first decode shared by the detect, seg and obb heads.

    Args:
        out: (4 + num_classes + extras, N) float32: cx, cy, w, h (engine-input pixels), class scores, extras.
        num_classes: class score channels.
        score_threshold: candidates whose best class scores below it are dropped.
        extras: trailing channels carried per candidate (mask coefficients, the angle) into ``Candidates.extras``.

    Returns:
        Candidates (score = max class score, class = its first argmax); extras (M, E) float32 when E > 0.
    """
    cls = out[4 : 4 + num_classes]
    scores = cls.max(axis=0)
    idx = np.flatnonzero(scores >= score_threshold)
    box = out[:4, idx]
    return Candidates(
        boxes=boxes_from_cxcywh(box[0], box[1], box[2], box[3]),
        scores=scores[idx].astype(np.float32),
        class_ids=cls[:, idx].argmax(axis=0).astype(np.int32),
        keypoints=np.zeros((len(idx), 0, 3), np.float32),
        extras=np.ascontiguousarray(out[4 + num_classes : 4 + num_classes + extras, idx].T, dtype=np.float32)
        if extras else None,
    )


class Yolov8Head(Head):
    """Decode of an Ultralytics YOLOv8 / YOLO11 detect output ``[1, 4 + nc, N]``."""

    name = "yolov8"
    applies_nms = True
    INPUT_DEFAULTS = ULTRALYTICS_INPUT

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        return channels_first_layout(outputs, input_spec) is not None

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        expected = "one output [1, 4 + classes, N] (N anchors, channels first)"
        if len(outputs) != 1 or len(outputs[0].shape) != 3:
            raise self._error(expected)
        b, c, n = outputs[0].shape
        if not dim_is(b, 1) or c < 5 or n == 0:
            raise self._error(expected)
        check_cells(self, n, expected)
        if c == grid_cells(input_spec.width, input_spec.height, STRIDES) and n != c:
            # Channels equal to the cell count: a channels-last [1, N, C] output (YOLOX, YOLOv5), not this layout.
            raise self._error(expected + f"; got {c} channels, the cell count of strides {STRIDES}, which is a "
                              "channels-last [1, N, C] output such as YOLOX's")
        self.num_classes = c - 4

    def gpu_decode(self) -> GpuDecode:
        """``decode_yolov8``: one thread per anchor."""
        _, c, n = self.outputs[0].shape
        cells, num_classes = int(n), int(c) - 4
        return GpuDecode("decode_yolov8", (cells,),
                         args=lambda out, tables: dict(out=out[0], cells=cells, num_classes=num_classes))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        out = as_float32(outputs[0])[0]  # (4 + nc, N)
        return decode_channels_first(out, out.shape[0] - 4, score_threshold)
