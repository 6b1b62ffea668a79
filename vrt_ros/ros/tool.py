"""The shell every console tool of the ROS edge shares (``replay``, ``record``): rclpy set-up and tear-down."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from vrt_ros.errors import ConfigError


def run_tool(prog: str, parser: argparse.ArgumentParser, node_name: str,
             body: Callable[[Node, argparse.Namespace], int], argv: Sequence[str] | None = None) -> int:
    """Parse the tool's options (ROS arguments after ``--ros-args`` go to rclpy), run ``body`` on a fresh node.

    Returns:
        ``body``'s exit status; 2 on a :class:`~vrt_ros.errors.ConfigError` (its message printed, prefixed with
        ``prog``); 0 on Ctrl-C or an external shutdown. The node is destroyed and rclpy shut down in every case.
    """
    argv = list(sys.argv if argv is None else argv)
    args = parser.parse_args(rclpy.utilities.remove_ros_args(argv)[1:])
    rclpy.init(args=argv)
    node = None
    try:
        node = Node(node_name)
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
