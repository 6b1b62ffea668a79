"""YOLOv8 / YOLO11 pose head (Ultralytics ONNX export): one person class plus K keypoints.

Layout (../shared/models/SOURCES.md; Ultralytics ``ultralytics/nn/modules/head.py::Pose.kpts_decode``):

- one output ``[1, 5 + 3K, N]`` float32, channels first; N as for detect (stride 8, 16, 32 cells);
- channels: ``cx, cy, w, h`` (engine-input pixels), person score (sigmoid), then per keypoint ``x, y, visibility``
  (x, y in engine-input pixels, visibility already sigmoid), keypoint-major;
- K = 17 for COCO keypoints (56 channels), named in COCO order (Lin et al. 2014, ``person_keypoints``), from the
  person's own point of view (``left_eye`` is the subject's left eye).
- several classes: ``[1, 4 + nc + 3K, N]`` with K = 17, score = max class score, class = argmax (YOLO26-pose built
  from its yaml has nc = 80: ``[1, 135, 8400]``). The channel count decides: ``(C - 5) % 3 == 0`` is one class and
  ``K = (C - 5) / 3``, anything else K = 17 and ``nc = C - 4 - 51``; ``auto`` takes a count other than 56 only with
  Ultralytics' ``task: pose`` metadata (every such count is also a detect layout).

Input: as Ultralytics detect (RGB, std 255, centred letterbox, pad 114).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, as_float32, dim_is
from vrt_ros.heads.yolov8 import ULTRALYTICS_INPUT, boxes_from_cxcywh, channels_first_layout, check_cells
from vrt_ros.types import InputSpec, TensorInfo

COCO_KEYPOINTS = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
)

#: Channels of the COCO-17 pose layout: box (4) + person score (1) + 17 x (x, y, visibility).
COCO_POSE_CHANNELS = 5 + 3 * len(COCO_KEYPOINTS)


class Yolov8PoseHead(Head):
    """Decode of an Ultralytics pose output ``[1, 5 + 3K, N]``; K = 17 gets the COCO keypoint names.

    Other K (custom pose models, chosen with ``model.head: yolov8_pose``) get names ``keypoint_0`` ...
    """

    name = "yolov8_pose"
    applies_nms = True
    keypoint_names = COCO_KEYPOINTS
    num_classes = 1
    INPUT_DEFAULTS = ULTRALYTICS_INPUT

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        layout = channels_first_layout(outputs, input_spec)
        return layout is not None and layout[0] == COCO_POSE_CHANNELS

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        expected = f"one output [1, 5 + 3*keypoints, N] (channels first; {COCO_POSE_CHANNELS} for 17 COCO keypoints)"
        if len(outputs) != 1 or len(outputs[0].shape) != 3:
            raise self._error(expected)
        b, c, n = outputs[0].shape
        coco = 4 + 3 * len(COCO_KEYPOINTS)
        if not dim_is(b, 1) or c < 8 or ((c - 5) % 3 and c <= coco) or n == 0:
            raise self._error(expected + " or [1, 4 + classes + 51, N] (17 keypoints, several classes)")
        check_cells(self, n, expected)
        self.num_classes = 1 if (c - 5) % 3 == 0 else int(c) - coco
        k = (c - 4 - self.num_classes) // 3
        if k != len(COCO_KEYPOINTS):
            self.keypoint_names = tuple(f"keypoint_{i}" for i in range(k))

    def gpu_decode(self) -> GpuDecode:
        """``decode_yolov8_pose``: one thread per anchor."""
        cells, k, nc = int(self.outputs[0].shape[2]), self.num_keypoints, int(self.num_classes)
        return GpuDecode("decode_yolov8_pose", (cells,),
                         args=lambda out, tables: dict(out=out[0], cells=cells, num_classes=nc, num_keypoints=k))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        out = as_float32(outputs[0])[0]  # (4 + nc + 3K, N)
        nc, k = int(self.num_classes), self.num_keypoints
        cls = out[4 : 4 + nc]
        scores = cls.max(axis=0)
        idx = np.flatnonzero(scores >= score_threshold)
        sel = out[:, idx]
        kpts = np.ascontiguousarray(sel[4 + nc :].reshape(k, 3, len(idx)).transpose(2, 0, 1), dtype=np.float32)
        return Candidates(
            boxes=boxes_from_cxcywh(sel[0], sel[1], sel[2], sel[3]),
            scores=scores[idx].astype(np.float32),
            class_ids=cls[:, idx].argmax(axis=0).astype(np.int32),
            keypoints=kpts,
        )
