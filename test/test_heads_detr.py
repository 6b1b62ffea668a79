"""detr: both layouts, score activations, top-K without NMS, the stretch resize through the CPU pipeline, the
``auto`` rule and the refusal of a second (``orig_target_sizes``) input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from synthetic_heads import blob_detr
from synthetic_models import OPSET, ramp_rectangle
from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.postprocess import finish
from vrt_ros.errors import ConfigError, ModelError
from vrt_ros.heads import select_head
from vrt_ros.inference.backends.cpu import CpuPipeline
from vrt_ros.settings import config
from vrt_ros.types import InputSpec, PostprocessParams, TensorInfo

PAIR = [TensorInfo("pred_logits", (1, 300, 3)), TensorInfo("pred_boxes", (1, 300, 4))]


def _values(model, **kw):
    return config.validate({**config.defaults(), "model.path": str(model), "backend": "cpu", **kw})


def test_stretch_geometry_maps_both_axes_on_their_own():
    lb = letterbox(1920, 1080, 640, 640, "center", "stretch")
    assert (lb.pad_x, lb.pad_y, lb.resized_width, lb.resized_height) == (0, 0, 640, 640)
    assert (lb.scale_x, lb.scale_y) == (640 / 1920, 640 / 1080)
    with pytest.raises(ValueError, match="model.resize"):
        letterbox(10, 10, 640, 640, "center", "squash")


def test_two_output_layout_sigmoid_every_query_class_pair_top_k():
    head = select_head("auto", PAIR, InputSpec(640, 640))
    assert head.name == "detr" and head.score_activation == "sigmoid" and not head.applies_nms
    logits = np.full((1, 300, 3), -9.0, np.float32)
    boxes = np.full((1, 300, 4), 0.1, np.float32)
    boxes[0, 5] = [0.5, 0.25, 0.2, 0.1]
    logits[0, 5, 0], logits[0, 5, 2] = 2.0, 1.0  # one query, two classes above the threshold (RT-DETR's topk)
    boxes[0, 9] = [0.5, 0.25, 0.2, 0.1]  # the same box again: no NMS, it stays
    logits[0, 9, 1] = 3.0
    cands = head.decode([logits, boxes], 0.5)
    lb = letterbox(640, 640, 640, 640, resize="stretch")
    dets = finish(cands, lb, PostprocessParams(score_threshold=0.5, max_detections=2), head.applies_nms)
    np.testing.assert_array_equal(dets.class_ids, [1, 0])  # top-2 by score: sigmoid(3), sigmoid(2)
    np.testing.assert_allclose(dets.scores, 1 / (1 + np.exp(-np.array([3.0, 2.0]))), rtol=1e-6)
    np.testing.assert_allclose(dets.boxes, [[256, 128, 384, 192]] * 2, atol=1e-3)


def test_softmax_drops_the_no_object_class_and_none_takes_probabilities():
    head = select_head("detr", PAIR, InputSpec(640, 640))
    head.set_score_activation("softmax")
    logits = np.zeros((1, 300, 3), np.float32)
    logits[0, :, 2] = 5.0  # every query: "no object"
    logits[0, 0] = [4.0, 0.0, 0.0]
    c = head.decode([logits, np.full((1, 300, 4), 0.5, np.float32)], 0.5)
    assert len(c) == 1 and c.class_ids[0] == 0 and c.scores[0] == pytest.approx(np.exp(4) / (np.exp(4) + 2), rel=1e-5)
    ultra = select_head("detr", [TensorInfo("output0", (1, 300, 4 + 80))], InputSpec(640, 640))
    assert ultra.score_activation == "none" and ultra.num_classes == 80
    out = np.zeros((1, 300, 84), np.float32)
    out[0, 3, :4] = [0.5, 0.5, 0.5, 0.5]
    out[0, 3, 4 + 7] = 0.8
    c = ultra.decode([out], 0.5)
    assert len(c) == 1 and c.class_ids[0] == 7 and c.scores[0] == pytest.approx(0.8)
    with pytest.raises(ConfigError, match="model.score_activation 'logistic'"):
        head.set_score_activation("logistic")


def test_auto_rule_for_the_single_output_needs_rtdetr_metadata():
    one = [TensorInfo("output0", (1, 300, 84))]
    with pytest.raises(ModelError, match="no known head.*1,300,84"):
        select_head("auto", one, InputSpec(640, 640))
    meta = {"description": "Ultralytics rtdetr-l model trained on coco.yaml"}
    assert select_head("auto", one, InputSpec(640, 640), meta).name == "detr"
    six = [TensorInfo("output0", (1, 300, 6))]
    assert select_head("auto", six, InputSpec(640, 640)).name == "end2end"
    # Ultralytics 8.4 exports RT-DETR as ranked [1, 300, 6] rows (detr_topk); a 2-class model of earlier versions is
    # [1, 300, 4 + 2]: the names metadata tells them apart.
    assert select_head("auto", six, InputSpec(640, 640), meta).name == "detr_topk"
    assert select_head("auto", six, InputSpec(640, 640), {**meta, "names": "{0: 'a', 1: 'b'}"}).name == "detr"


def test_detr_pipeline_stretches_and_maps_boxes_back(tmp_path):
    model = blob_detr(tmp_path / "detr.onnx", 640, 640)
    pipe = CpuPipeline(_values(model))
    assert pipe.head.name == "detr" and pipe.input_spec.resize == "stretch"
    for w, h in ((1920, 1080), (480, 640)):
        box = (0.2 * w, 0.3 * h, 0.6 * w, 0.5 * h)
        dets = pipe.process_bgr(ramp_rectangle(w, h, box))
        assert len(dets) == 1 and dets.class_ids[0] == 1
        np.testing.assert_allclose(dets.boxes[0], box, atol=1.5)


def test_second_input_is_refused_naming_it(tmp_path):
    nodes = [helper.make_node("ReduceMean", ["images"], ["m"], keepdims=1),
             helper.make_node("Cast", ["orig_target_sizes"], ["s"], to=TensorProto.FLOAT),
             helper.make_node("ReduceMean", ["s"], ["sm"], keepdims=1),
             helper.make_node("Add", ["m", "sm"], ["out"])]
    graph = helper.make_graph(nodes, "two_inputs",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64]),
                               helper.make_tensor_value_info("orig_target_sizes", TensorProto.INT64, [1, 2])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, 1, 1])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "two.onnx"))
    with pytest.raises(ModelError, match=r"second input 'orig_target_sizes' \[1, 2\]"):
        CpuPipeline(_values(tmp_path / "two.onnx"))
