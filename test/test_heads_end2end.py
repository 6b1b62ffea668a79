"""The layouts users export in 2026, without torch: YOLOv8 / YOLO11 / YOLO26 one-to-many and YOLO26 end-to-end
(detect, segment, pose, OBB) and Ultralytics RT-DETR (issue 36).

Each export is a small ONNX graph built here with the real export's input and output names, shapes, dtypes and the
``metadata_props`` keys ``auto`` reads. Where they come from:

- names: ``ultralytics/engine/exporter.py::export_onnx`` (input ``images``; ``output0``, plus ``output1`` for
  segmentation models), metadata ``task`` and ``description`` ("Ultralytics <model> model") from the same file;
- one-to-many shapes ``[1, 4 + nc (+ 32 | + 51 | + 1), 8400]`` + ``[1, 32, 160, 160]`` (``Detect._inference``,
  ``Segment`` / ``Pose`` / ``OBB``); YOLO26 built from its yaml: ``[1, 84, 8400]``, seg ``[1, 116, 8400]`` +
  ``[1, 32, 160, 160]``, pose ``[1, 135, 8400]`` (80 classes + 17 keypoints), OBB ``[1, 85, 8400]`` (measured on
  the H200 with ultralytics 8.4.190, issue 36);
- end-to-end ``[1, 300, 6 | 38 | 57 | 7]`` (``Detect.postprocess`` / ``Segment.postprocess`` /
  ``Pose.postprocess`` / ``OBB.postprocess`` after ``Detect.get_topk_index``; ``export(end2end=True)`` or a
  trained YOLO26 checkpoint);
- RT-DETR: ``[1, 300, 4 + nc]`` before 8.4 (``RTDETRDecoder.forward`` in export mode), ``[1, 300, 6]`` ranked rows
  of normalised cx, cy, w, h, score, class in 8.4.190 (``RTDETRDecoder.postprocess``; the issue measured the shape).

The graphs emit fixed tensors holding known objects, so the decoders are checked end to end (ONNX Runtime, the CPU
pipeline, source pixels) against what was put in; the GPU path runs on the CUDA stand-in (launch arguments by name)
and, marked ``gpu``, against the numpy reference on the real kernels.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx builds the layout graphs (test dependency)")
pytest.importorskip("onnxruntime", reason="onnxruntime is the CPU path")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from fake_cuda import FakeEngine, fake_cuda  # noqa: E402,F401  (fixture)
from gpu_support import requires_gpu  # noqa: E402
from vrt_ros.boxes.geometry import letterbox  # noqa: E402
from vrt_ros.boxes.postprocess import finish  # noqa: E402
from vrt_ros.errors import ModelError  # noqa: E402
from vrt_ros.heads import select_head  # noqa: E402
from vrt_ros.inference.pipeline import make_pipeline  # noqa: E402
from vrt_ros.settings import config  # noqa: E402
from vrt_ros.types import ImageSpec, InputSpec, PostprocessParams, TensorInfo  # noqa: E402

W = H = 640
N = 8400
SRC_W, SRC_H = 1280, 720  # letterbox: scale 0.5, pad_y 140 (centred)
YOLO = "Ultralytics YOLO26n model"
COCO80 = str({i: f"class{i}" for i in range(80)})


def meta(task: str, description: str = YOLO) -> dict[str, str]:
    return {"task": task, "description": description, "author": "Ultralytics", "stride": "32", "imgsz": "[640, 640]"}


#: export -> (outputs [(name, shape)], metadata, the head ``auto`` must pick)
EXPORTS = {
    "yolov8n / yolo11n / yolo26n one-to-many detect": ([("output0", (1, 84, N))], meta("detect"), "yolov8"),
    "yolov8n-seg / yolo11n-seg / yolo26n-seg one-to-many": (
        [("output0", (1, 116, N)), ("output1", (1, 32, 160, 160))], meta("segment"), "yolov8_seg"),
    "yolov8n-pose / yolo11n-pose one-to-many (1 class)": ([("output0", (1, 56, N))], meta("pose"), "yolov8_pose"),
    "yolo26n-pose one-to-many from its yaml (80 classes)": ([("output0", (1, 135, N))], meta("pose"), "yolov8_pose"),
    "yolov8n-obb / yolo11n-obb / yolo26n-obb one-to-many": ([("output0", (1, 85, N))], meta("obb"), "yolov8_obb"),
    "yolo26n end-to-end detect": ([("output0", (1, 300, 6))], meta("detect"), "end2end"),
    "yolo26n-seg end-to-end": ([("output0", (1, 300, 38)), ("output1", (1, 32, 160, 160))], meta("segment"),
                               "end2end_seg"),
    "yolo26n-pose end-to-end": ([("output0", (1, 300, 57))], meta("pose"), "end2end_pose"),
    "yolo26n-obb end-to-end": ([("output0", (1, 300, 7))], meta("obb"), "end2end_obb"),
    "rtdetr-l before 8.4": ([("output0", (1, 300, 84))], meta("detect", "Ultralytics RTDETR-l model"), "detr"),
    "rtdetr-l 8.4": ([("output0", (1, 300, 6))], {**meta("detect", "Ultralytics RTDETR-l model"), "names": COCO80},
                     "detr_topk"),
    "rtdetr 2-class before 8.4": ([("output0", (1, 300, 6))], {**meta("detect", "Ultralytics RTDETR-l model"),
                                                                "names": "{0: 'cat', 1: 'dog'}"}, "detr"),
}
#: Exports ``auto`` also picks from the shapes alone (no metadata): the end-to-end rows and the two-output layouts.
BY_SHAPE = {"end2end", "end2end_seg", "end2end_pose", "end2end_obb", "yolov8_seg", "yolov8"}


def layout_model(path: Path, outputs: dict[str, np.ndarray], metadata: dict[str, str]) -> Path:
    """An ONNX graph ``images`` [1, 3, H, W] float32 -> the named float32 outputs (fixed values, input consumed)."""
    nodes = [helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
             helper.make_node("Mul", ["m", "zero"], ["z"])]
    inits = [numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    outs = []
    for name, value in outputs.items():
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value, np.float32), f"{name}_value"))
        nodes.append(helper.make_node("Add", [f"{name}_value", "z"], [name]))
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)))
    graph = helper.make_graph(nodes, "export_layout", [helper.make_tensor_value_info(
        "images", TensorProto.FLOAT, [1, 3, H, W])], outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for k, v in metadata.items():
        p = model.metadata_props.add()
        p.key, p.value = k, v
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def cpu(model: Path, **params):
    values = config.validate({"backend": "cpu", "model.path": str(model), **params})
    return make_pipeline(values, log=lambda _m: None)


@pytest.mark.parametrize("export", sorted(EXPORTS))
def test_auto_picks_the_head_of_every_export(tmp_path, export):
    outs, metadata, head = EXPORTS[export]
    arrays = {n: np.zeros(s, np.float32) for n, s in outs}
    assert cpu(layout_model(tmp_path / "m.onnx", arrays, metadata)).head.name == head
    if head in BY_SHAPE:
        assert cpu(layout_model(tmp_path / "bare.onnx", arrays, {})).head.name == head


@pytest.mark.parametrize("outs", [
    [("output0", (1, 3549, 57))],  # [1, M, 57] with M the cells of 416x416: also a 52-class YOLOX
    [("output0", (1, 3549, 7))],  # also a 2-class YOLOX
])
def test_auto_refuses_an_end2end_row_count_that_is_also_a_yolox_grid(outs):
    infos = [TensorInfo(n, s) for n, s in outs]
    with pytest.raises(ModelError, match=r"ambiguous.*\[1,3549,"):
        select_head("auto", infos, InputSpec(416, 416))


def source_to_input(xy: np.ndarray) -> np.ndarray:
    """Source pixels of a 1280x720 frame -> 640x640 engine pixels (scale 0.5, centred: pad_y 140)."""
    return np.asarray(xy, np.float32) * 0.5 + np.array([0.0, 140.0], np.float32)


def rows(width: int, objects: list[np.ndarray]) -> np.ndarray:
    """A ``[1, 300, width]`` end-to-end output: the given rows first (ranked), the rest score 0."""
    out = np.zeros((1, 300, width), np.float32)
    for i, r in enumerate(objects):
        out[0, i, : len(r)] = r
    return out


def test_end2end_pose_keypoints_in_source_pixels(tmp_path):
    kp_src = np.stack([300 + 10 * np.arange(17), 200 + 5 * np.arange(17)], axis=1).astype(np.float32)
    kp = np.concatenate([source_to_input(kp_src), np.linspace(0.2, 0.9, 17, dtype=np.float32)[:, None]], axis=1)
    box = np.concatenate([source_to_input([[280, 180]]), source_to_input([[500, 320]])], axis=1)[0]
    person = np.concatenate([box, [0.9, 0.0], kp.ravel()])
    weak = np.concatenate([box + 5, [0.1, 0.0], kp.ravel()])
    model = layout_model(tmp_path / "p.onnx", {"output0": rows(57, [person, weak])}, meta("pose"))
    dets = cpu(model, score_threshold=0.25).process_bgr(np.zeros((SRC_H, SRC_W, 3), np.uint8))
    assert len(dets) == 1 and dets.class_ids.tolist() == [0]
    np.testing.assert_allclose(dets.boxes[0], [280, 180, 500, 320], atol=1e-3)
    np.testing.assert_allclose(dets.keypoints[0, :, :2], kp_src, atol=1e-3)
    np.testing.assert_allclose(dets.keypoints[0, :, 2], kp[:, 2], atol=1e-6)


def test_end2end_obb_angle_and_rectangle_without_nms(tmp_path):
    """Two overlapping oriented boxes both survive (no NMS); a raw OBB26 angle outside [-pi/4, 3pi/4) is the same
    rectangle in the published long-side form."""
    c = source_to_input([[640, 360]])[0]
    a = np.array([c[0], c[1], 200, 40, 0.8, 3, 0.3], np.float32)  # long side along 0.3 rad
    b = np.array([c[0] + 4, c[1], 40, 200, 0.7, 3, 0.3 + math.pi], np.float32)  # short side first, +pi: 0.3 + pi/2
    model = layout_model(tmp_path / "o.onnx", {"output0": rows(7, [a, b])}, meta("obb"))
    dets = cpu(model, score_threshold=0.25).process_bgr(np.zeros((SRC_H, SRC_W, 3), np.uint8))
    assert len(dets) == 2 and dets.class_ids.tolist() == [3, 3]
    sizes = np.stack([dets.boxes[:, 2] - dets.boxes[:, 0], dets.boxes[:, 3] - dets.boxes[:, 1]], axis=1)
    np.testing.assert_allclose(sizes, [[400, 80], [400, 80]], atol=1e-2)  # source pixels, long side first
    np.testing.assert_allclose(dets.theta, [0.3, 0.3 + math.pi / 2 - math.pi], atol=1e-5)
    np.testing.assert_allclose((dets.boxes[0, 0] + dets.boxes[0, 2]) / 2, 640, atol=1e-3)


def test_end2end_seg_masks_follow_their_rows(tmp_path):
    """Prototype 0 is +1 everywhere, coefficient 0 is +10 for the first object and -10 for the second: the first gets
    its box as its mask, the second none (its logits are negative)."""
    boxes_src = np.array([[100, 100, 300, 260], [700, 300, 900, 500]], np.float32)
    objs = []
    for i, (b, coef) in enumerate(zip(boxes_src, (10.0, -10.0))):
        box = np.concatenate([source_to_input(b[None, :2]), source_to_input(b[None, 2:])], axis=1)[0]
        coefs = np.zeros(32, np.float32)
        coefs[0] = coef
        objs.append(np.concatenate([box, [0.9 - 0.1 * i, 5.0 + i], coefs]))
    protos = np.zeros((1, 32, 160, 160), np.float32)
    protos[0, 0] = 1.0
    model = layout_model(tmp_path / "s.onnx", {"output0": rows(38, objs), "output1": protos}, meta("segment"))
    pipe = cpu(model)
    assert pipe.head.name == "end2end_seg"
    pipe.set_postprocess(PostprocessParams(score_threshold=0.25, want_masks=True))
    dets = pipe.process_bgr(np.zeros((SRC_H, SRC_W, 3), np.uint8))
    assert dets.class_ids.tolist() == [5, 6]
    np.testing.assert_allclose(dets.boxes, boxes_src, atol=1e-3)
    np.testing.assert_allclose(dets.extras[:, 0], [10.0, -10.0])
    mask = dets.label_mask
    assert mask is not None and mask.shape == (SRC_H, SRC_W)
    assert (mask[100:260, 100:300] == 1).all() and (mask == 1).sum() == 200 * 160
    assert not (mask == 2).any()


# ------------------------------------------------------------------------------ GPU path: the CUDA stand-in (CI)
E2E = {
    "end2end_seg": [TensorInfo("output0", (1, 300, 38)), TensorInfo("output1", (1, 32, 160, 160))],
    "end2end_pose": [TensorInfo("output0", (1, 300, 57))],
    "end2end_obb": [TensorInfo("output0", (1, 300, 7))],
    "detr_topk": [TensorInfo("output0", (1, 300, 6))],
}


@pytest.mark.parametrize("head, entry, args, extras, oriented", [
    ("end2end_seg", "decode_end2end_seg", {"rows": 300, "num_masks": 32}, 32, 0),
    ("end2end_pose", "decode_end2end_pose", {"rows": 300, "num_keypoints": 17}, 0, 0),
    ("end2end_obb", "decode_end2end_obb", {"rows": 300}, 1, 1),
    ("detr_topk", "decode_detr_topk", {"rows": 300, "input_w": 640, "input_h": 640}, 0, 0),
])
def test_end2end_heads_on_the_stand_in_rank_without_nms(fake_cuda, head, entry, args, extras, oriented):  # noqa: F811
    from test_gpu_heads import _frame, _named, _values
    from vrt_ros.inference.backends.cuda import CudaPipeline

    engine = FakeEngine([TensorInfo("images", (1, 3, H, W), "float32")], E2E[head])
    pipe = CudaPipeline(_values(head), log=lambda m: None, engine=engine)
    assert pipe.head.name == head and pipe._post.capacity == 300
    pipe.process(*_frame(1280, 720))
    dec = _named(fake_cuda, entry)
    assert dec["out"] == engine.enqueued[-1][1][0]
    assert {k: dec[k] for k in args} == args
    assert _named(fake_cuda, "nms_reduce")["apply_nms"] == 0
    assert not any(x.entry in ("nms_mask", "nms_mask_rotated") for x in fake_cuda.launches)
    if extras:
        fin = _named(fake_cuda, "finalize_extras")
        assert (fin["num_extras"], fin["oriented"]) == (extras, oriented)
    else:
        assert _named(fake_cuda, "finalize")["num_keypoints"] == pipe.head.num_keypoints
    assert fake_cuda.hazards == []
    pipe.close()


# ------------------------------------------------------------------------------ GPU path: real kernels (H200)
def random_rows(width: int, seed: int, k: int = 0) -> np.ndarray:
    """300 end-to-end rows: random boxes, scores falling from 0.99 (some below the thresholds), NaN rows."""
    rng = np.random.default_rng(seed)
    out = np.zeros((1, 300, width), np.float32)
    x1, y1 = rng.uniform(0, 560, 300), rng.uniform(0, 560, 300)
    out[0, :, 0], out[0, :, 1] = x1, y1
    out[0, :, 2], out[0, :, 3] = x1 + rng.uniform(4, 80, 300), y1 + rng.uniform(4, 80, 300)
    out[0, :, 4] = np.linspace(0.99, 0.01, 300)
    out[0, :, 5] = rng.integers(0, 80, 300)
    out[0, :, 6:] = rng.normal(0, 2, (300, width - 6))
    if k:
        out[0, :, 6::3] = rng.uniform(0, 640, (300, k))
        out[0, :, 7::3] = rng.uniform(0, 640, (300, k))
        out[0, :, 8::3] = rng.uniform(0, 1, (300, k))
    out[0, 3, 0] = np.nan
    out[0, 5, 5] = np.nan
    if width > 6:  # a field past the box, score and class (the plain [1, 300, 6] rows have none)
        out[0, 7, 6] = np.inf
    return out


@requires_gpu[0]
@requires_gpu[1]
@pytest.mark.parametrize("size", [(1920, 1080), (640, 480)], ids=str)
def test_end2end_heads_gpu_match_the_reference(size):
    from test_gpu_heads import _gpu_run, assert_masks, assert_same

    lb = letterbox(*size, W, H, "center")
    protos = np.random.default_rng(3).normal(0, 1, (1, 32, 160, 160)).astype(np.float32)
    cases = {
        "end2end_seg": [random_rows(38, 1), protos],
        "end2end_pose": [random_rows(57, 2, 17)],
        "end2end_obb": [random_rows(7, 3)],
        "detr_topk": [random_rows(6, 4) / np.array([640, 640, 640, 640, 1, 1], np.float32)],
    }
    for name, outputs in cases.items():
        head = select_head(name, E2E[name], InputSpec(W, H))
        params = PostprocessParams(score_threshold=0.3, max_detections=100, want_masks=head.has_masks)
        got = _gpu_run(head, outputs, lb, params)
        want = finish(head.decode(outputs, 0.3), lb, params, head.applies_nms, head.oriented)
        assert len(want) > 50
        assert_same(got, want, f"{name} {size}")
        if head.num_keypoints:
            np.testing.assert_allclose(got.keypoints, want.keypoints, atol=0.5)
        if head.has_masks:
            assert_masks(got.label_mask, head.label_mask(want, outputs, lb, params, np.uint8), len(want), name)


@requires_gpu[0]
@requires_gpu[1]
def test_multiclass_pose_gpu_matches_the_reference():
    """YOLO26-pose built from its yaml: [1, 135, 8400], 80 classes + 17 keypoints."""
    from test_gpu_heads import _gpu_run, assert_same

    rng = np.random.default_rng(9)
    out = np.zeros((1, 135, N), np.float32)
    out[0, :2] = rng.uniform(0, 640, (2, N))
    out[0, 2:4] = rng.uniform(4, 100, (2, N))
    out[0, 4:84] = rng.uniform(0, 1, (80, N)) ** 30
    out[0, 84:] = rng.uniform(0, 640, (51, N))
    out[0, 86::3] = rng.uniform(0, 1, (17, N))
    head = select_head("auto", [TensorInfo("output0", out.shape)], InputSpec(W, H), {"task": "pose"})
    assert head.name == "yolov8_pose" and head.num_classes == 80
    lb, params = letterbox(1280, 720, W, H, "center"), PostprocessParams(score_threshold=0.5)
    want = finish(head.decode([out], 0.5), lb, params, head.applies_nms)
    assert len(want) > 20 and len(set(want.class_ids.tolist())) > 5
    got = _gpu_run(head, [out], lb, params)
    assert_same(got, want, "yolo26 pose, 80 classes")
    np.testing.assert_allclose(got.keypoints, want.keypoints, atol=0.5)


def test_multiclass_pose_decodes_class_and_keypoints():
    """YOLO26-pose from its yaml, ``[1, 135, 8400]``: the best of 80 class scores, keypoints after the classes."""
    out = np.zeros((1, 135, N), np.float32)
    out[0, :4, 7] = [320, 320, 100, 200]
    out[0, 4 + 42, 7] = 0.9
    out[0, 4 + 3, 7] = 0.6
    out[0, 84::3, 7] = np.arange(17) * 10
    out[0, 85::3, 7] = 250
    out[0, 86::3, 7] = 0.5
    head = select_head("auto", [TensorInfo("output0", out.shape)], InputSpec(W, H), {"task": "pose"})
    assert (head.name, head.num_classes, head.num_keypoints) == ("yolov8_pose", 80, 17)
    cands = head.decode([out], 0.5)
    assert cands.class_ids.tolist() == [42] and cands.scores.tolist() == [pytest.approx(0.9)]
    np.testing.assert_allclose(cands.keypoints[0, :, 0], np.arange(17) * 10)
    np.testing.assert_allclose(cands.keypoints[0, :, 1:], [[250, 0.5]] * 17)
    # Without the task every [1, 4 + nc + 51, N] is also a detect layout: auto keeps yolov8 (README, "Model heads").
    assert select_head("auto", [TensorInfo("output0", (1, 135, N))], InputSpec(W, H)).name == "yolov8"


def test_rtdetr_topk_rows_in_source_pixels(tmp_path):
    """Ultralytics 8.4 RT-DETR: normalised cx, cy, w, h rows, stretched input: a 1280x720 frame maps back per axis."""
    r = np.array([[0.5, 0.25, 0.2, 0.1, 0.9, 17], [0.5, 0.25, 0.2, 0.1, 0.8, 3], [0.1, 0.1, 0.05, 0.05, 0.2, 1]],
                 np.float32)
    model = layout_model(tmp_path / "r.onnx", {"output0": rows(6, list(r))},
                         {**meta("detect", "Ultralytics RTDETR-l model"), "names": COCO80})
    pipe = cpu(model, score_threshold=0.25)
    assert pipe.head.name == "detr_topk" and pipe.input_spec.resize == "stretch"
    dets = pipe.process_bgr(np.zeros((SRC_H, SRC_W, 3), np.uint8))
    assert dets.class_ids.tolist() == [17, 3]  # the same query twice with two classes, no NMS
    np.testing.assert_allclose(dets.boxes, [[512, 144, 768, 216]] * 2, atol=1e-3)
    np.testing.assert_allclose(dets.scores, [0.9, 0.8], atol=1e-6)


@pytest.mark.parametrize("export", sorted(EXPORTS))
def test_metadata_read_without_onnx_matches_onnxruntime(tmp_path, export):
    """vrt_ros.model.model_file.onnx_metadata (no onnx import, the graph skipped) reads what ONNX Runtime reads."""
    import onnxruntime as ort

    from vrt_ros.model.model_file import onnx_metadata

    outs, metadata, _ = EXPORTS[export]
    path = layout_model(tmp_path / "m.onnx", {n: np.zeros(s, np.float32) for n, s in outs}, metadata)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert onnx_metadata(path) == dict(sess.get_modelmeta().custom_metadata_map) == metadata
    assert onnx_metadata(tmp_path / "missing.onnx") == {}


@pytest.mark.parametrize("export, head", [("yolov8n-obb / yolov8n-obb", "yolov8_obb"), ("rtdetr-l 8.4", "detr_topk"),
                                          ("yolo26n-pose one-to-many from its yaml (80 classes)", "yolov8_pose")])
def test_gpu_path_auto_reads_the_model_metadata(tmp_path, fake_cuda, export, head):  # noqa: F811
    """The GPU engines carry no metadata: the CUDA pipeline reads it from the ONNX file, so auto picks as on the CPU."""
    from test_gpu_heads import _values
    from vrt_ros.inference.backends.cuda import CudaPipeline

    export = "yolov8n-obb / yolo11n-obb / yolo26n-obb one-to-many" if export.startswith("yolov8n-obb") else export
    outs, metadata, want = EXPORTS[export]
    assert want == head
    path = layout_model(tmp_path / "m.onnx", {n: np.zeros(s, np.float32) for n, s in outs}, metadata)
    values = {**_values("auto"), "model.path": str(path)}
    engine = FakeEngine([TensorInfo("images", (1, 3, H, W), "float32")], [TensorInfo(n, s) for n, s in outs])
    pipe = CudaPipeline(values, log=lambda m: None, engine=engine)
    assert pipe.head.name == head
    pipe.close()
