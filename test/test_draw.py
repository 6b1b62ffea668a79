"""Drawing detections onto a real photo: pixels change exactly where boxes, text and keypoints go."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from vrt_ros.boxes.draw import CLASS_COLORS, KEYPOINT_COLORS, draw_detections, line_width
from vrt_ros.types import Detections


@pytest.fixture()
def photo(shared_dir: Path) -> np.ndarray:
    image = cv2.imread(str(shared_dir / "data" / "images" / "grace_hopper.jpg"), cv2.IMREAD_COLOR)
    assert image is not None and image.shape == (600, 512, 3)
    return image


def _one(box: tuple[float, float, float, float], class_id: int = 0, keypoints=None) -> Detections:
    kps = np.zeros((1, 0, 3), np.float32) if keypoints is None else np.asarray([keypoints], np.float32)
    return Detections(
        boxes=np.asarray([box], np.float32),
        scores=np.asarray([0.84], np.float32),
        class_ids=np.asarray([class_id], np.int32),
        keypoints=kps,
    )


def _close(pixel: np.ndarray, color: tuple[int, int, int], tol: int = 0) -> bool:
    return int(np.abs(pixel.astype(int) - np.asarray(color)).max()) <= tol


def test_box_edges_and_text_drawn_in_place(photo: np.ndarray) -> None:
    original = photo.copy()
    x1, y1, x2, y2 = 150, 120, 380, 330
    color = CLASS_COLORS[3]
    out = draw_detections(photo, _one((x1, y1, x2, y2), class_id=3), labels=("a", "b", "c", "face"))
    assert out is photo  # drawn into the caller's buffer
    # midpoints of the four edges take the class colour (and were not that colour before)
    for x, y in (((x1 + x2) // 2, y1), ((x1 + x2) // 2, y2), (x1, (y1 + y2) // 2), (x2, (y1 + y2) // 2)):
        assert _close(photo[y, x], color), (x, y, photo[y, x])
        assert not _close(original[y, x], color)
    # the text band sits just above the box
    band = photo[y1 - 12 : y1 - 2, x1 : x1 + 40]
    assert (band != original[y1 - 12 : y1 - 2, x1 : x1 + 40]).any()
    # inside the box (away from edges and text) and far outside nothing changed
    assert np.array_equal(photo[y1 + 10 : y2 - 10, x1 + 10 : x2 - 10], original[y1 + 10 : y2 - 10, x1 + 10 : x2 - 10])
    assert np.array_equal(photo[400:, :], original[400:, :])


def test_keypoints_drawn_above_threshold_only(photo: np.ndarray) -> None:
    original = photo.copy()
    kps = [(228.0, 203.0, 0.9), (310.0, 200.0, 0.8), (270.0, 250.0, 0.2)]  # third below threshold
    draw_detections(photo, _one((170, 120, 370, 330), keypoints=kps), keypoint_threshold=0.5, draw_text=False)
    assert _close(photo[203, 228], KEYPOINT_COLORS[0], tol=0)
    assert _close(photo[200, 310], KEYPOINT_COLORS[1], tol=0)
    assert np.array_equal(photo[245:256, 265:276], original[245:256, 265:276])


def test_text_can_be_disabled_and_unknown_class_shows_index(photo: np.ndarray) -> None:
    plain = photo.copy()
    draw_detections(plain, _one((150, 120, 380, 330), class_id=7), draw_text=False)
    with_text = photo.copy()
    draw_detections(with_text, _one((150, 120, 380, 330), class_id=7), labels=("only",))
    assert (with_text[100:119, 150:200] != plain[100:119, 150:200]).any()


def test_box_at_top_edge_puts_text_inside(photo: np.ndarray) -> None:
    original = photo.copy()
    draw_detections(photo, _one((10, 0, 200, 150)))
    assert (photo[3:20, 12:60] != original[3:20, 12:60]).any()


def test_empty_detections_change_nothing(photo: np.ndarray) -> None:
    original = photo.copy()
    draw_detections(photo, Detections.empty(5))
    assert np.array_equal(photo, original)


def test_rejects_buffers_it_cannot_draw_into(photo: np.ndarray) -> None:
    det = _one((10, 10, 50, 50))
    with pytest.raises(ValueError, match="C-contiguous"):
        draw_detections(photo[:, ::2], det)
    readonly = photo.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        draw_detections(readonly, det)
    with pytest.raises(ValueError, match="uint8"):
        draw_detections(photo.astype(np.float32), det)


def test_line_width_scales_with_image() -> None:
    assert line_width(480, 640) == 1
    assert line_width(1080, 1920) == 2
    assert line_width(2160, 3840) == 4
