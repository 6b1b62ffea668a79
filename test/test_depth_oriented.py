"""Depth -> 3D of oriented boxes (issue 34, HC-24): the pixels inside the rotated rectangle, its rotated extent
back-projected, on the CPU reference and on the CUDA stand-in (the glue feeds the kernel the rows' theta); the real
kernel against the reference is ``test_gpu_depth.py``'s ``test_HC_24_...`` (``-m gpu``).

The scene (test/depth_scenes.py ``stick_scene``): a thin stick 0.60 x 0.04 m tilted 45 deg in the image plane, 1 m
in front of a wall at 5 m, seen by a pinhole camera with fx == fy, so its image is exactly the oriented box the
detector publishes. Its image-aligned own-axis rectangle (what depth read before) holds mostly wall.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

import depth_scenes as ds
from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from test_gpu_depth import emulate_depth_box_stats
from vrt_ros.depth.boxes3d import boxes_3d
from vrt_ros.depth.camera_model import CameraModel
from vrt_ros.depth.image import DepthImage
from vrt_ros.depth.stats import DepthJob, box_stats, rotated_cover
from vrt_ros.types import ImageSpec, TensorInfo

RANGE = (0.1, 10.0)
TRUTH_REL = 0.02  # HC-24: within 2 % of the truth


def _hc24(scale: int = 1):
    box, theta = ds.stick_obb(ds.HC24_STICK)
    return box[None], np.float32([theta]), ds.stick_scene(scale=scale)


@pytest.mark.parametrize("encoding", ["32FC1", "16UC1"])
def test_HC_24_thin_tilted_object_before_a_wall_is_placed_on_the_object(encoding):
    boxes, theta, depth = _hc24()
    img, units = (depth, 1.0) if encoding == "32FC1" else (ds.to_mm(depth), 1000.0)
    model = CameraModel.from_info(ds.square_info())
    stats = box_stats(img, units, boxes, 1.0, RANGE, theta=theta)
    out = boxes_3d(boxes, stats, model, theta=theta)
    s = ds.HC24_STICK
    truth = np.array([s.x, s.y, s.z])
    assert out.index.tolist() == [0]
    assert np.linalg.norm(out.centres[0] - truth) <= TRUTH_REL * np.linalg.norm(truth), out.centres
    np.testing.assert_allclose(out.sizes[0, :2], [s.length, s.thickness], rtol=TRUTH_REL)  # the rotated extent
    assert out.yaw[0] == pytest.approx(s.angle, abs=1e-6)
    # the same box read as image-aligned (the bug) holds mostly wall: the scene tells the two apart
    wrong = boxes_3d(boxes, box_stats(img, units, boxes, 1.0, RANGE), model)
    assert wrong.centres[0, 2] == pytest.approx(ds.WALL_M)


def test_rotated_cover_counts_pixels_whose_centre_is_inside():
    """Every pixel of a turned rectangle is tested by its centre (brute force in float64, away from the edges), the
    cover's area is the rectangle's, a turn by pi covers the same pixels, and a box thinner than a pixel keeps the
    pixel holding its centre."""
    box = np.float32([100.3, 200.7, 260.1, 221.2])
    for theta in (0.3, -1.1, math.radians(45.0)):
        x0, x1, y0, y1, mask = rotated_cover(box, theta, 1.0, ds.W, ds.H)
        j, i = np.mgrid[y0:y1, x0:x1]
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        u = (i + 0.5 - cx) * math.cos(theta) + (j + 0.5 - cy) * math.sin(theta)
        v = (j + 0.5 - cy) * math.cos(theta) - (i + 0.5 - cx) * math.sin(theta)
        hw, hh = (box[2] - box[0]) / 2, (box[3] - box[1]) / 2
        clear = (np.abs(np.abs(u) - hw) > 1e-3) & (np.abs(np.abs(v) - hh) > 1e-3)
        inside = (np.abs(u) < hw) & (np.abs(v) < hh)
        np.testing.assert_array_equal(mask[clear], inside[clear])
        assert abs(int(mask.sum()) - 4 * hw * hh) < 2 * (hw + hh)
        turned = rotated_cover(box, theta + math.pi, 1.0, ds.W, ds.H)
        assert np.array_equal(turned[4][turned[4].any(1)][:, turned[4].any(0)], mask[mask.any(1)][:, mask.any(0)])
    x0, x1, y0, y1, mask = rotated_cover(np.float32([50.2, 60.1, 50.4, 60.3]), 0.7, 1.0, ds.W, ds.H)
    assert mask.sum() == 1 and mask[60 - y0, 50 - x0]


def test_depth_twice_the_colour_resolution_scales_the_rotated_box():
    boxes, theta, depth2 = _hc24(scale=2)
    stats = box_stats(depth2, 1.0, boxes, 2.0, RANGE, theta=theta)
    _, _, depth1 = _hc24()
    stats1 = box_stats(depth1, 1.0, boxes, 1.0, RANGE, theta=theta)
    assert stats[0, 2] == np.float32(ds.HC24_STICK.z) == stats1[0, 2]
    assert stats[0, 0] == pytest.approx(4 * stats1[0, 0], rel=0.02)


# ----------------------------------------------------------------------------------------- GPU glue on the stand-in
OBB_OUTPUTS = [TensorInfo("output0", (1, 4 + 3 + 1, 8400))]
IMAGES = TensorInfo("images", (1, 3, 640, 640), "float32")


def test_HC_24_gpu_glue_reads_theta_from_the_rows_on_the_stand_in(fake_cuda):  # noqa: F811
    """yolov8_obb on the CUDA stand-in: the depth kernel is launched with the rows' theta column, and its emulation
    (the kernel's steps in numpy, test_gpu_depth.py) gives bitwise the CPU reference's statistic of the rotated boxes
    (16UC1 and 32FC1); the axis-aligned heads launch it with theta_col -1."""
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.settings.config import defaults
    from vrt_ros.gpu.postprocess import THETA_COLUMN

    boxes, theta = ds.oriented_boxes()
    rows = ds.obb_rows(boxes, theta)

    def finalize_extras(args):
        result = int(args[-1])
        (ctypes.c_int32 * 2).from_address(result)[:] = [len(rows), len(rows)]
        ctypes.memmove(result + 16, rows.ctypes.data, rows.nbytes)

    fake_cuda.emulators.update({"finalize_extras": finalize_extras, "depth_box_stats": emulate_depth_box_stats})
    v = defaults()
    v.update({"model.path": "model.onnx", "backend": "cuda", "model.head": "yolov8_obb"})
    pipe = CudaPipeline(v, log=lambda m: None, engine=FakeEngine([IMAGES], OBB_OUTPUTS))
    depth = ds.stick_scene()
    spec = ImageSpec(width=ds.W, height=ds.H, encoding="bgr8", step=ds.W * 3)
    img = np.zeros((ds.H, ds.W, 3), np.uint8)
    for image in (DepthImage(ds.W, ds.H, "32FC1", ds.W * 4, depth.tobytes()),
                  DepthImage(ds.W, ds.H, "16UC1", ds.W * 2, ds.to_mm(depth).tobytes())):
        dets = pipe.process(spec, img, depth=DepthJob(image, 1.0, RANGE, 50.0))
        np.testing.assert_array_equal(dets.theta, theta)
        ref = box_stats(image.array(), image.units_per_m, dets.boxes, 1.0, RANGE, 50.0, theta=dets.theta)
        np.testing.assert_array_equal(dets.depth_stats, ref)
        assert ref[0, 2] == np.float32(ds.HC24_STICK.z)
    launch = [ln for ln in fake_cuda.launches if ln.entry == "depth_box_stats"][-1]
    sig = pipe._depth._sig
    assert dict(zip([p.name for p in sig.params], launch.args))["theta_col"] == THETA_COLUMN
    assert fake_cuda.hazards == []
    pipe.close()


def test_axis_aligned_heads_launch_the_depth_kernel_without_theta(fake_cuda):  # noqa: F811
    from test_gpu_glue import pipeline

    pipe = pipeline("yolov8")
    assert pipe._depth.theta_column == -1
    pipe.close()
