"""The node's "no frame received" warning on a real graph (issue 37): when the camera's topic has a publisher and
still no frame ever arrived, it names the publisher and its DDS profile (raw frames from a publisher without the
large-frame Fast DDS profile never reach another process), with the variable to set for Fast DDS 2 and 3; a topic
without any publisher keeps the plain advice. The node's own log is read from ``/rosout``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("sensor_msgs.msg", reason="sensor_msgs not installed")

from rcl_interfaces.msg import Log  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end  # noqa: E402
from vrt_ros.ros import dds  # noqa: E402
from vrt_ros.ros.camera_log import SILENT_AFTER_S  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402

pytestmark = pytest.mark.ros


def test_a_camera_whose_topic_has_a_silent_publisher_is_told_about_the_publishers_dds_profile(tmp_path):
    model = blob_end2end(tmp_path / "blob.onnx", 320, 320)
    ns = unique_namespace()
    silent: dict[str, str] = {}
    lock = threading.Lock()

    def on_log(msg: Log) -> None:
        if msg.name.endswith("silent_det") and "no frame received" in msg.msg:
            with lock:
                silent[msg.msg.split("'")[1]] = msg.msg

    with private_context() as ctx:
        client = Node("log_reader", context=ctx, namespace=ns)
        client.create_subscription(Log, "/rosout", on_log, make_qos("reliable", 100))
        driver = Node("cam_driver", context=ctx, namespace=ns)
        driver.create_publisher(Image, f"{ns}/front/image_raw", make_qos("sensor_data", 1))  # publishes nothing
        params = {"backend": "cpu", "model.path": str(model), "cameras": ["front", "rear"]}
        node = DetectorNode("silent_det", context=ctx, namespace=ns,
                            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        with spinning(ctx, client, driver, node):
            deadline = time.monotonic() + SILENT_AFTER_S + 30
            while time.monotonic() < deadline and len(silent) < 2:
                time.sleep(0.05)
        node.destroy_node()
        driver.destroy_node()
        client.destroy_node()
    assert set(silent) == {"front", "rear"}, silent
    front, rear = silent["front"], silent["rear"]
    assert f"on {ns}/front/image_raw, although 1 publisher(s) ({ns}/cam_driver) publish there" in front, front
    assert "FASTRTPS_DEFAULT_PROFILES_FILE (Fast DDS 2" in front and "FASTDDS_DEFAULT_PROFILES_FILE (Fast DDS 3" in front
    assert f"to {dds.PROFILE} in the publisher's environment" in front, front
    assert Path(dds.PROFILE).is_file()
    assert "Fast DDS" not in rear and "check that something publishes there" in rear, rear
