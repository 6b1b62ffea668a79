"""End-to-end head: the model already ran NMS and emits final boxes.

Layout (../shared/models/SOURCES.md; e.g. Ultralytics YOLOv10 / ``export(nms=True)`` exports):

- one output ``[1, M, 6]`` float32, M fixed slots (typically 100 or 300);
- row: ``x1, y1, x2, y2`` in engine-input pixels, score, class index (as a float); unused slots score 0.

``applies_nms`` is False: :func:`vrt_ros.boxes.postprocess.finish` only thresholds, sorts and caps these rows.
Input: as Ultralytics (RGB, std 255, centred letterbox, pad 114).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, as_float32, dim_is, grid_cells
from vrt_ros.heads.yolov8 import STRIDES, ULTRALYTICS_INPUT
from vrt_ros.types import InputSpec, TensorInfo

ROW = 6


class End2EndHead(Head):
    """Decode of an end-to-end ``[1, M, 6]`` output (boxes after the model's own NMS)."""

    name = "end2end"
    applies_nms = False
    INPUT_DEFAULTS = ULTRALYTICS_INPUT

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        if len(outputs) != 1 or len(outputs[0].shape) != 3:
            return False
        b, m, c = outputs[0].shape
        return dim_is(b, 1) and m != 0 and c == ROW

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        if not self.matches(outputs, input_spec):
            raise self._error("one output [1, M, 6] (x1, y1, x2, y2, score, class)")

    def gpu_decode(self) -> GpuDecode:
        """``decode_end2end``: one thread per row."""
        _, m, row = self.outputs[0].shape
        rows, row_len = int(m), int(row)
        return GpuDecode("decode_end2end", (rows,), args=lambda out, tables: dict(out=out[0], rows=rows, row_len=row_len))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        rows, scores, class_ids = end2end_rows(as_float32(outputs[0])[0], score_threshold)
        return Candidates(
            boxes=np.ascontiguousarray(rows[:, :4]),
            scores=scores,
            class_ids=class_ids,
            keypoints=np.zeros((len(rows), 0, 3), np.float32),
        )


def end2end_shape(outputs: Sequence[TensorInfo], input_spec: InputSpec) -> tuple[int, int] | None:
    """``(M, row length)`` of one ``[1, M, R]`` output (the end-to-end heads' row layout), else None; a row length
    that is the stride-8/16/32 cell count is a channels-first ``[1, C, N]`` output (Ultralytics one-to-many), not
    rows."""
    if len(outputs) != 1 or len(outputs[0].shape) != 3:
        return None
    b, m, c = outputs[0].shape
    if c == grid_cells(input_spec.width, input_spec.height, STRIDES):
        return None
    return (int(m), int(c)) if dim_is(b, 1) and m != 0 and c >= ROW else None


def end2end_rows(out: np.ndarray, score_threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of an end-to-end ``(M, R)`` output scoring at least the threshold (column 4), in row order.

    Returns:
        ``(rows (M', R) float32, scores (M',) float32, class_ids (M',) int32)``: the class is column 5 rounded; a
        NaN/Inf/negative class cannot become an index, so its row's score is NaN (``finish`` drops it; the GPU
        kernels drop it at once).
    """
    rows = out[out[:, 4] >= score_threshold]
    cls = rows[:, 5]
    valid = np.isfinite(cls) & (cls >= 0) & (cls < np.iinfo(np.int32).max)
    class_ids = np.rint(np.where(valid, cls, -1)).astype(np.int32)
    scores = rows[:, 4].copy()
    scores[~valid] = np.nan
    return rows, scores, class_ids
