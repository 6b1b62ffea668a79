"""The shell every console tool of the ROS edge shares (``replay``, ``record``): rclpy set-up and tear-down."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from vrt_ros.errors import ConfigError
from vrt_ros.ros import dds, stop
from vrt_ros.ros.qos import QOS_KEYS


def tool_parser(prog: str, description: str, role: str) -> argparse.ArgumentParser:
    """A tool's parser with the options every tool has: ``--qos`` and ``--depth`` of its ``role`` (``publisher`` or
    ``subscription``; preset ``reliable`` and depth 10 by default) and ``--dds-profile`` (which :func:`run_tool`
    applies)."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--qos", choices=QOS_KEYS, default="reliable", help=f"{role} QoS preset (default reliable)")
    p.add_argument("--depth", type=int, default=10, help=f"{role} history depth (default 10)")
    dds.add_argument(p)
    return p


def run_tool(prog: str, parser: argparse.ArgumentParser, node_name: str,
             body: Callable[[Node, argparse.Namespace], int], argv: Sequence[str] | None = None) -> int:
    """:func:`run_tool_body`, then the end of the process with its status where the process's signals are
    :mod:`vrt_ros.ros.stop`'s (no interpreter finalization, where a second signal would kill it)."""
    status = run_tool_body(prog, parser, node_name, body, argv)
    stop.end_process(status)
    return status


def run_tool_body(prog: str, parser: argparse.ArgumentParser, node_name: str,
             body: Callable[[Node, argparse.Namespace], int], argv: Sequence[str] | None = None) -> int:
    """Parse the tool's options (ROS arguments after ``--ros-args`` go to rclpy), run ``body`` on a fresh node.

    ``parser`` comes from :func:`tool_parser`; its ``--dds-profile`` is applied before ``rclpy.init`` (raw frames
    published to another process need it, see :mod:`vrt_ros.ros.dds`).

    Returns:
        ``body``'s exit status; 2 on a :class:`~vrt_ros.errors.ConfigError` (its message printed, prefixed with
        ``prog``); 0 on a stop: SIGINT or SIGTERM at any moment (:mod:`vrt_ros.ros.stop`: the first raises
        ``KeyboardInterrupt`` once, later ones are ignored) or an external shutdown. The node is destroyed and rclpy
        shut down in every case.
    """
    if argv is None or stop.installed():  # the process's own command line (not a main(argv) inside a test runner)
        stop.install(prog, raise_first=True)
    node = None
    try:
        if stop.requested():
            return 0  # during the imports (the tool's module installs the handling first)
        argv = list(sys.argv if argv is None else argv)
        args = parser.parse_args(rclpy.utilities.remove_ros_args(argv)[1:])
        choice = dds.apply(args.dds_profile)
        stop.started_ros()
        # rclpy's own handlers would shut the context down under the tool (vrt_ros.ros.stop has both signals)
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
        node = Node(node_name)
        node.get_logger().info(choice.reason)
        return body(node, args)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        return 0
    finally:
        try:
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()
        except KeyboardInterrupt:  # the first signal arrived during the teardown: it goes on (later ones are ignored)
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()
