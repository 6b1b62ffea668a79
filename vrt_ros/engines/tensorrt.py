"""The running TensorRT engine: load a serialized plan (from a file, or from ONNX through the cache), enqueue on the
pipeline's stream.

One wrapper for two flavours (:mod:`vrt_ros.engines.trt_flavours`): ``tensorrt`` (TensorRT >= 10; the lean runtime
``tensorrt_lean_bindings`` for serialized engines) and TensorRT for RTX (``tensorrt_rtx_bindings``), chosen at
start-up by ``engine.tensorrt_flavour`` (``auto`` prefers ``tensorrt``). Only the named-tensor API is used
(``num_io_tensors``, ``get_tensor_name/mode/dtype/shape``, ``set_input_shape``, ``set_tensor_address``,
``execute_async_v3``). No TensorRT module is imported at module import time.

The concerns live in small modules: plan files and their checks in :mod:`~vrt_ros.engines.trt_plan_file`, building
from ONNX and the cached plan in :mod:`~vrt_ros.engines.trt_build` (cache keys and sidecars in
:mod:`~vrt_ros.engines.engine_cache`), TensorRT's logger in :mod:`~vrt_ros.engines.trt_logging`, the runtime, the
deserialisation and the ordered release of the handles in :mod:`~vrt_ros.engines.trt_runtime`, the engine's I/O and
execution context in :mod:`~vrt_ros.engines.trt_io`. This module owns the engine's start-up (which file, which
flavour, build or load) and its execution.

What happens at start-up (:class:`TensorRtEngine`):

- ``model.path`` ending in ``.onnx``: the cached plan for this model, flavour and version, GPU, precision and
  shapes is loaded, or built and cached (:func:`~vrt_ros.engines.trt_build.cached_plan`). A cached plan that the
  runtime refuses is rebuilt once.
- any other path: a serialized engine, checked before TensorRT sees it
  (:func:`~vrt_ros.engines.trt_plan_file.read_engine_file`); its magic says which flavour wrote it, and only that
  flavour loads it. ``deserialize_cuda_engine`` returning None is a :class:`~vrt_ros.errors.ModelError` naming the
  file, what was expected and how to fix it, including what TensorRT logged; a runtime that cannot reach a usable
  GPU at all (no CUDA driver, a GPU the flavour does not run on) is :class:`~vrt_ros.errors.BackendUnavailable`.

Lifetime: the execution context, engine, runtime and logger are held by one private owner that releases them in that
order, on :meth:`TensorRtEngine.close` or from a ``weakref.finalize`` when the engine is collected, whatever order
Python collects the rest in; no raw TensorRT object is exposed.
"""

from __future__ import annotations

import logging
import traceback
import weakref
from pathlib import Path
from typing import Any, Mapping, Sequence

from vrt_ros.engines import trt_flavours, trt_precision
from vrt_ros.engines.trt_build import DEFAULT_WORKSPACE_MB, BuildOptions, cached_plan, resolve_profile
from vrt_ros.engines.trt_build import version as _version
from vrt_ros.engines.trt_io import bind_io
from vrt_ros.engines.trt_logging import Log, LogRouter, enum_name, make_logger
from vrt_ros.engines.trt_logging import diagnose_errors as _diagnose  # noqa: F401  (the tests' name)
from vrt_ros.engines.trt_plan_file import (  # noqa: F401  (re-exported: __all__)
    ENGINE_SUFFIXES,
    PLAN_HEADER_BYTES,
    PLAN_MAGIC,
    EngineFile,
    check_onnx_file,
    read_engine_file,
    rebuild_hint,
)
from vrt_ros.engines.trt_runtime import QUARANTINE as _QUARANTINE  # noqa: F401  (the tests' name)
from vrt_ros.engines.trt_runtime import Handles as _Handles
from vrt_ros.engines.trt_runtime import deserialize
from vrt_ros.errors import ConfigError, ModelError
from vrt_ros.model.model_file import is_onnx_model
from vrt_ros.model.model_setup import dynamic_batch_size
from vrt_ros.types import TensorInfo

_log = logging.getLogger(__name__)
_make_logger = make_logger  # the name the tests and older callers use
_enum_name = enum_name


# --------------------------------------------------------------------------------------------------------------
# Importing TensorRT
# --------------------------------------------------------------------------------------------------------------
def import_tensorrt(require_builder: bool = False, flavour: str = trt_flavours.AUTO, *,
                    compute_capability: str | None = None, gpu_name: str | None = None):
    """The TensorRT Python module to use (see :func:`vrt_ros.engines.trt_flavours.select`).

    Args:
        require_builder: an ONNX model is to be built (the lean runtime does not do then).
        flavour: ``engine.tensorrt_flavour``: "auto", "tensorrt" or "tensorrt_rtx".
        compute_capability, gpu_name: the GPU; a flavour that cannot run on it is skipped (auto) or refused.

    Raises:
        BackendUnavailable: nothing suitable imports, or no flavour runs on this GPU; the message says why.
    """
    return trt_flavours.select(flavour, compute_capability=compute_capability, gpu_name=gpu_name,
                               require_builder=require_builder)[1]


def tensorrt_unavailable_reason(require_builder: bool = False, flavour: str = trt_flavours.AUTO, *,
                                compute_capability: str | None = None, gpu_name: str | None = None) -> str | None:
    """Why TensorRT cannot be used here, or None when a flavour can (same arguments as :func:`import_tensorrt`).

    Never raises; for ``backend: auto`` (engine choice) and test skips. On a GPU the RTX flavour does not run on,
    the reason says so in one line ("skipped: TensorRT for RTX 1.7.1.116 cannot run on this GPU, ...").
    """
    return trt_flavours.unavailable_reason(flavour, compute_capability=compute_capability, gpu_name=gpu_name,
                                           require_builder=require_builder)


# --------------------------------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------------------------------
class TensorRtEngine:
    """A TensorRT engine on the pipeline's CUDA stream.

    Args:
        path: a serialized engine (``.engine``/``.plan``/``.trt`` or any non-``.onnx`` name), or an ``.onnx`` model
            (built once and cached).
        device: CUDA device ordinal (the caller makes its context current before construction and enqueue).
        cache_dir: the ``engine.cache_dir`` parameter ("" = ``$XDG_CACHE_HOME/vrt_ros``); engines go in ``engines/``.
        fp16: build in FP16 with FP32 inputs/outputs (TensorRT 10.x: ``BuilderFlag.FP16``; strongly typed flavours,
            TensorRT for RTX and TensorRT 11: the ONNX model is converted to FP16 first, see
            :func:`~vrt_ros.engines.trt_build.fp16_onnx`).
        workspace_mb: builder workspace limit, MiB.
        input_size: (width, height) of the image input for dynamic models (``model.input_width/height``).
        profile_min, profile_max: (width, height) bounds of the optimisation profile for dynamic models.
        calibration_cache: INT8 calibration cache file (TensorRT 10.x only); INT8 only when given.
        gpu_name, compute_capability: the device's identity for the cache key (e.g. "NVIDIA H200", "9.0" or "90");
            required when ``path`` is an ONNX model.
        log: start-up messages and TensorRT warnings/errors (e.g. the node's logger); default: Python logging.
        flavour: ``engine.tensorrt_flavour``: "auto" (``tensorrt``, else TensorRT for RTX where it runs on this GPU),
            "tensorrt" or "tensorrt_rtx" (see :mod:`vrt_ros.engines.trt_flavours`).
        max_batch: a dynamic batch dim is built with the profile batch range 1 .. ``max_batch``; ``enqueue(...,
            batch=b)`` sets the input shape to batch ``b`` when it changes (batched execution is checked on the
            builder in CI, not run: that needs a GPU).

    Attributes:
        inputs, outputs: :class:`~vrt_ros.types.TensorInfo` with the shapes resolved for the chosen input size and
            the dtypes the engine declares ("float32", "float16", ...).
        name: for logs, e.g. "TensorRT 10.13.3.9 (yolox_nano-tensorrt-fp16-....engine)".
        flavour: the :class:`~vrt_ros.engines.trt_flavours.Flavour` in use.
        engine_path: the engine file used (the cache entry when built from ONNX).
        built: True when this start built the engine (False: loaded from a file or the cache).

    Raises:
        ModelError: bad engine or ONNX file (see :func:`read_engine_file`), deserialisation failure, unsupported
            I/O (more than one input, data-dependent output shapes, vectorised formats, unsupported dtypes).
        ConfigError: parameters that contradict the model or this TensorRT (e.g. INT8 calibration on TensorRT for RTX).
        BackendUnavailable: TensorRT missing, the chosen flavour does not run on this GPU (TensorRT for RTX on an
            H200), or its runtime cannot start (no usable CUDA driver/device).
    """

    def __init__(
        self,
        path: str | Path,
        device: int = 0,
        *,
        cache_dir: str | None = None,
        fp16: bool = False,
        workspace_mb: int = DEFAULT_WORKSPACE_MB,
        input_size: tuple[int, int] | None = None,
        profile_min: tuple[int, int] | None = None,
        profile_max: tuple[int, int] | None = None,
        calibration_cache: str | None = None,
        gpu_name: str | None = None,
        compute_capability: str | None = None,
        log: Log | None = None,
        flavour: str = trt_flavours.AUTO,
        max_batch: int = 1,
        _trt=None,
    ) -> None:
        if not str(path):
            raise ModelError("model.path is empty: expected a serialized TensorRT engine (.engine/.plan) or an .onnx "
                             "model; set model.path")
        self._h = _Handles()
        self._finalizer = weakref.finalize(self, self._h.release)
        self._say: Log = log if log is not None else _log.info
        self._router = LogRouter(log)
        self.device = int(device)
        self.path = Path(path)
        self.built = False
        self.io: list[dict] = []  # the network's tensors as the builder saw them (engines built from ONNX)
        self._bound: tuple[int, ...] | None = None
        self._max_batch = max(1, int(max_batch))
        self._batch_now = 0  # the batch of the input shape set on the context (dynamic batch only)
        self.inputs: list[TensorInfo] = []
        self.outputs: list[TensorInfo] = []
        try:
            is_onnx = is_onnx_model(self.path)  # by content, not by name
            # The file is checked before TensorRT is even imported: a bad path fails the same way everywhere.
            ef = None
            if is_onnx:
                check_onnx_file(self.path)
            else:
                ef = read_engine_file(self.path)
            if ef is not None and flavour in trt_flavours.FLAVOURS and _trt is None:
                self._check_plan_flavour(ef, trt_flavours.FLAVOURS[flavour])
            if _trt is not None:
                trt = _trt
            else:
                _, trt = trt_flavours.select(flavour, compute_capability=compute_capability, gpu_name=gpu_name,
                                             require_builder=is_onnx, plan_flavour=ef.flavour if ef else None)
            self._trt = trt
            self.flavour = trt_flavours.flavour_of(trt)
            if ef is not None:
                self._check_plan_flavour(ef, self.flavour)
            self._h.logger = make_logger(trt, self._router)
            if is_onnx:
                if not gpu_name or not compute_capability:
                    raise ValueError("TensorRtEngine: gpu_name and compute_capability are required to cache an engine built from ONNX")
                options = BuildOptions(fp16=bool(fp16), workspace_mb=int(workspace_mb), input_size=input_size,
                                       profile_min=profile_min, profile_max=profile_max,
                                       calibration_cache=calibration_cache, max_batch=self._max_batch)
                self._load_onnx(options, gpu_name=gpu_name, compute_capability=compute_capability, cache_dir=cache_dir)
            else:
                self.engine_path = self.path
                if ef.metadata:
                    self._say(f"{self.path.name}: Ultralytics metadata prefix stripped (keys {sorted(ef.metadata)[:6]})")
                self._deserialize(ef.plan, self.path, rebuild_hint(self.path))
                del ef
            self._bind_io(input_size)
            self.name = f"{self.flavour.label} {_version(trt)} ({self.engine_path.name})"
        except BaseException as exc:
            # The traceback's frames may still reference TensorRT objects (locals of the helpers above): clear
            # them so that close() really destroys context, engine, runtime and logger now, in that order.
            traceback.clear_frames(exc.__traceback__)
            self.close()
            raise

    # ---- construction helpers -------------------------------------------------------------------------------
    def _check_plan_flavour(self, ef: EngineFile, reader: trt_flavours.Flavour) -> None:
        """Plans of one flavour never go to the other (their runtimes cannot read them)."""
        if ef.flavour is not reader:
            raise ModelError(f"engine file {self.path} is a {ef.flavour.label} plan (magic {ef.flavour.plan_magic!r}), "
                             f"which {reader.label} cannot load; load it with engine.tensorrt_flavour: "
                             f"{ef.flavour.name}, or give the .onnx model")

    @classmethod
    def from_values(cls, values: Mapping[str, Any], device: int = 0, *, gpu_name: str | None = None,
                    compute_capability: str | None = None, log: Log | None = None) -> "TensorRtEngine":
        """Build from validated parameter values (``model.path``, ``model.input_width/height``, ``engine.*``).

        Reads ``engine.cache_dir``, ``engine.fp16``, and when present ``engine.workspace_mb``,
        ``engine.profile_min`` / ``engine.profile_max`` ([width, height]; [] = the input size),
        ``engine.int8_calibration_cache`` ("" = none) and ``engine.tensorrt_flavour`` (default "auto").
        """
        w, h = int(values.get("model.input_width", 0) or 0), int(values.get("model.input_height", 0) or 0)
        pmin, pmax = list(values.get("engine.profile_min", []) or []), list(values.get("engine.profile_max", []) or [])
        for pname, v in (("engine.profile_min", pmin), ("engine.profile_max", pmax)):
            if v and len(v) != 2:
                raise ConfigError(f"{pname} must be [width, height] or [], got {v}")
        return cls(
            values["model.path"], device,
            cache_dir=str(values.get("engine.cache_dir", "") or ""),
            fp16=bool(values.get("engine.fp16", False)),
            workspace_mb=int(values.get("engine.workspace_mb", DEFAULT_WORKSPACE_MB)),
            input_size=(w, h) if w and h else None,
            profile_min=tuple(pmin) if pmin else None,
            profile_max=tuple(pmax) if pmax else None,
            calibration_cache=str(values.get("engine.int8_calibration_cache", "") or "") or None,
            gpu_name=gpu_name, compute_capability=compute_capability, log=log,
            flavour=str(values.get("engine.tensorrt_flavour", trt_flavours.AUTO) or trt_flavours.AUTO),
            max_batch=dynamic_batch_size(values),
        )

    def _deserialize(self, plan: bytes, path: Path, fix: str) -> None:
        deserialize(self._h, self._trt, self._router, self.flavour.label, plan, path, fix)

    def _bind_io(self, input_size: tuple[int, int] | None) -> None:
        io = bind_io(self._h, self._trt, self._router, f"engine {self.engine_path}", max_batch=self._max_batch,
                     input_size=input_size)
        self.inputs, self.outputs = io.inputs, io.outputs
        self._io_names, self._input_dims, self._batch_now = io.io_names, io.input_dims, io.batch_now

    # ---- building from ONNX ---------------------------------------------------------------------------------
    def _load_onnx(self, options: BuildOptions, *, gpu_name: str, compute_capability: str,
                   cache_dir: str | None) -> None:
        """Load the cached plan for this ONNX model and configuration, or build, cache and load it.

        A cached plan that the runtime refuses as a bad plan (ModelError, e.g. after a driver update) is rebuilt
        once; a runtime that cannot use this GPU at all (BackendUnavailable) is reported, and the entry kept.
        """
        kw = dict(gpu_name=gpu_name, compute_capability=compute_capability, cache_dir=cache_dir,
                  logger=self._h.logger, router=self._router, say=self._say)
        plan = cached_plan(self._trt, self.path, options, **kw)
        self.engine_path, self.built, self.io = plan.path, plan.built, plan.io
        if not plan.built:
            try:
                self._deserialize(plan.data, plan.path, plan.fix)
                self._say(f"TensorRT engine cache hit: {plan.path}")
                return
            except ModelError as exc:
                self._say(f"cached engine rejected, rebuilding: {exc}")
            plan = cached_plan(self._trt, self.path, options, rebuild=True, **kw)
            self.built, self.io = True, plan.io
        self._deserialize(plan.data, plan.path, plan.fix)
        self._say(trt_precision.report(self._trt, self._h.engine, options.precision, self.path))

    # ---- per frame ------------------------------------------------------------------------------------------
    def enqueue(self, stream, input_ptr: int, output_ptrs: Sequence[int], batch: int | None = None) -> None:
        """Queue one inference on ``stream``; returns at once (no host synchronisation).

        ``batch`` (a dynamic-batch engine only): the batch to run; the context's input shape is set when it changes
        (``set_input_shape``; the prepared sizes alternate, so this is a cheap shape update, no allocation).

        Args:
            stream: the pipeline's stream (an object with ``__cuda_stream__``, e.g. ``cuda.core.Stream``, or a raw
                ``cudaStream_t`` handle as int).
            input_ptr: device address of the input tensor (shape/dtype of ``inputs[0]``).
            output_ptrs: device addresses of the outputs, in ``outputs`` order, written in place.

        Raises:
            ModelError: TensorRT refused a tensor address or the enqueue (its logged error is included).
        """
        ctx = self._h.context
        if ctx is None:
            raise ModelError(f"TensorRT engine {self.engine_path} is closed")
        mark = self._router.mark()  # the errors this call logs go into its exception, not older ones
        if batch is not None and self.inputs[0].shape[0] < 0 and int(batch) != self._batch_now:
            shape = (int(batch), *self._input_dims[1:])
            if not ctx.set_input_shape(self._io_names[0], shape):
                raise ModelError(f"TensorRT refused input shape {shape} of {self._io_names[0]!r} (outside the "
                                 f"engine's batch profile? {self._router.quote(mark)})")
            self._batch_now = int(batch)
        ptrs = (int(input_ptr), *(int(p) for p in output_ptrs))
        if ptrs != self._bound:
            if len(ptrs) != len(self._io_names):
                raise ValueError(f"enqueue needs {len(self._io_names) - 1} output pointers, got {len(ptrs) - 1}")
            for n, p in zip(self._io_names, ptrs):
                if not ctx.set_tensor_address(n, p):
                    raise ModelError(f"TensorRT refused the device address of {n!r} ({self._router.quote(mark)})")
            self._bound = ptrs
        handle = int(stream.__cuda_stream__()[1]) if hasattr(stream, "__cuda_stream__") else int(stream)
        if not ctx.execute_async_v3(handle):
            self._bound = None
            raise ModelError(f"TensorRT execute_async_v3 failed for {self.engine_path} ({self._router.quote(mark)})")

    def close(self) -> None:
        """Release the context, engine, runtime and logger, in that order. Idempotent."""
        self._bound = None
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive


__all__ = ["ENGINE_SUFFIXES", "EngineFile", "LogRouter", "PLAN_HEADER_BYTES", "PLAN_MAGIC", "TensorRtEngine",
           "import_tensorrt", "read_engine_file", "resolve_profile", "tensorrt_unavailable_reason"]
