"""DETR rows already ranked top-K: Ultralytics RT-DETR's ONNX export from 8.4 on (no NMS, no activation).

Layout (Ultralytics 8.4 ``ultralytics/nn/modules/head.py::RTDETRDecoder.postprocess`` in export mode: top-K over
the flattened (query, class) sigmoid scores, "[cx, cy, w, h, score, class_index]"; read back by
``ultralytics/models/rtdetr/predict.py::RTDETRPredictor.postprocess``, which scales the boxes by the image size):

- one output ``[1, K, 6]`` float32, K = min(queries, ``max_det``) = 300 rows ranked by score: ``cx, cy, w, h``
  **normalised** to the engine input (0..1), score (a sigmoid probability), class index (as a float).

Each row is a candidate as it is (thresholded, ranked and capped: top-K, no NMS). Earlier Ultralytics versions export
``[1, 300, 4 + C]`` (``detr``'s one-output layout). ``[1, K, 6]`` is also ``end2end``'s shape (corners in pixels) and
a 2-class RT-DETR of those versions, so ``model.head: auto`` picks this head only when the model's metadata
``description`` names RT-DETR and its ``names`` do not list exactly 2 classes (:func:`vrt_ros.heads.select_head`).
Verified in CI on a graph with the export's names and shapes (test/test_heads_end2end.py).

Input: as ``detr``: RGB, 0..1 (std 255), **stretched** to the square input (``LetterBox(scale_fill=True)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, as_float32
from vrt_ros.heads.detr import DETR_INPUT
from vrt_ros.heads.end2end import ROW, end2end_rows, end2end_shape
from vrt_ros.heads.yolov8 import boxes_from_cxcywh
from vrt_ros.types import InputSpec, TensorInfo


class DetrTopkHead(Head):
    """Decode of Ultralytics RT-DETR's ranked rows ``[1, K, 6]`` (normalised cx, cy, w, h, score, class)."""

    name = "detr_topk"
    applies_nms = False
    INPUT_DEFAULTS = DETR_INPUT

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        """Never from the shapes alone (they are ``end2end``'s): ``auto`` takes it with RT-DETR metadata only."""
        return False

    @classmethod
    def matches_rows(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        """One ``[1, K, 6]`` output."""
        shape = end2end_shape(outputs, input_spec)
        return shape is not None and shape[1] == ROW

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        if not self.matches_rows(outputs, input_spec):
            raise self._error("one output [1, K, 6] (normalised cx, cy, w, h, score, class; Ultralytics RT-DETR 8.4)")
        self.rows = int(outputs[0].shape[1])
        self._scale = np.array([input_spec.width, input_spec.height] * 2, np.float32)

    def gpu_decode(self) -> GpuDecode:
        """``decode_detr_topk``: one thread per row, the box scaled by the input size."""
        rows, (w, h) = self.rows, (float(self._scale[0]), float(self._scale[1]))
        return GpuDecode("decode_detr_topk", (rows,), args=lambda out, tables: dict(out=out[0], rows=rows, input_w=w,
                                                                                    input_h=h))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        rows, scores, class_ids = end2end_rows(as_float32(outputs[0])[0], score_threshold)
        b = rows[:, :4] * self._scale
        return Candidates(
            boxes=boxes_from_cxcywh(b[:, 0], b[:, 1], b[:, 2], b[:, 3]),
            scores=scores,
            class_ids=class_ids,
            keypoints=np.zeros((len(rows), 0, 3), np.float32),
        )
