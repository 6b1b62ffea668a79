"""The ROS edge of vrt_ros: the only package that imports rclpy and message types.

Modules: :mod:`~vrt_ros.ros.node` (``DetectorNode``), :mod:`~vrt_ros.ros.params` (parameter declaration and runtime
changes), :mod:`~vrt_ros.ros.convert` (messages ↔ value types), :mod:`~vrt_ros.ros.qos` (QoS presets and mismatch
warnings), :mod:`~vrt_ros.ros.main` (``main()``: init, executor, shutdown), :mod:`~vrt_ros.ros.replay` and
:mod:`~vrt_ros.ros.record` (rosbag2 tools built on rosbags). Nothing is imported here, so importing one module does
not pull in the others.
"""
