"""The recovery bench's lifecycle part (:mod:`vrt_ros.bench.restart.recovery`, issue 27 item 3): how long a managed node's
``configure`` takes, and what it is made of.

Each run starts ``detector_node --lifecycle`` (the probe, :mod:`vrt_ros.bench.restart.recovery_probe`, with its time marks;
no fault) and drives it from a client node in the bench's process through the node's ``change_state`` service, as
``ros2 lifecycle set`` and lifecycle managers do: configure, cleanup, configure again, then Ctrl-C. Timed from the
request sent to the response received (``time.time()``, s):

- *cold*: the first configure of a process with an empty ``XDG_CACHE_HOME`` (no TensorRT plan, kernel or engine
  cache); *warm*: the first configure of a new process on the same cache; *again*: a configure after ``cleanup`` in
  that same warm process (modules imported, CUDA context up, the process's in-memory caches kept).
- its parts (:data:`CONFIGURE_PARTS`), from the probe's marks: *dispatch* (request → the pipeline's build begins:
  the service call's transport, the model file and labels checked), *backend* (→ the engine's construction begins:
  the backend's modules imported (onnxruntime, or cuda-python and the GPU backend), the CUDA context, the kernel
  library), *engine* (the engine constructed: the ONNX Runtime session; on the GPU ``load_engine``: the TensorRT
  plan loaded or built, or torch imported and the model converted), *warmup* (→ the pipeline built: kernels,
  buffers, the warm-up inference of each prepared batch size and the torch engine's CUDA-graph capture),
  *outputs* (→ the response received: publishers, the worker, the lifecycle bookkeeping, the response's transport).
- the lines the pipeline's build logged during the first cold configure, each with its time from the request.

The OS page cache is not dropped (no root): a cold configure has the model file in memory already.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from vrt_ros.bench.common import say
from vrt_ros.bench.restart.recovery_procs import MARK, Output, interrupt, parts

#: The configure's components, in order: (key, from mark, to mark); ``request`` and ``response`` are the bench's.
CONFIGURE_PARTS = (("dispatch", "request", "pipeline_begin"), ("backend", "pipeline_begin", "engine_begin"),
                   ("engine", "engine_begin", "engine_end"), ("warmup", "engine_end", "pipeline_end"),
                   ("outputs", "pipeline_end", "response"))
LABELS = ("cold", "warm", "again")
NODE_NAME = "vrt_detector"
_LOG = re.compile(r"RECOVERY_LOG (\d+\.\d+) (.*)")


class LifecycleClient:
    """A client of one managed node's ``change_state`` service, in its own rclpy context; a context manager.

    Args:
        node_fqn: the managed node's fully qualified name (``/ns/vrt_detector``).
    """

    def __init__(self, node_fqn: str) -> None:
        self.node_fqn = node_fqn

    def __enter__(self) -> "LifecycleClient":
        import rclpy
        from lifecycle_msgs.srv import ChangeState
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self._ctx = Context()
        rclpy.init(context=self._ctx)
        self._node = rclpy.create_node("recovery_lifecycle_client", context=self._ctx)
        self._client = self._node.create_client(ChangeState, f"{self.node_fqn}/change_state")
        self._executor = SingleThreadedExecutor(context=self._ctx)
        self._executor.add_node(self._node)
        return self

    def __exit__(self, *exc) -> None:
        self._executor.shutdown()
        self._node.destroy_node()
        self._ctx.try_shutdown()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the service; True when it is available."""
        return self._client.wait_for_service(timeout_sec=timeout_s)

    def transition(self, transition_id: int, timeout_s: float) -> tuple[float, float, bool]:
        """Request one transition (``lifecycle_msgs/Transition`` id) and wait up to ``timeout_s`` for the answer:
        (request sent, response received (wall-clock s), success).

        Raises:
            RuntimeError: no answer within ``timeout_s``.
        """
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        request = ChangeState.Request(transition=Transition(id=transition_id))
        sent = time.time()
        future = self._client.call_async(request)
        end = sent + timeout_s
        while not future.done() and time.time() < end:
            self._executor.spin_once(timeout_sec=0.01)
        received = time.time()
        if not future.done():
            raise RuntimeError(f"{self.node_fqn}: no answer to transition {transition_id} within {timeout_s} s")
        return sent, received, bool(future.result().success)


def _window(output: Output, t0: float, t1: float) -> tuple[dict[str, float], list[list]]:
    """The process's marks with times in [t0, t1] (the first of each), and its build's log lines in that window
    as [seconds after t0, text]."""
    marks: dict[str, float] = {}
    log: list[list] = []
    for _, line in list(output.lines):
        if (m := MARK.search(line)) is not None and t0 <= float(m.group(2)) <= t1:
            marks.setdefault(m.group(1), float(m.group(2)))
        elif (m := _LOG.search(line)) is not None and t0 <= float(m.group(1)) <= t1:
            log.append([round(float(m.group(1)) - t0, 4), m.group(2)])
    return marks, log


def _configure(client: LifecycleClient, output: Output, timeout_s: float) -> dict:
    """One timed configure: its marks, breakdown (:data:`CONFIGURE_PARTS` plus ``pipeline``, s) and log lines."""
    from lifecycle_msgs.msg import Transition

    sent, received, ok = client.transition(Transition.TRANSITION_CONFIGURE, timeout_s)
    time.sleep(0.05)  # the probe's last marks are read by the output thread
    marks, log = _window(output, sent, received)
    marks.update(request=sent, response=received)
    seconds = parts(marks, CONFIGURE_PARTS)
    seconds["pipeline"] = (marks["pipeline_end"] - marks["pipeline_begin"]
                           if "pipeline_begin" in marks and "pipeline_end" in marks else None)
    if not ok:
        raise RuntimeError(f"configure of {client.node_fqn} failed:\n{output.text()[-3000:]}")
    return {"marks": marks, "seconds": seconds, "log": log}


def lifecycle_process(env: dict[str, str], params: Path, namespace: str, timeout_s: float,
                      configure_after_s: float = 0.0) -> dict:
    """One ``detector_node --lifecycle`` process: the seconds from its start to its ``change_state`` service
    (``services_s``), a timed configure (``first``; ``configure_after_s`` after the service appeared, as a lifecycle
    manager bringing nodes up in order would: the node's background imports have had that time), a cleanup
    (``cleanup_s``) and a configure again (``again``).

    Raises:
        RuntimeError: no service, no answer within ``timeout_s``, or a failed transition (with the output's end).
    """
    from lifecycle_msgs.msg import Transition

    popen = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "vrt_ros.bench.restart.recovery_probe", "--lifecycle", "--names", NODE_NAME,
                             "--ros-args", "--params-file", str(params), "-r", f"__ns:={namespace}"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output = Output(proc)
    try:
        with LifecycleClient(f"{namespace}/{NODE_NAME}") as client:
            if not client.wait(timeout_s):
                raise RuntimeError(f"no {namespace}/{NODE_NAME}/change_state within {timeout_s} s:\n"
                                   f"{output.text()[-3000:]}")
            services = time.time() - popen
            time.sleep(configure_after_s)
            first = _configure(client, output, timeout_s)
            sent, received, ok = client.transition(Transition.TRANSITION_CLEANUP, timeout_s)
            if not ok:
                raise RuntimeError(f"cleanup failed:\n{output.text()[-3000:]}")
            again = _configure(client, output, timeout_s)
    finally:
        interrupt(proc)
        output.join()
    return {"services_s": services, "first": first, "cleanup_s": received - sent, "again": again}


def lifecycle_runs(repeats: int, env: dict[str, str], params: Path, namespace: str, timeout_s: float,
                   configure_after_s: float = 0.0) -> dict:
    """``repeats`` x (a cold process on an empty XDG_CACHE_HOME, then a warm one on the same cache): per label of
    :data:`LABELS` the timed configures, ``services_s`` per process and ``cleanup_s`` per cleanup (s); each first
    configure ``configure_after_s`` after the service appeared."""
    out: dict = {"configure": {label: [] for label in LABELS}, "services_s": [], "cleanup_s": [],
                 "configure_after_s": configure_after_s}
    for i in range(repeats):
        with tempfile.TemporaryDirectory(prefix="vrt_recovery_cache_") as cache:
            for label in ("cold", "warm"):
                run = lifecycle_process(dict(env, XDG_CACHE_HOME=cache), params, namespace, timeout_s,
                                        configure_after_s)
                out["configure"][label].append(run["first"])
                if label == "warm":
                    out["configure"]["again"].append(run["again"])
                out["services_s"].append(run["services_s"])
                out["cleanup_s"].append(run["cleanup_s"])
                say(f"lifecycle {label} {i + 1}/{repeats}: configure {run['first']['seconds']['total']:.2f} s, "
                    f"again {run['again']['seconds']['total']:.2f} s")
    return out


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def lifecycle_markdown(result: dict, cell: Callable[[float | None], str]) -> list[str]:
    """The lifecycle section's markdown lines (``cell`` formats a value)."""
    keys = [k for k, _, _ in CONFIGURE_PARTS]
    runs = result["configure"]
    repeats = len(runs["cold"])
    lines = [f"## Lifecycle configure (`detector_node --lifecycle`, `change_state` configure: request sent → "
             f"response received, s, median of {repeats})", "",
             "| configure | " + " | ".join(keys) + " | total | runs |", "|---|" + "---|" * (len(keys) + 2)]
    for label in LABELS:
        rows = runs[label]
        med = [_median(r["seconds"][k] for r in rows) for k in [*keys, "total"]]
        lines.append(f"| {label} | " + " | ".join(cell(v) for v in med) + " | "
                     + ", ".join(cell(r["seconds"]["total"]) for r in rows) + " |")
    after = result.get("configure_after_s", 0.0)
    lines += ["", (f"The first configure of each process sent {after:g} s after its service appeared "
                   "(`--configure-after`: the node's background imports had that time). " if after else "")
              + f"Process start → `change_state` service available: median {cell(_median(result['services_s']))} s; "
              f"cleanup: median {cell(_median(result['cleanup_s']))} s.", "",
              "cold: the first configure of a process on an empty XDG_CACHE_HOME; warm: the first configure of a new "
              "process on the same cache; again: configure after cleanup in the warm process. dispatch: request → "
              "the pipeline's build begins (transport, model and labels checks); backend: → the engine's "
              "construction begins (backend modules imported, GPU context, kernel library); engine: ONNX Runtime "
              "session, or on the GPU the TensorRT plan / torch import and model conversion; warmup: → pipeline "
              "built (kernels, buffers, warm-up inference, CUDA-graph capture); outputs: → response received "
              "(publishers, worker, response transport).", ""]
    log = runs["cold"][0]["log"] if runs["cold"] else []
    if log:
        lines += ["What the first cold configure's pipeline build logged (s after the request):", ""]
        lines += [f"- {offset:.3f}: {text[:200]}" for offset, text in log[:12]]
        lines.append("")
    return lines
