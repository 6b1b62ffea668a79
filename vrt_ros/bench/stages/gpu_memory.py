"""What a GPU pipeline leaves on the device after it is closed (issue 27, item 4: a lifecycle ``cleanup``).

Usage (GPU machine)::

    python -m vrt_ros.bench.stages.gpu_memory [--model PATH] [--cycles 3] [--frames 20] [--out results/bench]

One process, as a managed node lives: device memory in use (``nvidia-smi``'s ``memory.used`` for the device before
this process has a CUDA context; then ``cuMemGetInfo``: total - free, whole device) at each stage: CUDA context
(:class:`vrt_ros.gpu.runtime.GpuRuntime`), torch initialised (``import torch`` and a first tensor on the device),
then per cycle: pipeline built (``backend: cuda``, the engine as :func:`vrt_ros.inference.backends.gpu_engine.load_engine`
picks it: torch on a machine without TensorRT), active (``--frames`` frames of a real photo answered, CUDA graph
captured) and closed (:meth:`CudaPipeline.close`, what ``cleanup`` calls: buffers, stream, engine; the torch engine
also drops its graphs and empties torch's caching allocator and cuBLAS workspaces). torch's own counters
(``memory_allocated`` / ``memory_reserved``) are printed beside. Writes ``gpu_memory.json`` / ``gpu_memory.md``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

MIB = 2**20


def _smi_used_mib() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20)
        return float(out.stdout.strip().splitlines()[0])
    except Exception:  # noqa: BLE001 - no nvidia-smi: the row says so
        return None


def main(argv: list[str] | None = None) -> int:
    from vrt_ros.bench.common import library_versions, say, write_result

    repo = Path(__file__).resolve().parents[3]
    shared = Path(os.environ.get("VRT_SHARED_DIR", repo.parent / "shared"))
    p = argparse.ArgumentParser(prog="python -m vrt_ros.bench.stages.gpu_memory", description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(shared / "models" / "yolox_nano.onnx"))
    p.add_argument("--image", default=str(shared / "data" / "images" / "darknet_dog.jpg"))
    p.add_argument("--cycles", type=int, default=3)
    p.add_argument("--frames", type=int, default=20)
    p.add_argument("--out", default=str(repo / "results" / "bench"))
    args = p.parse_args(argv)

    import cv2

    rows: list[dict] = []
    smi = _smi_used_mib()
    rows.append({"stage": "before (no CUDA context in this process; nvidia-smi)", "used_mib": smi})
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    torch = None

    def mark(stage: str, **extra) -> None:
        row = {"stage": stage, "used_mib": rt.device_memory_used() / MIB, **extra}
        if torch is not None:
            row.update(torch_allocated_mib=torch.cuda.memory_allocated() / MIB,
                       torch_reserved_mib=torch.cuda.memory_reserved() / MIB)
        rows.append(row)
        say(f"gpu_memory: {stage}: {row['used_mib']:.0f} MiB")

    mark("CUDA context (GpuRuntime)")
    import torch as _torch

    torch = _torch
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    mark("torch initialised")
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.settings.config import defaults

    image = cv2.imread(args.image, cv2.IMREAD_COLOR)
    values = defaults()
    values.update({"model.path": args.model, "backend": "cuda"})
    engine_name = ""
    for cycle in range(1, args.cycles + 1):
        t = time.perf_counter()
        pipe = CudaPipeline(values, log=lambda m: None)
        engine_name = pipe.engine.name
        mark(f"cycle {cycle}: pipeline built", seconds=time.perf_counter() - t)
        for _ in range(args.frames):
            pipe.process_bgr(image)
        mark(f"cycle {cycle}: active ({args.frames} frames)")
        pipe.close()
        del pipe
        mark(f"cycle {cycle}: closed (cleanup)")
    base = rows[2]["used_mib"]
    context = rows[1]["used_mib"]
    lines = ["# GPU memory after a pipeline's close (issue 27, item 4)", "",
             f"Command: `python -m vrt_ros.bench.stages.gpu_memory --cycles {args.cycles} --frames {args.frames}`  ",
             f"Engine: {engine_name}; {library_versions(('torch', 'cuda-core', 'cuda-bindings', 'onnx2torch'))}", "",
             "| stage | device used (MiB) | vs torch initialised | torch allocated | torch reserved |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        used = r["used_mib"]
        cell = "n/a" if used is None else f"{used:.0f}"
        delta = "" if used is None or "torch_reserved_mib" not in r else f"{used - base:+.0f}"
        lines.append(f"| {r['stage']} | {cell} | {delta} | {r.get('torch_allocated_mib', 0):.1f} | "
                     f"{r.get('torch_reserved_mib', 0):.1f} |")
    closed = [r["used_mib"] for r in rows if r["stage"].endswith("closed (cleanup)")]
    lines += ["", f"After each cleanup vs torch initialised: {', '.join(f'{c - base:+.0f}' for c in closed)} MiB; "
              f"the process's floor: {context - (smi or 0):.0f} MiB CUDA context (this process's, with cuda.core's "
              f"modules) + {base - context:.0f} MiB torch's CUDA state (its context resources, cuBLAS/cuDNN "
              "handles and kernels loaded), which stay until the process exits.", ""]
    write_result(args.out, "gpu_memory", {"rows": rows, "engine": engine_name, "frames": args.frames}, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
