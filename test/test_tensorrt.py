"""TensorRT engine (vrt_ros.engines.tensorrt).

Three groups:

1. Runnable everywhere, no TensorRT: the file checks of HC-09 through the real constructor (they run before
   TensorRT is imported), the log router, the optimisation-profile rules.
2. Runnable everywhere, against ``FakeTrt`` — a stand-in module implementing the documented TensorRT >= 10 Python
   calls the engine uses, for what needs a GPU (Runtime, ICudaEngine, IExecutionContext): release order of
   context/engine/runtime/logger, deserialize returning None, dynamic shapes, dtypes, address binding, a cached plan
   the runtime refuses; and TensorRT 10.x's FP16 builder flag, which the real builder here (TensorRT for RTX) lacks.
   Building from ONNX runs against the real TensorRT for RTX builder in test_tensorrt_rtx.py.
3. ``@pytest.mark.tensorrt``: the real thing (full ``tensorrt`` + GPU): build tiny ONNX models, compare with ONNX
   Runtime, FP16 vs FP32 detections (HC-10), corrupt engines (HC-09), the cache. Skipped with the reason where
   TensorRT is absent. One test needs only the lean runtime (``tensorrt_lean_bindings``) and a GPU.
"""

from __future__ import annotations

import enum
import gc
import json
import logging
import os
import re
import sys
import types
import weakref
from pathlib import Path

import numpy as np
import pytest

from vrt_ros.engines import tensorrt as trt_mod
from vrt_ros.engines import trt_flavours
from vrt_ros.engines.engine_cache import EngineCache
from vrt_ros.engines.tensorrt import (
    PLAN_MAGIC,
    LogRouter,
    TensorRtEngine,
    read_engine_file,
    resolve_profile,
)
from vrt_ros.errors import BackendUnavailable, ConfigError, ModelError

HERE = Path(__file__).resolve().parent


# ==============================================================================================================
# 1. No TensorRT needed
# ==============================================================================================================
def _bad_engine_files(tmp_path: Path) -> dict[str, Path]:
    files = {}
    files["random_1k"] = tmp_path / "random.engine"
    files["random_1k"].write_bytes(np.random.default_rng(9).integers(0, 256, 1024, dtype=np.uint8).tobytes())
    files["empty"] = tmp_path / "empty.plan"
    files["empty"].write_bytes(b"")
    files["short"] = tmp_path / "short.engine"
    files["short"].write_bytes(PLAN_MAGIC + b"\0" * 8)
    files["jpeg"] = tmp_path / "photo.engine"
    files["jpeg"].write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(2000))
    files["missing"] = tmp_path / "nope" / "model.engine"
    files["directory"] = tmp_path
    return files


@pytest.mark.parametrize("case", ["random_1k", "empty", "short", "jpeg", "missing", "directory"])
def test_HC_09_bad_engine_files_rejected_before_tensorrt(tmp_path, case):
    """One ModelError naming the file, what was expected and the fix; TensorRT is never reached (nor needed)."""
    path = _bad_engine_files(tmp_path)[case]
    with pytest.raises(ModelError) as err:
        TensorRtEngine(path, log=lambda m: None)
    msg = str(err.value)
    assert str(path) in msg
    assert "expected" in msg
    assert "fix" in msg or "set model.path" in msg
    assert "\n" not in msg


def test_HC_09_onnx_model_named_engine(tmp_path):
    pytest.importorskip("onnx", reason="onnx builds the synthetic model")
    sys.path.insert(0, str(HERE))
    from synthetic_models import blob_end2end

    onnx_file = blob_end2end(tmp_path / "m.onnx", 64, 64)
    named_engine = tmp_path / "m.engine"
    named_engine.write_bytes(onnx_file.read_bytes())
    # judged by content (issue 15): an ONNX model named .engine is built from ONNX, not read as a plan; here that
    # stops at TensorRT's builder (absent) or at the GPU identity the engine cache needs, both naming ONNX
    with pytest.raises((BackendUnavailable, ValueError), match="ONNX"):
        TensorRtEngine(named_engine)


def test_HC_09_missing_or_empty_onnx(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        TensorRtEngine(tmp_path / "absent.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(ModelError, match="is empty"):
        TensorRtEngine(tmp_path / "empty.onnx")
    (tmp_path / "plan.onnx").write_bytes(PLAN_MAGIC + bytes(100))
    with pytest.raises((ModelError, BackendUnavailable)) as info:  # judged by content: a (garbage) plan
        TensorRtEngine(tmp_path / "plan.onnx")
    assert "ONNX model" not in str(info.value)
    with pytest.raises(ModelError, match="empty"):
        TensorRtEngine("")


def test_engine_file_with_ultralytics_metadata(tmp_path):
    plan = PLAN_MAGIC + os.urandom(200)
    meta = json.dumps({"imgsz": [640, 640], "task": "detect"}).encode()
    p = tmp_path / "yolo.engine"
    p.write_bytes(len(meta).to_bytes(4, "little") + meta + plan)
    ef = read_engine_file(p)
    assert ef.plan == plan and ef.metadata == {"imgsz": [640, 640], "task": "detect"}
    raw = tmp_path / "raw.plan"
    raw.write_bytes(plan)
    assert read_engine_file(raw).plan == plan and read_engine_file(raw).metadata == {}


def test_unavailable_reason_never_raises():
    reason = trt_mod.tensorrt_unavailable_reason()
    full = trt_mod.tensorrt_unavailable_reason(require_builder=True)
    assert reason is None or "tensorrt" in reason
    assert full is None or "full 'tensorrt' package" in full
    assert (reason is None) >= (full is None)  # the full package implies a runtime


def test_module_import_does_not_import_tensorrt():
    import subprocess

    code = ("import sys, vrt_ros.engines.tensorrt, vrt_ros.engines.engine_cache, vrt_ros.engines.trt_flavours; "
            "bad = [m for m in ('tensorrt', 'tensorrt_lean_bindings', 'tensorrt_rtx_bindings', 'onnx', 'cuda', 'torch', 'rclpy') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE.parent)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- log routing ---------------------------------------------------------------------------------------------
class Sev(enum.Enum):
    INTERNAL_ERROR = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    VERBOSE = 4


def test_log_router_levels_and_error_memory():
    lines = []
    r = LogRouter(lines.append, min_level=logging.INFO)
    m0 = r.mark()
    r.route(Sev.VERBOSE, "tactic 7")
    r.route(Sev.INFO, "loaded")
    r.route(Sev.WARNING, "slow")
    r.route(Sev.ERROR, "Version tag does not match")
    r.route(Sev.INTERNAL_ERROR, b"bytes message \xff")
    assert lines == ["TensorRT INFO: loaded", "TensorRT WARNING: slow", "TensorRT ERROR: Version tag does not match",
                     "TensorRT INTERNAL_ERROR: bytes message \ufffd"]
    assert r.errors_since(m0) == ["Version tag does not match", "bytes message \ufffd"]
    m1 = r.mark()
    assert r.errors_since(m1) == []
    r.route("ERROR", "by name")
    assert r.errors_since(m1) == ["by name"]


def test_log_router_never_raises():
    def sink(_line):
        raise RuntimeError("ROS logger gone")

    r = LogRouter(sink, min_level=logging.DEBUG)
    r.route(Sev.WARNING, "x")

    class Hostile:
        def __str__(self):
            raise ValueError("cannot print me")

    r.route(Sev.WARNING, Hostile())
    r.route(object(), "unknown severity")  # routed at WARNING
    r.sink = lambda line: (_ for _ in ()).throw(KeyboardInterrupt())  # even BaseException stays inside
    r.route(Sev.ERROR, "y")
    assert r.failures == 4


def test_logger_subclass_never_raises_into_the_caller():
    """The trt.ILogger subclass built by the module: log() swallows everything (checked over a stand-in base)."""
    fake = FakeTrt()
    router = LogRouter(lambda line: None)
    logger = trt_mod._make_logger(fake, router)
    assert isinstance(logger, fake.ILogger)

    def explode(*_a):
        raise SystemExit("boom")

    router.route = explode
    assert logger.log(fake.ILogger.Severity.ERROR, "x") is None


# ---- optimisation profile --------------------------------------------------------------------------------------
def test_resolve_profile():
    assert resolve_profile("images", (1, 3, 416, 416), None) is None
    assert resolve_profile("images", (-1, 3, 416, 416), None) == ((1, 3, 416, 416),) * 3
    assert resolve_profile("images", (1, 3, -1, -1), (640, 384)) == ((1, 3, 384, 640),) * 3
    assert resolve_profile("images", (-1, 3, -1, -1), (640, 480), (320, 240), (1280, 960)) == (
        (1, 3, 240, 320), (1, 3, 480, 640), (1, 3, 960, 1280))
    with pytest.raises(ConfigError, match="model.input_width"):
        resolve_profile("images", (1, 3, -1, -1), None)
    with pytest.raises(ConfigError, match="profile"):
        resolve_profile("images", (1, 3, -1, -1), (640, 480), (800, 600), None)
    with pytest.raises(ConfigError, match="contradict"):
        resolve_profile("images", (-1, 3, 416, 416), (640, 640))
    with pytest.raises(ModelError, match="channel"):
        resolve_profile("images", (1, -1, 416, 416), None)
    with pytest.raises(ModelError, match="4 dims"):
        resolve_profile("x", (-1, 10), None)


# ==============================================================================================================
# 2. Logic against a stand-in TensorRT module (documented TensorRT >= 10 Python calls only)
# ==============================================================================================================
EVENTS: list[str] = []


class _Tracked:
    label = "?"

    def __del__(self):
        if EVENTS is not None:  # None while the interpreter shuts down
            EVENTS.append(self.label)


def fake_plan(tensors, **extra) -> bytes:
    """A stand-in plan: the magic, a header's worth of padding, then a JSON description for FakeTrt."""
    return PLAN_MAGIC + bytes(28) + json.dumps({"tensors": tensors, **extra}).encode()


DET_TENSORS = [
    {"name": "images", "mode": "INPUT", "dtype": "FLOAT", "shape": [1, 3, 416, 416]},
    {"name": "output", "mode": "OUTPUT", "dtype": "FLOAT", "shape": [1, 3549, 85]},
]


class FakeTrt:
    """Implements the TensorRT >= 10 calls used by the engine module, with the documented failure behaviour
    (``deserialize_cuda_engine`` logs an error and returns None; ``build_serialized_network`` likewise)."""

    def __init__(self, version: str = "10.99.1", fp16_flag: bool = True, runtime_fails: bool = False):
        self.__version__ = version
        self.__name__ = "fake_tensorrt"
        self.builds = 0
        self.calls: list[tuple] = []
        self.runtime_fails = runtime_fails
        fake = self

        class Severity(enum.Enum):
            INTERNAL_ERROR = 0
            ERROR = 1
            WARNING = 2
            INFO = 3
            VERBOSE = 4

        class ILogger(_Tracked):
            label = "logger"

            def __init__(self):
                pass

        ILogger.Severity = Severity
        self.ILogger = ILogger
        self.TensorIOMode = enum.Enum("TensorIOMode", "INPUT OUTPUT NONE")
        self.DataType = enum.Enum("DataType", "FLOAT HALF INT32 INT64 INT8 UINT8 BOOL BF16 FP8")
        self.TensorFormat = enum.Enum("TensorFormat", "LINEAR CHW32")
        self.MemoryPoolType = enum.Enum("MemoryPoolType", "WORKSPACE")
        self.BuilderFlag = enum.Enum("BuilderFlag", "FP16 INT8" if fp16_flag else "DIRECT_IO")

        class Context(_Tracked):
            label = "context"

            def __init__(self, engine):
                self.engine = engine
                self.shapes = {t["name"]: tuple(t["shape"]) for t in engine.spec["tensors"]}
                self.addresses = {}
                self.executed = []

            def set_input_shape(self, name, shape):
                fake.calls.append(("set_input_shape", name, tuple(shape)))
                self.shapes[name] = tuple(shape)
                for t in self.engine.spec["tensors"]:
                    if t["mode"] == "OUTPUT" and -1 in t["shape"]:  # a shape that follows the input: H*W/64 rows
                        h, w = shape[2], shape[3]
                        # dim 0 follows the input's batch; any other -1: H*W/64 rows
                        self.shapes[t["name"]] = tuple((shape[0] if i == 0 else h * w // 64) if d == -1 else d
                                                       for i, d in enumerate(t["shape"]))
                return True

            def get_tensor_shape(self, name):
                return self.shapes[name]

            def set_tensor_address(self, name, ptr):
                fake.calls.append(("set_tensor_address", name, ptr))
                self.addresses[name] = ptr
                return True

            def execute_async_v3(self, stream_handle):
                fake.calls.append(("execute_async_v3", stream_handle))
                return self.engine.spec.get("execute_ok", True)

        class Engine(_Tracked):
            label = "engine"

            def __init__(self, spec):
                self.spec = spec
                self._t = {t["name"]: t for t in spec["tensors"]}

            @property
            def num_io_tensors(self):
                return len(self.spec["tensors"])

            def get_tensor_name(self, i):
                return self.spec["tensors"][i]["name"]

            def get_tensor_mode(self, name):
                return fake.TensorIOMode[self._t[name]["mode"]]

            def get_tensor_dtype(self, name):
                return fake.DataType[self._t[name]["dtype"]]

            def get_tensor_shape(self, name):
                return tuple(self._t[name]["shape"])

            def get_tensor_format(self, name):
                return fake.TensorFormat[self._t[name].get("format", "LINEAR")]

            def get_tensor_profile_shape(self, name, profile):
                return [tuple(s) for s in self._t[name]["profile"]]

            def create_execution_context(self):
                return Context(self)

        class Runtime(_Tracked):
            label = "runtime"

            def __init__(self, logger):
                self.logger = logger
                if fake.runtime_fails:
                    logger.log(Severity.ERROR, "createInferRuntime: CUDA initialization failure with error: 35")
                    self.label = "broken runtime"

            def deserialize_cuda_engine(self, plan):
                plan = bytes(plan)
                if not plan.startswith(PLAN_MAGIC):
                    self.logger.log(Severity.ERROR, "Serialization assertion plan->header.magicTag == rt::kPLAN_MAGIC_TAG failed.")
                    return None
                try:
                    spec = json.loads(plan[32:].decode())
                except ValueError:
                    self.logger.log(Severity.ERROR, "Serialization assertion sizeRead == static_cast<uint64_t>(mEnd - mCurrent) "
                                    "failed.Size specified in header does not match archive size")
                    return None
                if spec.get("version", fake.__version__) != fake.__version__:
                    self.logger.log(Severity.ERROR, "Serialization assertion stdVersionRead == kSERIALIZATION_VERSION failed."
                                    "Version tag does not match. Note: Current Version: 239, Serialized Engine Version: 236")
                    return None
                return Engine(spec)

        self.Runtime = Runtime

        # ---- builder side ----
        class Tensor:
            def __init__(self, name, shape, dtype="FLOAT"):
                self.name, self.shape, self.dtype = name, tuple(shape), fake.DataType[dtype]

        class Network(_Tracked):
            label = "network"

            def __init__(self):
                self.inputs, self.outputs = [], []

            @property
            def num_inputs(self):
                return len(self.inputs)

            def get_input(self, i):
                return self.inputs[i]

            @property
            def num_outputs(self):
                return len(self.outputs)

            def get_output(self, i):
                o = self.outputs[i]
                return Tensor(o["name"], o["shape"], o.get("dtype", "FLOAT"))

        class Parser(_Tracked):
            label = "parser"

            def __init__(self, network, logger):
                self.network, self.errors = network, []

            def parse(self, data, path=None):  # a real ONNX model (e.g. converted to FP16): its graph I/O
                import onnx

                model = onnx.load_from_string(bytes(data))
                fake.parsed_onnx = model
                dims = lambda vi: [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
                self.network.inputs = [Tensor(v.name, dims(v)) for v in model.graph.input]
                self.network.outputs = [{"name": v.name, "dtype": "FLOAT", "shape": dims(v)} for v in model.graph.output]
                return True

            def parse_from_file(self, path):
                try:
                    model = json.loads(Path(path).read_text())
                except ValueError:
                    self.errors = ["ModelImporter: failed to parse ONNX protobuf"]
                    return False
                self.network.inputs = [Tensor(t["name"], t["shape"]) for t in model["inputs"]]
                self.network.outputs = model["outputs"]
                return True

            @property
            def num_errors(self):
                return len(self.errors)

            def get_error(self, i):
                return self.errors[i]

        class Profile:
            def __init__(self):
                self.shapes = {}

            def set_shape(self, name, lo, opt, hi):
                self.shapes[name] = (tuple(lo), tuple(opt), tuple(hi))

        class Config(_Tracked):
            label = "config"

            def __init__(self):
                self.flags, self.profiles, self.pool = set(), [], {}
                self.progress_monitor = None

            def set_memory_pool_limit(self, pool, nbytes):
                self.pool[pool] = nbytes

            def set_flag(self, flag):
                self.flags.add(flag)

            def add_optimization_profile(self, p):
                self.profiles.append(p)

        class Builder(_Tracked):
            label = "builder"

            def __init__(self, logger):
                self.logger = logger

            def create_network(self, flags):
                return Network()

            def create_builder_config(self):
                return Config()

            def create_optimization_profile(self):
                return Profile()

            def build_serialized_network(self, network, config):
                fake.builds += 1
                mon = config.progress_monitor
                if mon is not None:  # as TensorRT does: nested phases, steps; the return value may cancel
                    mon.phase_start("Building engine", None, 2)
                    mon.phase_start("Tactic selection", "Building engine", 3)
                    fake.step_results = [mon.step_complete("Tactic selection", i) for i in range(3)]
                    mon.phase_finish("Tactic selection")
                    mon.phase_finish("Building engine")
                fake.last_config = types.SimpleNamespace(  # a copy: holding the config would keep it alive
                    flags=set(config.flags), pool=dict(config.pool), profiles=list(config.profiles))
                if any(o.get("unbuildable") for o in network.outputs):
                    self.logger.log(Severity.ERROR, "could not find any implementation for node X")
                    return None
                tensors = []
                for t in network.inputs:
                    prof = config.profiles[0].shapes[t.name] if config.profiles else (t.shape,) * 3
                    tensors.append({"name": t.name, "mode": "INPUT", "dtype": "FLOAT", "shape": list(t.shape),
                                    "profile": [list(s) for s in prof]})
                tensors += [dict(o, mode="OUTPUT") for o in network.outputs]
                return bytearray(fake_plan(tensors, version=fake.__version__))

        class IProgressMonitor:
            def __init__(self):
                pass

        self.Builder, self.OnnxParser, self.IProgressMonitor = Builder, Parser, IProgressMonitor


@pytest.fixture(autouse=True)
def _clear_events():
    EVENTS.clear()
    yield
    EVENTS.clear()


def write_plan(tmp_path, tensors=DET_TENSORS, name="det.engine", **extra) -> Path:
    p = tmp_path / name
    p.write_bytes(fake_plan(tensors, **extra))
    return p


def test_load_reports_names_shapes_dtypes(tmp_path):
    eng = TensorRtEngine(write_plan(tmp_path), _trt=FakeTrt())
    assert [(t.name, t.shape, t.dtype) for t in eng.inputs] == [("images", (1, 3, 416, 416), "float32")]
    assert [(t.name, t.shape, t.dtype) for t in eng.outputs] == [("output", (1, 3549, 85), "float32")]
    assert eng.name == "TensorRT 10.99.1 (det.engine)" and not eng.built
    eng.close()


@pytest.mark.parametrize("order", ["close", "collect", "cycle"])
def test_release_order_context_engine_runtime_logger(tmp_path, order):
    """Whatever releases the engine object, the TensorRT objects go context -> engine -> runtime -> logger."""
    eng = TensorRtEngine(write_plan(tmp_path), _trt=FakeTrt())
    assert EVENTS == []
    if order == "close":
        eng.close()
        assert eng.closed
        eng.close()  # idempotent
    elif order == "collect":
        del eng
    else:
        eng.me = eng  # a reference cycle: only the cyclic collector frees it
        del eng
        gc.collect()
    assert EVENTS == ["context", "engine", "runtime", "logger"]


def test_no_raw_handle_escapes(tmp_path):
    eng = TensorRtEngine(write_plan(tmp_path), _trt=FakeTrt())
    public = {k: v for k, v in vars(eng).items() if not k.startswith("_")}
    for v in public.values():
        assert not isinstance(v, _Tracked), f"raw TensorRT object exposed: {v!r}"
    eng.close()


def test_HC_09_deserialize_returning_none_is_a_model_error(tmp_path):
    """Half-truncated plan (magic intact) and an engine from another TensorRT version: TensorRT returns None."""
    fake = FakeTrt()
    good = fake_plan(DET_TENSORS)
    half = tmp_path / "half.engine"
    half.write_bytes(good[: len(good) // 2])
    with pytest.raises(ModelError) as err:
        TensorRtEngine(half, _trt=fake)
    msg = str(err.value)
    assert str(half) in msg and "truncated or corrupt" in msg and "Size specified in header" in msg
    assert "fix: rebuild the engine" in msg
    assert EVENTS == ["runtime", "logger"]  # the half-built owner was released, in order

    EVENTS.clear()
    other = write_plan(tmp_path, name="old.engine", version="10.0.0")
    with pytest.raises(ModelError, match="built by another TensorRT version.*Version tag does not match"):
        TensorRtEngine(other, _trt=fake)


def test_runtime_that_fails_to_start_is_unavailable_and_never_destroyed(tmp_path):
    fake = FakeTrt(runtime_fails=True)
    with pytest.raises(BackendUnavailable, match="cannot start here: createInferRuntime"):
        TensorRtEngine(write_plan(tmp_path), _trt=fake)
    gc.collect()
    assert "broken runtime" not in EVENTS  # destroying it crashes the real lean runtime (see the module)
    assert any(r.label == "broken runtime" for r, _ in trt_mod._QUARANTINE)
    # Drop the stand-in from the quarantine (it must not outlive the test; real runtimes stay there).
    trt_mod._QUARANTINE[:] = [(r, lg) for r, lg in trt_mod._QUARANTINE if not isinstance(r, _Tracked)]


def test_dynamic_batch_runs_each_batch_size_setting_the_shape_only_when_it_changes(tmp_path):
    """A dynamic-batch engine (profile batch 1..8) with max_batch 4: bound at batch 4 (the outputs' shapes read
    there), reported with dim 0 = -1 to the pipeline; enqueue(batch=b) sets the input shape only when b changes.
    (Batched execution on a real TensorRT needs a GPU: test_gpu_batch_device.py.)"""
    tensors = [
        {"name": "images", "mode": "INPUT", "dtype": "FLOAT", "shape": [-1, 3, 416, 416],
         "profile": [[1, 3, 416, 416], [8, 3, 416, 416], [8, 3, 416, 416]]},
        {"name": "output", "mode": "OUTPUT", "dtype": "FLOAT", "shape": [-1, 3549, 85]},
    ]
    fake = FakeTrt()
    eng = TensorRtEngine(write_plan(tmp_path, tensors), _trt=fake, max_batch=4)
    assert ("set_input_shape", "images", (4, 3, 416, 416)) in fake.calls
    assert eng.inputs[0].shape == (-1, 3, 416, 416) and eng.outputs[0].shape == (-1, 3549, 85)
    fake.calls.clear()
    for b in (4, 1, 1, 4, 4):
        eng.enqueue(7, 0x1000, [0x2000], batch=b)
    shapes = [c[2][0] for c in fake.calls if c[0] == "set_input_shape"]
    assert shapes == [1, 4] and sum(c[0] == "execute_async_v3" for c in fake.calls) == 5
    eng.close()
    single = TensorRtEngine(write_plan(tmp_path, tensors), _trt=fake)  # max_batch 1: batch 1, as before
    assert single.inputs[0].shape == (1, 3, 416, 416) and single.outputs[0].shape == (1, 3549, 85)
    single.close()


def test_a_batch_size_tensorrt_refuses_is_a_model_error_quoting_its_errors(tmp_path):
    """enqueue(batch=b) with a shape the context refuses: a ModelError naming the shape and what TensorRT logged
    during this call (not an AttributeError from the message's own construction)."""
    tensors = [
        {"name": "images", "mode": "INPUT", "dtype": "FLOAT", "shape": [-1, 3, 416, 416],
         "profile": [[1, 3, 416, 416], [8, 3, 416, 416], [8, 3, 416, 416]]},
        {"name": "output", "mode": "OUTPUT", "dtype": "FLOAT", "shape": [-1, 3549, 85]},
    ]
    eng = TensorRtEngine(write_plan(tmp_path, tensors), _trt=FakeTrt(), max_batch=4)
    eng._router.route("ERROR", "an older call's error")  # never quoted: not logged during this enqueue

    def refuse(name, shape):
        eng._router.route("ERROR", f"IExecutionContext::setInputShape: {name} {shape}")
        return False

    eng._h.context.set_input_shape = refuse
    try:
        eng.enqueue(7, 0x1000, [0x2000], batch=2)
    except ModelError as exc:  # not pytest.raises: its traceback would keep the context alive into the next test
        message = str(exc)
    else:
        pytest.fail("a refused batch shape was enqueued")
    assert re.search(r"refused input shape \(2, 3, 416, 416\).*setInputShape: images", message), message
    assert "older call" not in message
    eng.close()
    gc.collect()
    assert EVENTS[-4:] == ["context", "engine", "runtime", "logger"]


def test_dynamic_input_set_before_enqueue(tmp_path):
    tensors = [
        {"name": "images", "mode": "INPUT", "dtype": "HALF", "shape": [-1, 3, -1, -1],
         "profile": [[1, 3, 320, 320], [1, 3, 640, 640], [1, 3, 1280, 1280]]},
        {"name": "output0", "mode": "OUTPUT", "dtype": "FLOAT", "shape": [1, 84, -1]},
    ]
    fake = FakeTrt()
    eng = TensorRtEngine(write_plan(tmp_path, tensors), _trt=fake, input_size=(640, 384))
    assert ("set_input_shape", "images", (1, 3, 384, 640)) in fake.calls
    assert eng.inputs[0].shape == (1, 3, 384, 640) and eng.inputs[0].dtype == "float16"
    assert eng.outputs[0].shape == (1, 84, 384 * 640 // 64)
    eng.close()
    # Without a size: the profile's optimum.
    eng = TensorRtEngine(write_plan(tmp_path, tensors), _trt=fake)
    assert eng.inputs[0].shape == (1, 3, 640, 640)
    eng.close()
    with pytest.raises(ConfigError, match="outside the engine's optimisation profile"):
        TensorRtEngine(write_plan(tmp_path, tensors), _trt=fake, input_size=(2000, 2000))


@pytest.mark.parametrize("change,match", [
    ({"dtype": "BF16"}, "dtype BF16"),
    ({"format": "CHW32"}, "vectorised format CHW32"),
])
def test_unsupported_io_rejected(tmp_path, change, match):
    tensors = [dict(DET_TENSORS[0], **change), DET_TENSORS[1]]
    with pytest.raises(ModelError, match=match):
        TensorRtEngine(write_plan(tmp_path, tensors), _trt=FakeTrt())
    # Released at once (the traceback keeps nothing alive), in order; the context exists only for the dtype case.
    assert EVENTS == (["engine", "runtime", "logger"] if "format" in change else ["context", "engine", "runtime", "logger"])


def test_two_inputs_or_data_dependent_outputs_rejected(tmp_path):
    two = DET_TENSORS + [{"name": "scale", "mode": "INPUT", "dtype": "FLOAT", "shape": [1, 2]}]
    with pytest.raises(ModelError, match="one image input"):
        TensorRtEngine(write_plan(tmp_path, two), _trt=FakeTrt())
    dd = [DET_TENSORS[0], {"name": "boxes", "mode": "OUTPUT", "dtype": "FLOAT", "shape": [-1, 4]}]
    with pytest.raises(ModelError, match="data-dependent shape"):
        TensorRtEngine(write_plan(tmp_path, dd), _trt=FakeTrt())


class StreamLike:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_enqueue_binds_addresses_once_and_uses_the_stream(tmp_path):
    fake = FakeTrt()
    eng = TensorRtEngine(write_plan(tmp_path), _trt=fake)
    fake.calls.clear()
    for _ in range(3):
        eng.enqueue(StreamLike(0xABC), 0x1000, [0x2000])
    eng.enqueue(0xDEF, 0x1000, [0x3000])  # a raw handle; a new output buffer
    binds = [c for c in fake.calls if c[0] == "set_tensor_address"]
    assert binds == [("set_tensor_address", "images", 0x1000), ("set_tensor_address", "output", 0x2000),
                     ("set_tensor_address", "images", 0x1000), ("set_tensor_address", "output", 0x3000)]
    assert [c for c in fake.calls if c[0] == "execute_async_v3"] == [("execute_async_v3", 0xABC)] * 3 + [("execute_async_v3", 0xDEF)]
    eng.close()
    with pytest.raises(ModelError, match="closed"):
        eng.enqueue(0, 1, [2])


def test_enqueue_failure_raises(tmp_path):
    eng = TensorRtEngine(write_plan(tmp_path, execute_ok=False), _trt=FakeTrt())
    with pytest.raises(ModelError, match="execute_async_v3 failed"):
        eng.enqueue(1, 2, [3])
    eng.close()


def test_enqueue_failure_quotes_the_failing_calls_errors_only(tmp_path):
    """Issue 26: the message quotes what TensorRT logged during this call, not the last errors ever logged; an
    out-of-memory after an earlier illegal-address message was classed as a poisoned context (fatal)."""
    from vrt_ros.faults import ENGINE, classify, fatal_cuda_error

    eng = TensorRtEngine(write_plan(tmp_path), _trt=FakeTrt())
    eng._router.route("ERROR", "an earlier call: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
    eng._router.route("ERROR", "another earlier error")

    def execute_async_v3(handle):  # as TensorRT fails: log the reason, return False
        eng._router.route("ERROR", "IExecutionContext::enqueueV3: Error Code 2: OutOfMemory (Requested size 64 MiB)")
        return False

    eng._h.context.execute_async_v3 = execute_async_v3
    with pytest.raises(ModelError) as e:
        eng.enqueue(1, 2, [3])
    text = str(e.value)
    assert "OutOfMemory (Requested size 64 MiB)" in text and "earlier" not in text, text
    assert fatal_cuda_error(e.value) is None and classify(e.value).kind == ENGINE  # recoverable: not fatal at once
    eng._h.context.execute_async_v3 = lambda handle: False  # a failure that logs nothing says so
    with pytest.raises(ModelError, match=r"\(no TensorRT error logged\)"):
        eng.enqueue(1, 2, [3])
    eng.close()


# ---- build from ONNX and the cache (stand-in builder) --------------------------------------------------------
def fake_onnx(tmp_path, inputs=None, outputs=None, name="net.onnx") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({
        "inputs": inputs or [{"name": "images", "shape": [-1, 3, -1, -1]}],
        "outputs": outputs or [{"name": "output0", "dtype": "FLOAT", "shape": [1, 84, -1]}],
    }))
    return p


GPU = dict(gpu_name="NVIDIA H200", compute_capability="90")


def test_cache_entry_rejected_by_the_runtime_is_rebuilt(tmp_path):
    """A sidecar-valid entry that TensorRT still refuses (e.g. after a driver change) is rebuilt, not fatal."""
    fake = FakeTrt()
    onnx_file = fake_onnx(tmp_path)
    kw = dict(_trt=fake, cache_dir=str(tmp_path), input_size=(320, 320), **GPU)
    TensorRtEngine(onnx_file, **kw).close()
    cache_file = next((tmp_path / "engines").glob("*.engine"))
    bad = fake_plan(DET_TENSORS, version="0.0")
    cache_file.write_bytes(bad)
    meta_file = cache_file.with_suffix(".json")
    meta = json.loads(meta_file.read_text())
    import hashlib

    meta.update(engine_bytes=len(bad), engine_sha256=hashlib.sha256(bad).hexdigest())
    meta_file.write_text(json.dumps(meta))
    eng = TensorRtEngine(onnx_file, **kw)
    assert eng.built and fake.builds == 2
    eng.close()


def test_fp16_flag_on_tensorrt_10_and_fp16_conversion_where_strongly_typed(tmp_path, monkeypatch):
    """TensorRT 10.x: engine.fp16 sets BuilderFlag.FP16. A flavour without that flag (TensorRT 11, TensorRT for RTX)
    gets the model converted to FP16 with FP32 inputs/outputs instead; without onnxconverter-common that is a
    ConfigError naming engine.fp16. (The real RTX builder does the same in test_tensorrt_rtx.py.)"""
    from onnx import TensorProto

    onnx_file = fake_onnx(tmp_path)
    fake = FakeTrt()
    eng = TensorRtEngine(onnx_file, _trt=fake, cache_dir=str(tmp_path), input_size=(320, 320), fp16=True, **GPU)
    assert fake.BuilderFlag.FP16 in fake.last_config.flags and "-fp16-" in eng.engine_path.name
    eng.close()
    pytest.importorskip("onnxconverter_common", reason="onnxconverter-common converts models to FP16")
    tiny = _tiny_conv_onnx(tmp_path / "tiny.onnx", dynamic=False)
    trt11 = FakeTrt(version="11.4.0", fp16_flag=False)
    eng = TensorRtEngine(tiny, _trt=trt11, cache_dir=str(tmp_path), fp16=True, **GPU)
    graph = trt11.parsed_onnx.graph
    assert {i.data_type for i in graph.initializer} == {TensorProto.FLOAT16}  # weights in FP16
    assert [v.type.tensor_type.elem_type for v in [*graph.input, *graph.output]] == [TensorProto.FLOAT] * 2
    assert not trt11.last_config.flags and "-fp16-" in eng.engine_path.name
    assert eng.inputs[0].dtype == "float32" and eng.outputs[0].dtype == "float32"
    eng.close()
    monkeypatch.setitem(sys.modules, "onnxconverter_common", None)  # not installed
    with pytest.raises(ConfigError, match="engine.fp16.*onnxconverter-common"):
        TensorRtEngine(tiny, _trt=trt11, cache_dir=str(tmp_path / "other"), fp16=True, **GPU)


def test_engine_is_collectable(tmp_path):
    eng = TensorRtEngine(write_plan(tmp_path), _trt=FakeTrt())
    ref = weakref.ref(eng)
    del eng
    assert ref() is None


# ==============================================================================================================
# 3. Real TensorRT (full package + GPU); skipped where absent
# ==============================================================================================================
def _full_trt_reason() -> str | None:
    try:
        import tensorrt  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return f"the full TensorRT Python package is not importable here ({exc})"
    from vrt_ros.gpu import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    return f"GPU path unavailable: {reason}" if reason else None


FULL_REASON = _full_trt_reason()


def trt_test(f):
    """Mark a test as needing the full TensorRT package and a GPU; skipped with the reason elsewhere."""
    for mark in (pytest.mark.tensorrt, pytest.mark.gpu,
                 pytest.mark.skipif(FULL_REASON is not None, reason=str(FULL_REASON))):
        f = mark(f)
    return f


def _tiny_conv_onnx(path: Path, dynamic: bool) -> Path:
    """conv 3->4 (fixed weights) + ReLU + global-average-pool; NCHW float32, dynamic H/W when asked."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2
    b = rng.standard_normal(4).astype(np.float32)
    hw = ["H", "W"] if dynamic else [64, 96]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["images", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["pool"]),
         helper.make_node("Flatten", ["pool"], ["output"])],
        "tiny",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, *hw])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def gpu_rt():
    if FULL_REASON:
        pytest.skip(FULL_REASON)
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    return rt, rt.create_stream()


def _run(engine: TensorRtEngine, gpu_rt, x: np.ndarray) -> list[np.ndarray]:
    sys.path.insert(0, str(HERE))
    from gpu_support import from_device, to_device

    rt, stream = gpu_rt
    x = x.astype(engine.inputs[0].dtype)
    d_in = to_device(rt, stream, x)
    outs = [rt.alloc_device(int(np.prod(o.shape)) * np.dtype(o.dtype).itemsize, stream) for o in engine.outputs]
    engine.enqueue(stream, d_in.ptr, [o.ptr for o in outs])
    res = [from_device(rt, stream, b.ptr, o.shape, o.dtype) for b, o in zip(outs, engine.outputs)]
    for b in [d_in, *outs]:
        b.close(stream)
    return res


@trt_test
@pytest.mark.parametrize("dynamic", [False, True])
def test_trt_build_matches_onnxruntime_and_caches(tmp_path, gpu_rt, dynamic):
    import onnxruntime as ort

    rt, _ = gpu_rt
    model = _tiny_conv_onnx(tmp_path / "tiny.onnx", dynamic)
    kw = dict(cache_dir=str(tmp_path), input_size=(96, 64) if dynamic else None, gpu_name=rt.name,
              compute_capability=rt.arch, log=print)
    eng = TensorRtEngine(model, **kw)
    assert eng.built and eng.inputs[0].shape == (1, 3, 64, 96) and eng.outputs[0].shape == (1, 4)
    x = np.random.default_rng(5).uniform(0, 1, (1, 3, 64, 96)).astype(np.float32)
    (got,) = _run(eng, gpu_rt, x)
    (want,) = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"images": x})
    np.testing.assert_allclose(got, want, rtol=5e-3, atol=5e-3)  # TF32 convolutions allowed (TensorRT's default)
    eng.close()
    again = TensorRtEngine(model, **kw)
    assert not again.built
    np.testing.assert_allclose(_run(again, gpu_rt, x)[0], want, rtol=5e-3, atol=5e-3)
    again.close()


@trt_test
def test_trt_HC_09_corrupt_real_engines(tmp_path, gpu_rt):
    rt, _ = gpu_rt
    eng = TensorRtEngine(_tiny_conv_onnx(tmp_path / "t.onnx", False), cache_dir=str(tmp_path), gpu_name=rt.name,
                         compute_capability=rt.arch)
    plan = eng.engine_path.read_bytes()
    eng.close()
    cases = {
        "half.engine": plan[: len(plan) // 2],
        "garbled.engine": PLAN_MAGIC + os.urandom(len(plan) - 4),
        "random.engine": os.urandom(1024),
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ModelError) as err:
            TensorRtEngine(p)
        assert str(p) in str(err.value) and "fix" in str(err.value), name
    ok = tmp_path / "ok.engine"
    ok.write_bytes(plan)
    TensorRtEngine(ok).close()  # the intact copy loads


def _pipeline_values(model: Path, cache: Path, **kw):
    from vrt_ros.settings import config

    return config.validate({"model.path": str(model), "engine.cache_dir": str(cache), "backend": "cuda", **kw})


@trt_test
def test_trt_HC_10_fp16_input_engine_same_detections(tmp_path, gpu_rt):
    """An engine whose input is FP16 (declared by the model) gives the FP32 engine's detections."""
    sys.path.insert(0, str(HERE))
    from synthetic_models import blob_end2end, ramp_rectangle
    from vrt_ros.inference.backends.cuda import CudaPipeline

    rt, _ = gpu_rt
    img = ramp_rectangle(641, 481, (100.0, 150.0, 300.0, 330.0))
    dets = {}
    for fp16 in (False, True):
        model = blob_end2end(tmp_path / f"blob{int(fp16)}.onnx", 640, 640, fp16=fp16)
        values = _pipeline_values(model, tmp_path, **{"model.pad_value": 0.0})
        eng = TensorRtEngine.from_values(values, 0, gpu_name=rt.name, compute_capability=rt.arch)
        assert eng.inputs[0].dtype == ("float16" if fp16 else "float32")
        pipe = CudaPipeline(values, log=print, engine=eng)
        dets[fp16] = pipe.process_bgr(img)
        pipe.close()
    a, b = dets[False], dets[True]
    assert len(a) == len(b) == 1
    np.testing.assert_allclose(a.boxes, b.boxes, atol=1.0)
    np.testing.assert_allclose(a.boxes[0], [100, 150, 300, 330], atol=1.0)


@trt_test
def test_trt_yolox_fp32_and_fp16_match_cpu_reference(tmp_path, gpu_rt, shared_dir):
    """Real YOLOX-nano on real photos: TensorRT FP32 (and FP16 kernels on TensorRT 10.x) vs the CPU pipeline."""
    import cv2
    import tensorrt

    from vrt_ros.inference.backends.cpu import CpuPipeline
    from vrt_ros.inference.backends.cuda import CudaPipeline

    rt, _ = gpu_rt
    model = shared_dir / "models" / "yolox_nano.onnx"
    photos = [shared_dir / "data" / "images" / n for n in ("darknet_dog.jpg", "darknet_horses.jpg", "astronaut.png")]
    cpu = CpuPipeline(_pipeline_values(model, tmp_path, backend="cpu"), log=print)
    modes = [False] + ([True] if hasattr(tensorrt.BuilderFlag, "FP16") else [])
    for fp16 in modes:
        values = _pipeline_values(model, tmp_path, **{"engine.fp16": fp16})
        eng = TensorRtEngine.from_values(values, 0, gpu_name=rt.name, compute_capability=rt.arch, log=print)
        pipe = CudaPipeline(values, log=print, engine=eng)
        # TensorRT may use TF32 for FP32 convolutions (its default) and FP16 kernels when asked: boxes are compared
        # within a pixel or two, and only detections clear of the 0.35 threshold must appear on both sides.
        tol = 2.0 if fp16 else 1.0
        for photo in photos:
            img = cv2.imread(str(photo))
            want, got = cpu.process_bgr(img), pipe.process_bgr(img)
            assert (want.scores >= 0.45).any(), photo.name  # the comparison below is not vacuous
            for ref, other in ((want, got), (got, want)):
                for box, cls, score in zip(ref.boxes, ref.class_ids, ref.scores):
                    if score < 0.45:
                        continue
                    same = other.boxes[other.class_ids == cls]
                    assert len(same) and np.min(np.abs(same - box).max(axis=1)) <= tol, (photo.name, fp16, cls, box)
        pipe.close()


# ---- lean runtime only (tensorrt_lean_bindings) + GPU --------------------------------------------------------
def _lean_reason() -> str | None:
    try:
        import tensorrt_lean_bindings  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return f"the TensorRT lean runtime (tensorrt_lean_bindings) is not importable here ({exc})"
    from vrt_ros.gpu import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    return f"GPU path unavailable: {reason}" if reason else None


@pytest.mark.gpu
@pytest.mark.skipif(_lean_reason() is not None, reason=str(_lean_reason()))
def test_lean_runtime_rejects_corrupt_engines_cleanly(tmp_path):
    """Same code path, real TensorRT runtime code on a GPU: files that pass our header check but are no valid plan
    reach ``deserialize_cuda_engine``, which must return None (or raise) and become one ModelError; random bytes
    and a half file are stopped by the header check first."""
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)  # the device's primary context is current, as in the pipeline
    trt = trt_mod.import_tensorrt()  # tensorrt, or the lean runtime when tensorrt is absent
    print(f"\nTensorRT module {trt.__name__} {trt.__version__} on {rt.name} (sm_{rt.arch})")
    rng = np.random.default_rng(11)
    cases = {
        "random_1k.engine": rng.integers(0, 256, 1024, dtype=np.uint8).tobytes(),
        "garbled.engine": PLAN_MAGIC + rng.integers(0, 256, 4092, dtype=np.uint8).tobytes(),
        "zeros.engine": PLAN_MAGIC + bytes(60000),
        "header_only.engine": PLAN_MAGIC + bytes(28),
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ModelError) as err:
            TensorRtEngine(p, log=print)
        msg = str(err.value)
        print(f"{name}: ModelError: {msg}")
        assert str(p) in msg and "fix" in msg
        if data.startswith(PLAN_MAGIC):
            assert "could not be loaded by TensorRT" in msg  # reached the real deserialize_cuda_engine


# scripts/test_extras.sh installs the 11.4 lean runtime here, off sys.path (no other test may see a `tensorrt` flavour)
LEAN_EXTRAS = Path(sys.prefix) / ".vrt-extras" / "tensorrt-lean"


def _lean_without_gpu_reason() -> str | None:
    from vrt_ros.gpu import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        return "needs a machine WITHOUT a usable GPU"
    if _lean_reason() is None or (LEAN_EXTRAS / "tensorrt_lean_bindings").is_dir():
        return None
    return f"the TensorRT lean runtime is neither importable nor in {LEAN_EXTRAS} (make test: scripts/test_extras.sh)"


@pytest.mark.skipif(_lean_without_gpu_reason() is not None, reason=str(_lean_without_gpu_reason()))
def test_lean_runtime_without_gpu_is_unavailable_not_a_crash(tmp_path):
    """Real lean-runtime code (11.4 in CI, from scripts/test_extras.sh) on a machine without a CUDA driver: Runtime()
    logs errors and returns an object whose destruction crashes; the engine must raise BackendUnavailable and the
    process must exit normally."""
    import subprocess

    plan = tmp_path / "x.engine"
    plan.write_bytes(PLAN_MAGIC + os.urandom(4092))
    code = (
        "import sys\n"
        "from vrt_ros.engines.tensorrt import TensorRtEngine\n"
        "from vrt_ros.errors import BackendUnavailable\n"
        "try:\n"
        f"    TensorRtEngine({str(plan)!r}, log=lambda m: None)\n"
        "except BackendUnavailable as e:\n"
        "    print('unavailable:', e)\n"
        "import gc; gc.collect(); print('exit ok')\n"
    )
    env = dict(os.environ)
    if LEAN_EXTRAS.is_dir():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LEAN_EXTRAS), env.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE.parent, timeout=120,
                       env=env)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "unavailable: the TensorRT" in r.stdout and "cannot start here" in r.stdout and "exit ok" in r.stdout


@pytest.mark.parametrize("logged,cause", [
    (["Serialization assertion stdVersionRead == kSERIALIZATION_VERSION failed.Version tag does not match. "
      "Note: Current Version: 239, Serialized Engine Version: 236"], "another TensorRT version"),
    (["The engine plan file is generated on an incompatible device, expecting compute 9.0 got compute 8.7, "
      "please rebuild."], "another GPU"),
    (["Serialization assertion plan->header.magicTag == rt::kPLAN_MAGIC_TAG failed."], "not a TensorRT plan"),
    (["Serialization assertion sizeRead == static_cast<uint64_t>(mEnd - mCurrent) failed.Size specified in header "
      "does not match archive size"], "truncated or corrupt"),
    # Seen on an H200 with the lean runtime 11.4.0.106 (b"ftrt" + random bytes; b"ftrt" + zeros):
    (["IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization assertion header.pad == "
      "expectedPlatformTag failed.Platform specific tag mismatch detected. TensorRT plan files are only supported on "
      "the target runtime platform they were created on."], "another GPU or platform, or is corrupt"),
    (["IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization assertion plan.header.size == "
      "blobSize failed. In parsePlan)"], "truncated or corrupt"),
    ([], "corrupt, truncated, or from another TensorRT version or GPU"),
])
def test_diagnose_messages(logged, cause):
    assert cause in trt_mod._diagnose(logged)


def test_deserialization_errors_are_reported_once(tmp_path):
    """TensorRT's errors during deserialisation go into the ModelError, not also into the log."""
    logs = []
    with pytest.raises(ModelError, match="Version tag"):
        TensorRtEngine(write_plan(tmp_path, version="1.0"), _trt=FakeTrt(), log=logs.append)
    assert not any("Version tag" in line for line in logs)
