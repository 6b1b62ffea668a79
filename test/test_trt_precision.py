"""After every build the log says the precision asked for and what the plan reports (issue 28, item 3), on the
TensorRT stand-in of test_tensorrt.py (a real engine inspector needs a loadable engine, which cannot be had here),
and the lean-runtime case the surface test found (get_tensor_format without a TensorFormat binding)."""

from __future__ import annotations

import enum
import json

import pytest

from test_tensorrt import GPU, FakeTrt, fake_onnx, write_plan
from vrt_ros.engines.tensorrt import TensorRtEngine
from vrt_ros.engines.trt_precision import layer_types, plan_precision
from vrt_ros.errors import ConfigError

LAYERS = {"Layers": [
    {"Name": "conv1", "Outputs": [{"Name": "a", "Format/Datatype": "Row major linear FP16 format"}]},
    {"Name": "conv2", "Outputs": [{"Name": "b", "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}]},
    {"Name": "q", "Outputs": [{"Name": "c", "Format/Datatype": "Row major linear Int8 format"}]},
    {"Name": "head", "Outputs": [{"Name": "output0", "Format/Datatype": "Row major linear FP32"}]},
    "a layer listed by name only"]}


def _with_inspector(fake: FakeTrt, info=LAYERS) -> FakeTrt:
    """Give the stand-in TensorRT 10's engine inspector (ICudaEngine.create_engine_inspector)."""
    fake.LayerInformationFormat = enum.Enum("LayerInformationFormat", "ONELINE JSON")
    fake.ProfilingVerbosity = enum.Enum("ProfilingVerbosity", "LAYER_NAMES_ONLY DETAILED NONE")

    class EngineInspector:
        def get_engine_information(self, fmt):
            assert fmt is fake.LayerInformationFormat.JSON
            return json.dumps(info)

    fake.EngineInspector = EngineInspector
    engine_cls = type(fake.Runtime(fake.ILogger()).deserialize_cuda_engine(write_plan_bytes()))
    engine_cls.create_engine_inspector = lambda self: EngineInspector()
    return fake


def write_plan_bytes():
    from test_tensorrt import DET_TENSORS, fake_plan

    return fake_plan(DET_TENSORS)


def test_layer_types_reads_the_json_layer_information():
    assert dict(layer_types(LAYERS)) == {"FP16": 2, "INT8": 1, "FP32": 1}
    assert not layer_types({"Layers": ["names", "only"]}) and not layer_types([])


def test_a_build_logs_what_was_asked_and_what_the_plan_reports(tmp_path):
    lines: list[str] = []
    fake = _with_inspector(FakeTrt())
    eng = TensorRtEngine(fake_onnx(tmp_path), _trt=fake, cache_dir=str(tmp_path), input_size=(320, 320), fp16=True,
                         log=lines.append, **GPU)
    (report,) = [line for line in lines if "engine precision" in line]
    assert report == ("TensorRT 10.99.1 engine precision: asked fp16 (BuilderFlag.FP16); the plan reports FP16 2, "
                      "INT8 1, FP32 1 layers (by output type)"), report
    assert fake.last_config.flags == {fake.BuilderFlag.FP16}
    eng.close()
    lines.clear()  # a cache hit builds nothing: no report
    TensorRtEngine(fake_onnx(tmp_path), _trt=fake, cache_dir=str(tmp_path), input_size=(320, 320), fp16=True,
                   log=lines.append, **GPU).close()
    assert not [line for line in lines if "engine precision" in line]


def test_a_flavour_without_an_inspector_says_so(tmp_path):
    lines: list[str] = []
    fake = FakeTrt(version="11.4.0", fp16_flag=False)  # no inspector, strongly typed
    TensorRtEngine(fake_onnx(tmp_path), _trt=fake, cache_dir=str(tmp_path), input_size=(320, 320), log=lines.append,
                   **GPU).close()
    (report,) = [line for line in lines if "engine precision" in line]
    assert "asked fp32 (default); the plan reports no layer precisions (this TensorRT has no engine inspector" in report


def test_an_inspector_that_fails_is_no_report_not_an_error():
    fake = _with_inspector(FakeTrt())
    engine = fake.Runtime(fake.ILogger()).deserialize_cuda_engine(write_plan_bytes())
    engine.create_engine_inspector = lambda: (_ for _ in ()).throw(TypeError("Unable to convert function return value"))
    assert plan_precision(fake, engine) is None
    del fake.EngineInspector  # the 11.4 lean runtime: the method exists, its return type is not bound
    assert plan_precision(fake, fake.Runtime(fake.ILogger()).deserialize_cuda_engine(write_plan_bytes())) is None


def test_lean_runtime_without_a_tensorformat_binding_loads(tmp_path):
    """The 11.4 lean runtime has get_tensor_format but cannot return its value (no TensorFormat binding): the
    linear-format check is skipped there instead of raising TypeError at start-up."""
    fake = FakeTrt(version="11.4.0", fp16_flag=False)
    del fake.TensorFormat
    engine_cls = type(fake.Runtime(fake.ILogger()).deserialize_cuda_engine(write_plan_bytes()))

    def unconvertible(self, name):
        raise TypeError("Unable to convert function return value to a Python type! nvinfer1::TensorFormat")

    engine_cls.get_tensor_format = unconvertible
    eng = TensorRtEngine(write_plan(tmp_path), _trt=fake)
    assert eng.inputs and eng.outputs
    eng.close()


def test_a_calibration_cache_on_a_tensorrt_without_calibration_fails_before_the_cache(tmp_path):
    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"TRT-8601-EntropyCalibration2\n")
    fake = FakeTrt(version="11.4.0", fp16_flag=False)
    with pytest.raises(ConfigError, match="engine.int8_calibration_cache: TensorRT 11.4.0 has no INT8 calibration"):
        TensorRtEngine(fake_onnx(tmp_path), _trt=fake, cache_dir=str(tmp_path), input_size=(320, 320),
                       calibration_cache=str(cache), **GPU)
    assert fake.builds == 0
