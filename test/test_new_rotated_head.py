"""Issue 37 item 4: a new head with rotated boxes is right in every consumer by construction. ``SpinnerHead`` is a
head nobody downstream knows: its raw output is one row per object (cx, cy, w, h, angle, score) and its decode gives
``Candidates`` with the angle in ``extras[:, 0]``, as every oriented head does; ``postprocess.finish`` makes its
``Detections``. Depth (the CPU reference), tracking, drawing and the Detection2D writer then handle its boxes as
rotated without a line of theirs naming it: each asks the ``Detections`` for its geometry."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

import depth_scenes as ds
from vrt_ros.boxes.draw import CLASS_COLORS, draw_detections
from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.postprocess import finish
from vrt_ros.depth.boxes3d import boxes_3d
from vrt_ros.depth.camera_model import CameraModel
from vrt_ros.depth.stats import box_stats
from vrt_ros.heads.base import Candidates
from vrt_ros.tracking import ByteTracker, TrackerParams
from vrt_ros.tracking.output import track_frame
from vrt_ros.types import PostprocessParams

RANGE = (0.1, 10.0)


class SpinnerHead:
    """The fake new head: raw output (M, 6) rows cx, cy, w, h, angle (radians), score, engine-input pixels."""

    name = "spinner"
    oriented = True
    applies_nms = True

    def decode(self, out: np.ndarray, threshold: float) -> Candidates:
        out = np.asarray(out, np.float32).reshape(-1, 6)
        out = out[out[:, 5] >= threshold]
        cx, cy, w, h = out[:, 0], out[:, 1], out[:, 2], out[:, 3]
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
        return Candidates(boxes=boxes, scores=out[:, 5].copy(), class_ids=np.zeros(len(out), np.int32),
                          keypoints=np.zeros((len(out), 0, 3), np.float32), extras=out[:, 4:5].copy())


def run_head(rows) -> "Detections":  # noqa: F821 - what the CPU backend does with a head's output
    head = SpinnerHead()
    lb = letterbox(ds.W, ds.H, ds.W, ds.H, "center")
    return finish(head.decode(np.asarray(rows, np.float32), 0.25), lb, PostprocessParams(score_threshold=0.25),
                  head.applies_nms, head.oriented)


def _stick_row(s: ds.Stick, score: float = 0.9) -> list[float]:
    box, theta = ds.stick_obb(s)
    return [(box[0] + box[2]) / 2, (box[1] + box[3]) / 2, box[2] - box[0], box[3] - box[1], theta, score]


def test_depth_measures_the_new_heads_thin_tilted_object_not_the_wall():
    """HC-24's scene: a thin stick at 1 m at 45 degrees before a wall at 5 m. The stick's box read as rotated holds
    the stick's depth only (median and 90th percentile 1 m); its image-aligned rectangle would be mostly wall."""
    dets = run_head([_stick_row(ds.HC24_STICK)])
    assert dets.rotated and len(dets) == 1
    depth = ds.stick_scene()
    stats = box_stats(depth, 1.0, dets.boxes, 1.0, RANGE, theta=dets.theta)  # as the node's depth step calls it
    assert stats[0, 1:].tolist() == [ds.HC24_STICK.z] * 3
    out = boxes_3d(dets.boxes, stats, CameraModel.from_info(ds.square_info()), theta=dets.theta)
    assert out.yaw[0] == pytest.approx(ds.HC24_STICK.angle, abs=1e-4)
    assert out.sizes[0, 0] == pytest.approx(ds.HC24_STICK.length, rel=0.02)


def test_tracking_keeps_the_new_heads_crossing_sticks_apart():
    """Two sticks crossing as an X (the same centre, +-0.5 rad, 200 x 8 px) have the same image-aligned rectangle:
    only the rotated overlap tells them apart. Their order in the head's output swaps every frame (scores
    alternate); each keeps its track id."""
    tracker = ByteTracker(TrackerParams(min_hits=1))
    by_angle: dict[float, set[str]] = {0.5: set(), -0.5: set()}
    for k in range(8):
        cx, cy = 300.0 + 2 * k, 240.0 + k
        hi, lo = (0.9, 0.8) if k % 2 else (0.8, 0.9)
        dets = run_head([[cx, cy, 200.0, 8.0, 0.5, hi], [cx, cy, 200.0, 8.0, -0.5, lo]])
        assert len(dets) == 2  # their probiou is low: rotated NMS keeps both
        published, ids = track_frame(tracker, k * 33_000_000, dets, 0.25)
        for t, i in zip(published.theta.tolist(), ids):
            by_angle[round(t, 1)].add(i)
    assert all(len(v) == 1 and "" not in v for v in by_angle.values()), by_angle
    assert by_angle[0.5] != by_angle[-0.5]


def test_drawing_outlines_the_new_heads_turned_boxes():
    """The drawn outline follows the turned rectangle: its corners are painted, the corners of the image-aligned
    rectangle around it are not."""
    dets = run_head([[320.0, 240.0, 200.0, 20.0, 0.6, 0.9]])
    image = np.zeros((ds.H, ds.W, 3), np.uint8)
    draw_detections(image, dets, draw_text=False, thickness=1)
    color = np.array(CLASS_COLORS[0], np.uint8)
    painted = np.all(image == color, axis=2) | (image.sum(axis=2) > 0)
    for x, y in np.round(cv2.boxPoints(((320.0, 240.0), (200.0, 20.0), math.degrees(0.6)))).astype(int):
        assert painted[y - 1:y + 2, x - 1:x + 2].any(), (x, y)  # on the outline (anti-aliased: within a pixel)
    x0, y0 = np.floor(dets.corners()[0].min(axis=0)).astype(int)
    x1, y1 = np.ceil(dets.corners()[0].max(axis=0)).astype(int)
    assert not painted[y0, x0] and not painted[y0, x1] and not painted[y1, x0] and not painted[y1, x1]


def test_the_message_writer_publishes_the_new_heads_theta():
    pytest.importorskip("vision_msgs", reason="vision_msgs not installed (run `make test`, which sets up .venv)")
    from std_msgs.msg import Header

    from vrt_ros.ros.convert import detections_to_msg

    dets = run_head([[320.0, 240.0, 200.0, 20.0, 0.6, 0.9], [100.0, 100.0, 10.0, 40.0, 0.2, 0.8]])
    msg = detections_to_msg(dets, Header())
    got = [(d.bbox.center.position.x, d.bbox.center.position.y, d.bbox.size_x, d.bbox.size_y, d.bbox.center.theta)
           for d in msg.detections]
    np.testing.assert_allclose(got, [(320, 240, 200, 20, 0.6), (100, 100, 40, 10, 0.2 - math.pi / 2)], atol=1e-4)


@pytest.mark.parametrize("thickness", [1, 3])
def test_axis_aligned_boxes_draw_the_pixels_of_cv2_rectangle(thickness):
    """The one outline path draws an axis-aligned box (and a rotated one at angle 0) exactly as ``cv2.rectangle``
    with 8-connected lines did before the geometry moved into ``Detections``."""
    from vrt_ros.types import Detections

    box = np.float32([[100.4, 60.6, 300.5, 200.2]])
    want = np.zeros((ds.H, ds.W, 3), np.uint8)
    cv2.rectangle(want, (100, 61), (300, 200), CLASS_COLORS[0], thickness, cv2.LINE_8)
    for theta in (None, np.zeros(1, np.float32)):
        image = np.zeros_like(want)
        dets = Detections(boxes=box, scores=np.float32([0.9]), class_ids=np.int32([0]), theta=theta)
        draw_detections(image, dets, draw_text=False, thickness=thickness)
        assert np.array_equal(image, want)


def test_a_head_registered_in_heads_is_a_model_head_value_without_another_edit():
    """Registering a head is one entry in ``HEADS``: the parameter schema's ``model.head`` choices follow it (before
    issue 37 a second list in config.py had to be edited too)."""
    from vrt_ros.settings import config
    from vrt_ros.errors import ConfigError
    from vrt_ros.heads import HEADS

    for name in HEADS:
        assert config.check_value("model.head", name) == name
    with pytest.raises(ConfigError):
        config.check_value("model.head", "spinner")
