"""The GPU engine for a model file: TensorRT where it can run (required for serialized engines), else torch.

Used by :class:`vrt_ros.inference.backends.cuda.CudaPipeline` at start-up; each engine module is imported lazily here.
"""

from __future__ import annotations

from typing import Any, Mapping

from vrt_ros.errors import BackendUnavailable
from vrt_ros.model.model_file import is_onnx_model


def load_engine(values: Mapping[str, Any], runtime, log):
    """The GPU engine for ``model.path``: TensorRT when it can run here (required for serialized engines), else torch.

    ``engine.tensorrt_flavour`` "auto" takes TensorRT, else TensorRT for RTX where it runs on this GPU (skipped on
    others, e.g. the H200, the reason going into the one "GPU engine: torch" line), else torch; a forced flavour
    that cannot run here fails with the reason instead of falling back.

    Raises:
        BackendUnavailable: neither engine can run this model here; the message gives both reasons.
    """
    path = str(values["model.path"])
    is_onnx = is_onnx_model(path)  # by content, not by name
    flavour = str(values.get("engine.tensorrt_flavour", "auto") or "auto")
    try:
        from vrt_ros.engines.tensorrt import TensorRtEngine, tensorrt_unavailable_reason

        trt_reason = tensorrt_unavailable_reason(flavour=flavour, compute_capability=runtime.arch, gpu_name=runtime.name)
    except ImportError as exc:
        trt_reason = f"vrt_ros.engines.tensorrt not importable: {exc}"
    if trt_reason is not None and flavour != "auto":
        raise BackendUnavailable(f"engine.tensorrt_flavour '{flavour}' cannot run here: {trt_reason}")
    if trt_reason is None:
        try:
            return TensorRtEngine.from_values(values, runtime.device_id, gpu_name=runtime.name,
                                              compute_capability=runtime.arch, log=log)
        except BackendUnavailable as exc:  # e.g. a lean runtime that cannot build from ONNX
            if not is_onnx or flavour != "auto":
                raise
            trt_reason = str(exc)
    if not is_onnx:
        from vrt_ros.engines.tensorrt import read_engine_file

        read_engine_file(path)  # a missing or garbage file gets its own start-up error (HC-09) first
        raise BackendUnavailable(f"serialized TensorRT engine {path} needs TensorRT: {trt_reason}")
    try:
        from vrt_ros.engines.torch import TorchEngine
    except ImportError as exc:
        raise BackendUnavailable(
            f"no GPU engine for {path}: TensorRT unavailable ({trt_reason}); torch not importable ({exc})"
        ) from exc
    log(f"GPU engine: torch (TensorRT unavailable: {trt_reason})")
    from vrt_ros.model.model_setup import dynamic_batch_size

    return TorchEngine(path, runtime.device_id, fp16=bool(values.get("engine.fp16", False)),
                       max_batch=dynamic_batch_size(values), cache_dir=str(values.get("engine.cache_dir", "") or ""),
                       log=log)
