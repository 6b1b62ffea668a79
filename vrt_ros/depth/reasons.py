"""Why a frame's 3D output, or one box's 3D entry, is not published: the one table (counted per camera by the node
under ``depth.<reason>`` on ``/diagnostics``; the 2D detections are published either way)."""

from __future__ import annotations

from vrt_ros.errors import FrameError

UNPAIRED = "depth_unpaired"
ENCODING = "depth_encoding"
BAD_IMAGE = "depth_bad_image"
FRAME_MISMATCH = "depth_frame_mismatch"
SIZE_MISMATCH = "depth_size_mismatch"
NO_CAMERA_INFO = "camera_info_missing"
CAMERA_INFO_K = "camera_info_k_invalid"
CAMERA_INFO_DISTORTION = "camera_info_distortion"
CAMERA_INFO_SIZE = "camera_info_size_mismatch"
CAMERA_INFO_FRAME = "camera_info_frame_mismatch"
CAMERA_INFO_BINNING = "camera_info_binning_roi"
NO_VALID_DEPTH = "box_no_valid_depth"
INTERNAL = "depth_internal_error"

#: reason -> what it means and what to change (the node's log hint and the README).
REASONS: dict[str, str] = {
    UNPAIRED: "no depth frame within depth.max_skew_ms of the colour frame's stamp (raise depth.max_skew_ms or "
              "depth.wait_ms, or check the depth topic)",
    ENCODING: "depth encoding is not 16UC1 (mm) or 32FC1 (m)",
    BAD_IMAGE: "depth image data shorter than height * step, or a step below width * 2/4 bytes",
    FRAME_MISMATCH: "depth frame_id differs from the colour image's: the depth is not registered to this camera",
    SIZE_MISMATCH: "depth size is not the colour size times one uniform scale (registered depth must cover the "
                   "same view)",
    NO_CAMERA_INFO: "no camera_info received yet on <cam>/camera_info",
    CAMERA_INFO_K: "camera_info K is all zeros, not finite or has fx, fy <= 0 (uncalibrated camera)",
    CAMERA_INFO_DISTORTION: "camera_info distortion_model is unknown with non-zero D, or D has the wrong length",
    CAMERA_INFO_SIZE: "camera_info width/height differ from the colour image's",
    CAMERA_INFO_FRAME: "camera_info frame_id differs from the colour image's",
    CAMERA_INFO_BINNING: "camera_info binning or ROI is set (not supported: calibrate at the published resolution)",
    NO_VALID_DEPTH: "a box with no valid depth pixel (0, NaN or outside depth.range_m): no 3D entry for it",
    INTERNAL: "an unexpected error while computing the 3D output (the 2D detections went out; report the log line)",
}


def refuse(reason: str, detail: str) -> FrameError:
    """The error for a refused depth frame: ``FrameError`` with ``reason`` and a message of ``detail`` plus the
    table's explanation."""
    return FrameError(f"{detail}: {REASONS[reason]}", reason=reason)
