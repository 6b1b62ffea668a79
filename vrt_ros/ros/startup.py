"""Process start-up of ``detector_node`` around ``rclpy.init``: parameter files, quiet Ctrl-C, unmatched sections.

- :func:`init` reads every ``--params-file`` with :mod:`vrt_ros.param_files` (the reader ``python -m vrt_ros.config``
  uses) *before* rcl does, so a missing, unreadable, non-YAML or mis-structured file ends start-up with one line
  naming the file and the problem (exit code 2) instead of rclpy's ``RCLInvalidROSArgsError`` traceback; then it
  installs :func:`quiet_sigint` and calls ``rclpy.init``.
- :func:`quiet_sigint`: the first SIGINT raises ``KeyboardInterrupt`` (the executor stops, nodes are destroyed,
  exit code 0); later ones are ignored. Ctrl-C in a terminal under ``ros2 launch`` delivers two: one from the
  terminal to the whole process group, one forwarded by launch; the second used to land in the shutdown path and
  print a traceback (exit code -2).
- :func:`warn_unmatched_sections` logs one warning per parameter-file section that applies to none of the
  process's nodes (e.g. a bare ``front_detector:`` key when the node runs under a namespace).
"""

from __future__ import annotations

import signal
import threading
from typing import Sequence

import rclpy
import rclpy.utilities
from rclpy.node import Node

from vrt_ros import param_files
from vrt_ros.errors import ConfigError


def params_files(argv: Sequence[str]) -> list[str]:
    """The files of every ``--params-file FILE`` among the ROS arguments of ``argv`` (in order)."""
    files: list[str] = []
    in_ros_args = False
    for i, arg in enumerate(argv):
        if arg == "--ros-args":
            in_ros_args = True
        elif arg == "--":
            in_ros_args = False
        elif in_ros_args and arg == "--params-file" and i + 1 < len(argv):
            files.append(argv[i + 1])
    return files


_interrupted = threading.Event()


def quiet_sigint(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    """SIGINT handler: ``KeyboardInterrupt`` the first time, nothing afterwards (see the module docstring)."""
    if _interrupted.is_set():
        return
    _interrupted.set()
    raise KeyboardInterrupt


def _rcl_error(exc: Exception) -> ConfigError:
    """rclpy's argument errors as one line (their messages carry C source locations and line breaks)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return ConfigError(f"ROS arguments rejected by rcl: {text.split(', at /')[0]}")


def non_ros_args(argv: Sequence[str]) -> list[str]:
    """``argv`` without its ROS arguments, after checking every ``--params-file`` (rcl parses them here already).

    Raises:
        ConfigError: one line: a bad parameter file (named, with the problem), or ROS arguments rcl rejects.
    """
    param_files.read_all(params_files(argv))
    try:
        return list(rclpy.utilities.remove_ros_args(list(argv)))
    except Exception as exc:  # rclpy: RCLInvalidROSArgsError, UnknownROSArgsError
        raise _rcl_error(exc) from None


def init(argv: Sequence[str]) -> None:
    """Install :func:`quiet_sigint`, then ``rclpy.init(args=argv)``.

    Raises:
        ConfigError: one line: ROS arguments that rcl rejects.
    """
    if threading.current_thread() is threading.main_thread():
        # Before rclpy.init: rclpy's own handler wakes the executors, then chains to this one.
        signal.signal(signal.SIGINT, quiet_sigint)
    try:
        rclpy.init(args=list(argv))
    except Exception as exc:  # rclpy: RCLInvalidROSArgsError, RCLError
        raise _rcl_error(exc) from None


def warn_unmatched_sections(argv: Sequence[str], nodes: Sequence[Node]) -> list[str]:
    """Warn (on the first node's logger) about each parameter-file section that applies to none of ``nodes``.

    Returns:
        The warning lines (also logged).
    """
    if not nodes:
        return []
    fqns = [n.get_fully_qualified_name() for n in nodes]
    sections = param_files.read_all(params_files(argv))
    lines = [param_files.unmatched_hint(s, fqns) for s in param_files.unmatched(sections, fqns)]
    for line in lines:
        nodes[0].get_logger().warning(line)
    return lines
