"""TensorRT engine: load a serialized engine or build one from ONNX (cached), enqueue on the pipeline's stream.

This module is the only importer of ``tensorrt`` (TensorRT >= 10, named-tensor API only: ``num_io_tensors``,
``get_tensor_name/mode/dtype/shape``, ``set_input_shape``, ``set_tensor_address``, ``execute_async_v3``), imported
lazily inside functions, so importing the module needs no TensorRT. When only the TensorRT *lean runtime* is
installed (``tensorrt_lean_bindings``, PyPI ``tensorrt-lean-cu13-bindings``), serialized engines are loaded through
it; building from ONNX needs the full ``tensorrt`` package.

What happens at start-up (:class:`TensorRtEngine`):

- ``model.path`` ending in ``.onnx``: the engine cache (:mod:`vrt_ros.engines.engine_cache`) is asked for an entry
  keyed by the ONNX SHA-256, TensorRT version, GPU name + compute capability, precision and requested shapes. A
  valid entry is loaded; a missing, stale, foreign, truncated or corrupt one is (re)built: ONNX parser, builder
  config (workspace limit, FP16 when ``engine.fp16`` on TensorRT 10.x, INT8 only with a calibration cache on
  TensorRT 10.x), an optimisation profile for dynamic inputs, progress logged while building, and the serialized
  engine plus a JSON sidecar written to the cache.
- any other path: a serialized engine. The file is checked *before* TensorRT sees it (exists, non-empty, at
  least a plan header long, starts with the plan magic ``ftrt``; an Ultralytics metadata prefix is accepted and
  stripped). ``deserialize_cuda_engine`` returning None is an error. Each failure raises one
  :class:`~vrt_ros.errors.ModelError` naming the file, what was expected and how to fix it, including what
  TensorRT logged (e.g. its version-tag mismatch for an engine from another TensorRT release).

TensorRT's logger callback never raises (an exception would cross into C++): :class:`LogRouter` catches everything
and routes messages to a Python callable (the node's logger). Lifetime: the execution context, engine, runtime and
logger are held by one private owner that releases them in that order, on :meth:`TensorRtEngine.close` or from a
``weakref.finalize`` when the engine is collected, whatever order Python collects the rest in; no raw TensorRT
object is exposed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
import weakref
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from vrt_ros.engines.engine_cache import EngineCache, EngineKey, file_sha256
from vrt_ros.engines.engine_cache import cache_dir as engine_cache_dir
from vrt_ros.errors import BackendUnavailable, ConfigError, ModelError
from vrt_ros.model_file import is_onnx_model
from vrt_ros.types import TensorInfo

_log = logging.getLogger(__name__)

Log = Callable[[str], None]

PLAN_MAGIC = b"ftrt"
"""First bytes of a serialized TensorRT plan (TensorRT's ``kPLAN_MAGIC_TAG``)."""
PLAN_HEADER_BYTES = 32
"""A file shorter than this cannot hold a plan header (magic, serialization version, size fields)."""
ENGINE_SUFFIXES = (".engine", ".plan", ".trt")
DEFAULT_WORKSPACE_MB = 1024

# TensorRT DataType member name -> numpy dtype name (only types the pipeline can hold in a buffer).
_DTYPES = {"FLOAT": "float32", "HALF": "float16", "INT32": "int32", "INT64": "int64", "INT8": "int8",
           "UINT8": "uint8", "BOOL": "bool"}
_LEVELS = {"INTERNAL_ERROR": logging.CRITICAL, "ERROR": logging.ERROR, "WARNING": logging.WARNING,
           "INFO": logging.INFO, "VERBOSE": logging.DEBUG}


# --------------------------------------------------------------------------------------------------------------
# Importing TensorRT
# --------------------------------------------------------------------------------------------------------------
def import_tensorrt(require_builder: bool = False):
    """The TensorRT Python module: ``tensorrt``, else (deserialisation only) ``tensorrt_lean_bindings``.

    Args:
        require_builder: building from ONNX needs ``tensorrt`` itself; the lean runtime is not accepted then.

    Raises:
        BackendUnavailable: nothing suitable imports; the message says what to install.
    """
    try:
        import tensorrt as trt

        return trt
    except Exception as exc:  # ImportError, or a broken install failing to load its libraries
        full_error = exc
    if require_builder:
        raise BackendUnavailable(
            f"building a TensorRT engine from ONNX needs the full 'tensorrt' Python package (>= 10), which does not "
            f"import here ({type(full_error).__name__}: {full_error}); install it, or give a prebuilt engine file"
        )
    try:
        import tensorrt_lean_bindings as trt

        return trt
    except Exception as exc:
        raise BackendUnavailable(
            f"TensorRT is not importable here: 'tensorrt' ({full_error}) nor the lean runtime "
            f"'tensorrt_lean_bindings' ({exc}); install tensorrt >= 10"
        ) from None


def tensorrt_unavailable_reason(require_builder: bool = False) -> str | None:
    """Why TensorRT cannot be used here, or None when it imports.

    Args:
        require_builder: ask for the full package (building from ONNX); otherwise the lean runtime also counts.

    Never raises; for ``backend: auto`` (engine choice) and test skips.
    """
    try:
        import_tensorrt(require_builder=require_builder)
    except BackendUnavailable as exc:
        return str(exc)
    return None


def _version(trt) -> str:
    return str(getattr(trt, "__version__", "unknown"))


# --------------------------------------------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------------------------------------------
def _enum_name(severity: Any) -> str:
    name = getattr(severity, "name", None)
    if not isinstance(name, str):
        name = str(severity).rsplit(".", 1)[-1]
    return name.upper()


class LogRouter:
    """Routes TensorRT log messages to a Python callable; :meth:`route` never raises.

    TensorRT calls its logger from C++; an exception escaping the Python ``log()`` would cross into C++. So every
    failure here (a sink that raises, a message that cannot be converted) is swallowed and counted.

    Args:
        sink: receives ``"TensorRT <LEVEL>: <message>"`` strings at or above ``min_level`` (e.g. the node's logger).
        min_level: Python logging level below which messages are not forwarded (VERBOSE = DEBUG, INFO, WARNING,
            ERROR, INTERNAL_ERROR = CRITICAL).
        keep: how many ERROR/INTERNAL_ERROR messages are remembered for error reports.

    Attributes:
        failures: messages lost because routing them raised.
    """

    def __init__(self, sink: Log | None = None, min_level: int = logging.WARNING, keep: int = 32) -> None:
        self.sink = sink
        self.min_level = min_level
        self.failures = 0
        self.hold_errors = False  # while True, errors are only remembered (the caller reports them in its exception)
        self._errors: deque[tuple[int, str]] = deque(maxlen=keep)
        self._count = 0
        self._lock = threading.Lock()

    def route(self, severity: Any, message: Any) -> None:
        """Handle one message (``severity``: a TensorRT ``ILogger.Severity`` or its name). Never raises."""
        try:
            name = _enum_name(severity)
            level = _LEVELS.get(name, logging.WARNING)
            text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
            if level >= logging.ERROR:
                with self._lock:
                    self._count += 1
                    self._errors.append((self._count, text))
            if level >= self.min_level and not (self.hold_errors and level >= logging.ERROR):
                line = f"TensorRT {name}: {text}"
                if self.sink is not None:
                    self.sink(line)
                else:
                    _log.log(level, line)
        except BaseException:  # noqa: BLE001 - nothing may escape into TensorRT's C++ caller
            try:
                self.failures += 1
            except BaseException:  # noqa: BLE001
                pass

    def mark(self) -> int:
        """A position in the error stream; pass it to :meth:`errors_since`."""
        with self._lock:
            return self._count

    def errors_since(self, mark: int) -> list[str]:
        """ERROR and INTERNAL_ERROR messages logged after ``mark`` (oldest first, at most ``keep``)."""
        with self._lock:
            return [text for i, text in self._errors if i > mark]


_logger_classes: dict[int, type] = {}
_QUARANTINE: list[tuple[Any, Any]] = []  # runtimes that failed to start; never destroyed (see TensorRtEngine._runtime)


def _make_logger(trt, router: LogRouter):
    """A ``trt.ILogger`` whose ``log()`` forwards to ``router`` and never raises."""
    cls = _logger_classes.get(id(trt))
    if cls is None:

        class RoutedLogger(trt.ILogger):
            def __init__(self, r: LogRouter) -> None:
                trt.ILogger.__init__(self)
                self._router = r

            def log(self, severity, msg):  # called from C++
                try:
                    self._router.route(severity, msg)
                except BaseException:  # noqa: BLE001 - route() already never raises; belt and braces
                    pass

        cls = _logger_classes[id(trt)] = RoutedLogger
    return cls(router)


# --------------------------------------------------------------------------------------------------------------
# Ownership of TensorRT objects
# --------------------------------------------------------------------------------------------------------------
class _Owner:
    """Sole owner of a set of TensorRT objects, released in the order of ``ORDER``.

    Each object is dropped by clearing its only reference, so its C++ object is destroyed right there (CPython
    reference counting), in this order.
    """

    ORDER: tuple[str, ...] = ()
    __slots__ = ()

    def __init__(self) -> None:
        for name in self.ORDER:
            setattr(self, name, None)

    def release(self) -> None:
        for name in self.ORDER:
            setattr(self, name, None)


class _Handles(_Owner):
    """The objects of one engine: ``context`` before ``engine`` before ``runtime`` before ``logger``."""

    ORDER = ("context", "engine", "runtime", "logger")
    __slots__ = ORDER + ("__weakref__",)


class _BuildHandles(_Owner):
    """The builder-side objects: parser, network, profile, config, builder, then the progress monitor and
    calibrator (which must outlive every TensorRT object using them), then the logger."""

    ORDER = ("parser", "network", "profile", "config", "builder", "monitor", "calibrator", "logger")
    __slots__ = ORDER


# --------------------------------------------------------------------------------------------------------------
# File checks (before TensorRT sees any byte)
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineFile:
    """A serialized engine read from disk and checked.

    Attributes:
        path: the file.
        plan: the TensorRT plan bytes (any Ultralytics metadata prefix removed).
        metadata: the Ultralytics JSON metadata when the file had one, else {}.
    """

    path: Path
    plan: bytes
    metadata: dict


def _rebuild_hint(path: Path) -> str:
    return (f"rebuild the engine with this TensorRT on this GPU (e.g. trtexec --onnx=model.onnx --saveEngine={path}), "
            "or set model.path to the .onnx model so vrt_ros builds and caches the engine")


def read_engine_file(path: str | Path, fix: str | None = None) -> EngineFile:
    """Read a serialized TensorRT engine and check its header before TensorRT sees it.

    Accepts a raw plan (starting with ``ftrt``) or an Ultralytics export (``uint32`` little-endian JSON length,
    the JSON metadata, then the plan).

    Args:
        path: the engine file.
        fix: how to fix a bad file (default: rebuild it / use the ONNX model).

    Raises:
        ModelError: missing path, a directory, an empty or too-short file, or a file that is not a TensorRT plan
            (random bytes, an ONNX model, an image...). The message names the file, what was expected and the fix.
    """
    p = Path(path)
    fix = fix or _rebuild_hint(p)
    expected = "a serialized TensorRT engine (plan starting with b'ftrt') or an .onnx model"
    if not str(path):
        raise ModelError(f"model.path is empty: expected {expected}; set model.path")
    if not p.exists():
        raise ModelError(f"engine file {p} does not exist: expected {expected}; set model.path to an existing file")
    if not p.is_file():
        raise ModelError(f"engine path {p} is not a regular file: expected {expected}; set model.path to the file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ModelError(f"engine file {p} cannot be read ({exc}); check its permissions") from exc
    if len(data) < PLAN_HEADER_BYTES:
        raise ModelError(f"engine file {p} is {len(data)} bytes, too short for a TensorRT plan "
                         f"(header alone is {PLAN_HEADER_BYTES} bytes): expected {expected}; fix: {fix}")
    if data.startswith(PLAN_MAGIC):
        return EngineFile(p, data, {})
    meta_len = int.from_bytes(data[:4], "little")
    start = 4 + meta_len
    if 0 < meta_len and start + PLAN_HEADER_BYTES <= len(data) and data[start:start + 4] == PLAN_MAGIC:
        try:
            meta = json.loads(data[4:start].decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            meta = None
        if isinstance(meta, dict):
            return EngineFile(p, data[start:], meta)
    what = "an ONNX model (protobuf)" if _looks_like_onnx(data) else "not a TensorRT plan"
    hint = "; if it is an ONNX model, give it the .onnx suffix so it is built" if what.startswith("an ONNX") else ""
    raise ModelError(f"engine file {p} is {what}: its first bytes are {data[:8].hex(' ')}, expected {expected}{hint}; "
                     f"fix: {fix}")


def _looks_like_onnx(data: bytes) -> bool:
    """True when ``data`` starts like an ONNX ``ModelProto``: field 1 (ir_version, a small varint), then a
    length-delimited field such as producer_name (2), graph (7) or opset_import (8). A hint for the message only."""
    return (len(data) > 3 and data[0] == 0x08 and 1 <= data[1] <= 32
            and data[2] in (0x12, 0x1A, 0x22, 0x2A, 0x3A, 0x42, 0x52, 0x5A, 0x62, 0x72))


def _check_onnx_file(p: Path) -> None:
    """Fail early on a missing, empty or non-ONNX ``.onnx`` path (TensorRT's parser reports the rest)."""
    if not p.is_file():
        raise ModelError(f"ONNX model {p} does not exist: expected an .onnx file; set model.path to an existing file")
    with open(p, "rb") as f:
        head = f.read(PLAN_HEADER_BYTES)
    if not head:
        raise ModelError(f"ONNX model {p} is empty: expected an ONNX model; re-export or re-download it")
    if head.startswith(PLAN_MAGIC):
        raise ModelError(f"ONNX model {p} is a serialized TensorRT engine, not ONNX: rename it to .engine so it is loaded as one")


def _diagnose(errors: Sequence[str]) -> str:
    """A short cause from TensorRT's logged errors."""
    text = " ".join(errors).lower()
    if "version tag" in text or "serialization version" in text or ("version" in text and "does not match" in text):
        return "it was built by another TensorRT version"
    if any(k in text for k in ("incompatible device", "expecting compute", "compute capability", "platform",
                               "not compatible", "hardware")):
        return "it was built for another GPU or platform, or is corrupt"
    if "magic" in text:
        return "it is not a TensorRT plan"
    if "size" in text or "truncat" in text or "archive" in text:
        return "it is truncated or corrupt"
    return "it is corrupt, truncated, or from another TensorRT version or GPU"


# --------------------------------------------------------------------------------------------------------------
# Optimisation profile (pure)
# --------------------------------------------------------------------------------------------------------------
def resolve_profile(
    name: str,
    dims: Sequence[int],
    input_size: tuple[int, int] | None,
    profile_min: tuple[int, int] | None = None,
    profile_max: tuple[int, int] | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(min, opt, max) shapes for an NCHW image input with dynamic dims, or None when it is fully static.

    A dynamic batch becomes 1; dynamic H/W take ``input_size`` (width, height) as the optimum and
    ``profile_min``/``profile_max`` (width, height; default: the optimum) as the bounds.

    Raises:
        ModelError: not a 4-D input, or a dynamic channel count.
        ConfigError: dynamic H/W without ``model.input_width/height``, or bounds not ordered min <= opt <= max.
    """
    dims = tuple(int(d) for d in dims)
    if all(d >= 0 for d in dims):
        return None
    if len(dims) != 4:
        raise ModelError(f"input {name!r} has shape {dims}: the detector pipeline feeds one NCHW image (4 dims)")
    n, c, h, w = dims
    if c < 0:
        raise ModelError(f"input {name!r} has a dynamic channel count {dims}: expected 3 (an image)")
    if (h < 0 or w < 0) and input_size is None:
        raise ConfigError(f"model.input_width/model.input_height: input {name!r} has a dynamic size {dims}; set them")
    ow, oh = input_size if input_size else (w, h)
    if (h >= 0 and oh != h) or (w >= 0 and ow != w):
        raise ConfigError(f"model.input_width/height {ow}x{oh} contradict input {name!r} fixed dims {dims}")
    opt = (1 if n < 0 else n, c, oh, ow)

    def bound(wh: tuple[int, int] | None) -> tuple[int, ...]:
        if wh is None or (h >= 0 and w >= 0):
            return opt
        bw, bh = int(wh[0]), int(wh[1])
        return (opt[0], c, h if h >= 0 else bh, w if w >= 0 else bw)

    lo, hi = bound(profile_min), bound(profile_max)
    if not all(a <= b <= z for a, b, z in zip(lo, opt, hi)):
        raise ConfigError(f"engine.profile_min {lo} <= input size {opt} <= engine.profile_max {hi} does not hold "
                          f"for input {name!r}; widen the profile or change model.input_width/height")
    return lo, opt, hi


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
        fp16: allow FP16 kernels when building (TensorRT 10.x ``BuilderFlag.FP16``; TensorRT 11 removed weak typing,
            so there the model itself must carry FP16 types).
        workspace_mb: builder workspace limit, MiB.
        input_size: (width, height) of the image input for dynamic models (``model.input_width/height``).
        profile_min, profile_max: (width, height) bounds of the optimisation profile for dynamic models.
        calibration_cache: INT8 calibration cache file (TensorRT 10.x only); INT8 only when given.
        gpu_name, compute_capability: the device's identity for the cache key (e.g. "NVIDIA H200", "9.0" or "90");
            required when ``path`` is an ONNX model.
        log: start-up messages and TensorRT warnings/errors (e.g. the node's logger); default: Python logging.

    Attributes:
        inputs, outputs: :class:`~vrt_ros.types.TensorInfo` with the shapes resolved for the chosen input size and
            the dtypes the engine declares ("float32", "float16", ...).
        name: for logs, e.g. "TensorRT 10.13.3.9 (yolox_nano-fp16-....engine)".
        engine_path: the engine file used (the cache entry when built from ONNX).
        built: True when this start built the engine (False: loaded from a file or the cache).

    Raises:
        ModelError: bad engine or ONNX file (see :func:`read_engine_file`), deserialisation failure, unsupported
            I/O (more than one input, data-dependent output shapes, vectorised formats, unsupported dtypes).
        ConfigError: parameters that contradict the model or this TensorRT (e.g. ``engine.fp16`` on TensorRT 11).
        BackendUnavailable: TensorRT missing, or its runtime cannot start (no usable CUDA driver/device).
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
        self._bound: tuple[int, ...] | None = None
        self.inputs: list[TensorInfo] = []
        self.outputs: list[TensorInfo] = []
        try:
            is_onnx = is_onnx_model(self.path)  # by content, not by name
            # The file is checked before TensorRT is even imported: a bad path fails the same way everywhere.
            if is_onnx:
                _check_onnx_file(self.path)
            else:
                ef = read_engine_file(self.path)
            self._trt = trt = _trt if _trt is not None else import_tensorrt(require_builder=is_onnx)
            self._h.logger = _make_logger(trt, self._router)
            if is_onnx:
                if not gpu_name or not compute_capability:
                    raise ValueError("TensorRtEngine: gpu_name and compute_capability are required to cache an engine built from ONNX")
                self._load_onnx(
                    fp16=fp16, workspace_mb=workspace_mb, input_size=input_size, profile_min=profile_min,
                    profile_max=profile_max, calibration_cache=calibration_cache, gpu_name=gpu_name,
                    compute_capability=compute_capability, cache_dir=cache_dir)
            else:
                self.engine_path = self.path
                if ef.metadata:
                    self._say(f"{self.path.name}: Ultralytics metadata prefix stripped (keys {sorted(ef.metadata)[:6]})")
                self._deserialize(ef.plan, self.path, _rebuild_hint(self.path))
                del ef
            self._bind_io(input_size)
            self.name = f"TensorRT {_version(trt)} ({self.engine_path.name})"
        except BaseException as exc:
            # The traceback's frames may still reference TensorRT objects (locals of the helpers above): clear
            # them so that close() really destroys context, engine, runtime and logger now, in that order.
            traceback.clear_frames(exc.__traceback__)
            self.close()
            raise

    # ---- construction helpers -------------------------------------------------------------------------------
    @classmethod
    def from_values(cls, values: Mapping[str, Any], device: int = 0, *, gpu_name: str | None = None,
                    compute_capability: str | None = None, log: Log | None = None) -> "TensorRtEngine":
        """Build from validated parameter values (``model.path``, ``model.input_width/height``, ``engine.*``).

        Reads ``engine.cache_dir``, ``engine.fp16``, and when present ``engine.workspace_mb``,
        ``engine.profile_min`` / ``engine.profile_max`` ([width, height]; [] = the input size) and
        ``engine.int8_calibration_cache`` ("" = none).
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
        )

    def _runtime(self):
        """Create the runtime once; a runtime that logged errors while starting is unusable (no CUDA)."""
        if self._h.runtime is None:
            mark = self._router.mark()
            self._h.runtime = self._trt.Runtime(self._h.logger)
            errors = self._router.errors_since(mark)
            if errors or self._h.runtime is None:
                # Destroying a runtime whose start failed crashes TensorRT (measured with the lean runtime 11.4 on a
                # machine without a CUDA driver: SIGSEGV in its destructor), so it is kept, with its logger, until
                # the process exits instead of being released.
                _QUARANTINE.append((self._h.runtime, self._h.logger))
                self._h.runtime = None
                raise BackendUnavailable(f"the TensorRT {_version(self._trt)} runtime cannot start here: "
                                         f"{' | '.join(errors) or 'Runtime() returned None'}")
        return self._h.runtime

    def _deserialize(self, plan: bytes, path: Path, fix: str) -> None:
        self._runtime()
        mark = self._router.mark()
        self._router.hold_errors = True  # what TensorRT logs goes into the ModelError below, not twice into the log
        try:
            self._h.engine = self._h.runtime.deserialize_cuda_engine(plan)
        except Exception as exc:  # some bindings raise instead of returning None
            errors = self._router.errors_since(mark) + [f"{type(exc).__name__}: {exc}"]
            self._h.engine = None
        else:
            errors = self._router.errors_since(mark)
        finally:
            self._router.hold_errors = False
        if self._h.engine is None:
            detail = " | ".join(errors[-3:]) or "deserialize_cuda_engine returned None"
            raise ModelError(
                f"engine file {path} could not be loaded by TensorRT {_version(self._trt)}: {_diagnose(errors)} "
                f"(TensorRT: {detail}). Expected an engine built by TensorRT {_version(self._trt)} for this GPU; "
                f"fix: {fix}"
            ) from None

    def _bind_io(self, input_size: tuple[int, int] | None) -> None:
        engine = self._h.engine
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if _enum_name(engine.get_tensor_mode(n)) == "INPUT"]
        outputs = [n for n in names if _enum_name(engine.get_tensor_mode(n)) == "OUTPUT"]
        where = f"engine {self.engine_path}"
        if len(inputs) != 1 or not outputs:
            raise ModelError(f"{where} has inputs {inputs} and outputs {outputs}: the detector pipeline needs one image "
                             "input and at least one output")
        for n in names:
            fmt = getattr(engine, "get_tensor_format", None)
            if fmt is not None and _enum_name(fmt(n)) != "LINEAR":
                raise ModelError(f"{where}: tensor {n!r} uses the vectorised format {_enum_name(fmt(n))}; "
                                 "rebuild with linear (default) I/O formats")
        self._h.context = engine.create_execution_context()
        if self._h.context is None:
            raise ModelError(f"{where}: TensorRT could not create an execution context "
                             f"({' | '.join(self._router.errors_since(0)[-2:]) or 'out of device memory?'})")
        ctx = self._h.context
        name = inputs[0]
        dims = tuple(int(d) for d in engine.get_tensor_shape(name))
        if any(d < 0 for d in dims):
            lo, opt, hi = (tuple(int(d) for d in s) for s in engine.get_tensor_profile_shape(name, 0))
            shape = list(opt)
            if input_size is not None and len(shape) == 4:
                shape[0] = max(shape[0], 1)
                shape[3], shape[2] = int(input_size[0]), int(input_size[1])
            if not all(a <= b <= c for a, b, c in zip(lo, shape, hi)):
                raise ConfigError(f"model.input_width/height: input {name!r} shape {tuple(shape)} is outside the engine's "
                                  f"optimisation profile {lo}..{hi}; choose a size inside it or rebuild the engine")
            if not ctx.set_input_shape(name, tuple(shape)):
                raise ConfigError(f"{where}: set_input_shape({name!r}, {tuple(shape)}) was refused by TensorRT "
                                  f"({' | '.join(self._router.errors_since(0)[-2:])})")
            dims = tuple(shape)
        self.inputs = [TensorInfo(name, dims, self._dtype(name))]
        for n in outputs:
            shape = tuple(int(d) for d in ctx.get_tensor_shape(n))
            if any(d < 0 for d in shape):
                raise ModelError(f"{where}: output {n!r} has a data-dependent shape {shape}; the pipeline needs output "
                                 "shapes fixed by the input shape")
            self.outputs.append(TensorInfo(n, shape, self._dtype(n)))
        self._io_names = [name, *outputs]

    def _dtype(self, name: str) -> str:
        dt = _enum_name(self._h.engine.get_tensor_dtype(name))
        if dt not in _DTYPES:
            raise ModelError(f"engine {self.engine_path}: tensor {name!r} has dtype {dt}, which the pipeline cannot hold "
                             f"(supported: {sorted(_DTYPES)})")
        return _DTYPES[dt]

    # ---- building from ONNX ---------------------------------------------------------------------------------
    def _load_onnx(self, *, fp16, workspace_mb, input_size, profile_min, profile_max, calibration_cache,
                   gpu_name, compute_capability, cache_dir) -> None:
        """Load the cached engine for this ONNX model and configuration, or build, cache and load it."""
        trt, onnx_path = self._trt, self.path
        calib_sha = ""
        if calibration_cache:
            if not Path(calibration_cache).is_file():
                raise ConfigError(f"engine.int8_calibration_cache: {calibration_cache} does not exist")
            calib_sha = file_sha256(calibration_cache)
        precision = "int8" if calibration_cache else ("fp16" if fp16 else "fp32")
        key = EngineKey(
            onnx_sha256=file_sha256(onnx_path), tensorrt_version=_version(trt), gpu_name=str(gpu_name),
            compute_capability=str(compute_capability), precision=precision,
            shapes={"input_size": list(input_size) if input_size else None,
                    "profile_min": list(profile_min) if profile_min else None,
                    "profile_max": list(profile_max) if profile_max else None},
            calibration_sha256=calib_sha, model_name=onnx_path.stem)
        cache = EngineCache(engine_cache_dir(cache_dir))
        found = cache.lookup(key)
        fix = f"delete {found.engine_path} and {found.sidecar_path.name} (the next start rebuilds it)"
        self.engine_path = found.engine_path
        if found.hit:
            try:
                self._deserialize(read_engine_file(found.engine_path, fix).plan, found.engine_path, fix)
                self._say(f"TensorRT engine cache hit: {found.engine_path}")
                return
            except ModelError as exc:  # e.g. a driver update: ours to rebuild, never to fail on
                self._say(f"cached engine rejected, rebuilding: {exc}")
                cache.remove(key)
        elif found.status == "stale":
            self._say(f"TensorRT engine cache entry {found.engine_path.name} is stale ({found.reason}); rebuilding")
            cache.remove(key)
        plan = self._build(key, fp16=fp16, workspace_mb=workspace_mb, input_size=input_size,
                           profile_min=profile_min, profile_max=profile_max, calibration_cache=calibration_cache)
        self.built = True
        try:
            cache.store(key, plan)
            self._say(f"TensorRT engine written to the cache: {found.engine_path} ({len(plan) / 1e6:.1f} MB); "
                      f"delete it to force a rebuild (cache folder {cache.directory}, engine.cache_dir={cache_dir or ''!r})")
        except OSError as exc:
            self._say(f"warning: could not write the engine cache {cache.directory} ({exc}); the engine is rebuilt "
                      "at every start until engine.cache_dir is writable")
        self._deserialize(plan, found.engine_path, fix)

    def _build(self, key: EngineKey, *, fp16, workspace_mb, input_size, profile_min, profile_max,
               calibration_cache) -> bytes:
        trt, onnx_path = self._trt, self.path
        if not hasattr(trt, "Builder"):
            raise BackendUnavailable(f"building {onnx_path.name} needs the full tensorrt package; "
                                     f"{getattr(trt, '__name__', 'this module')} is a runtime only")
        b = _BuildHandles()
        b.logger = self._h.logger
        try:
            mark = self._router.mark()
            b.builder = trt.Builder(b.logger)
            if b.builder is None:
                raise BackendUnavailable(f"TensorRT Builder cannot start: {' | '.join(self._router.errors_since(mark))}")
            b.network = b.builder.create_network(0)
            b.parser = trt.OnnxParser(b.network, b.logger)
            if not b.parser.parse_from_file(str(onnx_path)):
                errs = [str(b.parser.get_error(i)) for i in range(b.parser.num_errors)]
                raise ModelError(f"ONNX model {onnx_path} could not be parsed by TensorRT {_version(trt)}: "
                                 f"{' | '.join(errs[:3]) or 'unknown error'}; expected a complete ONNX model with "
                                 "operators TensorRT supports: re-export it (opset 13-21) or re-download it")
            b.config = b.builder.create_builder_config()
            b.config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mb) << 20)
            if key.precision == "fp16":
                if not hasattr(trt.BuilderFlag, "FP16"):
                    raise ConfigError(f"engine.fp16: TensorRT {_version(trt)} has no FP16 builder flag (weak typing was "
                                      "removed in TensorRT 11); export the ONNX model with FP16 types (e.g. ModelOpt "
                                      "AutoCast, keep_io_types) and set engine.fp16 false")
                b.config.set_flag(trt.BuilderFlag.FP16)
            if key.precision == "int8":
                b.calibrator = _calibrator(trt, Path(calibration_cache))
                b.config.set_flag(trt.BuilderFlag.INT8)
                b.config.int8_calibrator = b.calibrator
            profiled = []
            for i in range(b.network.num_inputs):
                t = b.network.get_input(i)
                shapes = resolve_profile(t.name, tuple(t.shape), input_size, profile_min, profile_max)
                if shapes is not None:
                    if b.profile is None:
                        b.profile = b.builder.create_optimization_profile()
                    b.profile.set_shape(t.name, *shapes)
                    profiled.append(f"{t.name} min {shapes[0]} opt {shapes[1]} max {shapes[2]}")
            if b.profile is not None:
                b.config.add_optimization_profile(b.profile)
            b.monitor = _progress_monitor(trt, self._say)
            if b.monitor is not None:
                b.config.progress_monitor = b.monitor
            self._say(f"building a TensorRT {_version(trt)} engine from {onnx_path.name} ({key.precision}, workspace "
                      f"{workspace_mb} MiB{', ' + '; '.join(profiled) if profiled else ''}); this can take minutes")
            t0 = time.monotonic()
            mark = self._router.mark()
            serialized = b.builder.build_serialized_network(b.network, b.config)
            if serialized is None:
                errs = self._router.errors_since(mark)
                raise ModelError(f"TensorRT could not build an engine from {onnx_path}: "
                                 f"{' | '.join(errs[-3:]) or 'build_serialized_network returned None'}; check the "
                                 "model's operators and engine.workspace_mb")
            plan = bytes(memoryview(serialized))
            del serialized
            self._say(f"TensorRT engine built in {time.monotonic() - t0:.1f} s ({len(plan) / 1e6:.1f} MB)")
            return plan
        finally:
            b.release()

    # ---- per frame ------------------------------------------------------------------------------------------
    def enqueue(self, stream, input_ptr: int, output_ptrs: Sequence[int]) -> None:
        """Queue one inference on ``stream``; returns at once (no host synchronisation).

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
        ptrs = (int(input_ptr), *(int(p) for p in output_ptrs))
        if ptrs != self._bound:
            if len(ptrs) != len(self._io_names):
                raise ValueError(f"enqueue needs {len(self._io_names) - 1} output pointers, got {len(ptrs) - 1}")
            for n, p in zip(self._io_names, ptrs):
                if not ctx.set_tensor_address(n, p):
                    raise ModelError(f"TensorRT refused the device address of {n!r} ({self._last_errors()})")
            self._bound = ptrs
        handle = int(stream.__cuda_stream__()[1]) if hasattr(stream, "__cuda_stream__") else int(stream)
        if not ctx.execute_async_v3(handle):
            self._bound = None
            raise ModelError(f"TensorRT execute_async_v3 failed for {self.engine_path} ({self._last_errors()})")

    def _last_errors(self) -> str:
        return " | ".join(self._router.errors_since(0)[-2:]) or "no TensorRT error logged"

    def close(self) -> None:
        """Release the context, engine, runtime and logger, in that order. Idempotent."""
        self._bound = None
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive


def _progress_monitor(trt, say: Log):
    """A ``trt.IProgressMonitor`` logging build phases (TensorRT >= 10 full package), or None. Never raises."""
    base = getattr(trt, "IProgressMonitor", None)
    if base is None:
        return None

    class BuildProgress(base):
        def __init__(self) -> None:
            base.__init__(self)
            self._t0 = time.monotonic()
            self._last = self._t0
            self._lock = threading.Lock()  # TensorRT may report from several internal threads

        def phase_start(self, phase_name, parent_phase, num_steps):
            try:
                if not parent_phase:
                    say(f"TensorRT build: {phase_name} ({num_steps} steps) at {time.monotonic() - self._t0:.0f} s")
            except BaseException:  # noqa: BLE001 - called from C++
                pass

        def step_complete(self, phase_name, step):
            try:
                now = time.monotonic()
                with self._lock:
                    due = now - self._last >= 10.0  # a heartbeat line at most every 10 s
                    if due:
                        self._last = now
                if due:
                    say(f"TensorRT build: {phase_name} step {step} ({now - self._t0:.0f} s)")
            except BaseException:  # noqa: BLE001
                pass
            return True  # never cancel

        def phase_finish(self, phase_name):
            pass

    return BuildProgress()


def _calibrator(trt, cache_file: Path):
    """An INT8 calibrator that only replays ``cache_file`` (TensorRT 10.x)."""
    base = getattr(trt, "IInt8EntropyCalibrator2", None)
    if base is None or not hasattr(trt.BuilderFlag, "INT8"):
        raise ConfigError(f"engine.int8_calibration_cache: TensorRT {_version(trt)} has no INT8 calibration (removed in "
                          "TensorRT 11); use a Q/DQ-quantised ONNX model and leave the parameter empty")
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

    return CacheCalibrator()


__all__ = ["EngineFile", "LogRouter", "TensorRtEngine", "import_tensorrt", "read_engine_file", "resolve_profile",
           "tensorrt_unavailable_reason", "PLAN_MAGIC"]
