"""The CPU pipeline end to end: real YOLOX on real photos, box positions (HC-07), bad models (HC-09),
FP16 input and NaN outputs (HC-10), empty and exact results (HC-11)."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is the CPU engine; installed by `make test`")
pytest.importorskip("onnx", reason="onnx builds the synthetic models; installed by `make test`")

from vrt_ros.errors import ConfigError, ModelError
from vrt_ros.inference.pipeline import make_pipeline
from vrt_ros.model.labels import class_name, load_labels
from vrt_ros.settings import config
from vrt_ros.types import ImageSpec, PostprocessParams

from synthetic_models import blob_end2end, constant_yolov8, ramp_rectangle


def values(**kw):
    """Validated parameter values with dotted names passed as keyword arguments using '__' for '.'."""
    return config.validate({k.replace("__", "."): v for k, v in kw.items()})


def quiet(_msg: str) -> None:
    pass


def cpu(path, **kw):
    return make_pipeline(values(backend="cpu", model__path=str(path), **kw), log=quiet)


# --- real model, real photos -------------------------------------------------------------------------------

EXPECTED = {  # ../shared/models/SOURCES.md, score >= 0.35
    "darknet_dog.jpg": {"dog", "bicycle", "car"},
    "darknet_horses.jpg": {"horse"},
    "darknet_giraffe.jpg": {"giraffe", "zebra"},
    "astronaut.png": {"person"},
    "coffee.png": {"cup"},
}


@pytest.fixture(scope="module")
def yolox(shared_dir):
    return cpu(shared_dir / "models/yolox_nano.onnx", model__labels=str(shared_dir / "models/coco80.names"))


@pytest.mark.parametrize("photo", sorted(EXPECTED))
def test_yolox_finds_expected_classes(shared_dir, yolox, photo):
    labels = load_labels(shared_dir / "models/coco80.names")
    img = cv2.imread(str(shared_dir / "data/images" / photo), cv2.IMREAD_COLOR)
    dets = yolox.process_bgr(img)
    found = {class_name(labels, int(c)) for c in dets.class_ids}
    assert EXPECTED[photo] <= found, f"{photo}: found {found}"
    h, w = img.shape[:2]
    assert (dets.boxes[:, 0] >= 0).all() and (dets.boxes[:, 2] <= w).all() and (dets.boxes[:, 3] <= h).all()
    assert (dets.boxes[:, 2] > dets.boxes[:, 0]).all() and (dets.scores >= 0.35).all()
    if photo == "darknet_horses.jpg":
        assert (dets.class_ids == labels.index("horse")).sum() >= 3


def test_raw_and_decoded_paths_agree(shared_dir, yolox):
    img = cv2.imread(str(shared_dir / "data/images/darknet_dog.jpg"), cv2.IMREAD_COLOR)
    h, w = img.shape[:2]
    a = yolox.process_bgr(img)
    rgba = np.concatenate([img[..., ::-1], np.zeros((h, w, 1), np.uint8)], axis=2)
    b = yolox.process(ImageSpec(w, h, "rgba8", w * 4), np.ascontiguousarray(rgba).tobytes())
    assert np.array_equal(a.class_ids, b.class_ids) and np.allclose(a.boxes, b.boxes) and np.allclose(a.scores, b.scores)


def test_HC_11_exactly_one_and_three_objects(shared_dir, yolox):
    labels = load_labels(shared_dir / "models/coco80.names")
    for photo, n in (("astronaut.png", 1), ("darknet_dog.jpg", 3)):
        dets = yolox.process_bgr(cv2.imread(str(shared_dir / "data/images" / photo), cv2.IMREAD_COLOR))
        assert len(dets) == n, [class_name(labels, int(c)) for c in dets.class_ids]
        assert ((dets.boxes[:, 2] - dets.boxes[:, 0]) > 0).all() and ((dets.boxes[:, 3] - dets.boxes[:, 1]) > 0).all()


def test_HC_11_black_frame_threshold_and_max_detections(shared_dir, yolox):
    black = np.zeros((480, 640, 3), np.uint8)
    assert len(yolox.process_bgr(black)) == 0
    horses = cv2.imread(str(shared_dir / "data/images/darknet_horses.jpg"), cv2.IMREAD_COLOR)
    try:
        yolox.set_postprocess(PostprocessParams(score_threshold=1.01))
        assert len(yolox.process_bgr(horses)) == 0
        yolox.set_postprocess(PostprocessParams(score_threshold=0.05, max_detections=2))
        assert len(yolox.process_bgr(horses)) == 2
    finally:
        yolox.set_postprocess(PostprocessParams())


# --- synthetic models: positions, precision, NaN ------------------------------------------------------------

@pytest.mark.parametrize("engine", [(640, 640), (640, 384)])
@pytest.mark.parametrize("src", [(1280, 720), (720, 1280), (640, 640), (641, 481), (100, 1000)])
def test_HC_07_box_in_source_pixels(tmp_path, engine, src):
    w, h = src
    x1, y1, x2, y2 = w * 0.31, h * 0.42, w * 0.63, h * 0.77
    img = ramp_rectangle(w, h, (x1, y1, x2, y2))
    for align in ("center", "top_left"):
        # pad 0: the blob model's profiles take a max across the padding too
        pipe = cpu(blob_end2end(tmp_path / "blob.onnx", *engine), model__align=align, model__pad_value=0.0)
        dets = pipe.process(ImageSpec(w, h, "bgr8", w * 3), img.tobytes())
        assert len(dets) == 1
        assert np.abs(dets.boxes[0] - [x1, y1, x2, y2]).max() <= 1.0, (align, dets.boxes[0], (x1, y1, x2, y2))


def test_HC_10_fp16_input_same_detections(tmp_path):
    img = ramp_rectangle(640, 480, (200.0, 100.0, 450.0, 300.0))
    a = cpu(blob_end2end(tmp_path / "f32.onnx", 640, 640)).process_bgr(img)
    b = cpu(blob_end2end(tmp_path / "f16.onnx", 640, 640, fp16=True)).process_bgr(img)
    assert len(a) == len(b) == 1
    assert np.abs(a.boxes - b.boxes).max() <= 1.0


def test_HC_10_nan_and_inf_rows_never_published(tmp_path):
    n, nc = 8, 3
    out = np.zeros((1, 4 + nc, n), np.float32)
    out[0, :4] = np.array([[100, 100, 50, 40]] * n).T + np.arange(n) * 60  # cx, cy, w, h apart
    out[0, 4, :] = 0.9
    out[0, 0, 1] = np.nan
    out[0, 2, 2] = np.inf
    out[0, 4, 3] = np.nan
    out[0, 5, 4] = np.inf
    out[0, 1, 5] = -np.inf
    pipe = cpu(constant_yolov8(tmp_path / "nan.onnx", 640, 640, out), model__head="yolov8")
    dets = pipe.process_bgr(np.full((640, 640, 3), 50, np.uint8))
    assert np.isfinite(dets.boxes).all() and np.isfinite(dets.scores).all()
    assert 1 <= len(dets) <= n - 4


# --- start-up errors (HC-09) ------------------------------------------------------------------------------

def _bad_models(tmp_path, shared_dir):
    rnd = tmp_path / "random.onnx"
    rnd.write_bytes(np.random.default_rng(3).integers(0, 256, 1024, dtype=np.uint8).tobytes())
    half = tmp_path / "half.onnx"
    data = (shared_dir / "models/yolox_nano.onnx").read_bytes()
    half.write_bytes(data[: len(data) // 2])
    wrong = tmp_path / "model.onnx"
    wrong.write_bytes((shared_dir / "data/images/darknet_dog.jpg").read_bytes())
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    return [tmp_path / "missing.onnx", rnd, half, wrong, empty]


def test_HC_09_bad_model_files_fail_fast_with_the_path(tmp_path, shared_dir):
    for path in _bad_models(tmp_path, shared_dir):
        with pytest.raises(ModelError) as e:
            cpu(path)
        msg = str(e.value)
        assert str(path) in msg, msg
        assert "model.path" in msg or "re-export" in msg or "expected" in msg, msg


def test_HC_09_engine_file_on_cpu_and_empty_path(tmp_path):
    garbage = tmp_path / "model.engine"  # judged by content (issue 15): random bytes are neither format
    garbage.write_bytes(b"\xff\x00" + os.urandom(1022))
    with pytest.raises(ModelError, match="neither an ONNX model nor a TensorRT engine"):
        cpu(garbage)
    plan = tmp_path / "plan.onnx"  # a TensorRT plan, whatever its name, is refused on the CPU path
    plan.write_bytes(b"ftrt" + os.urandom(1020))
    with pytest.raises(ModelError, match="is a TensorRT engine: it needs backend 'cuda'"):
        cpu(plan)
    with pytest.raises(ModelError, match="model.path"):
        make_pipeline(values(backend="cpu"), log=quiet)


def test_dynamic_input_needs_size(tmp_path):
    path = blob_end2end(tmp_path / "blob.onnx", 320, 320)
    with pytest.raises(ConfigError, match="model.input_width"):
        cpu(path, model__input_width=640)


def test_named_head_that_does_not_fit_fails_at_start_up(shared_dir):
    # YOLOX's [1, 3549, 85] must not be decoded as a yolov8 [1, 4 + classes, N] output (silently finding nothing).
    for head in ("yolov8", "yolov8_pose", "centerface", "end2end"):
        with pytest.raises(ModelError, match=r"3549"):
            cpu(shared_dir / "models/yolox_nano.onnx", model__head=head)
