"""The node process of the recovery bench (:mod:`vrt_ros.bench.restart.recovery`): ``detector_node`` with time marks, and
optionally a fatal fault after a number of frames. A bench tool, not part of the node: the product has no hook for it.

Usage (the bench writes it as the node's executable, or runs it with ``python -m``)::

    python -m vrt_ros.bench.restart.recovery_probe [--fault-after N] [detector_node options] --ros-args ...

Prints ``RECOVERY <mark> <wall time, s>`` lines on stdout (flushed at once): ``start`` (the interpreter is up, before
any vrt_ros or ROS import; for a ``--warm-standby`` standby: its take-over, and ``imported`` at the same time), ``imported`` (``vrt_ros.ros.main`` imported), ``pipeline_begin`` / ``pipeline_end``
(around the pipeline's build: ONNX Runtime session or GPU engine), ``engine_begin`` / ``engine_end`` (inside it,
around the engine: ``OnnxRuntimeEngine`` on the CPU path, ``load_engine`` on the GPU path: TensorRT plan or torch
import and model conversion), ``frame_begin`` / ``frame_end`` (around the first frame's processing), ``fault`` (the
injected fault raised); and ``RECOVERY_LOG <wall time, s> <text>`` for each line the pipeline's build logs and
each record of vrt_ros's Python logging (kernel cache, torch conversion and graph capture) at its emission. The
pipeline marks come again at every lifecycle ``configure`` (``--lifecycle``). With
``--fault-after N`` the pipeline processes ``N`` frames, then raises what a poisoned CUDA context raises
(:func:`raised_fault`: a GpuError carrying ``CUDA_ERROR_ILLEGAL_ADDRESS`` as its code) on every frame, as test/test_node_faults.py does: the node
goes fatal and ``main()`` exits with status 3.
"""

from __future__ import annotations

import time

START = time.time()  # first: before the imports this module measures

import importlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from typing import Any, Sequence  # noqa: E402

#: The message of the injected fault (:func:`raised_fault`); the fault table reads its code, not this text.
FAULT_TEXT = "cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
#: The ``CUresult`` of the injected fault (CUDA_ERROR_ILLEGAL_ADDRESS, sticky: vrt_ros.faults classes it fatal).
FAULT_CODE = 700


def raised_fault() -> Exception:
    """The injected fault: what a failed stream sync raises after an illegal memory access (a GpuError whose
    ``code`` is CUDA_ERROR_ILLEGAL_ADDRESS), without a GPU."""
    from vrt_ros.gpu.errors import GpuError  # pure module: no CUDA import

    return GpuError(FAULT_TEXT, code=FAULT_CODE, name="CUDA_ERROR_ILLEGAL_ADDRESS")
#: Set to ``illegal_address`` (GPU pipelines only): the fault is real, a kernel reading address 0x100 launched on the
#: pipeline's stream before the frame, so the frame's sync fails with CUDA_ERROR_ILLEGAL_ADDRESS and the context is
#: poisoned, as on the H200 in issue 27 (the bench's ``--fault-kind``).
FAULT_KIND_ENV = "VRT_RECOVERY_FAULT"


def illegal_address(runtime: Any, stream: Any) -> None:
    """Launch ``rank_by_score`` on ``stream`` with its input at address 0x100: a real illegal memory access, which
    poisons the context at the stream's next sync (no sync here).

    Args:
        runtime: the :class:`vrt_ros.gpu.runtime.GpuRuntime` (a CUDA pipeline's ``runtime``).
        stream: a stream of it (the pipeline's ``stream``).
    """
    import numpy as np
    from cuda.core import launch

    from vrt_ros.gpu.launch import cfg_1d
    from vrt_ros.gpu.library import KernelLibrary

    lib = KernelLibrary.shared(runtime.arch)
    count = runtime.alloc_device(4, stream)
    runtime.memset32(count.ptr, 1000, 1, stream)
    args = (np.uint64(0x100), np.int32(8), np.int32(1000), np.uint64(count.ptr), np.uint64(0x200))
    lib.signature("postprocess", "rank_by_score").check(args)
    launch(stream, cfg_1d(1000), lib.kernel("postprocess", "rank_by_score"), *args)


def mark(name: str, at: float | None = None) -> None:
    """Print one time mark (``RECOVERY <name> <wall time>``), flushed."""
    print(f"RECOVERY {name} {time.time() if at is None else at:.6f}", flush=True)


class FaultAfter:
    """The real pipeline ``inner`` with marks around its first frame (``frame_begin``, ``frame_end``); with
    ``frames`` given, it processes that many frames, then raises :func:`raised_fault` on each frame.
    Everything else goes to ``inner``."""

    def __init__(self, inner: Any, frames: int | None) -> None:
        self._inner, self._left, self._first = inner, frames, True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _call(self, method: str, *args):
        if self._left is not None and self._left <= 0:
            mark("fault")
            if os.environ.get(FAULT_KIND_ENV) != "illegal_address":
                raise raised_fault()
            # the frame below then fails at its sync with the real CUDA error
            illegal_address(self._inner.runtime, self._inner.stream)
            self._left = None
        if self._left is not None:
            self._left -= 1
        if not self._first:
            return getattr(self._inner, method)(*args)
        self._first = False
        mark("frame_begin")
        try:
            return getattr(self._inner, method)(*args)
        finally:
            mark("frame_end")

    def process(self, spec, data):
        return self._call("process", spec, data)

    def process_batch(self, *args):
        return self._call("process_batch", *args)

    def process_bgr(self, image):
        return self._call("process_bgr", image)


def _marked(fn: Any) -> Any:
    """``fn`` with ``engine_begin`` / ``engine_end`` marks around each call."""

    def call(*args, **kwargs):
        mark("engine_begin")
        try:
            return fn(*args, **kwargs)
        finally:
            mark("engine_end")

    call.recovery_marked = True
    return call


#: Per ``backend`` parameter: the (module, engine constructor) pairs its pipeline's build may call.
_ENGINES = {"cpu": (("vrt_ros.inference.backends.cpu", "OnnxRuntimeEngine"),),
            "cuda": (("vrt_ros.inference.backends.cuda", "load_engine"),),
            "auto": (("vrt_ros.inference.backends.cuda", "load_engine"), ("vrt_ros.inference.backends.cpu", "OnnxRuntimeEngine"))}


def _mark_engines(backend: str) -> None:
    """Wrap the engine constructor of the backend(s) ``backend`` may use (imported here: inside the pipeline's
    build, as :func:`vrt_ros.inference.pipeline.make_pipeline` would import them); once per process. A backend module that
    cannot be imported here is left alone (``make_pipeline`` reports it)."""
    for name, attr in _ENGINES.get(backend, ()):
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - no cuda-python here: make_pipeline gives the reason
            continue
        if not getattr(getattr(module, attr), "recovery_marked", False):
            setattr(module, attr, _marked(getattr(module, attr)))


def _log_marks() -> None:
    """Print vrt_ros's Python log records as ``RECOVERY_LOG <record's time> <logger>: <message>`` lines (the node's
    own bridge sets the level while a node exists). Imported here, after the ``start`` mark."""
    import logging

    class LogMarks(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                text = record.getMessage().replace("\n", " ")
                print(f"RECOVERY_LOG {record.created:.6f} {record.name}: {text}", flush=True)
            except Exception:  # noqa: BLE001 - a log line must never break the node
                pass

    logging.getLogger("vrt_ros").addHandler(LogMarks())


def run(argv: Sequence[str]) -> int:
    """``detector_node`` with the marks; ``--fault-after N`` (first in ``argv[1:]``) injects the fault. The process's
    own entry (as ``detector_node``): SIGINT and SIGTERM are :mod:`vrt_ros.ros.stop`'s, as the node's."""
    from vrt_ros.ros import stop

    stop.install("detector_node")
    argv = list(argv)
    fault_after = None
    if len(argv) > 2 and argv[1] == "--fault-after":
        fault_after = int(argv[2])
        del argv[1:3]
    from vrt_ros.ros import standby

    waiting = os.environ.get(standby.ROLE_ENV) == "standby"
    if not waiting:
        mark("start", START)
    from vrt_ros.ros import main as main_module
    from vrt_ros.ros import node as node_module

    if waiting:  # a --warm-standby standby: its start is its take-over (``go``), long after its imports
        _mark_take_over(standby)
    else:
        mark("imported")
    _log_marks()
    real = node_module.make_pipeline

    def make_pipeline(values, log):
        mark("pipeline_begin")
        _mark_engines(values["backend"])

        def marked_log(text: str) -> None:
            print(f"RECOVERY_LOG {time.time():.6f} {text}", flush=True)
            log(text)

        pipeline = real(values, marked_log)
        mark("pipeline_end")
        return FaultAfter(pipeline, fault_after)

    node_module.make_pipeline = make_pipeline
    return main_module.main(argv, child_command=[sys.executable, *sys.orig_argv[1:]])  # --warm-standby: probes too


def _mark_take_over(standby: Any) -> None:
    """A standby probe marks ``start`` and ``imported`` when its wait for ``go`` ends with ``go``."""
    wait = standby.ChildLink.wait_for_go

    def wait_for_go(self, *args, **kwargs):
        went = wait(self, *args, **kwargs)
        if went:
            now = time.time()
            mark("start", now)
            mark("imported", now)
        return went

    standby.ChildLink.wait_for_go = wait_for_go


#: The executable the bench installs in place of ``detector_node`` (``{python}``, ``{fault_after}`` filled in).
WRAPPER = """#!{python}
import sys
from vrt_ros.bench.restart.recovery_probe import run
sys.exit(run([sys.argv[0], "--fault-after", "{fault_after}", *sys.argv[1:]]))
"""

if __name__ == "__main__":
    sys.exit(run(sys.argv))
