"""Precision of TensorRT engines: how the builder is asked for FP16 or INT8 on each flavour, and what a plan reports.

==========================  ===============================  ===============================================
TensorRT                    ``engine.fp16``                  INT8
==========================  ===============================  ===============================================
10.x (JetPack 6: 10.3)      ``BuilderFlag.FP16``             ``engine.int8_calibration_cache`` (a calibrator
                                                             replaying it, ``BuilderFlag.INT8``), or a Q/DQ
                                                             model
11.x, TensorRT for RTX      the ONNX model converted to      a Q/DQ (explicitly quantized) model only: a
(strongly typed)            FP16 first (``trt_build``)       calibration cache is refused at start-up
==========================  ===============================  ===============================================

A Q/DQ model is an ONNX model with ``QuantizeLinear``/``DequantizeLinear`` nodes (onnxruntime's
``quantize_static(quant_format=QuantFormat.QDQ)``, NVIDIA ModelOpt): every TensorRT since 8 builds its INT8 layers
from the scales in the model, with no calibration. After a build, :func:`plan_precision` reads what the plan's layers
compute in from TensorRT's engine inspector (``ICudaEngine.create_engine_inspector``, JSON layer information; the
build asks for ``ProfilingVerbosity.DETAILED`` where the flavour has it), so the log says what was asked and what was
built (rf-detr #1453: ``fp16=True`` silently built an FP32 engine on TensorRT 11).

No TensorRT module is imported here: the caller passes the one it selected.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from vrt_ros.engines.trt_flavours import flavour_of
from vrt_ros.errors import ConfigError

QDQ_OPS = (b"QuantizeLinear", b"DequantizeLinear")
_TYPES = (("FP32", "FP32"), ("FLOAT", "FP32"), ("HALF", "FP16"), ("FP16", "FP16"), ("BF16", "BF16"),
          ("INT8", "INT8"), ("FP8", "FP8"), ("INT4", "INT4"), ("FP4", "FP4"), ("INT32", "INT32"), ("INT64", "INT64"),
          ("BOOL", "BOOL"), ("UINT8", "UINT8"))


def _label(trt) -> str:
    return f"{flavour_of(trt).label} {getattr(trt, '__version__', 'unknown')}"


def has_calibration(trt) -> bool:
    """Whether ``trt`` can calibrate INT8 (TensorRT 10.x: ``IInt8EntropyCalibrator2`` and ``BuilderFlag.INT8``;
    gone in TensorRT 11, absent from TensorRT for RTX)."""
    flags = getattr(trt, "BuilderFlag", None)
    return hasattr(trt, "IInt8EntropyCalibrator2") and flags is not None and hasattr(flags, "INT8")


def check_calibration(trt, calibration_cache: str | None) -> None:
    """Fail at start-up when ``engine.int8_calibration_cache`` is set for a TensorRT that cannot use it.

    Raises:
        ConfigError: names the parameter, why, and what to do instead (a Q/DQ model); or the file is missing.
    """
    if not calibration_cache:
        return
    if not has_calibration(trt):
        raise calibration_error(trt)
    if not Path(calibration_cache).is_file():
        raise ConfigError(f"engine.int8_calibration_cache: {calibration_cache} does not exist")


def calibration_error(trt) -> ConfigError:
    """The start-up error for ``engine.int8_calibration_cache`` on a TensorRT without INT8 calibration."""
    return ConfigError(
            f"engine.int8_calibration_cache: {_label(trt)} has no INT8 calibration (TensorRT 11 removed the INT8 "
            "calibrators and builder flags, TensorRT for RTX never had them): its INT8 comes only from an "
            "explicitly quantized ONNX model. Quantize the model with Q/DQ nodes (onnxruntime.quantization."
            "quantize_static with quant_format=QuantFormat.QDQ, or NVIDIA ModelOpt), set model.path to it and "
            "leave engine.int8_calibration_cache empty")


def qdq_nodes(onnx_path: Path) -> int:
    """How many QuantizeLinear/DequantizeLinear nodes an ONNX model holds (0: not explicitly quantized).

    Counts the op-type strings in the protobuf (each node stores its op type), so no onnx import is needed.
    """
    data = Path(onnx_path).read_bytes()
    return sum(len(re.findall(rb"[\x00-\x20]" + op + rb"(?![A-Za-z])", data)) for op in QDQ_OPS)


def strongly_typed(trt) -> bool:
    """True for a builder without precision flags (TensorRT 11, TensorRT for RTX): networks are strongly typed."""
    return not hasattr(trt.BuilderFlag, "FP16")


def asked(precision: str, *, strongly_typed: bool, qdq: int) -> str:
    """What the builder is asked for, in words, e.g. "fp16 (BuilderFlag.FP16)"."""
    how = {"fp16": "model converted to FP16, strongly typed" if strongly_typed else "BuilderFlag.FP16",
           "int8": "calibration cache, BuilderFlag.INT8", "fp32": "default"}[precision]
    text = f"{precision} ({how})"
    return text + (f", INT8 from the model's {qdq} Q/DQ nodes" if qdq else "")


def enable_calibration(trt, config, cache_file: Path):
    """Set ``config`` for INT8 with a calibrator that only replays ``cache_file`` (TensorRT 10.x); returns the
    calibrator, which must outlive every TensorRT object using it.

    Raises:
        ConfigError: ``trt`` has no INT8 calibration (see :func:`check_calibration`).
    """
    base = getattr(trt, "IInt8EntropyCalibrator2", None)
    if base is None or not hasattr(trt.BuilderFlag, "INT8"):
        raise calibration_error(trt)
    data = cache_file.read_bytes()

    class CacheCalibrator(base):
        def __init__(self) -> None:
            base.__init__(self)

        def get_batch_size(self):
            return 1

        def get_batch(self, names):
            return None  # no data: everything comes from the cache

        def read_calibration_cache(self):
            return data

        def write_calibration_cache(self, cache):
            return None

    calibrator = CacheCalibrator()
    config.set_flag(trt.BuilderFlag.INT8)
    config.int8_calibrator = calibrator
    return calibrator


def request_layer_details(trt, config) -> None:
    """Ask the builder to keep per-layer information in the plan (``ProfilingVerbosity.DETAILED``), where it can."""
    verbosity = getattr(trt, "ProfilingVerbosity", None)
    if verbosity is not None and hasattr(verbosity, "DETAILED"):
        config.profiling_verbosity = verbosity.DETAILED


def layer_types(info: dict) -> Counter:
    """Layers of TensorRT's JSON engine information by the type of their first output ("FP16": 120, ...).

    A layer's output ``Format/Datatype`` reads e.g. "Row major linear FP16 format" or "Half"; layers without
    details (plans built without DETAILED verbosity list names only) are not counted.
    """
    counts: Counter = Counter()
    for layer in info.get("Layers", []) if isinstance(info, dict) else []:
        outputs = layer.get("Outputs") if isinstance(layer, dict) else None
        if not outputs:
            continue
        text = str(outputs[0].get("Format/Datatype", "")).upper()
        words = set(re.findall(r"[A-Z0-9]+", text))
        found = next((name for key, name in _TYPES if key in words), None)
        if found:
            counts[found] += 1
    return counts


def plan_precision(trt, engine) -> str | None:
    """What a deserialised engine's layers compute in, from the engine inspector ("FP16 120, FP32 3 layers"), or
    None when the flavour or the plan cannot say (no inspector, no layer details). Never raises."""
    make = getattr(engine, "create_engine_inspector", None)
    fmt = getattr(trt, "LayerInformationFormat", None)
    # the 11.4 lean runtime has create_engine_inspector but no EngineInspector binding: calling it raises TypeError
    if make is None or fmt is None or not hasattr(trt, "EngineInspector"):
        return None
    try:
        info = json.loads(make().get_engine_information(fmt.JSON))
    except Exception:  # noqa: BLE001 - a report only
        return None
    counts = layer_types(info)
    if not counts:
        return None
    return ", ".join(f"{name} {n}" for name, n in counts.most_common()) + " layers (by output type)"


def report(trt, engine, precision: str, onnx_path: Path) -> str:
    """The line logged after a build: the precision asked for and what the plan's layers compute in."""
    said = plan_precision(trt, engine) or ("no layer precisions (this TensorRT has no engine inspector, or the plan "
                                           "no layer details)")
    typed = strongly_typed(trt) if hasattr(trt, "BuilderFlag") else True
    wanted = asked(precision, strongly_typed=typed, qdq=qdq_nodes(onnx_path))
    return f"{_label(trt)} engine precision: asked {wanted}; the plan reports {said}"


__all__ = ["QDQ_OPS", "asked", "calibration_error", "check_calibration", "enable_calibration", "has_calibration",
           "layer_types", "plan_precision", "qdq_nodes", "report", "request_layer_details", "strongly_typed"]
