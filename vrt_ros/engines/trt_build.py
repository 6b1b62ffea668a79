"""Building a TensorRT plan from ONNX, and the cached plan for an ONNX model (build once, then load from the cache).

Works with every flavour that has a builder (``tensorrt`` >= 10, TensorRT for RTX; see
:mod:`vrt_ros.engines.trt_flavours`): ONNX parser, builder config (workspace limit, precision, an optimisation
profile for dynamic inputs, the target compute capability where the flavour needs one), progress logged while
building. The plan is stored in the engine cache (:mod:`vrt_ros.engines.engine_cache`) with a sidecar that also
records the network's input/output tensors (names, dtypes, shapes, profile) as the builder saw them.

FP16 (``engine.fp16``): on TensorRT 10.x the builder's ``BuilderFlag.FP16`` lets it pick FP16 kernels. Flavours
without that flag build strongly typed networks (TensorRT for RTX, TensorRT 11): there the ONNX model is converted
to FP16 first with onnxconverter-common (``convert_float_to_float16(keep_io_types=True)``), so the engine still
takes FP32 inputs and gives FP32 outputs, the same contract as an FP16 TensorRT 10 engine.

No TensorRT module is imported here: the caller passes the one it selected.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from vrt_ros.engines.engine_cache import EngineCache, EngineKey, file_sha256
from vrt_ros.engines.engine_cache import cache_dir as engine_cache_dir
from vrt_ros.engines.trt_flavours import TENSORRT_RTX, flavour_of, parse_compute_capability
from vrt_ros.engines.trt_logging import Log, LogRouter, enum_name
from vrt_ros.engines.trt_plan_file import read_engine_file
from vrt_ros.engines.trt_precision import (asked, check_calibration, enable_calibration, qdq_nodes,
                                           request_layer_details, strongly_typed)
from vrt_ros.errors import BackendUnavailable, ConfigError, ModelError

DEFAULT_WORKSPACE_MB = 1024
DTYPES = {"FLOAT": "float32", "HALF": "float16", "INT32": "int32", "INT64": "int64", "INT8": "int8",
          "UINT8": "uint8", "BOOL": "bool"}
"""TensorRT ``DataType`` member name -> numpy dtype name (only types the pipeline can hold in a buffer)."""


def version(trt) -> str:
    """``trt.__version__``, or "unknown"."""
    return str(getattr(trt, "__version__", "unknown"))


class Owner:
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


class _BuildHandles(Owner):
    """The builder-side objects: parser, network, profile, config, builder, then the progress monitor and
    calibrator (which must outlive every TensorRT object using them), then the logger."""

    ORDER = ("parser", "network", "profile", "config", "builder", "monitor", "calibrator", "logger")
    __slots__ = ORDER


@dataclass(frozen=True)
class BuildOptions:
    """How to build an engine from ONNX (the ``engine.*`` and ``model.input_*`` parameters).

    Attributes:
        fp16: FP16 precision (see the module docstring for how each flavour gets it).
        workspace_mb: builder workspace limit, MiB.
        input_size: (width, height) of the image input for dynamic models.
        profile_min, profile_max: (width, height) bounds of the optimisation profile for dynamic models.
        calibration_cache: INT8 calibration cache file (TensorRT 10.x only); INT8 only when given.
        max_batch: for a dynamic batch dim, the profile's batch range is 1 .. ``max_batch`` (optimum ``max_batch``).
    """

    fp16: bool = False
    workspace_mb: int = DEFAULT_WORKSPACE_MB
    input_size: tuple[int, int] | None = None
    profile_min: tuple[int, int] | None = None
    profile_max: tuple[int, int] | None = None
    calibration_cache: str | None = None
    max_batch: int = 1

    @property
    def precision(self) -> str:
        """"int8" (with a calibration cache), "fp16" or "fp32"."""
        return "int8" if self.calibration_cache else ("fp16" if self.fp16 else "fp32")


@dataclass
class Plan:
    """A serialized engine for an ONNX model, from the cache or just built.

    Attributes:
        data: the plan bytes.
        path: the cache entry's engine file (written unless the cache folder is not writable).
        key: its cache key.
        built: True when this call built it (False: cache hit).
        io: the network's tensors as the builder saw them: dicts with ``name``, ``mode`` ("INPUT"/"OUTPUT"),
            ``dtype`` (numpy name), ``shape`` (-1 = dynamic) and, for profiled inputs, ``profile`` ([min, opt, max]).
            From the build, or from the sidecar on a cache hit.
        fix: how to get rid of a bad entry (for error messages).
    """

    data: bytes
    path: Path
    key: EngineKey
    built: bool
    io: list[dict] = field(default_factory=list)
    fix: str = ""


# --------------------------------------------------------------------------------------------------------------
# Optimisation profile (pure)
# --------------------------------------------------------------------------------------------------------------
def resolve_profile(
    name: str,
    dims: Sequence[int],
    input_size: tuple[int, int] | None,
    profile_min: tuple[int, int] | None = None,
    profile_max: tuple[int, int] | None = None,
    max_batch: int = 1,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(min, opt, max) shapes for an NCHW image input with dynamic dims, or None when it is fully static.

    A dynamic batch ranges over 1 .. ``max_batch`` (``engine.max_batch``; the optimum is ``max_batch``, the batch
    the many-camera node runs most); dynamic H/W take ``input_size`` (width, height) as the optimum and
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
    top = max(1, int(max_batch)) if n < 0 else n
    opt = (top, c, oh, ow)

    def bound(wh: tuple[int, int] | None, batch: int) -> tuple[int, ...]:
        if wh is None or (h >= 0 and w >= 0):
            return (batch, *opt[1:])
        bw, bh = int(wh[0]), int(wh[1])
        return (batch, c, h if h >= 0 else bh, w if w >= 0 else bw)

    lo, hi = bound(profile_min, 1 if n < 0 else n), bound(profile_max, top)
    if not all(a <= b <= z for a, b, z in zip(lo, opt, hi)):
        raise ConfigError(f"engine.profile_min {lo} <= input size {opt} <= engine.profile_max {hi} does not hold "
                          f"for input {name!r}; widen the profile or change model.input_width/height")
    return lo, opt, hi


# --------------------------------------------------------------------------------------------------------------
# The cached plan
# --------------------------------------------------------------------------------------------------------------
def make_key(trt, onnx_path: Path, options: BuildOptions, gpu_name: str, compute_capability: str) -> EngineKey:
    """The cache key of ``onnx_path`` built by ``trt`` with ``options`` for this GPU.

    Raises:
        ConfigError: ``options.calibration_cache`` does not exist, or this TensorRT cannot calibrate INT8
            (:func:`~vrt_ros.engines.trt_precision.check_calibration`).
    """
    calib_sha = ""
    if options.calibration_cache:
        check_calibration(trt, options.calibration_cache)  # before the cache: TensorRT 11 / RTX cannot calibrate
        calib_sha = file_sha256(options.calibration_cache)
    size, lo, hi = options.input_size, options.profile_min, options.profile_max
    return EngineKey(
        onnx_sha256=file_sha256(onnx_path), tensorrt_version=version(trt), gpu_name=str(gpu_name),
        compute_capability=str(compute_capability), precision=options.precision,
        shapes={"input_size": list(size) if size else None, "profile_min": list(lo) if lo else None,
                "profile_max": list(hi) if hi else None,
                **({"max_batch": int(options.max_batch)} if options.max_batch > 1 else {})},
        calibration_sha256=calib_sha, model_name=onnx_path.stem, flavour=flavour_of(trt).name)


def cached_plan(trt, onnx_path: Path, options: BuildOptions, *, gpu_name: str, compute_capability: str,
                cache_dir: str | None, logger: Any, router: LogRouter, say: Log, rebuild: bool = False) -> Plan:
    """The plan for ``onnx_path``: the valid cache entry, else built now and written to the cache.

    A missing, stale (other flavour, version, GPU, model, precision or shapes), truncated or corrupt entry is
    rebuilt (the sidecar check runs before any TensorRT module sees the file); ``rebuild`` forces a build (the
    caller's runtime refused a cached plan). A cache folder that cannot be written is logged, not fatal.

    Raises:
        ModelError: the ONNX model cannot be parsed or built (names the file and TensorRT's messages).
        ConfigError: parameters this flavour cannot honour.
        BackendUnavailable: the module has no builder.
    """
    key = make_key(trt, onnx_path, options, gpu_name, compute_capability)
    cache = EngineCache(engine_cache_dir(cache_dir))
    found = cache.lookup(key)
    fix = f"delete {found.engine_path} and {found.sidecar_path.name} (the next start rebuilds it)"
    if found.hit and not rebuild:
        try:
            data = read_engine_file(found.engine_path, fix).plan
            return Plan(data, found.engine_path, key, False, list(found.meta.get("io", [])), fix)
        except ModelError as exc:  # the sidecar matched but the header does not: rebuild it
            say(f"TensorRT engine cache entry {found.engine_path.name} is unusable ({exc}); rebuilding")
    elif found.status == "stale":
        say(f"TensorRT engine cache entry {found.engine_path.name} is stale ({found.reason}); rebuilding")
    if found.status != "miss":
        cache.remove(key)
    data, io = build_plan(trt, onnx_path, options, compute_capability=compute_capability, logger=logger,
                          router=router, say=say)
    try:
        cache.store(key, data, extra={"io": io})
        say(f"TensorRT engine written to the cache: {found.engine_path} ({len(data) / 1e6:.1f} MB); "
            f"delete it to force a rebuild (cache folder {cache.directory}, engine.cache_dir={cache_dir or ''!r})")
    except OSError as exc:
        say(f"warning: could not write the engine cache {cache.directory} ({exc}); the engine is rebuilt "
            "at every start until engine.cache_dir is writable")
    return Plan(data, found.engine_path, key, True, io, fix)


# --------------------------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------------------------
def fp16_onnx(onnx_path: Path) -> bytes:
    """``onnx_path`` converted to FP16 weights and arithmetic with FP32 inputs and outputs (serialized ONNX).

    Uses onnxconverter-common's ``convert_float_to_float16(keep_io_types=True)``; values beyond FP16's range are
    clamped by it (its truncation warnings are silenced).

    Raises:
        ConfigError: onnxconverter-common is not installed (names ``engine.fp16`` and what to install).
        ModelError: the model cannot be read or converted (names the file).
    """
    try:
        import onnx
        from onnxconverter_common import float16
    except ImportError as exc:
        raise ConfigError(
            f"engine.fp16: this TensorRT builds strongly typed networks, so vrt_ros converts {onnx_path.name} to FP16 "
            f"with onnxconverter-common, which is not importable ({exc}); pip install 'onnxconverter-common>=1.14,<2' "
            "or set engine.fp16 false") from None
    try:
        model = onnx.load(str(onnx_path))
        # Models of IR < 4 list their weights as graph inputs too (CenterFace does): as inputs they would be kept
        # FP32 by keep_io_types while their initializers become FP16, an inconsistent model. Weights are not inputs.
        weights = {i.name for i in model.graph.initializer}
        inputs = [v for v in model.graph.input if v.name not in weights]
        if len(inputs) != len(model.graph.input):
            del model.graph.input[:]
            model.graph.input.extend(inputs)
            model.ir_version = max(model.ir_version, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            half = float16.convert_float_to_float16(model, keep_io_types=True)
        return half.SerializeToString()
    except Exception as exc:  # noqa: BLE001 - protobuf/onnx raise many types
        raise ModelError(f"ONNX model {onnx_path} could not be converted to FP16 ({type(exc).__name__}: {exc}); "
                         "re-export it, or set engine.fp16 false") from None


def _tensor_record(t, mode: str) -> dict:
    dt = enum_name(t.dtype) if hasattr(t, "dtype") else "FLOAT"
    return {"name": str(t.name), "mode": mode, "dtype": DTYPES.get(dt, dt.lower()), "shape": [int(d) for d in t.shape]}


def network_io(network) -> list[dict]:
    """The network's inputs then outputs as :attr:`Plan.io` records (without profiles)."""
    io = [_tensor_record(network.get_input(i), "INPUT") for i in range(network.num_inputs)]
    return io + [_tensor_record(network.get_output(i), "OUTPUT") for i in range(network.num_outputs)]


def build_plan(trt, onnx_path: Path, options: BuildOptions, *, compute_capability: str | None, logger: Any,
               router: LogRouter, say: Log) -> tuple[bytes, list[dict]]:
    """Parse ``onnx_path`` and build a serialized engine with ``trt``.

    Returns:
        (plan bytes, the network's tensors as :attr:`Plan.io` records).

    Raises:
        ModelError: the parser rejects the file (corrupt, unsupported operator: its messages are quoted), or the
            builder fails (e.g. a workspace too small for any tactic: its logged errors are quoted).
        ConfigError: INT8 on a flavour without calibration; ``engine.fp16`` without onnxconverter-common where the
            network must be converted; bad profile parameters.
        BackendUnavailable: ``trt`` is a runtime-only module.
    """
    if not hasattr(trt, "Builder"):
        raise BackendUnavailable(f"building {onnx_path.name} needs the full tensorrt package; "
                                 f"{getattr(trt, '__name__', 'this module')} is a runtime only")
    flavour = flavour_of(trt)
    typed = strongly_typed(trt)
    precision = options.precision
    data = fp16_onnx(onnx_path) if precision == "fp16" and typed else None
    b = _BuildHandles()
    b.logger = logger
    try:
        mark = router.mark()
        b.builder = trt.Builder(b.logger)
        if b.builder is None:
            raise BackendUnavailable(f"TensorRT Builder cannot start: {' | '.join(router.errors_since(mark))}")
        b.network = b.builder.create_network(0)
        b.parser = trt.OnnxParser(b.network, b.logger)
        parsed = b.parser.parse_from_file(str(onnx_path)) if data is None else b.parser.parse(data, str(onnx_path))
        if not parsed:
            errs = [str(b.parser.get_error(i)) for i in range(b.parser.num_errors)]
            raise ModelError(f"ONNX model {onnx_path} could not be parsed by {flavour.label} {version(trt)}: "
                             f"{' | '.join(errs[:3]) or 'unknown error'}; expected a complete ONNX model with "
                             "operators TensorRT supports: re-export it (opset 13-21) or re-download it")
        b.config = b.builder.create_builder_config()
        b.config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(options.workspace_mb) << 20)
        if precision == "fp16" and not typed:
            b.config.set_flag(trt.BuilderFlag.FP16)
        if precision == "int8":
            b.calibrator = enable_calibration(trt, b.config, Path(str(options.calibration_cache)))
        request_layer_details(trt, b.config)  # so that the plan can say what its layers compute in
        if flavour is TENSORRT_RTX and compute_capability and parse_compute_capability(compute_capability) == (7, 5):
            # RTX plans run on 8.0+ by default; Turing needs a plan built for it (NVIDIA: "CPU-only AOT" page).
            b.config.num_compute_capabilities = 1
            b.config.set_compute_capability(trt.ComputeCapability.SM75, 0)
        io = network_io(b.network)
        profiled = []
        for i in range(b.network.num_inputs):
            t = b.network.get_input(i)
            shapes = resolve_profile(t.name, tuple(t.shape), options.input_size, options.profile_min,
                                     options.profile_max, options.max_batch)
            if shapes is not None:
                if b.profile is None:
                    b.profile = b.builder.create_optimization_profile()
                b.profile.set_shape(t.name, *shapes)
                io[i]["profile"] = [list(s) for s in shapes]
                profiled.append(f"{t.name} min {shapes[0]} opt {shapes[1]} max {shapes[2]}")
        if b.profile is not None:
            b.config.add_optimization_profile(b.profile)
        b.monitor = _progress_monitor(trt, say)
        if b.monitor is not None:
            b.config.progress_monitor = b.monitor
        say(f"building a {flavour.label} {version(trt)} engine from {onnx_path.name} (asked: "
            f"{asked(precision, strongly_typed=typed, qdq=qdq_nodes(onnx_path))}"
            f"{', FP32 inputs/outputs' if data is not None else ''}; workspace "
            f"{options.workspace_mb} MiB{', ' + '; '.join(profiled) if profiled else ''}); this can take minutes")
        t0 = time.monotonic()
        mark = router.mark()
        serialized = b.builder.build_serialized_network(b.network, b.config)
        if serialized is None:
            errs = router.errors_since(mark)
            raise ModelError(f"{flavour.label} could not build an engine from {onnx_path}: "
                             f"{' | '.join(errs[-3:]) or 'build_serialized_network returned None'}; check the "
                             f"model's operators, and engine.workspace_mb ({options.workspace_mb} MiB) if TensorRT "
                             "asks for more workspace memory")
        plan = bytes(memoryview(serialized))
        del serialized
        say(f"{flavour.label} engine built in {time.monotonic() - t0:.1f} s ({len(plan) / 1e6:.1f} MB)")
        return plan, io
    finally:
        b.release()


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


__all__ = ["DEFAULT_WORKSPACE_MB", "DTYPES", "BuildOptions", "Owner", "Plan", "build_plan", "cached_plan",
           "fp16_onnx", "make_key", "network_io", "resolve_profile", "version"]
