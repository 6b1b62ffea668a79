"""YOLOv8 / YOLO11 oriented-box head (Ultralytics ``-obb`` ONNX export). Verified on synthetic layouts only.

Layout (Ultralytics ``ultralytics/nn/modules/head.py::OBB.forward``: ``angle = (self.cv4[i](x[i]).sigmoid() -
0.25) * math.pi`` and, in export mode, ``torch.cat([x, angle], 1)`` where ``x`` is ``Detect``'s
``torch.cat((dbox, cls.sigmoid()), 1)`` with ``dbox = dist2rbox(...) * strides``, i.e. ``xywh``):

- one output ``[1, 4 + nc + 1, N]`` float32, channels first, N the stride-8/16/32 cell count (8400 at 640x640
  for the DOTA models at 1024x1024: 21504);
- channels: ``cx, cy, w, h`` in engine-input pixels (w along the angle's direction, ``ops.xywhr2xyxyxyxy``),
  ``nc`` class scores (sigmoid), then the angle in radians, in ``[-pi/4, 3pi/4)``.

The shape alone is a detect layout with one class more, so ``model.head: auto`` picks this head only when the
model's metadata says ``task: obb`` (Ultralytics writes it into every export); otherwise set ``model.head:
yolov8_obb``. NMS is rotated (probabilistic IoU, :mod:`vrt_ros.boxes.rotated`), and the published ``theta`` follows the
long-side convention documented there. Only the letterbox resize is allowed (a stretch would turn rectangles
into parallelograms).

Input: as Ultralytics detect (RGB, std 255, centred letterbox, pad 114).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, as_float32, dim_is
from vrt_ros.heads.yolov8 import ULTRALYTICS_INPUT, channels_first_layout, check_cells, decode_channels_first
from vrt_ros.types import InputSpec, TensorInfo


class Yolov8ObbHead(Head):
    """Decode of an Ultralytics OBB output ``[1, 4 + nc + 1, N]``: candidates are own-axis boxes with the angle in
    ``extras[:, 0]``."""

    name = "yolov8_obb"
    applies_nms = True
    oriented = True
    INPUT_DEFAULTS = ULTRALYTICS_INPUT
    RESIZES = ("letterbox",)

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        layout = channels_first_layout(outputs, input_spec)
        return layout is not None and layout[0] >= 6

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        expected = "one output [1, 4 + classes + 1, N] (channels first: cx, cy, w, h, class scores, angle)"
        if len(outputs) != 1 or len(outputs[0].shape) != 3:
            raise self._error(expected)
        b, c, n = outputs[0].shape
        if not dim_is(b, 1) or c < 6 or n == 0:
            raise self._error(expected)
        check_cells(self, n, expected)
        self.num_classes = int(c) - 5

    @property
    def num_extras(self) -> int:
        """The angle."""
        return 1

    def gpu_decode(self) -> GpuDecode:
        """``decode_yolov8_obb``: one thread per anchor; the angle follows the candidate header."""
        cells, nc = int(self.outputs[0].shape[2]), int(self.num_classes)
        return GpuDecode("decode_yolov8_obb", (cells,), args=lambda out, tables: dict(out=out[0], cells=cells, num_classes=nc))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        out = as_float32(outputs[0])[0]  # (4 + nc + 1, N)
        return decode_channels_first(out, self.num_classes, score_threshold, 1)
