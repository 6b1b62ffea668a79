"""Synthetic RGB-D scenes with known geometry for the depth tests: fronto-parallel boxes at known distances in front
of a background plane, seen through a distorted camera (K, D, distortion model).

Each object's 2D box is built from the forward projection (``cv2.projectPoints`` / ``cv2.fisheye.projectPoints``,
independent of the undistortion under test): centred on the projection of the object's centre, as wide and high as
the projections of its edge midpoints. Its pixels in the depth image hold the object's depth; the rest holds the
background plane's. So the expected 3D centre is the object's centre exactly, whatever the distortion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from vrt_ros.depth.camera_model import CameraInfo
from vrt_ros.depth.stats import pixel_span

W, H = 640, 480
K = (520.0, 0.0, 331.5, 0.0, 523.0, 236.25, 0.0, 0.0, 1.0)
DISTORTIONS = {
    "plumb_bob": (-0.28, 0.09, 0.0012, -0.0008, -0.012),
    "rational_polynomial": (-0.25, 0.07, 0.001, -0.0005, -0.01, 0.02, 0.004, 0.001),
    "equidistant": (0.08, -0.03, 0.006, -0.001),
}


@dataclass
class Obj:
    """A fronto-parallel rectangle: centre (x, y, z) m in the optical frame, width and height m."""

    x: float
    y: float
    z: float
    w: float
    h: float


OBJECTS = (Obj(0.30, -0.10, 1.500, 0.40, 0.30), Obj(-0.55, 0.25, 2.250, 0.50, 0.60), Obj(0.15, 0.20, 0.800, 0.20, 0.20))
BACKGROUND_M = 4.0


def info(model: str = "plumb_bob", frame_id: str = "cam_optical", width: int = W, height: int = H) -> CameraInfo:
    return CameraInfo(width, height, model, DISTORTIONS[model], K, K[:3] + (0.0,) + K[3:6] + (0.0,) + K[6:] + (0.0,),
                      frame_id)


def project(model: str, pts: np.ndarray) -> np.ndarray:
    """Image points (geometry convention: + 0.5) of optical-frame points (N, 3)."""
    k, d = np.array(K).reshape(3, 3), np.array(DISTORTIONS[model])
    pts = np.asarray(pts, np.float64).reshape(-1, 1, 3)
    if model == "equidistant":
        uv, _ = cv2.fisheye.projectPoints(pts, np.zeros(3), np.zeros(3), k, d)
    else:
        uv, _ = cv2.projectPoints(pts, np.zeros(3), np.zeros(3), k, d)
    return uv.reshape(-1, 2) + 0.5


def box(model: str, o: Obj) -> np.ndarray:
    """The object's 2D box (x1, y1, x2, y2), centred on its centre's projection."""
    c, left, right, top, bottom = project(model, [(o.x, o.y, o.z), (o.x - o.w / 2, o.y, o.z), (o.x + o.w / 2, o.y, o.z),
                                                  (o.x, o.y - o.h / 2, o.z), (o.x, o.y + o.h / 2, o.z)])
    hw, hh = (right[0] - left[0]) / 2, (bottom[1] - top[1]) / 2
    return np.array([c[0] - hw, c[1] - hh, c[0] + hw, c[1] + hh], np.float32)


def scene(model: str = "plumb_bob", objects=OBJECTS, scale: int = 1, holes: bool = True):
    """Boxes (N, 4) float32 colour pixels and the depth image in metres (H*scale, W*scale) float32: each box's
    pixels at its object's depth (far objects first), the background plane elsewhere; with ``holes`` every 7th pixel
    of each box is invalid (0, NaN, or 0.05 m: nearer than any range), so the statistic must ignore them."""
    boxes = np.stack([box(model, o) for o in objects])
    depth = np.full((H * scale, W * scale), BACKGROUND_M, np.float32)
    for o, b in sorted(zip(objects, boxes), key=lambda ob: -ob[0].z):
        c0, c1 = pixel_span(b[0], b[2], scale, W * scale)
        r0, r1 = pixel_span(b[1], b[3], scale, H * scale)
        patch = depth[r0:r1, c0:c1]
        patch[:] = o.z
        if holes:
            flat = patch.reshape(-1)
            flat[0::21], flat[7::21], flat[14::21] = 0.0, np.nan, 0.05
    return boxes, depth


def to_mm(depth_m: np.ndarray) -> np.ndarray:
    """The same depth as 16UC1 millimetres (invalid -> 0)."""
    mm = np.where(np.isfinite(depth_m), np.round(depth_m * 1000.0), 0.0)
    return mm.astype(np.uint16)


# ----------------------------------------------------------------------------------------- HC-24: a tilted thin object
#: a pinhole camera with fx == fy (a rectangle parallel to the image plane images as a rectangle of the same angle)
K_SQUARE = (520.0, 0.0, 331.5, 0.0, 520.0, 236.25, 0.0, 0.0, 1.0)
WALL_M = 5.0


def square_info(frame_id: str = "cam_optical") -> CameraInfo:
    return CameraInfo(W, H, "plumb_bob", (0.0,) * 5, K_SQUARE, K_SQUARE[:3] + (0.0,) + K_SQUARE[3:6] + (0.0,)
                      + K_SQUARE[6:] + (0.0,), frame_id)


@dataclass
class Stick:
    """A thin rectangle parallel to the image plane: centre (x, y, z) m, length and thickness m, turned by ``angle``
    (radians, from +x toward +y) in its plane."""

    x: float
    y: float
    z: float
    length: float
    thickness: float
    angle: float


HC24_STICK = Stick(0.10, -0.05, 1.0, 0.60, 0.04, math.radians(45.0))


def stick_obb(s: Stick) -> tuple[np.ndarray, float]:
    """The stick's oriented box as the detector publishes it: the rectangle in its own axes (x1, y1, x2, y2) float32
    and theta (its image through :data:`K_SQUARE` is exactly this rectangle)."""
    f, cx, cy = K_SQUARE[0], K_SQUARE[2], K_SQUARE[5]
    u, v = f * s.x / s.z + cx + 0.5, f * s.y / s.z + cy + 0.5  # geometry convention: pixel i covers [i, i + 1)
    hl, ht = f * s.length / s.z / 2, f * s.thickness / s.z / 2
    return np.array([u - hl, v - ht, u + hl, v + ht], np.float32), float(s.angle)


def stick_scene(sticks=(HC24_STICK,), wall_m: float = WALL_M, scale: int = 1) -> np.ndarray:
    """The (H*scale, W*scale) float32 depth in metres: the wall, and each stick where the ray through the pixel's
    centre meets it (nearest first)."""
    f, cx, cy = K_SQUARE[0], K_SQUARE[2], K_SQUARE[5]
    j, i = np.mgrid[0:H * scale, 0:W * scale]
    x = ((i + 0.5) / scale - 0.5 - cx) / f  # the ray through the depth pixel's centre (colour pixel units)
    y = ((j + 0.5) / scale - 0.5 - cy) / f
    depth = np.full(x.shape, wall_m, np.float32)
    for s in sorted(sticks, key=lambda s: -s.z):
        dx, dy = x * s.z - s.x, y * s.z - s.y
        along = dx * math.cos(s.angle) + dy * math.sin(s.angle)
        across = dy * math.cos(s.angle) - dx * math.sin(s.angle)
        depth[(np.abs(along) < s.length / 2) & (np.abs(across) < s.thickness / 2)] = s.z
    return depth


def obb_rows(boxes: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """finalize_extras rows (x1, y1, x2, y2, score, class, theta, angle) of oriented detections."""
    rows = np.zeros((len(boxes), 8), np.float32)
    rows[:, :4], rows[:, 4], rows[:, 6], rows[:, 7] = boxes, 0.9, theta, theta
    return rows


def oriented_boxes(seed: int = 3):
    """The HC-24 stick plus 30 random oriented boxes (any angle, some partly outside the image)."""
    box, theta = stick_obb(HC24_STICK)
    box, theta = box[None], np.float32([theta])
    rng = np.random.default_rng(seed)
    c = rng.uniform([0, 0], [W, H], (30, 2))
    wh = rng.uniform([2, 0.3], [200, 60], (30, 2))
    more = np.concatenate([c - wh / 2, c + wh / 2], axis=1).astype(np.float32)
    return np.concatenate([box, more]), np.concatenate([theta, rng.uniform(-math.pi / 2, math.pi / 2, 30)]).astype(np.float32)
