"""Process start-up of ``detector_node`` around ``rclpy.init``: parameter files, quiet Ctrl-C, unmatched sections.

- :func:`init` reads every ``--params-file`` with :mod:`vrt_ros.settings.param_files` (the reader ``python -m vrt_ros.settings.config``
  uses) *before* rcl does, so a missing, unreadable, non-YAML or mis-structured file ends start-up with one line
  naming the file and the problem (exit code 2) instead of rclpy's ``RCLInvalidROSArgsError`` traceback; then it
  calls ``rclpy.init`` without rclpy's signal handlers: SIGINT and SIGTERM are :mod:`vrt_ros.ros.stop`'s (one stop
  request at any moment; later signals ignored, exit code 0).
- :func:`files_for_no_node` names, before anything else is checked, each parameter file none of whose sections
  applies to a node of the process (a misspelt node name: the node would start on its defaults).
- :func:`warn_unmatched_sections` logs one warning per parameter-file section that applies to none of the
  process's nodes (e.g. a bare ``front_detector:`` key when the node runs under a namespace), nor to a node that
  another process of the same launch runs (``--peer-names``).
- :func:`warn_shared_outputs` warns when two nodes of the process would publish the same topic (the same cameras in
  the same namespace: every detection twice on one topic).
- :func:`exit_with_parent`: the process gets SIGINT (an orderly shutdown) when its parent dies, so a node started by
  ``ros2 launch`` does not outlive it: launch ends at once on SIGTERM, leaving its processes running (upstream
  ros2/launch#666). Linux ``prctl(PR_SET_PDEATHSIG)``; elsewhere nothing.
- :func:`exit_now`: the fatal path's end (issue 27): flush Python's and C's output streams and Python logging, then
  ``os._exit``: no ``finally`` blocks, no node or pipeline teardown, no atexit handlers, no CUDA destructors (after a
  poisoned context each of them fails in turn: 2.8 s from fault to exit on the H200 before issue 27), so
  ``respawn`` can restart the process at once.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Sequence

import rclpy
import rclpy.utilities
from rclpy.signals import SignalHandlerOptions
from rclpy.node import Node

from vrt_ros.errors import ConfigError
from vrt_ros.ros import stop
from vrt_ros.ros.qos import resolve_topic
from vrt_ros.settings import param_files


def _ros_arg_values(argv: Sequence[str], flags: Sequence[str]) -> list[str]:
    """The value after every one of ``flags`` among the ROS arguments of ``argv`` (in order)."""
    values: list[str] = []
    in_ros_args = False
    for i, arg in enumerate(argv):
        if arg == "--ros-args":
            in_ros_args = True
        elif arg == "--":
            in_ros_args = False
        elif in_ros_args and arg in flags and i + 1 < len(argv):
            values.append(argv[i + 1])
    return values


def params_files(argv: Sequence[str]) -> list[str]:
    """The files of every ``--params-file FILE`` among the ROS arguments of ``argv`` (in order)."""
    return _ros_arg_values(argv, ("--params-file",))


def node_fqn(name: str, argv: Sequence[str]) -> str:
    """The fully-qualified name rcl gives a node created as ``name`` in the root namespace under the command line's
    remap rules: ``-r [NODE:]__node:=NEW`` (``__name`` too), then ``-r [NODE:]__ns:=/NS`` matched against the new
    name; of each kind the first rule that names no node, or names the node, applies (rcl's ``rcl_node_init``:
    rcl_remap_node_name, then rcl_remap_node_namespace). Known before ``rclpy.init``, so parameter files can be
    checked against the node before anything else."""
    rules = []
    for rule in _ros_arg_values(argv, ("-r", "--remap")):
        lhs, sep, value = rule.partition(":=")
        node, _, target = lhs.rpartition(":")
        if sep:
            rules.append((node, target, value))
    name = next((v for n, t, v in rules if t in ("__node", "__name") and n in ("", name)), name)
    namespace = next((v for n, t, v in rules if t == "__ns" and n in ("", name)), "/")
    return f"{namespace.rstrip('/')}/{name}"


def files_for_no_node(argv: Sequence[str], names: Sequence[str], peers: Sequence[str] = ()) -> dict[str, str]:
    """File -> one line, for each ``--params-file`` of ``argv`` that has sections and none of which applies to a node of this
    process (``names``, remapped as :func:`node_fqn` says) nor to one of ``peers`` (nodes other processes of the same
    launch run, in the first node's namespace): a misspelt node name, or a file written for another node, leaves the
    node on its defaults, and the start-up error that follows (an empty ``model.path``) would hide why.

    Raises:
        ConfigError: a parameter file that cannot be read (as :func:`non_ros_args`).
    """
    fqns = [node_fqn(n, argv) for n in names]
    namespace = fqns[0].rsplit("/", 1)[0] if fqns else ""
    known = fqns + [f"{namespace}/{p}" for p in peers]
    lines = {}
    for file in dict.fromkeys(params_files(argv)):
        sections = param_files.read(file)
        if sections and not any(param_files.key_matches(s.key, n) for s in sections for n in known):
            lines[file] = param_files.no_node_hint(file, sections, fqns)
    return lines


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
    """``rclpy.init(args=argv)`` without rclpy's signal handlers (:mod:`vrt_ros.ros.stop` has SIGINT and SIGTERM).

    Raises:
        ConfigError: one line: ROS arguments that rcl rejects.
    """
    try:
        # rclpy's own handlers would shut the context down under a node still being built (SIGTERM: RCLError
        # "context is invalid", issue 33): signals are vrt_ros.ros.stop's
        rclpy.init(args=list(argv), signal_handler_options=SignalHandlerOptions.NO)
    except Exception as exc:  # rclpy: RCLInvalidROSArgsError, RCLError
        raise _rcl_error(exc) from None


def warn_unmatched_sections(argv: Sequence[str], nodes: Sequence[Node], peers: Sequence[str] = (),
                            reported: Sequence[str] = ()) -> list[str]:
    """Warn (on the first node's logger) about each parameter-file section that applies to none of ``nodes``, nor to
    a node named in ``peers`` (the nodes other processes of the same launch run, in the first node's namespace);
    sections of the files in ``reported`` (:func:`files_for_no_node` said so already) are left out.

    Returns:
        The warning lines (also logged).
    """
    if not nodes:
        return []
    fqns = [n.get_fully_qualified_name() for n in nodes]
    namespace = nodes[0].get_namespace().rstrip("/")
    known = fqns + [f"{namespace}/{p}" for p in peers]
    sections = param_files.read_all(params_files(argv))
    lines = [param_files.unmatched_hint(s, fqns) for s in param_files.unmatched(sections, known)
             if s.file not in reported]
    for line in lines:
        nodes[0].get_logger().warning(line)
    return lines


#: The topics a detector node publishes per camera (relative to the camera).
_OUTPUTS = ("detections", "keypoints", "label_info", "debug_image")


def warn_shared_outputs(nodes: Sequence[Node]) -> list[str]:
    """Warn about each output topic that two of ``nodes`` would publish (e.g. ``--names a b`` with the same
    ``cameras`` in one namespace: each camera's frames processed twice and every detection published twice).

    Returns:
        The warning lines (also logged, on the first node's logger).
    """
    owner: dict[str, str] = {}
    lines = []
    for node in nodes:
        for cam in node.get_parameter("cameras").value:
            for topic in (resolve_topic(node, f"{cam}/{out}") for out in _OUTPUTS):
                other = owner.setdefault(topic, node.get_fully_qualified_name())
                if other != node.get_fully_qualified_name() and topic.endswith("/detections"):
                    lines.append(f"nodes {other} and {node.get_fully_qualified_name()} both publish {topic} (and the "
                                 f"topics beside it): each frame is processed twice and every detection published "
                                 f"twice; give each node its own 'cameras' or namespace")
    for line in lines:
        nodes[0].get_logger().warning(line)
    return lines


#: ``prctl`` option: the signal the calling process gets when its parent thread exits (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def exit_with_parent(sig: int = signal.SIGINT) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent exits (see the module docstring).

    Returns:
        True where it was set (Linux); False elsewhere. When the parent has already gone (the process was
        re-parented before the call) ``sig`` is raised at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # the parent died between getppid() and prctl()
        os.kill(os.getpid(), sig)
    return True


def exit_now(status: int) -> None:
    """End the process with ``status`` at once (see the module docstring); never returns.

    What was printed or logged is flushed first (:func:`vrt_ros.ros.stop.exit_process`): ``sys.stdout``/``sys.stderr``,
    Python logging's handlers, and C stdio (``fflush(NULL)``: rcutils' console and log-file output). Nothing else runs:
    only for the fatal path, where the process's CUDA context is unusable and nothing it holds is worth an orderly
    release.
    """
    stop.exit_process(status)
