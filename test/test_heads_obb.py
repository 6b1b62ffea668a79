"""yolov8_obb: the layout, probabilistic IoU and rotated NMS against hand values, the theta convention, and HC-21
on a synthetic oriented-box model that measures a drawn bar's orientation from its image moments."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from synthetic_heads import moment_obb
from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.postprocess import finish
from vrt_ros.boxes.rotated import canonical, corners, probiou, rotated_nms
from vrt_ros.errors import ConfigError, ModelError
from vrt_ros.heads import select_head
from vrt_ros.heads.base import grid_cells
from vrt_ros.heads.yolov8 import STRIDES
from vrt_ros.inference.backends.cpu import CpuPipeline
from vrt_ros.settings import config
from vrt_ros.types import InputSpec, PostprocessParams, TensorInfo

N = grid_cells(640, 640, STRIDES)


def _bar(width: int, height: int, cx: float, cy: float, length: float, thick: float, theta: float) -> np.ndarray:
    img = np.zeros((height, width, 3), np.uint8)
    pts = corners(cx, cy, length, thick, theta)
    cv2.fillPoly(img, [np.round(pts * 16).astype(np.int32)], (255, 255, 255), lineType=cv2.LINE_AA, shift=4)
    return img


def test_canonical_keeps_the_rectangle_and_puts_the_long_side_first():
    w, h, t = canonical(np.array([10.0, 4.0, 10.0]), np.array([4.0, 10.0, 4.0]), np.array([0.3, 0.3 - math.pi / 2, 3.0]))
    np.testing.assert_allclose(w, 10.0)
    np.testing.assert_allclose(h, 4.0)
    np.testing.assert_allclose(t[:2], [0.3, 0.3], atol=1e-6)
    assert -math.pi / 2 <= t[2] < math.pi / 2 and abs(t[2] - (3.0 - math.pi)) < 1e-6
    for (a, b, ang), (a2, b2, ang2) in zip([(10, 4, 0.3), (4, 10, 0.3 - math.pi / 2), (10, 4, 3.0)], zip(w, h, t)):
        p, q = corners(0, 0, a, b, ang), corners(0, 0, a2, b2, ang2)
        assert min(np.abs(np.roll(q, k, axis=0) - p).max() for k in range(4)) < 1e-4  # the same four corners


def test_probiou_matches_hand_values():
    box = np.array([50.0, 50.0, 20.0, 10.0, 0.4])
    assert probiou(box, box[None])[0] == pytest.approx(1.0, abs=1e-3)
    # the same box with w/h swapped and the angle turned 90 degrees is the same Gaussian
    assert probiou(box, np.array([[50, 50, 10, 20, 0.4 + math.pi / 2]]))[0] == pytest.approx(1.0, abs=1e-3)
    far = probiou(box, np.array([[500, 500, 20, 10, 0.4]]))[0]
    assert far < 1e-3
    # two axis-aligned equal squares offset by half a side: Bhattacharyya distance = (d^2 / 8) / (s^2 / 12)
    s, d = 12.0, 6.0
    bd = (d * d / 8.0) / (s * s / 12.0)
    want = 1 - math.sqrt(1 - math.exp(-bd) + 1e-7)
    assert probiou(np.array([0, 0, s, s, 0.0]), np.array([[d, 0, s, s, 0.0]]))[0] == pytest.approx(want, abs=1e-4)


def test_rotated_nms_is_greedy_per_class():
    boxes = np.array([[50, 50, 40, 8, 0.5], [51, 50, 40, 8, 0.52], [50, 50, 40, 8, 0.5 + math.pi / 2],
                      [200, 200, 30, 30, 0.0], [50, 50, 40, 8, 0.5]], np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.95], np.float32)
    classes = np.array([0, 0, 0, 0, 1])
    np.testing.assert_array_equal(rotated_nms(boxes, scores, 0.5, classes), [4, 0, 2, 3])
    np.testing.assert_array_equal(rotated_nms(boxes, scores, 0.5), [4, 2, 3])


def test_obb_decode_and_finish_map_to_source_with_theta():
    out = np.zeros((1, 4 + 2 + 1, N), np.float32)
    out[0, :, 7] = [320, 320, 100, 20, 0.0, 0.9, 2.0]  # class 1, angle 2.0 rad (in Ultralytics' [-pi/4, 3pi/4))
    head = select_head("yolov8_obb", [TensorInfo("output0", out.shape)], InputSpec(640, 640))
    assert head.num_classes == 2 and head.oriented
    lb = letterbox(1280, 720, 640, 640, "center")
    dets = finish(head.decode([out], 0.25), lb, PostprocessParams(), head.applies_nms, head.oriented)
    assert len(dets) == 1 and dets.class_ids[0] == 1
    cx, cy = (dets.boxes[0, 0] + dets.boxes[0, 2]) / 2, (dets.boxes[0, 1] + dets.boxes[0, 3]) / 2
    assert (cx, cy) == pytest.approx((640.0, 360.0), abs=0.01)
    assert dets.boxes[0, 2] - dets.boxes[0, 0] == pytest.approx(200.0, abs=0.01)  # long side, source pixels
    assert dets.theta[0] == pytest.approx(2.0 - math.pi, abs=1e-5)


def test_auto_picks_obb_only_with_its_task_metadata():
    outs = [TensorInfo("output0", (1, 20, N))]
    assert select_head("auto", outs, InputSpec(640, 640), {"task": "obb"}).name == "yolov8_obb"
    assert select_head("auto", outs, InputSpec(640, 640)).name == "yolov8"


def test_obb_refuses_the_stretch_resize(tmp_path):
    model = moment_obb(tmp_path / "obb.onnx", 640, 640, N)
    with pytest.raises(ConfigError, match="model.resize 'stretch'.*yolov8_obb"):
        CpuPipeline(config.validate({**config.defaults(), "model.path": str(model), "backend": "cpu",
                                     "model.head": "yolov8_obb", "model.resize": "stretch"}))
    with pytest.raises(ConfigError, match="model.score_activation 'sigmoid'.*yolov8_obb"):
        CpuPipeline(config.validate({**config.defaults(), "model.path": str(model), "backend": "cpu",
                                     "model.head": "yolov8_obb", "model.score_activation": "sigmoid"}))


def test_HC_21_thin_box_rotated_through_minus_90_to_90(tmp_path):
    """The same thin bar turned from -90 to +90 degrees over consecutive frames: theta stays in [-pi/2, pi/2),
    follows the bar continuously (wrapping only at the range's edge), size_x is always the long side, and the
    published rectangle's corners are the drawn bar's corners (the model swaps w/h below -45 degrees as Ultralytics
    does, and the published box is still the same physical rectangle)."""
    model = moment_obb(tmp_path / "obb.onnx", 640, 640, N)
    pipe = CpuPipeline(config.validate({**config.defaults(), "model.path": str(model), "backend": "cpu",
                                        "model.head": "yolov8_obb", "model.pad_value": 0.0}))
    pipe.set_postprocess(PostprocessParams(score_threshold=0.5))
    w, h, cx, cy, length, thick = 960, 720, 470.0, 350.0, 400.0, 40.0
    thetas, swapped_raw = [], 0
    for deg in range(-90, 91, 5):
        t = math.radians(deg)
        dets = pipe.process_bgr(_bar(w, h, cx, cy, length, thick, t))
        assert len(dets) == 1 and dets.theta is not None
        th = float(dets.theta[0])
        assert -math.pi / 2 <= th < math.pi / 2
        bw, bh = dets.boxes[0, 2] - dets.boxes[0, 0], dets.boxes[0, 3] - dets.boxes[0, 1]
        assert bw >= bh and bw == pytest.approx(length, rel=0.03) and bh == pytest.approx(thick, rel=0.1)
        got = corners((dets.boxes[0, 0] + dets.boxes[0, 2]) / 2, (dets.boxes[0, 1] + dets.boxes[0, 3]) / 2, bw, bh, th)
        want = corners(cx, cy, length, thick, t)
        assert min(np.abs(np.roll(got, k, axis=0) - want).max() for k in range(4)) < 3.0, deg
        swapped_raw += deg < -45
        thetas.append(th)
    assert swapped_raw > 0
    steps = np.diff(thetas)
    wraps = np.abs(steps) > math.radians(45)
    assert wraps.sum() <= 1  # -90 and +90 are the same rectangle: at most one wrap, at the range's edge
    assert np.allclose(steps[~wraps], math.radians(5), atol=math.radians(1))
