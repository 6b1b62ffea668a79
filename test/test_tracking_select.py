"""What tracking publishes keeps every per-detection field in step: dropping the detections below
``score_threshold`` (kept for the tracker only) also drops their keypoints, extras and theta, and relabels the
instance-label image so that a pixel still says ``index + 1`` of the published array (a dropped one's pixels: 0)."""

from __future__ import annotations

import numpy as np

from vrt_ros.tracking.output import select
from vrt_ros.types import Detections


def test_select_keeps_fields_in_step_and_relabels_the_mask():
    n = 4
    label = np.zeros((6, 8), np.uint8)
    for i in range(n):  # detection i owns column pair 2i, 2i+1
        label[:, 2 * i:2 * i + 2] = i + 1
    dets = Detections(boxes=np.arange(16, dtype=np.float32).reshape(4, 4), scores=np.array([0.9, 0.2, 0.8, 0.1], np.float32),
                      class_ids=np.arange(4, dtype=np.int32), keypoints=np.arange(24, dtype=np.float32).reshape(4, 2, 3),
                      extras=np.arange(8, dtype=np.float32).reshape(4, 2), theta=np.array([0.1, 0.2, 0.3, 0.4], np.float32),
                      label_mask=label)
    keep = dets.scores >= 0.5
    out = select(dets, keep)
    assert out.class_ids.tolist() == [0, 2] and out.theta.tolist() == [np.float32(0.1), np.float32(0.3)]
    assert out.keypoints.shape == (2, 2, 3) and out.extras.tolist() == [[0, 1], [4, 5]]
    assert out.label_mask[:, 0:2].max() == 1 and out.label_mask[:, 4:6].min() == 2  # detections 0 and 2 -> 1 and 2
    assert not out.label_mask[:, 2:4].any() and not out.label_mask[:, 6:8].any()  # dropped ones are background
    assert out.label_mask is label  # the frame's own buffer, rewritten in place (no allocation per frame)


def test_select_of_plain_detections_has_no_mask_or_theta():
    dets = Detections(boxes=np.zeros((3, 4), np.float32), scores=np.array([0.9, 0.1, 0.7], np.float32),
                      class_ids=np.zeros(3, np.int32))
    out = select(dets, dets.scores > 0.5)
    assert len(out) == 2 and out.theta is None and out.label_mask is None
