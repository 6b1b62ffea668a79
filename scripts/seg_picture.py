"""Draw the yolov8_seg masks of the real ID-card model on one of its photos (the picture the README links).

Usage: ``.venv/bin/python scripts/seg_picture.py [SHARED_DIR] [OUT]`` (defaults ``../shared``,
``docs/images/seg_three_ids.jpg``). CPU path (ONNX Runtime + the numpy mask reference, the GPU's order of
operations); the package's defaults: score 0.6, NMS IoU 0.5, class-agnostic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2

from vrt_ros import config
from vrt_ros.backends.cpu import CpuPipeline
from vrt_ros.draw import draw_detections
from vrt_ros.types import PostprocessParams


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parents[1]
    shared = Path(argv[0]) if argv else repo.parent / "shared"
    out = Path(argv[1]) if len(argv) > 1 else repo / "docs" / "images" / "seg_three_ids.jpg"
    seg = shared / "models" / "seg"
    pipe = CpuPipeline(config.validate({**config.defaults(), "backend": "cpu",
                                        "model.path": str(seg / "idcard_yolov8seg.onnx")}))
    pipe.set_postprocess(PostprocessParams(score_threshold=0.6, nms_iou=0.5, class_agnostic=True, want_masks=True))
    image = cv2.imread(str(seg / "photos" / "three_ids.png"))
    dets = pipe.process_bgr(image)
    draw_detections(image, dets, labels=("id_card",))
    cv2.imwrite(str(out), image, [cv2.IMWRITE_JPEG_QUALITY, 85])
    print(f"{out}: {len(dets)} detections, scores {[round(float(s), 3) for s in dets.scores]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
