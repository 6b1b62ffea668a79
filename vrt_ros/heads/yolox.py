"""YOLOX head (Megvii YOLOX, exported with ``decode_in_inference=False``).

Layout (../shared/models/SOURCES.md; YOLOX repo ``yolox/utils/demo_utils.py::demo_postprocess``,
Ge et al. 2021, "YOLOX: Exceeding YOLO Series in 2021"):

- one output ``[1, N, 5 + nc]`` float32; ``N = sum((H // s) * (W // s))`` for strides 8, 16, 32 of the engine
  input ``W x H``, cells row-major within each stride, strides in increasing order;
- row: ``dx, dy, log_w, log_h, objectness, nc class scores`` (objectness and classes already sigmoid);
- ``cx = (dx + gx) * s``, ``cy = (dy + gy) * s``, ``w = exp(log_w) * s``, ``h = exp(log_h) * s`` in input pixels;
- ``score = objectness * max(class scores)``, class = argmax.

Input: BGR, 0..255, no mean/std, letterbox top-left, pad 114 (YOLOX ``preproc``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, InputDefaults, as_float32, dim_is, grid_cells
from vrt_ros.types import InputSpec, TensorInfo

STRIDES = (8, 16, 32)


class YoloxHead(Head):
    """Decode of a YOLOX ``[1, N, 5 + nc]`` output (see the module docstring for the layout)."""

    name = "yolox"
    applies_nms = True
    INPUT_DEFAULTS = InputDefaults(
        channel_order="bgr", mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), pad_value=114.0, align="top_left"
    )

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        if len(outputs) != 1 or len(outputs[0].shape) != 3:
            return False
        b, n, c = outputs[0].shape
        if input_spec.width % STRIDES[-1] or input_spec.height % STRIDES[-1]:
            return False
        return dim_is(b, 1) and n == grid_cells(input_spec.width, input_spec.height, STRIDES) and c >= 6

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        w, h = input_spec.width, input_spec.height
        cells = grid_cells(w, h, STRIDES)
        expected = f"one output [1, {cells}, 5 + classes] (cells of strides {STRIDES}; input sides multiples of 32)"
        if w % STRIDES[-1] or h % STRIDES[-1] or len(outputs) != 1 or len(outputs[0].shape) != 3:
            raise self._error(expected)
        b, n, c = outputs[0].shape
        if not (dim_is(b, 1) and dim_is(n, cells) and c >= 6):
            raise self._error(expected)
        self.num_classes = c - 5
        self.num_cells = cells
        gx, gy, st = [], [], []
        for s in STRIDES:
            ys, xs = np.mgrid[0 : h // s, 0 : w // s]
            gx.append(xs.ravel())
            gy.append(ys.ravel())
            st.append(np.full(xs.size, s))
        self._gx = np.concatenate(gx).astype(np.float32)
        self._gy = np.concatenate(gy).astype(np.float32)
        self._stride = np.concatenate(st).astype(np.float32)

    def gpu_decode(self) -> GpuDecode:
        """``decode_yolox``: one thread per cell; the cell grid (x, y, stride per cell) is a table on the device."""
        grid = np.ascontiguousarray(np.stack([self._gx, self._gy, self._stride], axis=1), dtype=np.float32)
        cells, num_classes = int(self.num_cells), int(self.num_classes)
        return GpuDecode("decode_yolox", (cells,), tables={"grid": grid},
                         args=lambda out, tables: dict(out=out[0], cells=cells, num_classes=num_classes,
                                                       grid=tables["grid"]))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        if outputs[0].shape[1] != self.num_cells:
            raise self._error(f"[1, {self.num_cells}, {self.num_classes + 5}], got {tuple(outputs[0].shape)}")
        out = as_float32(outputs[0]).reshape(self.num_cells, self.num_classes + 5)
        # score = obj * cls with cls <= 1, so obj >= threshold is a cheap exact pre-filter.
        idx = np.flatnonzero(out[:, 4] >= score_threshold)
        rows = out[idx]
        cls = rows[:, 5:]
        class_ids = cls.argmax(axis=1).astype(np.int32)
        scores = rows[:, 4] * cls[np.arange(len(rows)), class_ids]
        keep = scores >= score_threshold
        idx, rows, scores, class_ids = idx[keep], rows[keep], scores[keep], class_ids[keep]
        s = self._stride[idx]
        cx = (rows[:, 0] + self._gx[idx]) * s
        cy = (rows[:, 1] + self._gy[idx]) * s
        with np.errstate(over="ignore", invalid="ignore"):
            half_w = np.exp(rows[:, 2]) * s * 0.5
            half_h = np.exp(rows[:, 3]) * s * 0.5
        boxes = np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], axis=1).astype(np.float32)
        return Candidates(
            boxes=boxes,
            scores=scores.astype(np.float32),
            class_ids=class_ids,
            keypoints=np.zeros((len(idx), 0, 3), np.float32),
        )
