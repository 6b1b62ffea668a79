"""End-to-end pose head: YOLO26-pose's default ONNX export (no NMS; rows already top-K).

Layout (Ultralytics ``ultralytics/nn/modules/head.py::Pose.postprocess`` after ``Detect.get_topk_index``, for
``Pose26`` / ``Pose`` built with ``end2end=True``; keypoints from ``Pose26.kpts_decode`` in export mode, i.e. x, y in
engine-input pixels and the visibility through a sigmoid; documented as ``(N, 300, 57)``):

- one output ``[1, M, 6 + 3K]`` float32, M = ``max_det`` (300) rows ranked by score: ``x1, y1, x2, y2`` in
  engine-input pixels, score, class index (as a float; 0 for person models), then K x (x, y, visibility),
  keypoint-major; K = 17 COCO keypoints (57 values), named as ``yolov8_pose`` names them.

``applies_nms`` is False: the rows are thresholded, ranked and capped (top-K) only. ``model.head: auto`` picks this
head for ``[1, M, 57]`` (other K: with Ultralytics' ``task: pose`` metadata, or ``model.head: end2end_pose``).
Verified in CI on graphs with the export's names and shapes (test/test_heads_end2end.py).

Input: as Ultralytics detect (RGB, std 255, centred letterbox, pad 114).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, as_float32
from vrt_ros.heads.end2end import ROW, end2end_rows, end2end_shape
from vrt_ros.heads.yolov8 import ULTRALYTICS_INPUT
from vrt_ros.heads.yolov8_pose import COCO_KEYPOINTS
from vrt_ros.types import InputSpec, TensorInfo


class End2EndPoseHead(Head):
    """Decode of an end-to-end pose output ``[1, M, 6 + 3K]``."""

    name = "end2end_pose"
    applies_nms = False
    keypoint_names = COCO_KEYPOINTS
    INPUT_DEFAULTS = ULTRALYTICS_INPUT

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        shape = end2end_shape(outputs, input_spec)
        return shape is not None and shape[1] == ROW + 3 * len(COCO_KEYPOINTS)

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        shape = end2end_shape(outputs, input_spec)
        if shape is None or shape[1] < ROW + 3 or (shape[1] - ROW) % 3:
            raise self._error("one output [1, M, 6 + 3*keypoints] (x1, y1, x2, y2, score, class, keypoints x, y, "
                              f"visibility; {ROW + 3 * len(COCO_KEYPOINTS)} for 17 COCO keypoints)")
        self.rows, k = shape[0], (shape[1] - ROW) // 3
        if k != len(COCO_KEYPOINTS):
            self.keypoint_names = tuple(f"keypoint_{i}" for i in range(k))

    def gpu_decode(self) -> GpuDecode:
        """``decode_end2end_pose``: one thread per row; keypoints after the candidate header."""
        rows, k = self.rows, self.num_keypoints
        return GpuDecode("decode_end2end_pose", (rows,), args=lambda out, tables: dict(out=out[0], rows=rows,
                                                                                       num_keypoints=k))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        rows, scores, class_ids = end2end_rows(as_float32(outputs[0])[0], score_threshold)
        k = self.num_keypoints
        return Candidates(
            boxes=np.ascontiguousarray(rows[:, :4]),
            scores=scores,
            class_ids=class_ids,
            keypoints=np.ascontiguousarray(rows[:, ROW : ROW + 3 * k].reshape(len(rows), k, 3)),
        )
