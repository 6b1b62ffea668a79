"""The camera model of ``sensor_msgs/CameraInfo``: rays through image points, raw or rectified.

Raw input (``depth.rectified: false``, the default: the colour image is ``image_raw`` and the depth is registered
to it): the point is undistorted with K, D and the distortion model by OpenCV, ``cv2.undistortPoints`` for
``plumb_bob`` (D = k1 k2 t1 t2 k3) and ``rational_polynomial`` (k1 k2 t1 t2 k3 k4 k5 k6), and
``cv2.fisheye.undistortPoints`` for ``equidistant`` (k1 k2 k3 k4), the models and D layouts of REP-104 /
``sensor_msgs/CameraInfo``. Rectified input (``depth.rectified: true``: ``image_rect``, depth registered to the
rectified image): the ray through P, ``x = (u - cx' - Tx) / fx'``, ``y = (v - cy' - Ty) / fy'`` (as
``image_geometry.PinholeCameraModel.projectPixelTo3dRay``); it is in the rectified frame, which is the optical
frame for a monocular camera (R = identity).

Image points follow :mod:`vrt_ros.boxes.geometry` (pixel ``i`` covers ``[i, i + 1)``); K and P use OpenCV's convention
(pixel centres at integers), so a point ``(u, v)`` is passed to OpenCV as ``(u - 0.5, v - 0.5)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from vrt_ros.depth import reasons

#: distortion model -> allowed lengths of D (REP-104; OpenCV reads 4, 5 or 8 pinhole coefficients).
DISTORTION_MODELS: dict[str, tuple[int, ...]] = {
    "plumb_bob": (4, 5),
    "rational_polynomial": (8,),
    "equidistant": (4,),
}
#: undistortion iterations: until the point reprojects within 1e-9 px, at most 100 steps (OpenCV's default, 5
#: steps, leaves mm errors at a wide lens's edge).
CRITERIA = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 100, 1e-9)


@dataclass(frozen=True)
class CameraInfo:
    """The fields of ``sensor_msgs/CameraInfo`` the model uses (plain values, no ROS).

    Attributes:
        width, height: calibrated image size, pixels.
        distortion_model: ``plumb_bob``, ``rational_polynomial``, ``equidistant`` (or anything with D all zeros).
        d: distortion coefficients.
        k: 3x3 intrinsic matrix, row-major (9 values), pixels.
        p: 3x4 projection matrix, row-major (12 values), pixels (rectified images).
        frame_id: its optical frame.
        binning_x, binning_y, roi: binning and region of interest (x_offset, y_offset, width, height).
    """

    width: int
    height: int
    distortion_model: str
    d: tuple[float, ...]
    k: tuple[float, ...]
    p: tuple[float, ...] = (0.0,) * 12
    frame_id: str = ""
    binning_x: int = 0
    binning_y: int = 0
    roi: tuple[int, int, int, int] = (0, 0, 0, 0)


@dataclass
class CameraModel:
    """Rays through image points of one calibrated camera (module docstring).

    Build it with :meth:`from_info`, which refuses what would publish wrong or NaN positions.

    Attributes:
        info: the camera_info it was made from.
        rectified: rays through P (rectified image) instead of K and D (raw image).
    """

    info: CameraInfo
    rectified: bool
    _k: np.ndarray = field(init=False, repr=False)
    _d: np.ndarray = field(init=False, repr=False)

    @classmethod
    def from_info(cls, info: CameraInfo, rectified: bool = False) -> "CameraModel":
        """Check ``info`` and make its model.

        Raises:
            FrameError: ``camera_info_k_invalid`` (K, or P when rectified, all zeros, not finite, or fx, fy <= 0:
            an uncalibrated camera; HC-20), ``camera_info_distortion`` (unknown model with non-zero D, or a D of
            the wrong length), ``camera_info_binning_roi``. Each message names camera_info and the field.
        """
        k = np.asarray(info.k, np.float64)
        p = np.asarray(info.p, np.float64)
        if k.size != 9 or not np.all(np.isfinite(k)) or k[0] <= 0 or k[4] <= 0:
            raise reasons.refuse(reasons.CAMERA_INFO_K, f"camera_info K = {k.tolist()}")
        if rectified and (p.size != 12 or not np.all(np.isfinite(p)) or p[0] <= 0 or p[5] <= 0):
            raise reasons.refuse(reasons.CAMERA_INFO_K, f"camera_info P = {p.tolist()} (depth.rectified: true "
                                 "takes rays through P)")
        if info.binning_x > 1 or info.binning_y > 1 or any(info.roi):
            raise reasons.refuse(reasons.CAMERA_INFO_BINNING, f"camera_info binning {info.binning_x}x"
                                 f"{info.binning_y}, roi {list(info.roi)}")
        d = np.asarray(info.d, np.float64)
        if not np.all(np.isfinite(d)):
            raise reasons.refuse(reasons.CAMERA_INFO_DISTORTION, f"camera_info D = {d.tolist()}")
        lengths = DISTORTION_MODELS.get(info.distortion_model)
        if not rectified and np.any(d != 0):
            if lengths is None:
                raise reasons.refuse(reasons.CAMERA_INFO_DISTORTION, f"camera_info distortion_model "
                                     f"{info.distortion_model!r} (known: {', '.join(DISTORTION_MODELS)})")
            if d.size not in lengths:
                raise reasons.refuse(reasons.CAMERA_INFO_DISTORTION, f"camera_info D has {d.size} values for "
                                     f"{info.distortion_model} (expected {' or '.join(map(str, lengths))})")
        model = cls(info, bool(rectified))
        model._k = k.reshape(3, 3)
        equidistant = info.distortion_model == "equidistant"
        model._d = d if np.any(d != 0) else np.zeros(4 if equidistant else 5)  # equidistant with D = 0 is not a pinhole
        return model

    def rays(self, uv: np.ndarray) -> np.ndarray:
        """Normalised image coordinates ``(x, y)`` of image points: the optical-frame ray through each is
        ``(x, y, 1)`` (REP-103: x right, y down, z forward), so the point at depth ``z`` is ``z * (x, y, 1)``.

        Args:
            uv: (N, 2) image points in pixels (:mod:`vrt_ros.boxes.geometry` convention).

        Returns:
            (N, 2) float64.
        """
        pts = np.asarray(uv, np.float64).reshape(-1, 2) - 0.5
        if pts.shape[0] == 0:
            return np.zeros((0, 2))
        if self.rectified:
            p = np.asarray(self.info.p, np.float64).reshape(3, 4)
            return np.stack([(pts[:, 0] - p[0, 2] - p[0, 3]) / p[0, 0],
                             (pts[:, 1] - p[1, 2] - p[1, 3]) / p[1, 1]], axis=1)
        src = pts.reshape(-1, 1, 2)
        if self.info.distortion_model == "equidistant":
            out = _fisheye_undistort(src, self._k, self._d)
        else:
            out = _pinhole_undistort(src, self._k, self._d)
        return out.reshape(-1, 2).astype(np.float64)


def _pinhole_undistort(src: np.ndarray, k: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``cv2.undistortPoints`` with :data:`CRITERIA` (OpenCV 4.6+ takes them there; 4.5 has ``undistortPointsIter``)."""
    if hasattr(cv2, "undistortPointsIter"):
        return cv2.undistortPointsIter(src, k, d, None, None, CRITERIA)
    return cv2.undistortPoints(src, k, d, None, None, None, CRITERIA)


def _fisheye_undistort(src: np.ndarray, k: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``cv2.fisheye.undistortPoints`` with :data:`CRITERIA` where this OpenCV takes criteria (4.6 and later),
    else with its own (10 steps, 1e-8)."""
    try:
        return cv2.fisheye.undistortPoints(src, k, d, None, None, None, CRITERIA)
    except (cv2.error, TypeError):
        return cv2.fisheye.undistortPoints(src, k, d)


def check_info_matches(info: CameraInfo, colour_width: int, colour_height: int, colour_frame: str) -> None:
    """camera_info must describe the colour image: the same frame id and size.

    Raises:
        FrameError: ``camera_info_frame_mismatch`` or ``camera_info_size_mismatch``, naming both values.
    """
    if info.frame_id != colour_frame:
        raise reasons.refuse(reasons.CAMERA_INFO_FRAME, f"camera_info frame_id {info.frame_id!r}, colour "
                             f"{colour_frame!r}")
    if (info.width, info.height) != (colour_width, colour_height):
        raise reasons.refuse(reasons.CAMERA_INFO_SIZE, f"camera_info {info.width}x{info.height}, colour "
                             f"{colour_width}x{colour_height}")
