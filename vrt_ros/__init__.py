"""vrt_ros: a GPU perception node for ROS 2, written in Python.

Importing this package imports numpy only: never rclpy, cuda or tensorrt (a test enforces it).
The ROS edge lives in :mod:`vrt_ros.ros`, the GPU edge in :mod:`vrt_ros.gpu`.
"""

__version__ = "0.1.0"

from vrt_ros import _moved  # one-release aliases of moved modules (issue 37); removed in 0.2

_moved.install()
