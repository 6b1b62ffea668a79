"""YOLOv8 / YOLO11 instance segmentation head (Ultralytics ``-seg`` ONNX export).

Layout (Ultralytics ``ultralytics/nn/modules/head.py::Segment.forward``: ``torch.cat([x, mc], 1), p`` in export
mode, ``p = self.proto(x[0])`` at stride 4; the real export in ``../shared/models/seg``):

- ``output0`` ``[1, 4 + nc + P, N]`` float32, channels first, N the stride-8/16/32 cell count (8400 at 640x640):
  ``cx, cy, w, h`` in engine-input pixels, ``nc`` class scores (already sigmoid), then P (32) mask coefficients;
- ``output1`` ``[1, P, H / 4, W / 4]`` mask prototypes (160x160 at 640x640).

Either output order is accepted (the 4-D one is the prototypes). ``model.head: auto`` picks this head only when
the prototype output is present (a single ``[1, C, N]`` output is the detect head). Masks are assembled for the
kept detections only (:mod:`vrt_ros.boxes.masks`; ``kernels/masks.cu`` on the GPU).

Input: as Ultralytics detect (RGB, std 255, centred letterbox, pad 114).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.boxes.masks import label_image
from vrt_ros.heads.base import Candidates, GpuDecode, Head, as_float32, dim_is, grid_cells
from vrt_ros.heads.yolov8 import STRIDES, ULTRALYTICS_INPUT, decode_channels_first
from vrt_ros.types import Detections, InputSpec, Letterbox, PostprocessParams, TensorInfo

#: Engine input pixels per prototype pixel (Ultralytics ``Proto`` upsamples stride 8 features by 2).
PROTO_STRIDE = 4


def seg_layout(outputs: Sequence[TensorInfo], input_spec: InputSpec) -> tuple[int, int, int] | None:
    """``(detection output index, prototype output index, P)`` of a YOLOv8-seg export, else None."""
    if len(outputs) != 2:
        return None
    dims = [len(o.shape) for o in outputs]
    if sorted(dims) != [3, 4]:
        return None
    di, pi = (0, 1) if dims[0] == 3 else (1, 0)
    b, c, n = outputs[di].shape
    pb, p, ph, pw = outputs[pi].shape
    w, h = input_spec.width, input_spec.height
    if not (dim_is(b, 1) and dim_is(pb, 1)) or p < 1 or c < 5 + p:
        return None
    if n != grid_cells(w, h, STRIDES) or not (dim_is(ph, h // PROTO_STRIDE) and dim_is(pw, w // PROTO_STRIDE)):
        return None
    return di, pi, int(p)


class Yolov8SegHead(Head):
    """Decode of an Ultralytics YOLOv8 / YOLO11 ``-seg`` export: boxes as ``yolov8`` plus P mask coefficients,
    carried through NMS in ``extras``, and the prototype output for :meth:`label_mask`."""

    name = "yolov8_seg"
    applies_nms = True
    has_masks = True
    INPUT_DEFAULTS = ULTRALYTICS_INPUT

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        return seg_layout(outputs, input_spec) is not None

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        layout = seg_layout(outputs, input_spec)
        if layout is None:
            raise self._error(f"two outputs: [1, 4 + classes + P, N] (N = cells of strides {STRIDES}) and mask "
                              f"prototypes [1, P, H/{PROTO_STRIDE}, W/{PROTO_STRIDE}]")
        self.det_index, self.proto_index, self.num_masks = layout
        self.num_classes = int(outputs[self.det_index].shape[1]) - 4 - self.num_masks

    @property
    def num_extras(self) -> int:
        """The P mask coefficients."""
        return self.num_masks

    def gpu_decode(self) -> GpuDecode:
        """``decode_yolov8_seg``: one thread per anchor; the coefficients follow the candidate header."""
        cells, nc, p, di = int(self.outputs[self.det_index].shape[2]), int(self.num_classes), self.num_masks, self.det_index
        return GpuDecode("decode_yolov8_seg", (cells,),
                         args=lambda out, tables: dict(out=out[di], cells=cells, num_classes=nc, num_masks=p))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        out = as_float32(outputs[self.det_index])[0]  # (4 + nc + P, N)
        return decode_channels_first(out, self.num_classes, score_threshold, self.num_masks)

    def label_mask(self, dets: Detections, outputs: Sequence[np.ndarray], lb: Letterbox, params: PostprocessParams,
                   dtype: type, out: np.ndarray | None = None) -> np.ndarray:
        """The frame's instance-label image (:func:`vrt_ros.boxes.masks.label_image`) from its final detections (boxes in
        source pixels, coefficients in ``extras``) and the engine's prototype output."""
        return label_image(dets, outputs[self.proto_index], lb, params.mask_threshold, dtype, out)
