"""One model through every row of the benchmark, for each size and encoding.

Rows per configuration (model, size, encoding):

- ``vrt_ros_gpu``: :class:`~vrt_ros.inference.backends.cuda.CudaPipeline` with the torch engine in a CUDA graph;
- ``torch_gpu``: the Ultralytics-style peer (:mod:`vrt_ros.bench.stages.torch_peer`), YOLOX heads only;
- ``typical_captured`` / ``typical_eager``: the baseline (:mod:`vrt_ros.bench.stages.baseline`);
- ``vrt_ros_cpu``: :class:`~vrt_ros.inference.backends.cpu.CpuPipeline` (ONNX Runtime), fewer frames;

plus ``limits`` (engine alone, pinned H2D alone) and ``upload`` (variants of getting the bytes to the GPU).
A row that cannot run here is ``{"unavailable": reason}``. Warm-up frames are excluded from every number.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vrt_ros.bench.frames import as_received, make_messages
from vrt_ros.bench.stats import ratio, summary
from vrt_ros.errors import BackendUnavailable

log = logging.getLogger(__name__)

ROWS = ("vrt_ros_gpu", "torch_gpu", "typical_captured", "typical_eager", "vrt_ros_cpu")
#: The rows run on the GPU (unavailable together when there is none).
GPU_ROWS = ROWS[:4]
ROW_TITLES = {
    "vrt_ros_gpu": "vrt_ros GPU pipeline",
    "torch_gpu": "Ultralytics-style node: uint8 upload, letterbox + NMS in torch on the GPU, same captured engine",
    "typical_captured": "typical node, same captured engine (baseline)",
    "typical_eager": "typical node, eager module (baseline)",
    "vrt_ros_cpu": "vrt_ros CPU path (ONNX Runtime)",
}


@dataclass(frozen=True)
class Settings:
    """How many frames each part measures (after ``warmup`` frames per row and configuration)."""

    frames: int = 300
    warmup: int = 30
    eager_frames: int = 300
    cpu_frames: int = 50
    cpu_warmup: int = 3
    upload_frames: int = 200
    gpu: bool = True
    cpu: bool = True
    message: str = "fresh"  # vrt_ros.bench.frames.MESSAGE_STATES


def _values(path: Path, backend: str) -> dict:
    from vrt_ros.settings.config import defaults

    values = defaults()
    values.update({"model.path": str(path), "backend": backend})
    return values


class GpuSide:
    """The GPU objects of one model: the torch engine (CUDA graph) and the pipeline built on it.

    Raises:
        BackendUnavailable: no CUDA device / cuda-python, or torch / onnx2torch missing.
    """

    def __init__(self, path: Path, say: Callable[[str], None]) -> None:
        from vrt_ros.gpu import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        try:
            from vrt_ros.engines.torch import TorchEngine
        except ImportError as exc:
            raise BackendUnavailable(f"torch not importable: {exc}") from exc
        from vrt_ros.inference.backends.cuda import CudaPipeline

        self.engine = TorchEngine(path, 0, cuda_graph=True)
        self.pipe = CudaPipeline(_values(path, "cuda"), log=say, engine=self.engine)
        self.baselines: dict = {}

    def close(self) -> None:
        self.pipe.close()


def _run_callable(fn: Callable, messages: Sequence, warmup: int, frames: int,
                  after_warmup: Callable[[], None] | None = None) -> tuple[list[float], list[int]]:
    n = len(messages)
    for i in range(warmup):
        fn(*messages[i % n])
    if after_warmup is not None:
        after_warmup()
    wall, dets = [], []
    for i in range(frames):
        spec, data = messages[i % n]
        t0 = time.perf_counter()
        d = fn(spec, data)
        wall.append((time.perf_counter() - t0) * 1e3)
        dets.append(len(d))
    return wall, dets


def _row(wall: list[float], dets: list[int], **extra) -> dict:
    return {"wall_ms": summary(wall), "detections_per_frame": float(np.mean(dets)) if dets else 0.0, **extra}


def gpu_rows(side: GpuSide, messages: Sequence, st: Settings) -> dict:
    """``vrt_ros_gpu``, the two baselines, ``limits`` and ``upload`` for one configuration."""
    from vrt_ros.bench.stages.baseline import TypicalNode, torch_allocations
    from vrt_ros.bench.stages.torch_peer import PeerUnavailable, TorchGpuNode
    from vrt_ros.gpu import measure

    pipe = side.pipe
    out: dict = {}
    n = len(messages)
    for i in range(st.warmup):  # includes the staging reallocation for this size/encoding and the graph capture
        pipe.process(*messages[i % n])
    a = measure.run_pipeline(pipe, messages, st.frames, extra_allocs=lambda: torch_allocations(side.engine.device))
    stages = measure.run_stages(pipe, messages, st.frames)
    out["vrt_ros_gpu"] = _row(
        a["wall_ms"], a["detections"],
        pipeline_total_ms=summary(a["pipeline_total_ms"]),
        stages_ms={k: summary(v) for k, v in stages.items()},
        syncs_per_frame=a["syncs_per_frame"],
        allocs_per_frame=a["allocs_per_frame"],
        frames=st.frames,
    )
    # limits: the engine alone, the bytes alone
    measure.engine_alone(pipe, 10)
    eng = measure.engine_alone(pipe, st.frames)
    nbytes = max(len(d) for _, d in messages)
    ub = measure.UploadBench(pipe.runtime, nbytes)
    upload: dict = {}
    try:
        for variant in measure.UploadBench.VARIANTS:
            for i in range(5):
                ub.run(variant, messages[i % n][1])
            k = st.frames if variant == "pinned_h2d" else st.upload_frames
            upload[variant] = summary([ub.run(variant, messages[i % n][1]) for i in range(k)])
    finally:
        ub.close()
    out["limits"] = {
        "engine_alone_ms": summary(eng["gpu_ms"]),
        "engine_alone_wall_ms": summary(eng["wall_ms"]),
        "h2d_pinned_ms": upload["pinned_h2d"],
        "frame_bytes": nbytes,
    }
    out["upload"] = upload
    # the peers, same model object, same frames
    params = pipe._params  # the pipeline's own thresholds (parameter defaults)
    peers = {
        "torch_gpu": (st.frames, lambda: TorchGpuNode(side.engine, pipe.head, pipe.input_spec, params)),
        "typical_captured": (st.frames, lambda: TypicalNode(side.engine, pipe.head, pipe.input_spec, params, "captured")),
        "typical_eager": (st.eager_frames, lambda: TypicalNode(side.engine, pipe.head, pipe.input_spec, params, "eager")),
    }
    for key, (frames, build) in peers.items():
        try:
            node = side.baselines.get(key)
            if node is None:
                node = side.baselines[key] = build()
            mark: list[int] = []
            wall, dets = _run_callable(node, messages, st.warmup, frames,
                                       after_warmup=lambda: mark.append(torch_allocations(side.engine.device)))
            allocs = (torch_allocations(side.engine.device) - mark[0]) / frames
            out[key] = _row(wall, dets, frames=frames, torch_allocs_per_frame=allocs)
        except PeerUnavailable as exc:
            out[key] = {"unavailable": str(exc)}
        except Exception as exc:  # report, keep the other rows
            log.exception("peer %s failed", key)
            out[key] = {"unavailable": f"{type(exc).__name__}: {exc}"}
    return out


def derived(rows: dict) -> dict:
    """Overheads and ratios from one configuration's rows (None where a row is missing).

    - ``overhead_ms`` = total p50 − engine-alone p50;
    - ``overhead_beyond_limit_ms`` = total p50 − (engine-alone p50 + pinned H2D p50);
    - ``total_over_limit`` = total p50 ÷ (engine-alone p50 + pinned H2D p50);
    - ``p99_over_p50`` of the vrt_ros GPU row;
    - ``speedup_vs_torch_gpu`` / ``speedup_vs_captured`` / ``speedup_vs_eager`` = peer p50 ÷ vrt_ros GPU p50.
    """
    def p(key: str, q: str = "p50"):
        r = rows.get(key) or {}
        return (r.get("wall_ms") or {}).get(q)

    total = p("vrt_ros_gpu")
    lim = rows.get("limits") or {}
    eng = (lim.get("engine_alone_ms") or {}).get("p50")
    h2d = (lim.get("h2d_pinned_ms") or {}).get("p50")
    both = eng + h2d if eng is not None and h2d is not None else None
    return {
        "overhead_ms": total - eng if total is not None and eng is not None else None,
        "overhead_beyond_limit_ms": total - both if total is not None and both is not None else None,
        "total_over_limit": ratio(total, both),
        "p99_over_p50": ratio(p("vrt_ros_gpu", "p99"), total),
        "speedup_vs_torch_gpu": ratio(p("torch_gpu"), total),
        "speedup_vs_captured": ratio(p("typical_captured"), total),
        "speedup_vs_eager": ratio(p("typical_eager"), total),
    }


def run_model(name: str, path: Path, sources: Sequence[np.ndarray], sizes: Sequence[tuple[int, int]],
              encodings: Sequence[str], st: Settings, say: Callable[[str], None], repeats: int = 1) -> list[dict]:
    """Every configuration of one model, swept ``repeats`` times with the same engine, pipelines and peers (built
    once) and merged by :func:`merge_repeats`.

    Returns:
        One dict per (size, encoding): ``model``, ``size``, ``encoding``, the rows, ``limits``, ``upload``,
        ``derived``, ``derived_range``, ``repeats``.
    """
    side = None
    gpu_reason = "disabled (--no-gpu)"
    if st.gpu:
        try:
            side = GpuSide(path, say)
            gpu_reason = ""
        except BackendUnavailable as exc:
            gpu_reason = str(exc)
        except Exception as exc:
            log.exception("GPU set-up failed")
            gpu_reason = f"{type(exc).__name__}: {exc}"
    cpu_pipe, cpu_reason = None, "disabled (--no-cpu)"
    if st.cpu:
        try:
            from vrt_ros.inference.backends.cpu import CpuPipeline

            cpu_pipe, cpu_reason = CpuPipeline(_values(path, "cpu"), log=say), ""
        except Exception as exc:
            cpu_reason = f"{type(exc).__name__}: {exc}"
    runs: list[list[dict]] = []
    try:
        for rep in range(repeats):  # whole sweeps repeated: a slow spell of the machine hits one run, not one row
            results: list[dict] = []
            for w, h in sizes:
                for enc in encodings:
                    t_cfg = time.perf_counter()
                    messages = as_received(make_messages(sources, w, h, enc), st.message)
                    say(f"run {rep + 1}/{repeats}, {name} {w}x{h} {enc}: {len(messages)} distinct frames of "
                        f"{len(messages[0][1])} bytes ({st.message} messages)")
                    cfg: dict = {"model": name, "model_file": path.name, "size": f"{w}x{h}", "encoding": enc,
                                 "frame_bytes": len(messages[0][1]), "distinct_frames": len(messages)}
                    if side is not None:
                        try:
                            cfg.update(gpu_rows(side, messages, st))
                        except Exception as exc:  # report it in the results, go on with the next configuration
                            log.exception("GPU rows of %s %dx%d %s failed", name, w, h, enc)
                            for key in GPU_ROWS:
                                cfg.setdefault(key, {"unavailable": f"failed: {type(exc).__name__}: {exc}"})
                    else:
                        for key in GPU_ROWS:
                            cfg[key] = {"unavailable": gpu_reason}
                    if cpu_pipe is not None:
                        wall, dets = _run_callable(cpu_pipe.process, messages, st.cpu_warmup, st.cpu_frames)
                        cfg["vrt_ros_cpu"] = _row(wall, dets, frames=st.cpu_frames)
                    else:
                        cfg["vrt_ros_cpu"] = {"unavailable": cpu_reason}
                    cfg["derived"] = derived(cfg)
                    say(f"  done in {time.perf_counter() - t_cfg:.1f} s: " + ", ".join(
                        f"{k} p50 {cfg[k]['wall_ms']['p50']:.3f} ms" for k in ROWS if "wall_ms" in cfg.get(k, {})))
                    results.append(cfg)
                    del messages
            runs.append(results)
    finally:
        if side is not None:
            side.close()
        if cpu_pipe is not None:
            cpu_pipe.close()
    return merge_repeats(runs)


def merge_repeats(runs: Sequence[Sequence[dict]]) -> list[dict]:
    """One configuration list from repeated runs of the same configurations (``--repeats``).

    Each configuration keeps, per row, the run whose p50 is the median of that row's p50s over the runs (the
    middle one of three), so a row's p50 / p99 / stages come from one run. Its ``derived`` values are the median
    over the runs of the values each run derived from its own rows (ratios are always between rows of one run),
    and ``derived_range`` holds their ``[min, max]``; ``repeats`` is the number of runs.

    Args:
        runs: per run, the configurations of one sweep (:func:`run_model`), in the same order every run.

    Raises:
        ValueError: no run, or runs that do not hold the same configurations.
    """
    if not runs:
        raise ValueError("no run to merge")
    keys = [[(c["model"], c["size"], c["encoding"]) for c in run] for run in runs]
    if any(k != keys[0] for k in keys):
        raise ValueError("repeated runs measured different configurations")
    merged = []
    for i in range(len(runs[0])):
        reps = [run[i] for run in runs]
        cfg = dict(reps[0])
        for key in ROWS:
            timed = [r for r in reps if "wall_ms" in r.get(key, {})]
            if timed:
                timed.sort(key=lambda r: r[key]["wall_ms"]["p50"])
                cfg[key] = timed[(len(timed) - 1) // 2][key]
        for key in ("limits", "upload"):
            with_key = [r for r in reps if r.get(key)]
            if with_key:
                cfg[key] = with_key[(len(with_key) - 1) // 2][key]
        cfg["derived"], cfg["derived_range"] = {}, {}
        for name in reps[0]["derived"]:
            vals = sorted(v for v in (r["derived"].get(name) for r in reps) if v is not None)
            cfg["derived"][name] = float(np.median(vals)) if vals else None
            cfg["derived_range"][name] = [vals[0], vals[-1]] if vals else None
        cfg["repeats"] = len(reps)
        merged.append(cfg)
    return merged
