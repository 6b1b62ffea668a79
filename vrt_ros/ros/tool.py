"""The shell every console tool of the ROS edge shares (``replay``, ``record``): rclpy set-up and tear-down."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from vrt_ros.errors import ConfigError
from vrt_ros.ros import dds
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
    """Parse the tool's options (ROS arguments after ``--ros-args`` go to rclpy), run ``body`` on a fresh node.

    ``parser`` comes from :func:`tool_parser`; its ``--dds-profile`` is applied before ``rclpy.init`` (raw frames
    published to another process need it, see :mod:`vrt_ros.ros.dds`).

    Returns:
        ``body``'s exit status; 2 on a :class:`~vrt_ros.errors.ConfigError` (its message printed, prefixed with
        ``prog``); 0 on Ctrl-C or an external shutdown. The node is destroyed and rclpy shut down in every case.
    """
    argv = list(sys.argv if argv is None else argv)
    args = parser.parse_args(rclpy.utilities.remove_ros_args(argv)[1:])
    try:
        choice = dds.apply(args.dds_profile)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    rclpy.init(args=argv)
    node = None
    try:
        node = Node(node_name)
        node.get_logger().info(choice.reason)
        return body(node, args)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        return 0
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
