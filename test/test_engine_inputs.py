"""Non-float engine inputs are refused at start-up, and NaN class scores never reach a detection (issue 12, item 7;
the GPU decode kernels follow the same rule: test_gpu_robot.py checks both paths agree)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
onnx = pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from onnx import TensorProto, helper  # noqa: E402

from synthetic_models import constant_yolov8  # noqa: E402
from vrt_ros.errors import ModelError  # noqa: E402
from vrt_ros.inference.backends.cpu import CpuPipeline  # noqa: E402
from vrt_ros.settings.config import defaults  # noqa: E402


def _pipe(path, **extra):
    v = defaults()
    v.update({"model.path": str(path), "backend": "cpu", **extra})
    return CpuPipeline(v, log=lambda m: None)


@pytest.mark.parametrize("itype, name", [(TensorProto.UINT8, "uint8"), (TensorProto.INT32, "int32")])
def test_non_float_engine_input_is_refused(tmp_path, itype, name):
    graph = helper.make_graph(
        [helper.make_node("Cast", ["images"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("ReduceMean", ["f"], ["m"], keepdims=1),
         helper.make_node("Reshape", ["m", "shape"], ["r"]),
         helper.make_node("Tile", ["r", "reps"], ["output"])],
        "u8", [helper.make_tensor_value_info("images", itype, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, 6])],
        initializer=[helper.make_tensor("shape", TensorProto.INT64, [3], [1, 1, 1]),
                     helper.make_tensor("reps", TensorProto.INT64, [3], [1, 1, 6])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelError, match=f"float NCHW image input.*{name}"):
        _pipe(path)  # the CPU path (ONNX Runtime)
    # the set-up every GPU engine (TensorRT, torch) goes through, which used to feed such an input float32 data
    from vrt_ros.model.model_setup import model_setup
    from vrt_ros.types import TensorInfo

    with pytest.raises(ModelError, match=f"model input 'images' is {name}"):
        model_setup(defaults(), TensorInfo("images", (1, 3, 64, 64), name), [TensorInfo("output", (1, 1, 6), "float32")])


def test_nan_class_scores_are_never_published(tmp_path):
    """A cell with a NaN among its class scores is dropped whichever class holds it (numpy max/argmax propagate
    NaN); the other cells are kept."""
    n, nc = 6, 3
    out = np.zeros((1, 4 + nc, n), np.float32)
    out[0, :4] = np.array([[80, 80, 40, 40]] * n).T
    out[0, 0] += np.arange(n) * 90  # cx apart
    out[0, 4:, :] = 0.05
    out[0, 4 + np.arange(n) % nc, np.arange(n)] = 0.9  # one strong class per cell
    out[0, 4, 1] = np.nan  # NaN in the first class of cell 1 (its strong class is 1)
    out[0, 6, 3] = np.nan  # NaN in the last class of cell 3
    out[0, 5, 4] = np.nan  # NaN in cell 4's strong class
    dets = _pipe(constant_yolov8(tmp_path / "nan.onnx", 640, 640, out), **{"model.head": "yolov8"}).process_bgr(
        np.zeros((640, 640, 3), np.uint8))
    assert np.isfinite(dets.scores).all()
    centres = sorted(int(round((b[0] + b[2]) / 2)) for b in dets.boxes)
    assert centres == [80 + 90 * i for i in (0, 2, 5)]
