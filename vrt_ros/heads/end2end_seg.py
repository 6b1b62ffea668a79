"""End-to-end instance segmentation head: YOLO26-seg's default ONNX export (no NMS; rows already top-K).

Layout (Ultralytics ``ultralytics/nn/modules/head.py::Segment.postprocess`` after ``Detect.get_topk_index``, for
``Segment26`` / ``Segment`` built with ``end2end=True``; boxes from ``Detect.decode_bboxes`` with ``xywh=False``
when end-to-end, i.e. corners; documented as ``(N, 300, 6 + 32)`` + ``(N, 32, H, W)``):

- ``output0`` ``[1, M, 6 + P]`` float32, M = ``max_det`` (300) rows ranked by score: ``x1, y1, x2, y2`` in
  engine-input pixels, score (sigmoid class probability), class index (as a float), then P (32) mask coefficients;
- ``output1`` ``[1, P, H / 4, W / 4]`` mask prototypes (160x160 at 640x640), as ``yolov8_seg``'s.

Either output order is accepted (the 4-D one is the prototypes). ``applies_nms`` is False: the rows are thresholded,
ranked and capped (top-K) only. Masks as ``yolov8_seg`` (:mod:`vrt_ros.boxes.masks`; ``kernels/masks.cu``).
``model.head: auto`` picks this head from the shapes: a 3-D ``[1, M, 6 + P]`` output beside ``[1, P, H/4, W/4]``
prototypes with the same P. Verified in CI on graphs with the export's names and shapes (test/test_heads_end2end.py).

Input: as Ultralytics detect (RGB, std 255, centred letterbox, pad 114).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.boxes.masks import label_image
from vrt_ros.heads.base import Candidates, GpuDecode, Head, as_float32, dim_is
from vrt_ros.heads.end2end import ROW, end2end_rows
from vrt_ros.heads.yolov8 import ULTRALYTICS_INPUT
from vrt_ros.heads.yolov8_seg import PROTO_STRIDE
from vrt_ros.types import Detections, InputSpec, Letterbox, PostprocessParams, TensorInfo


def end2end_seg_layout(outputs: Sequence[TensorInfo], input_spec: InputSpec) -> tuple[int, int, int] | None:
    """``(rows output index, prototype output index, P)`` of an end-to-end seg export, else None."""
    if len(outputs) != 2 or sorted(len(o.shape) for o in outputs) != [3, 4]:
        return None
    di, pi = (0, 1) if len(outputs[0].shape) == 3 else (1, 0)
    b, m, c = outputs[di].shape
    pb, p, ph, pw = outputs[pi].shape
    w, h = input_spec.width, input_spec.height
    if not (dim_is(b, 1) and dim_is(pb, 1)) or m == 0 or p < 1 or c != ROW + p:
        return None
    if not (dim_is(ph, h // PROTO_STRIDE) and dim_is(pw, w // PROTO_STRIDE)):
        return None
    return di, pi, int(p)


class End2EndSegHead(Head):
    """Decode of an end-to-end seg export: ``end2end`` rows plus P mask coefficients (``extras``) and prototypes."""

    name = "end2end_seg"
    applies_nms = False
    has_masks = True
    INPUT_DEFAULTS = ULTRALYTICS_INPUT

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        return end2end_seg_layout(outputs, input_spec) is not None

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        layout = end2end_seg_layout(outputs, input_spec)
        if layout is None:
            raise self._error(f"two outputs: rows [1, M, 6 + P] (x1, y1, x2, y2, score, class, P mask coefficients) "
                              f"and mask prototypes [1, P, H/{PROTO_STRIDE}, W/{PROTO_STRIDE}]")
        self.det_index, self.proto_index, self.num_masks = layout
        self.rows = int(outputs[self.det_index].shape[1])

    @property
    def num_extras(self) -> int:
        """The P mask coefficients."""
        return self.num_masks

    def gpu_decode(self) -> GpuDecode:
        """``decode_end2end_seg``: one thread per row; the coefficients follow the candidate header."""
        rows, p, di = self.rows, self.num_masks, self.det_index
        return GpuDecode("decode_end2end_seg", (rows,), args=lambda out, tables: dict(out=out[di], rows=rows,
                                                                                      num_masks=p))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        rows, scores, class_ids = end2end_rows(as_float32(outputs[self.det_index])[0], score_threshold)
        return Candidates(
            boxes=np.ascontiguousarray(rows[:, :4]),
            scores=scores,
            class_ids=class_ids,
            keypoints=np.zeros((len(rows), 0, 3), np.float32),
            extras=np.ascontiguousarray(rows[:, ROW : ROW + self.num_masks]),
        )

    def label_mask(self, dets: Detections, outputs: Sequence[np.ndarray], lb: Letterbox, params: PostprocessParams,
                   dtype: type, out: np.ndarray | None = None) -> np.ndarray:
        """The frame's instance-label image, as ``yolov8_seg``'s (:func:`vrt_ros.boxes.masks.label_image`)."""
        return label_image(dets, outputs[self.proto_index], lb, params.mask_threshold, dtype, out)
