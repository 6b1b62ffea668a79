"""CPU reference preprocessing: same engine input for every encoding and row padding; geometry round trips."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vrt_ros.boxes.geometry import letterbox, to_input, to_source
from vrt_ros.intake import frames
from vrt_ros.intake.preprocess import CpuPreprocessor
from vrt_ros.types import InputSpec

from test_frames import pack

YOLOX = InputSpec(416, 416, "bgr", (0, 0, 0), (1, 1, 1), 114.0, "top_left")
V8 = InputSpec(640, 384, "rgb", (0, 0, 0), (255, 255, 255), 114.0, "center")


@pytest.fixture(scope="module")
def horses(shared_dir):
    img = cv2.imread(str(shared_dir / "data/images/darknet_horses.jpg"), cv2.IMREAD_COLOR)
    assert img is not None
    return img


def test_unresized_frame_gives_ultralytics_tensor_bit_for_bit():
    """A 640x640 frame (letterbox the identity) gives exactly Ultralytics' input, ``im[..., ::-1] ... / 255`` in
    float32 (``ultralytics/engine/predictor.py::preprocess``): std divides, as there (x * (1 / 255) is 1 ulp off for
    126 of the 256 values, which a random-weight RT-DETR turned into 1.7e-3 of score in issue 36's parity run)."""
    bgr = np.arange(640 * 640 * 3, dtype=np.uint32).reshape(640, 640, 3).astype(np.uint8)  # every value, many times
    tensor, _ = CpuPreprocessor(InputSpec(640, 640, "rgb", (0, 0, 0), (255, 255, 255), 114.0, "center"))(bgr)
    want = np.ascontiguousarray(bgr[..., ::-1].transpose(2, 0, 1)).astype(np.float32) / np.float32(255)
    assert tensor.dtype == np.float32 and np.array_equal(tensor[0], want)


@pytest.mark.parametrize("spec", [YOLOX, V8])
def test_same_engine_input_for_every_colour_encoding_and_padding(horses, spec):
    pre = CpuPreprocessor(spec)
    ref = pre(frames.to_bgr(*pack(horses, "bgr8")))[0].copy()
    for enc, step_extra in (("rgb8", 0), ("bgra8", 0), ("rgba8", 0), ("bgr8", 1), ("bgr8", 125)):
        w = horses.shape[1] * (4 if "a" in enc else 3)
        img = frames.to_bgr(*pack(horses, enc, step=w + step_extra))
        assert np.array_equal(pre(img)[0], ref), enc


def test_mono8_gives_grey_replicated(horses):
    pre = CpuPreprocessor(YOLOX)
    grey = horses[..., 1]
    got = pre(frames.to_bgr(*pack(horses, "mono8")))[0].copy()
    want = pre(np.repeat(grey[..., None], 3, axis=2))[0]
    assert np.array_equal(got, want)
    assert np.array_equal(got[0, 0], got[0, 2])


def test_letterbox_layout_and_pad(horses):
    h, w = horses.shape[:2]
    t, lb = CpuPreprocessor(V8)(horses)
    assert t.shape == (1, 3, 384, 640) and t.dtype == np.float32
    assert lb.resized_width <= 640 and lb.resized_height <= 384
    assert max(abs(lb.resized_width - w * min(640 / w, 384 / h)), abs(lb.resized_height - h * min(640 / w, 384 / h))) <= 0.5
    # padding columns hold pad/std, content is the resized image in RGB order scaled by 1/255
    if lb.pad_x:
        assert np.allclose(t[0, :, :, : lb.pad_x], 114 / 255)
    resized = cv2.resize(horses.astype(np.float32), (lb.resized_width, lb.resized_height))
    content = t[0, :, lb.pad_y : lb.pad_y + lb.resized_height, lb.pad_x : lb.pad_x + lb.resized_width]
    assert np.allclose(content[0] * 255, resized[..., 2], atol=1e-3)


@pytest.mark.parametrize("src", [(1280, 720), (720, 1280), (640, 640), (641, 481), (100, 1000), (1, 1)])
@pytest.mark.parametrize("dst", [(640, 640), (640, 384), (416, 416)])
@pytest.mark.parametrize("align", ["top_left", "center"])
def test_geometry_round_trip(src, dst, align):
    lb = letterbox(*src, *dst, align)
    assert 1 <= lb.resized_width <= dst[0] and 1 <= lb.resized_height <= dst[1]
    assert lb.pad_x + lb.resized_width <= dst[0] and lb.pad_y + lb.resized_height <= dst[1]
    pts = np.array([[0, 0, src[0], src[1]], [src[0] / 3, src[1] / 7, src[0] / 2, src[1] / 2]], np.float32)
    fwd = to_input(pts.copy(), lb)
    assert fwd[0, 0] == pytest.approx(lb.pad_x) and fwd[0, 2] == pytest.approx(lb.pad_x + lb.resized_width, abs=1e-3)
    assert np.allclose(to_source(fwd, lb), pts, atol=1e-3)
