"""TensorRT logging: a ``trt.ILogger`` whose ``log()`` never raises, routing messages to a Python callable.

TensorRT calls its logger from C++; an exception escaping the Python ``log()`` would cross into C++. So every
failure while routing (a sink that raises, a message that cannot be converted) is swallowed and counted. Errors are
also remembered, so a caller can put what TensorRT logged into the exception it raises. Works with every flavour
(``tensorrt``, ``tensorrt_lean_bindings``, ``tensorrt_rtx_bindings``): all subclass ``trt.ILogger`` the same way.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Callable, Sequence

_log = logging.getLogger("vrt_ros.engines.tensorrt")

Log = Callable[[str], None]

_LEVELS = {"INTERNAL_ERROR": logging.CRITICAL, "ERROR": logging.ERROR, "WARNING": logging.WARNING,
           "INFO": logging.INFO, "VERBOSE": logging.DEBUG}


def enum_name(severity: Any) -> str:
    name = getattr(severity, "name", None)
    if not isinstance(name, str):
        name = str(severity).rsplit(".", 1)[-1]
    return name.upper()


class LogRouter:
    """Routes TensorRT log messages to a Python callable; :meth:`route` never raises.

    TensorRT calls its logger from C++; an exception escaping the Python ``log()`` would cross into C++. So every
    failure here (a sink that raises, a message that cannot be converted) is swallowed and counted.

    Args:
        sink: receives ``"TensorRT <LEVEL>: <message>"`` strings at or above ``min_level`` (e.g. the node's logger).
        min_level: Python logging level below which messages are not forwarded (VERBOSE = DEBUG, INFO, WARNING,
            ERROR, INTERNAL_ERROR = CRITICAL).
        keep: how many WARNING-or-worse messages are remembered for error reports.

    Attributes:
        failures: messages lost because routing them raised.
    """

    def __init__(self, sink: Log | None = None, min_level: int = logging.WARNING, keep: int = 64) -> None:
        self.sink = sink
        self.min_level = min_level
        self.failures = 0
        self.hold_errors = False  # while True, errors are only remembered (the caller reports them in its exception)
        self._errors: deque[tuple[int, int, str]] = deque(maxlen=keep)  # (position, level, text)
        self._count = 0
        self._lock = threading.Lock()

    def route(self, severity: Any, message: Any) -> None:
        """Handle one message (``severity``: a TensorRT ``ILogger.Severity`` or its name). Never raises."""
        try:
            name = enum_name(severity)
            level = _LEVELS.get(name, logging.WARNING)
            text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
            if level >= logging.WARNING:
                with self._lock:
                    self._count += 1
                    self._errors.append((self._count, level, text))
            if level >= self.min_level and not (self.hold_errors and level >= logging.ERROR):
                line = f"TensorRT {name}: {text}"
                if self.sink is not None:
                    self.sink(line)
                else:
                    _log.log(level, line)
        except BaseException:  # noqa: BLE001 - nothing may escape into TensorRT's C++ caller
            try:
                self.failures += 1
            except BaseException:  # noqa: BLE001
                pass

    def mark(self) -> int:
        """A position in the error stream; pass it to :meth:`errors_since`."""
        with self._lock:
            return self._count

    def errors_since(self, mark: int, min_level: int = logging.ERROR) -> list[str]:
        """Messages at or above ``min_level`` (default: ERROR and INTERNAL_ERROR; WARNING is also remembered)
        logged after ``mark`` (oldest first, at most ``keep``)."""
        with self._lock:
            return [text for i, level, text in self._errors if i > mark and level >= min_level]


    def quote(self, mark: int, default: str = "no TensorRT error logged") -> str:
        """The errors logged after ``mark`` (see :meth:`mark`, taken just before the failing call), joined with
        ``" | "`` for an exception message; ``default`` when it logged none. Never the errors of earlier calls: an
        out-of-memory must not be reported (and classified) with an older call's error."""
        return " | ".join(self.errors_since(mark)) or default


_logger_classes: dict[int, type] = {}


def make_logger(trt, router: LogRouter):
    """A ``trt.ILogger`` whose ``log()`` forwards to ``router`` and never raises."""
    cls = _logger_classes.get(id(trt))
    if cls is None:

        class RoutedLogger(trt.ILogger):
            def __init__(self, r: LogRouter) -> None:
                trt.ILogger.__init__(self)
                self._router = r

            def log(self, severity, msg):  # called from C++
                try:
                    self._router.route(severity, msg)
                except BaseException:  # noqa: BLE001 - route() already never raises; belt and braces
                    pass

        cls = _logger_classes[id(trt)] = RoutedLogger
    return cls(router)




# Causes read from TensorRT's logged errors (the engine's load errors)
def diagnose_errors(errors: Sequence[str]) -> str:
    """A short cause from TensorRT's logged errors."""
    text = " ".join(errors).lower()
    if "version tag" in text or "serialization version" in text or ("version" in text and "does not match" in text):
        return "it was built by another TensorRT version"
    if any(k in text for k in ("incompatible device", "expecting compute", "compute capability", "platform",
                               "not compatible", "hardware")):
        return "it was built for another GPU or platform, or is corrupt"
    if "magic" in text:
        return "it is not a TensorRT plan"
    if "size" in text or "truncat" in text or "archive" in text:
        return "it is truncated or corrupt"
    return "it is corrupt, truncated, or from another TensorRT version or GPU"

def runtime_unusable(errors: Sequence[str]) -> bool:
    """True when TensorRT's errors say its runtime cannot use the GPU at all (no driver, too old a driver, a GPU
    the flavour does not run on), rather than that the plan is bad."""
    text = " ".join(errors).lower()
    return any(k in text for k in ("cudaerror 35", "cuda driver version is insufficient", "no cuda-capable device",
                                   "cannot run on this gpu", "cudaerror 100", "cuda initialization failure"))


__all__ = ["Log", "LogRouter", "diagnose_errors", "enum_name", "make_logger", "runtime_unusable"]
