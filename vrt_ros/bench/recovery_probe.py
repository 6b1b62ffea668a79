"""The node process of the recovery bench (:mod:`vrt_ros.bench.recovery`): ``detector_node`` with time marks, and
optionally a fatal fault after a number of frames. A bench tool, not part of the node: the product has no hook for it.

Usage (the bench writes it as the node's executable, or runs it with ``python -m``)::

    python -m vrt_ros.bench.recovery_probe [--fault-after N] [detector_node options] --ros-args ...

Prints ``RECOVERY <mark> <wall time, s>`` lines on stdout (flushed at once): ``start`` (the interpreter is up, before
any vrt_ros or ROS import), ``imported`` (``vrt_ros.ros.main`` imported), ``pipeline_begin`` / ``pipeline_end``
(around the pipeline's build: ONNX Runtime session or GPU engine), ``frame_begin`` / ``frame_end`` (around the
first frame's processing), ``fault`` (the injected fault raised). With
``--fault-after N`` the pipeline processes ``N`` frames, then raises the text of a poisoned CUDA context
(``CUDA error: an illegal memory access was encountered``) on every frame, as test/test_node_faults.py does: the node
goes fatal and ``main()`` exits with status 3.
"""

from __future__ import annotations

import time

START = time.time()  # first: before the imports this module measures

import sys  # noqa: E402
from typing import Any, Sequence  # noqa: E402

#: What the injected fault raises: the text PyTorch gives for a sticky CUDA error (vrt_ros.faults classes it fatal).
FAULT_TEXT = "CUDA error: an illegal memory access was encountered"


def mark(name: str, at: float | None = None) -> None:
    """Print one time mark (``RECOVERY <name> <wall time>``), flushed."""
    print(f"RECOVERY {name} {time.time() if at is None else at:.6f}", flush=True)


class FaultAfter:
    """The real pipeline ``inner`` with marks around its first frame (``frame_begin``, ``frame_end``); with
    ``frames`` given, it processes that many frames, then raises :data:`FAULT_TEXT` (as RuntimeError) on each frame.
    Everything else goes to ``inner``."""

    def __init__(self, inner: Any, frames: int | None) -> None:
        self._inner, self._left, self._first = inner, frames, True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _call(self, method: str, *args):
        if self._left is not None and self._left <= 0:
            mark("fault")
            raise RuntimeError(FAULT_TEXT)
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


def run(argv: Sequence[str]) -> int:
    """``detector_node`` with the marks; ``--fault-after N`` (first in ``argv[1:]``) injects the fault."""
    argv = list(argv)
    fault_after = None
    if len(argv) > 2 and argv[1] == "--fault-after":
        fault_after = int(argv[2])
        del argv[1:3]
    mark("start", START)
    from vrt_ros.ros import main as main_module
    from vrt_ros.ros import node as node_module

    mark("imported")
    real = node_module.make_pipeline

    def make_pipeline(values, log):
        mark("pipeline_begin")
        pipeline = real(values, log)
        mark("pipeline_end")
        return FaultAfter(pipeline, fault_after)

    node_module.make_pipeline = make_pipeline
    return main_module.main(argv)


#: The executable the bench installs in place of ``detector_node`` (``{python}``, ``{fault_after}`` filled in).
WRAPPER = """#!{python}
import sys
from vrt_ros.bench.recovery_probe import run
sys.exit(run([sys.argv[0], "--fault-after", "{fault_after}", *sys.argv[1:]]))
"""

if __name__ == "__main__":
    sys.exit(run(sys.argv))
