"""A managed node imports its engine's modules in the background while it waits unconfigured (issue 27).

``configure`` builds the pipeline, and most of a warm-cache configure on the H200 was one import: ``import torch``,
3.7 s of the 4.8 s (results/bench/recovery_h200.md). A managed node is usually started well before it is
configured (a lifecycle manager brings the robot's nodes up in order), so :class:`~vrt_ros.ros.lifecycle_node.
LifecycleDetectorNode` starts :func:`start` at construction: a daemon thread imports the modules the configured
``backend`` will need (:func:`engine_modules`). A ``configure`` that comes while the thread is still importing
waits for the same import (Python's per-module import lock) instead of starting it again; one that comes later
finds it done. Nothing else is made: no CUDA call, no engine, no GPU memory.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
import time
from typing import Callable

from vrt_ros.engines.trt_flavours import FLAVOURS


def _findable(name: str, find: Callable) -> bool:
    try:
        return find(name) is not None
    except (ImportError, ValueError):  # a parent package that is not there
        return False


def engine_modules(backend: str, find: Callable = importlib.util.find_spec) -> list[str]:
    """The modules a pipeline of ``backend`` imports as it is built, in order (those not installed left out): the
    backend's module and the libraries it imports lazily.

    ``cuda``: the CUDA pipeline and cuda-python's ``cuda.core``, then the GPU engine it will load: the TensorRT
    engine module and the first TensorRT flavour installed, else the torch engine (``import torch``); ``cpu``: the
    ONNX Runtime pipeline and ``onnxruntime``; ``auto``: both (the CPU path is its fallback).

    Args:
        backend: the ``backend`` parameter: ``cpu``, ``cuda`` or ``auto``.
        find: ``importlib.util.find_spec`` (tests pass their own).
    """
    names: list[str] = []
    if backend in ("cuda", "auto") and _findable("cuda.core", find):
        names += ["vrt_ros.inference.backends.cuda", "cuda.core"]
        trt = [m for f in FLAVOURS.values() for m in (f.module, f.runtime_module) if m and _findable(m, find)]
        if trt:
            names += ["vrt_ros.engines.tensorrt", trt[0]]
        elif _findable("torch", find):
            names.append("vrt_ros.engines.torch")
    if backend in ("cpu", "auto") and _findable("onnxruntime", find):
        names += ["vrt_ros.inference.backends.cpu", "onnxruntime"]
    return names


def start(backend: str, log: Callable[[str], None]) -> threading.Thread:
    """Import :func:`engine_modules` of ``backend`` in a daemon thread; ``log`` gets one line when done (the
    modules and the seconds, or the first import error, which ``configure`` will then report itself)."""

    def run() -> None:
        t0 = time.monotonic()
        names = engine_modules(backend)
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - configure imports it again and reports the error
                log(f"background import of {name} failed ({type(exc).__name__}: {exc}); configure will report it")
                return
        if names:
            log(f"engine modules imported in the background for configure: {', '.join(names)} "
                f"({time.monotonic() - t0:.2f} s)")

    thread = threading.Thread(target=run, name="vrt_prefetch", daemon=True)
    thread.start()
    return thread
