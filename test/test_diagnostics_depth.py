"""A camera whose 3D output is refused shows it on /diagnostics (the new-user trial's item 11): WARN when more than
DROP_WARN_FRACTION of the period's frames that reached the 3D output were refused, OK again once 3D boxes flow."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rclpy", reason="rclpy (the ROS 2 wheels) is not installed: make test installs it")

from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402

from vrt_ros.ros.camera import Camera  # noqa: E402
from vrt_ros.ros.diagnostics import camera_statuses  # noqa: E402


def _status(cam: Camera) -> DiagnosticStatus:
    now = time.monotonic()
    (st,) = camera_statuses("/det", "cpu", [cam], now, 1.0, now, {}, {})
    return st


def _frames(cam: Camera, n: int, published: int, unpaired: int) -> None:
    cam.counters.received += n
    cam.counters.processed += n
    cam.last_frame_mono = time.monotonic()
    cam.counters.depth["published"] += published
    cam.counters.depth["depth_unpaired"] += unpaired


def test_a_camera_whose_every_3d_output_is_refused_is_warn_and_ok_again_once_3d_flows():
    cam = Camera("front")
    _frames(cam, 40, published=0, unpaired=40)
    st = _status(cam)
    assert st.level == DiagnosticStatus.WARN, st.message
    assert "3D output refused for 40 of 40 frames" in st.message and "depth_unpaired: 40" in st.message
    _frames(cam, 30, published=30, unpaired=0)  # the depth topic is fed now: the next period is OK
    st = _status(cam)
    assert st.level == DiagnosticStatus.OK, st.message
    _frames(cam, 30, published=28, unpaired=2)  # a few unpaired frames (<= 10 %) stay OK
    cam.counters.depth["box_no_valid_depth"] += 500  # boxes without valid depth are counted per box, not frames
    assert _status(cam).level == DiagnosticStatus.OK


def test_a_camera_without_depth_is_not_judged_by_it():
    cam = Camera("rear")
    _frames(cam, 10, published=0, unpaired=0)
    cam.counters.depth.clear()  # depth off for this camera: no depth.* counters
    st = _status(cam)
    assert st.level == DiagnosticStatus.OK and not [v for v in st.values if v.key.startswith("depth.")]
