"""Draw the yolov8_seg masks of the real ID-card model on one of its photos (the picture the README links).

Usage: ``.venv/bin/python scripts/seg_picture.py [SHARED_DIR] [OUT] [--photo NAME]`` (defaults ``$VRT_SHARED_DIR``
or ``../shared``, ``docs/images/seg_three_ids.jpg``, ``three_ids.png``). CPU path (ONNX Runtime + the numpy mask
reference, the GPU's order of operations); the package's defaults: score 0.6, NMS IoU 0.5, class-agnostic.
A missing model or photo ends it with one line naming the file (exit code 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_parser() -> argparse.ArgumentParser:
    """The script's options (``--help`` works without the shared folder, OpenCV or the model)."""
    p = argparse.ArgumentParser(prog="scripts/seg_picture.py", description=__doc__.split("\n\n")[0])
    p.add_argument("shared", nargs="?", type=Path,
                   default=Path(os.environ.get("VRT_SHARED_DIR") or REPO.parent / "shared"),
                   help="the shared data folder, holding models/seg/ (default $VRT_SHARED_DIR or ../shared)")
    p.add_argument("out", nargs="?", type=Path, default=REPO / "docs" / "images" / "seg_three_ids.jpg",
                   help="the picture to write, JPEG (default docs/images/seg_three_ids.jpg)")
    p.add_argument("--photo", default="three_ids.png", help="photo under models/seg/photos/ (default three_ids.png)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    seg = args.shared / "models" / "seg"
    model, photo = seg / "idcard_yolov8seg.onnx", seg / "photos" / args.photo
    for path, what in ((model, "model"), (photo, "photo")):
        if not path.is_file():
            there = sorted(p.name for p in path.parent.glob("*.png")) if path.parent.is_dir() else []
            listed = f" (photos there: {', '.join(there)})" if what == "photo" and there else ""
            print(f"seg_picture: {what} {path} does not exist{listed}; give the shared folder as SHARED_DIR",
                  file=sys.stderr)
            return 2
    import cv2

    from vrt_ros.settings import config
    from vrt_ros.inference.backends.cpu import CpuPipeline
    from vrt_ros.boxes.draw import draw_detections
    from vrt_ros.types import PostprocessParams

    pipe = CpuPipeline(config.validate({**config.defaults(), "backend": "cpu", "model.path": str(model)}))
    pipe.set_postprocess(PostprocessParams(score_threshold=0.6, nms_iou=0.5, class_agnostic=True, want_masks=True))
    image = cv2.imread(str(photo))
    dets = pipe.process_bgr(image)
    draw_detections(image, dets, labels=("id_card",))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(args.out), image, [cv2.IMWRITE_JPEG_QUALITY, 85])
    print(f"{args.out}: {len(dets)} detections, scores {[round(float(s), 3) for s in dets.scores]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
