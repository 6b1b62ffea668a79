"""Python ``logging`` from vrt_ros (engines, GPU path, pipeline) into the node's ROS logger, at the same severity.

The core logs with the standard library (``logging.getLogger("vrt_ros....")``): the torch engine's CUDA-graph
fallback, TensorRT's messages, the kernel cache, the candidate-overflow warning. Without a bridge those records go
nowhere in a ROS process (no handler, or stderr without the node's name, not in ``/rosout``). :func:`attach`
installs one handler on the ``vrt_ros`` logger that forwards each record to a node's rclpy logger:

==================  ===============
Python level        rclpy severity
==================  ===============
DEBUG (and below)   debug
INFO                info
WARNING             warning
ERROR               error
CRITICAL            fatal
==================  ===============

Several nodes in one process share the one handler; records go to the most recently attached node still attached
(the core's records are not tied to a node). The ``vrt_ros`` logger's level follows the ROS logger's (DEBUG when
the node logs at debug, else INFO), so ``--log-level`` works for the core's records too.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

ROOT = "vrt_ros"


def ros_severity(levelno: int) -> str:
    """The rclpy logger method name for a Python logging level."""
    if levelno >= logging.CRITICAL:
        return "fatal"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warning"
    if levelno >= logging.INFO:
        return "info"
    return "debug"


class RosLogHandler(logging.Handler):
    """Forwards records to the most recently attached rclpy logger (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._targets: list[Any] = []
        self._lock_targets = threading.Lock()

    def add(self, ros_logger: Any) -> None:
        with self._lock_targets:
            self._targets.append(ros_logger)

    def remove(self, ros_logger: Any) -> int:
        """Detach ``ros_logger``; returns how many stay attached."""
        with self._lock_targets:
            if ros_logger in self._targets:
                self._targets.remove(ros_logger)
            return len(self._targets)

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock_targets:
            target = self._targets[-1] if self._targets else None
        if target is None:
            return
        try:
            text = record.getMessage()
            if record.exc_info:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
            _FORWARD[ros_severity(record.levelno)](target, f"[{record.name}] {text}")
        except Exception:  # a logging failure must never break a frame
            self.handleError(record)


# One call site per severity: rclpy ties each call site (file, line, bytecode offset) to the severity of its first
# call and raises ValueError when a later call from there has another one.
def _debug(logger: Any, text: str) -> None:
    logger.debug(text)


def _info(logger: Any, text: str) -> None:
    logger.info(text)


def _warning(logger: Any, text: str) -> None:
    logger.warning(text)


def _error(logger: Any, text: str) -> None:
    logger.error(text)


def _fatal(logger: Any, text: str) -> None:
    logger.fatal(text)


_FORWARD = {"debug": _debug, "info": _info, "warning": _warning, "error": _error, "fatal": _fatal}

_handler: RosLogHandler | None = None
_saved_level: int | None = None
_guard = threading.Lock()


def attach(ros_logger: Any) -> RosLogHandler:
    """Forward vrt_ros's Python logging to ``ros_logger`` (an rclpy ``RcutilsLogger``) until :func:`detach`."""
    global _handler, _saved_level
    with _guard:
        root = logging.getLogger(ROOT)
        if _handler is None:
            _handler = RosLogHandler()
            _saved_level = root.level
            root.addHandler(_handler)
        _handler.add(ros_logger)
        try:
            debug = bool(ros_logger.is_enabled_for(_debug_severity()))
        except Exception:
            debug = False
        root.setLevel(logging.DEBUG if debug else logging.INFO)
        return _handler


def detach(ros_logger: Any) -> None:
    """Stop forwarding to ``ros_logger``; the handler is removed with the last attached logger."""
    global _handler, _saved_level
    with _guard:
        if _handler is None:
            return
        if _handler.remove(ros_logger) == 0:
            root = logging.getLogger(ROOT)
            root.removeHandler(_handler)
            root.setLevel(_saved_level or logging.NOTSET)
            _handler = None


def _debug_severity():
    from rclpy.logging import LoggingSeverity

    return LoggingSeverity.DEBUG
