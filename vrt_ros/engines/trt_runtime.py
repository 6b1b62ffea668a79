"""The TensorRT runtime of one engine and the objects it owns: start the runtime, deserialise a plan, release them
in order (split out of :mod:`vrt_ros.engines.tensorrt`, which keeps the engine's start-up and its execution).

The handles of one engine (:class:`Handles`: ``context``, ``engine``, ``runtime``, ``logger``) are released in that
order by :meth:`~vrt_ros.engines.trt_build.Owner.release`, whatever order Python collects the rest in. A runtime whose
start failed is never destroyed (:data:`QUARANTINE`): destroying it crashes TensorRT (measured with the lean runtime
11.4 on a machine without a CUDA driver: SIGSEGV in its destructor).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vrt_ros.engines.trt_build import Owner
from vrt_ros.engines.trt_build import version as _version
from vrt_ros.engines.trt_logging import LogRouter
from vrt_ros.engines.trt_logging import diagnose_errors as _diagnose
from vrt_ros.engines.trt_logging import runtime_unusable as _runtime_unusable
from vrt_ros.errors import BackendUnavailable, ModelError

#: (runtime, logger) pairs of runtimes that failed to start; kept until the process exits, never destroyed.
QUARANTINE: list[tuple[Any, Any]] = []


class Handles(Owner):
    """The objects of one engine: ``context`` before ``engine`` before ``runtime`` before ``logger``."""

    ORDER = ("context", "engine", "runtime", "logger")
    __slots__ = ORDER + ("__weakref__",)


def start_runtime(h: Handles, trt, router: LogRouter, label: str):
    """``h.runtime``, created once with ``h.logger``; returns it.

    Args:
        h: the engine's handles (``h.logger`` set).
        trt: the TensorRT module in use.
        router: the engine's log router (what TensorRT logged while starting).
        label: the flavour's label for messages, e.g. "TensorRT".

    Raises:
        BackendUnavailable: the runtime logged errors while starting or is None (no usable CUDA driver/device);
            the runtime and its logger go to :data:`QUARANTINE`.
    """
    if h.runtime is None:
        mark = router.mark()
        h.runtime = trt.Runtime(h.logger)
        errors = router.errors_since(mark)
        if errors or h.runtime is None:
            QUARANTINE.append((h.runtime, h.logger))
            h.runtime = None
            raise BackendUnavailable(f"the {label} {_version(trt)} runtime cannot start here: "
                                     f"{' | '.join(errors) or 'Runtime() returned None'}")
    return h.runtime


def deserialize(h: Handles, trt, router: LogRouter, label: str, plan: bytes, path: Path, fix: str) -> None:
    """Deserialise ``plan`` (the bytes of ``path``) into ``h.engine``, starting the runtime first.

    What TensorRT logs goes into the exception, not a second time into the log.

    Raises:
        BackendUnavailable: the runtime cannot start, or cannot load engines on this machine at all (the machine,
            not the plan: nothing to rebuild).
        ModelError: the plan was refused; the message names ``path``, the cause TensorRT logged and ``fix``.
    """
    start_runtime(h, trt, router, label)
    mark = router.mark()
    router.hold_errors = True
    try:
        h.engine = h.runtime.deserialize_cuda_engine(plan)
    except Exception as exc:  # some bindings raise instead of returning None
        errors = router.errors_since(mark) + [f"{type(exc).__name__}: {exc}"]
        h.engine = None
    else:
        errors = router.errors_since(mark)
    finally:
        router.hold_errors = False
    if h.engine is None:
        detail = " | ".join(errors[-3:]) or "deserialize_cuda_engine returned None"
        full = f"{label} {_version(trt)}"
        warned = router.errors_since(mark, logging.WARNING)  # e.g. TensorRT for RTX's GPU refusal
        if _runtime_unusable(errors + warned):
            detail = " | ".join((errors + [w for w in warned if w not in errors])[-3:])
            raise BackendUnavailable(f"the {full} runtime cannot load engines on this machine ({detail})")
        raise ModelError(
            f"engine file {path} could not be loaded by {full}: {_diagnose(errors)} "
            f"(TensorRT: {detail}). Expected an engine built by {full} for this GPU; fix: {fix}"
        ) from None
