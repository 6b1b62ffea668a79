"""End-to-end oriented-box head: YOLO26-obb's default ONNX export (no NMS; rows already top-K).

Layout (Ultralytics ``ultralytics/nn/modules/head.py::OBB.postprocess`` after ``Detect.get_topk_index``, for
``OBB26`` / ``OBB`` built with ``end2end=True``: "[x, y, w, h, max_class_prob, class_index, angle]", the box from
``dist2rbox``, i.e. centre and size in the box's own axes; documented as ``(N, 300, 7)``):

- one output ``[1, M, 7]`` float32, M = ``max_det`` (300) rows ranked by score: ``cx, cy, w, h`` in engine-input
  pixels, score, class index (as a float), angle in radians. ``OBB26`` outputs the raw angle (no sigmoid, so any
  range; ``OBB``'s is in [-pi/4, 3pi/4)): both are brought to the published long-side form in [-pi/2, pi/2)
  (:func:`vrt_ros.boxes.rotated.canonical`), the same rectangle.

``applies_nms`` is False (no rotated NMS; thresholded, ranked and capped only); ``oriented``: the angle travels in
``extras[:, 0]`` and ``bbox.center.theta`` is published as ``yolov8_obb``'s. Letterbox only. ``model.head: auto``
picks this head for one ``[1, M, 7]`` output (M not the stride-8/16/32 cell count: that is also a 2-class YOLOX).
Verified in CI on graphs with the export's names and shapes (test/test_heads_end2end.py).

Input: as Ultralytics detect (RGB, std 255, centred letterbox, pad 114).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, as_float32
from vrt_ros.heads.end2end import ROW, end2end_rows, end2end_shape
from vrt_ros.heads.yolov8 import ULTRALYTICS_INPUT, boxes_from_cxcywh
from vrt_ros.types import InputSpec, TensorInfo


class End2EndObbHead(Head):
    """Decode of an end-to-end OBB output ``[1, M, 7]``: own-axis boxes with the angle in ``extras[:, 0]``."""

    name = "end2end_obb"
    applies_nms = False
    oriented = True
    INPUT_DEFAULTS = ULTRALYTICS_INPUT
    RESIZES = ("letterbox",)

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        shape = end2end_shape(outputs, input_spec)
        return shape is not None and shape[1] == ROW + 1

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        if not self.matches(outputs, input_spec):
            raise self._error("one output [1, M, 7] (cx, cy, w, h, score, class, angle in radians)")
        self.rows = int(outputs[0].shape[1])

    @property
    def num_extras(self) -> int:
        """The angle."""
        return 1

    def gpu_decode(self) -> GpuDecode:
        """``decode_end2end_obb``: one thread per row; the angle follows the candidate header."""
        rows = self.rows
        return GpuDecode("decode_end2end_obb", (rows,), args=lambda out, tables: dict(out=out[0], rows=rows))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        rows, scores, class_ids = end2end_rows(as_float32(outputs[0])[0], score_threshold)
        return Candidates(
            boxes=boxes_from_cxcywh(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]),
            scores=scores,
            class_ids=class_ids,
            keypoints=np.zeros((len(rows), 0, 3), np.float32),
            extras=np.ascontiguousarray(rows[:, ROW : ROW + 1]),
        )
