"""DETR-family heads (RT-DETR, D-FINE, DEIM, RF-DETR; Ultralytics RT-DETR): one box per query, no NMS.
Verified on synthetic layouts only.

Layouts:

- **two outputs** (RT-DETR ``lyuwenyu/RT-DETR`` ``rtdetrv2_pytorch/tools/export_onnx.py`` without its
  postprocessor, i.e. the model's ``pred_logits`` / ``pred_boxes``; D-FINE and DEIM export the same pair;
  RF-DETR ``rfdetr/deploy/export.py`` names them ``dets`` and ``labels``): boxes ``[1, Q, 4]`` = cx, cy, w, h
  **normalised** to the engine input (0..1), and class logits ``[1, Q, C]``. The boxes output is the one whose
  last dim is 4; when C is 4 as well, the one whose name contains ``box`` or ``det``.
  Default ``model.score_activation: sigmoid``, and every (query, class) pair is a candidate, as those projects'
  own postprocessors do (``RTDETRPostProcessor``: ``topk`` over ``sigmoid(logits).flatten(1)``).
- **one output** ``[1, Q, 4 + C]`` (Ultralytics ``ultralytics/nn/modules/head.py::RTDETRDecoder.forward`` in export
  mode: ``torch.cat((dec_bboxes.squeeze(0), dec_scores.squeeze(0).sigmoid()), -1)``): normalised cx, cy, w, h and
  C scores already passed through a sigmoid. Default ``model.score_activation: none``, one candidate per query
  (its best class), as Ultralytics' ``RTDETRPredictor.postprocess``.

``softmax`` (the original DETR): softmax over the C logits, the last of which is "no object" and is dropped.
Candidates are ranked by score and capped at ``max_detections`` (top-K), never NMS-ed.

``model.head: auto`` (the rule, :func:`vrt_ros.heads.select_head`): two 3-D outputs ``[1, Q, 4]`` + ``[1, Q, C]``
with the same Q are this head, unless Q is the stride-8/16/32 cell count (8400 at 640x640): that pair is one box
per anchor before NMS (YOLO-NAS, DAMO-YOLO; :func:`per_anchor_pair`), refused by ``auto`` and by ``detr`` alike. One ``[1, Q, 4 + C]`` output is this head only when
the model's metadata ``description`` names RT-DETR (Ultralytics writes "Ultralytics rtdetr-l model ...") and
neither Q nor 4 + C is the stride-8/16/32 cell count: the same shape is a YOLOX export at another input size, and
``[1, Q, 6]`` is ``end2end``. Without the metadata set ``model.head: detr``. Anything else fails with the shapes
seen.

Input: RGB, 0..1 (std 255), **stretched** to the square input (``model.resize: stretch``; RT-DETR's
``T.Resize``, Ultralytics ``LetterBox(scale_fill=True)``). Exports with a second input (RT-DETR's deploy model
takes ``orig_target_sizes``) are refused at start-up naming that input: export the model without its
postprocessor, so that its boxes stay normalised and this head maps them to source pixels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, InputDefaults, as_float32, dim_is, grid_cells
from vrt_ros.heads.yolov8 import STRIDES, boxes_from_cxcywh
from vrt_ros.types import InputSpec, TensorInfo

DETR_INPUT = InputDefaults(
    channel_order="rgb", mean=(0.0, 0.0, 0.0), std=(255.0, 255.0, 255.0), pad_value=0.0, align="top_left",
    resize="stretch",
)
_BOX_WORDS = ("box", "det")


def per_anchor_pair(outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
    """A ``[1, N, 4]`` + ``[1, N, C]`` pair whose N is the stride-8/16/32 cell count: one box per anchor before NMS
    (YOLO-NAS ``bboxes``/``scores``, DAMO-YOLO ``boxes``/``scores``: x1, y1, x2, y2 in input pixels and class
    probabilities), which has DETR's shapes but not its boxes (normalised cx, cy, w, h) nor its no-NMS ranking."""
    if len(outputs) != 2 or any(len(o.shape) != 3 for o in outputs):
        return False
    cells = grid_cells(input_spec.width, input_spec.height, STRIDES)
    return outputs[0].shape[1] == outputs[1].shape[1] == cells and 4 in (outputs[0].shape[2], outputs[1].shape[2])


def _pair_layout(outputs: Sequence[TensorInfo], input_spec: InputSpec) -> tuple[int, int] | None:
    """``(boxes index, logits index)`` of a ``[1, Q, 4]`` + ``[1, Q, C]`` pair (Q not the YOLO cell count: see
    :func:`per_anchor_pair`), else None."""
    if len(outputs) != 2 or any(len(o.shape) != 3 for o in outputs) or per_anchor_pair(outputs, input_spec):
        return None
    (b0, q0, c0), (b1, q1, c1) = outputs[0].shape, outputs[1].shape
    if not (dim_is(b0, 1) and dim_is(b1, 1)) or q0 != q1 or q0 == 0:
        return None
    if c0 == 4 and c1 == 4:
        named = [i for i, o in enumerate(outputs) if any(w in o.name.lower() for w in _BOX_WORDS)]
        return (named[0], 1 - named[0]) if len(named) == 1 else None
    if c0 == 4 and c1 >= 1:
        return 0, 1
    if c1 == 4 and c0 >= 1:
        return 1, 0
    return None


def _single_layout(outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
    """A ``[1, Q, 4 + C]`` output that is not a YOLO grid: neither YOLOX/YOLOv5 ``[1, N, 5 + C]`` nor Ultralytics'
    channels-first ``[1, 4 + C, N]`` (N = the cell count)."""
    if len(outputs) != 1 or len(outputs[0].shape) != 3:
        return False
    b, q, c = outputs[0].shape
    cells = grid_cells(input_spec.width, input_spec.height, STRIDES)
    return dim_is(b, 1) and q > 0 and c >= 5 and cells not in (q, c)


class DetrHead(Head):
    """Decode of DETR-family outputs: normalised query boxes and per-query class scores, ranked, no NMS."""

    name = "detr"
    applies_nms = False
    INPUT_DEFAULTS = DETR_INPUT
    SCORE_ACTIVATIONS = ("sigmoid", "softmax", "none")

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        """The two-output layout only: one ``[1, Q, 4 + C]`` output is also a YOLOX export at another input size
        or an ``end2end`` one, so ``auto`` takes it as RT-DETR only with the metadata (:meth:`matches_single`)."""
        return _pair_layout(outputs, input_spec) is not None

    @classmethod
    def matches_single(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        """Ultralytics' one-output RT-DETR layout ``[1, Q, 4 + C]`` (Q and 4 + C not the YOLO cell count)."""
        return _single_layout(outputs, input_spec)

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        if per_anchor_pair(outputs, input_spec):
            raise self._error("DETR queries, not one box per anchor: Q = the cell count of strides 8/16/32 is a "
                              "YOLO-NAS / DAMO-YOLO pre-NMS layout (x1, y1, x2, y2 in pixels + class scores), which no "
                              "head here decodes (docs/models.md, 'Model heads', lists the layouts that are)")
        pair = _pair_layout(outputs, input_spec)
        if pair is not None:
            self.box_index, self.logit_index = pair
            self.num_classes = int(outputs[self.logit_index].shape[2])
            self.score_activation = "sigmoid"
        elif _single_layout(outputs, input_spec):
            self.box_index = self.logit_index = 0
            self.num_classes = int(outputs[0].shape[2]) - 4
            self.score_activation = "none"
        else:
            raise self._error("boxes [1, Q, 4] (normalised cx, cy, w, h) and class logits [1, Q, C] (RT-DETR, "
                              "D-FINE, DEIM, RF-DETR), or one [1, Q, 4 + C] output (Ultralytics RT-DETR)")
        self.num_queries = int(outputs[0].shape[1])
        self._scale = np.array([input_spec.width, input_spec.height] * 2, np.float32)

    @property
    def label_count(self) -> int | None:
        """C classes, less the "no object" class that ``softmax`` drops."""
        return self.num_classes - 1 if self.score_activation == "softmax" else self.num_classes

    def gpu_decode(self) -> GpuDecode:
        """``decode_detr``: one thread per (query, class) pair; top-K is the shared rank + the finalize cap (no NMS).
        The activation is read when the launch is built (``model.score_activation`` is applied after construction)."""
        q = self.num_queries
        box_stride = int(self.outputs[self.box_index].shape[2])
        logit_stride = int(self.outputs[self.logit_index].shape[2])
        offset = 4 if self.box_index == self.logit_index else 0
        softmax = self.score_activation == "softmax"
        classes = self.num_classes - 1 if softmax else self.num_classes
        act = {"none": 0, "sigmoid": 1, "softmax": 2}[self.score_activation]
        bi, li, (w, h) = self.box_index, self.logit_index, (float(self._scale[0]), float(self._scale[1]))
        return GpuDecode("decode_detr", (q * classes,), args=lambda out, tables: dict(
            boxes=out[bi], logits=out[li], queries=q, num_classes=classes, box_stride=box_stride,
            logit_stride=logit_stride, logit_offset=offset, activation=act, input_w=w, input_h=h))

    def _scores(self, raw: np.ndarray) -> np.ndarray:
        """(Q, C') class scores after ``score_activation`` (softmax drops the last, "no object", class)."""
        if self.score_activation == "sigmoid":
            return 1.0 / (1.0 + np.exp(-raw))
        if self.score_activation == "softmax":
            e = np.exp(raw - raw.max(axis=1, keepdims=True))
            return (e / e.sum(axis=1, keepdims=True))[:, :-1]
        return raw

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        boxes = as_float32(outputs[self.box_index])[0][:, :4] * self._scale  # (Q, 4) cx, cy, w, h, input pixels
        raw = as_float32(outputs[self.logit_index])[0]
        raw = raw[:, 4:] if self.box_index == self.logit_index else raw
        scores = self._scores(raw.astype(np.float32))
        if self.score_activation == "sigmoid":  # every (query, class) pair, as RTDETRPostProcessor's topk
            q, c = np.nonzero(scores >= score_threshold)
            s = scores[q, c]
        else:  # one candidate per query, its best class
            c_all = scores.argmax(axis=1)
            s_all = scores[np.arange(len(scores)), c_all]
            q = np.flatnonzero(s_all >= score_threshold)
            c, s = c_all[q], s_all[q]
        b = boxes[q]
        return Candidates(
            boxes=boxes_from_cxcywh(b[:, 0], b[:, 1], b[:, 2], b[:, 3]),
            scores=s.astype(np.float32),
            class_ids=c.astype(np.int32),
            keypoints=np.zeros((len(q), 0, 3), np.float32),
        )
