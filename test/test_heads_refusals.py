"""A wrong head or labels file is refused at start-up, never silently wrong (issue 34).

Every (head, model layout) pair is tried as a new user would: each head named explicitly on every layout the
project decodes. A pair is accepted only when the layout is the head's own or when the two layouts have the same
shapes (listed in :data:`SHAPE_TWINS`, where only the model's metadata or the user can tell them apart); every
other pair must raise :class:`ModelError` naming the shapes seen. Then the real YOLOX-nano model with every wrong
head, the YOLO-NAS / DAMO-YOLO per-anchor pair under ``auto``, and labels files with the wrong number of names.
"""

from __future__ import annotations

import pytest

from vrt_ros.errors import ConfigError, ModelError
from vrt_ros.heads import HEADS, select_head
from vrt_ros.heads.base import grid_cells
from vrt_ros.model.labels import check_label_count
from vrt_ros.settings import config
from vrt_ros.types import InputSpec, TensorInfo

STRIDES = (8, 16, 32)


def layouts(w: int, h: int) -> dict[str, list[TensorInfo]]:
    """One engine-output list per layout the heads decode, for a ``w`` x ``h`` engine input (names as exported)."""
    n = grid_cells(w, h, STRIDES)
    return {
        "yolox": [TensorInfo("output", (1, n, 85))],
        "yolov8": [TensorInfo("output0", (1, 84, n))],
        "yolov8_pose": [TensorInfo("output0", (1, 56, n))],
        "yolov8_seg": [TensorInfo("output0", (1, 116, n)), TensorInfo("output1", (1, 32, h // 4, w // 4))],
        "yolov8_obb": [TensorInfo("output0", (1, 20, n))],
        "centerface": [TensorInfo(str(537 + i), (1, c, h // 4, w // 4)) for i, c in enumerate((1, 2, 2, 10))],
        "end2end": [TensorInfo("output0", (1, 300, 6))],
        "end2end_seg": [TensorInfo("output0", (1, 300, 38)), TensorInfo("output1", (1, 32, h // 4, w // 4))],
        "end2end_pose": [TensorInfo("output0", (1, 300, 57))],
        "end2end_obb": [TensorInfo("output0", (1, 300, 7))],
        "detr_topk": [TensorInfo("output0", (1, 300, 6))],  # Ultralytics 8.4 RT-DETR: end2end's shape
        "detr": [TensorInfo("pred_logits", (1, 300, 80)), TensorInfo("pred_boxes", (1, 300, 4))],
        "detr_single": [TensorInfo("output0", (1, 300, 84))],  # Ultralytics RT-DETR
    }


#: The layout key whose own head it is (``detr_single`` is the ``detr`` head's second layout).
OWNER = {"detr_single": "detr"}

#: (head, layout) pairs with identical shapes: a 56-channel detect output is 52 classes or 17 keypoints, a
#: 20-channel one 16 classes, 15 classes + angle or 5 keypoints, an 84-channel one 80 classes or a 29-class pose
#: (17 keypoints), ``[1, 300, 6 / 7 / 57]`` an end-to-end row or a 2 / 3 / 53-class RT-DETR, ``[1, 300, 84]`` an
#: RT-DETR or an end-to-end pose with 26 keypoints; ``[1, 300, 6]`` is also Ultralytics 8.4 RT-DETR's ranked rows. ``auto`` settles them with Ultralytics' ``task`` / ``description`` metadata or refuses them as ambiguous
#: (test_heads.py); a named head takes the user's word.
SHAPE_TWINS = {
    ("yolov8", "yolov8_pose"), ("yolov8", "yolov8_obb"), ("yolov8_obb", "yolov8"), ("yolov8_obb", "yolov8_pose"),
    ("yolov8_pose", "yolov8_obb"), ("yolov8_pose", "yolov8"), ("detr", "end2end"), ("detr", "end2end_pose"),
    ("detr", "end2end_obb"), ("end2end_pose", "detr_single"), ("end2end", "detr_topk"), ("detr_topk", "end2end"),
    ("detr", "detr_topk"),
}

SIZES = [(416, 416), (640, 640), (800, 480)]


def pairs():
    for size in SIZES:
        for layout in layouts(*size):
            for head in sorted(HEADS):
                yield pytest.param(head, layout, size, id=f"{head}-on-{layout}-{size[0]}x{size[1]}")


@pytest.mark.parametrize("head, layout, size", list(pairs()))
def test_every_wrong_head_is_refused_naming_the_shapes(head, layout, size):
    outs = layouts(*size)[layout]
    spec = InputSpec(*size)
    if OWNER.get(layout, layout) == head or (head, layout) in SHAPE_TWINS:
        assert select_head(head, outs, spec).name == head
        return
    with pytest.raises(ModelError) as err:
        select_head(head, outs, spec)
    msg = str(err.value)
    assert repr(head) in msg and "expected" in msg
    for o in outs:
        assert f"{o.name!r}[{','.join(map(str, o.shape))}]" in msg


def test_yolov8_family_refuses_an_anchor_count_that_is_not_the_cell_count():
    """The YOLOX-nano output ``[1, 3549, 85]`` read channels first has N = 85 anchors: every head of the family says
    which N it expected; a dynamic N is still checked per frame."""
    spec = InputSpec(416, 416)
    for head in ("yolov8", "yolov8_obb", "yolov8_pose"):
        with pytest.raises(ModelError, match=r"N = 3549 .*got N = 85"):
            select_head(head, [TensorInfo("output", (1, 3549 if head != "yolov8_pose" else 3548, 85))], spec)
    assert select_head("yolov8_obb", [TensorInfo("output0", (1, 20, -1))], spec).num_classes == 15


@pytest.mark.parametrize("names", [("bboxes", "scores"), ("boxes", "scores"), ("pre_nms_scores", "pre_nms_boxes")])
@pytest.mark.parametrize("size", [(640, 640), (416, 416)], ids=str)
def test_auto_refuses_a_per_anchor_box_and_score_pair(names, size):
    """YOLO-NAS / DAMO-YOLO ``[1, N, 4]`` + ``[1, N, 80]`` (N the cell count) was taken for DETR: 80 full-image
    boxes a frame. ``auto`` and ``detr`` refuse it with the shapes; the same pair with DETR's 300 queries is DETR."""
    w, h = size
    n = grid_cells(w, h, STRIDES)
    outs = [TensorInfo(names[0], (1, n, 4 if "box" in names[0] else 80)),
            TensorInfo(names[1], (1, n, 4 if "box" in names[1] else 80))]
    spec = InputSpec(w, h)
    with pytest.raises(ModelError) as err:
        select_head("auto", outs, spec)
    msg = str(err.value)
    assert "YOLO-NAS" in msg and f"[1,{n},4]" in msg and f"[1,{n},80]" in msg
    with pytest.raises(ModelError, match="one box per anchor"):
        select_head("detr", outs, spec)
    detr = [TensorInfo(o.name, (1, 300, o.shape[2])) for o in outs]
    assert select_head("auto", detr, spec).name == "detr"


@pytest.fixture(scope="module")
def yolox_nano(shared_dir):
    path = shared_dir / "models" / "yolox_nano.onnx"
    if not path.exists():
        pytest.skip(f"{path} not in the shared data")
    return path


def test_real_yolox_nano_with_every_wrong_head_is_refused_at_start_up(yolox_nano):
    """``model.head: yolov8_obb`` on YOLOX-nano started and published 0 detections on every frame."""
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    from vrt_ros.inference.pipeline import make_pipeline

    assert make_pipeline(config.validate({"backend": "cpu", "model.path": str(yolox_nano)}),
                         log=lambda _m: None).head.name == "yolox"
    for head in sorted(set(HEADS) - {"yolox"}):
        values = config.validate({"backend": "cpu", "model.path": str(yolox_nano), "model.head": head})
        with pytest.raises(ModelError, match=r"\[1,3549,85\]") as err:
            make_pipeline(values, log=lambda _m: None)
        assert repr(head) in str(err.value)


def test_labels_count_must_be_the_model_class_count():
    warned: list[str] = []
    names = tuple(f"c{i}" for i in range(5))
    with pytest.raises(ConfigError) as err:
        check_label_count(names, 80, "five.names", "yolox", warned.append)
    msg = str(err.value)
    assert "model.labels" in msg and "five.names" in msg and "5 names" in msg and "80 classes" in msg
    check_label_count(tuple(f"c{i}" for i in range(80)), 80, "coco80.names", "yolox", warned.append)
    check_label_count((), 80, "", "yolox", warned.append)
    assert warned == []
    check_label_count(names, None, "five.names", "end2end", warned.append)
    assert len(warned) == 1 and "five.names" in warned[0] and "not checked" in warned[0] and "end2end" in warned[0]


@pytest.mark.parametrize("head, outs, count", [
    ("yolox", [TensorInfo("output", (1, 3549, 85))], 80),
    ("yolov8_pose", [TensorInfo("output0", (1, 56, 3549))], 1),
    ("yolov8_obb", [TensorInfo("output0", (1, 20, 3549))], 15),
    ("yolov8_seg", [TensorInfo("output0", (1, 116, 3549)), TensorInfo("output1", (1, 32, 104, 104))], 80),
    ("detr", [TensorInfo("pred_logits", (1, 300, 91)), TensorInfo("pred_boxes", (1, 300, 4))], 91),
    ("end2end", [TensorInfo("output0", (1, 300, 6))], None),
])
def test_label_count_of_each_head(head, outs, count):
    h = select_head(head, outs, InputSpec(416, 416))
    assert h.label_count == count
    if head == "detr":
        h.set_score_activation("softmax")  # the last class is "no object"
        assert h.label_count == count - 1


def test_node_refuses_five_names_for_the_80_class_model(yolox_nano, tmp_path):
    """The node's configure step: a 5-name labels file on the 80-class YOLOX-nano fails naming both counts (it was
    accepted, and class 7 published as ``7``); the right file starts."""
    pytest.importorskip("rclpy", reason="rclpy not installed")
    pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable")
    from rclpy.parameter import Parameter

    from ros_testing import private_context
    from vrt_ros.ros.node import DetectorNode

    five = tmp_path / "five.names"
    five.write_text("".join(f"thing{i}\n" for i in range(5)))
    eighty = tmp_path / "eighty.names"
    eighty.write_text("".join(f"thing{i}\n" for i in range(80)))

    def params(labels):
        return [Parameter("backend", value="cpu"), Parameter("model.path", value=str(yolox_nano)),
                Parameter("model.labels", value=str(labels))]

    with private_context() as ctx:
        with pytest.raises(ConfigError, match=r"five\.names has 5 names but the model scores 80 classes"):
            DetectorNode(context=ctx, parameter_overrides=params(five))
        node = DetectorNode(context=ctx, parameter_overrides=params(eighty))
        node.destroy_node()
