"""scripts/parity_ultralytics.py: its matching and measures in CI (no torch), and the run itself on the GPU machine.

The comparison is checked on fabricated detections: a perfect copy gives zero differences and a pass; a shifted
box, a swapped class, an oriented box written in the other convention (short side first, angle + pi/2) and
overlapping masks are measured as the docstring says.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vrt_ros.types import Detections

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "parity_ultralytics.py"


@pytest.fixture(scope="module")
def parity():
    spec = importlib.util.spec_from_file_location("parity_ultralytics", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dets(boxes, scores, classes, **extra) -> Detections:
    d = Detections.empty(0, 0)
    d.boxes = np.asarray(boxes, np.float32)
    d.scores = np.asarray(scores, np.float32)
    d.class_ids = np.asarray(classes, np.int32)
    for k, v in extra.items():
        setattr(d, k, v)
    return d


def test_identical_detections_pass_and_differences_are_measured(parity):
    ref = {"boxes": np.array([[10, 10, 50, 60], [100, 100, 200, 150]], float), "scores": np.array([0.9, 0.8]),
           "classes": np.array([1, 2])}
    same = parity.compare(ref, dets(ref["boxes"][::-1], [0.8, 0.9], [2, 1]), "detect")
    assert same == {"ref": 2, "vrt": 2, "matched": 2, "score": pytest.approx(0, abs=1e-6),
                    "box": pytest.approx(0, abs=1e-4)}
    assert parity.verdict([same])[0] == "pass"
    moved = parity.compare(ref, dets(ref["boxes"] + [0.7, 0, 0, 0], [0.9, 0.8], [1, 2]), "detect")
    assert moved["box"] == pytest.approx(0.7, abs=1e-4) and parity.verdict([moved])[0] == "FAIL"
    other_class = parity.compare(ref, dets(ref["boxes"], [0.9, 0.8], [1, 3]), "detect")
    assert other_class["matched"] == 1 and parity.verdict([other_class])[1]["unmatched"] == 2


def test_oriented_boxes_compared_as_rectangles_whatever_the_convention(parity):
    """Ultralytics' regularised xywhr (w < h, angle + pi/2) and vrt_ros's long-side form are the same rectangle."""
    cx, cy, w, h, t = 300.0, 200.0, 120.0, 40.0, 0.4
    own = np.array([[cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]])
    ref_corners = parity.corners(np.array([[cx - h / 2, cy - w / 2, cx + h / 2, cy + w / 2]]), np.array([t + math.pi / 2]))
    ref = {"boxes": own, "scores": np.array([0.9]), "classes": np.array([0]), "corners": ref_corners,
           "theta": parity.long_side_angle(np.array([h]), np.array([w]), np.array([t + math.pi / 2]))}
    m = parity.compare(ref, dets(own, [0.9], [0], theta=np.array([t], np.float32)), "obb")
    assert m["box"] < 1e-3 and m["angle"] < 1e-6
    tilted = parity.compare(ref, dets(own, [0.9], [0], theta=np.array([t + 0.01], np.float32)), "obb")
    assert tilted["angle"] == pytest.approx(0.01, abs=1e-6) and tilted["box"] > 0.5


def test_masks_compared_as_label_images(parity):
    """Two overlapping instances: the reference's independent masks become a label image (first in score order owns
    a pixel), as vrt_ros publishes them, so an exact copy has IoU 1."""
    masks = np.zeros((2, 100, 100), bool)
    masks[0, 10:60, 10:60] = True
    masks[1, 40:90, 40:90] = True
    ref = {"boxes": np.array([[10, 10, 60, 60], [40, 40, 90, 90]], float), "scores": np.array([0.9, 0.8]),
           "classes": np.array([0, 0]), "masks": masks}
    label = parity.label_image(masks, (100, 100)).astype(np.uint16)
    assert (label[45, 45], label[70, 70]) == (1, 2)
    m = parity.compare(ref, dets(ref["boxes"], [0.9, 0.8], [0, 0], label_mask=label), "segment")
    assert m["mask_iou"] == 1.0
    worse = label.copy()
    worse[10:12, 10:60] = 0
    assert parity.compare(ref, dets(ref["boxes"], [0.9, 0.8], [0, 0], label_mask=worse), "segment")["mask_iou"] < 0.99


def test_greedy_nms_keeps_a_box_whose_only_overlap_was_suppressed(parity):
    """vrt_ros's rotated NMS (greedy) against Ultralytics' Fast-NMS on a chain a-b-c (a overlaps b, b overlaps c):
    greedy keeps a and c, Fast-NMS only a; the script runs Ultralytics' predictor with the greedy one."""
    over = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], bool)
    assert parity.greedy_keep(over) == [0, 2]
    fast = [j for j in range(3) if not np.triu(over, 1)[:, j].any()]
    assert fast == [0]


def test_zero_area_reference_boxes_under_the_cap_are_not_counted_against_vrt_ros(parity):
    """Ultralytics caps at max_det and then clips (a box wholly in the padding stays, zero height); vrt_ros drops
    such boxes before its cap, so it fills the slots with the next ones. With the reference capped, vrt_ros's
    detections past the reference's kept count are not compared; uncapped, they are unmatched."""
    boxes = np.array([[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50]], float)
    ref = {"boxes": boxes[:2], "scores": np.array([0.9, 0.8]), "classes": np.array([0, 0]), "capped": True,
           "unpublished": 1}
    filled = dets(boxes, [0.9, 0.8, 0.7], [0, 0, 0])
    m = parity.compare(ref, filled, "detect")
    assert (m["ref"], m["vrt"], m["matched"], m["unpublished"]) == (2, 2, 2, 1) and parity.verdict([m])[0] == "pass"
    m = parity.compare({**ref, "capped": False}, filled, "detect")
    assert (m["vrt"], m["matched"]) == (3, 2) and parity.verdict([m])[0] == "FAIL"


def test_every_row_of_the_issue_is_listed(parity):
    names = [r[0] for r in parity.ROWS]
    for fam in ("YOLOv8", "YOLO11", "YOLO26"):
        for task in ("detect", "segment", "pose", "obb"):
            assert f"{fam} {task}" in names
    assert {f"YOLO26 {t} end-to-end" for t in ("detect", "segment", "pose", "obb")} <= set(names)
    assert "RT-DETR detect" in names


@pytest.mark.gpu
def test_parity_run_on_the_gpu_machine(tmp_path, shared_dir):
    """The H200 run (scripts/parity_ultralytics.py, all rows): every row within its tolerances."""
    pytest.importorskip("ultralytics", reason="the ultralytics package (carried as wheels) is not installed")
    env = {**os.environ, "YOLO_OFFLINE": "1", "VRT_SHARED_DIR": str(shared_dir), "PYTHONPATH": str(REPO)}
    out = tmp_path / "parity"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    assert (out / "parity.md").exists() and proc.returncode == 0
