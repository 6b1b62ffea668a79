"""Make a batch-N (or dynamic-batch) ONNX model from a batch-1 one, checked output for output with ONNX Runtime.

    python -m vrt_ros.tools.batch_model yolox_nano.onnx yolox_nano_b8.onnx --batch 8 --images photos/
    python -m vrt_ros.tools.batch_model yolox_nano.onnx yolox_nano_dyn.onnx --batch dynamic --images photos/

The rewrite is :func:`vrt_ros.onnx_batch.rebatch`; the check (:func:`vrt_ros.onnx_batch.compare`) runs the new model
on batches of the given frames (a fixed batch N: N frames; dynamic: batches of 1, 2 and ``--check-batch``) and the
original on each frame alone; the new file is written only when every output of every slot agrees within
``--atol`` + ``--rtol`` x |value|. Exit status 0: written and checked; 1: the check failed (nothing written);
2: bad arguments or an unusable model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


def _images(paths: list[str], count: int) -> list[np.ndarray]:
    """The frames to check on: the image files given (folders: their images, sorted), else seeded noise."""
    import cv2

    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(f for f in p.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES) if p.is_dir() else [p]
    images = []
    for f in files:
        img = cv2.imread(str(f), cv2.IMREAD_COLOR)
        if img is None:
            raise SystemExit(f"batch_model: cannot read image {f}")
        images.append(img)
    if not images:  # no frames given: noise of a camera's size (the check still compares every output)
        rng = np.random.default_rng(0)
        images = [rng.integers(0, 256, (480, 640, 3), np.uint8) for _ in range(count)]
    return images


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.tools.batch_model", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="batch-1 ONNX model")
    ap.add_argument("output", help="where the batched ONNX model goes")
    ap.add_argument("--batch", required=True, help="N (fixed batch) or 'dynamic'")
    ap.add_argument("--images", nargs="*", default=[], help="image files or folders to check on (default: noise)")
    ap.add_argument("--check-batch", type=int, default=4, help="largest batch checked for a dynamic model (default 4)")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args(argv)
    try:
        import onnx
    except ImportError as exc:
        print(f"batch_model: needs onnx (pip install 'vrt_ros[model-tools]'): {exc}", file=sys.stderr)
        return 2
    from vrt_ros.errors import ModelError
    from vrt_ros.onnx_batch import compare, rebatch

    if args.batch != "dynamic" and not args.batch.isdigit():
        print(f"batch_model: --batch must be a positive integer or 'dynamic', got {args.batch!r}", file=sys.stderr)
        return 2
    batch = None if args.batch == "dynamic" else int(args.batch)
    sizes = sorted({1, 2, args.check_batch}) if batch is None else [batch]
    try:
        model, info = rebatch(onnx.load(args.model), batch)
    except (ModelError, OSError, onnx.onnx_cpp2py_export.checker.ValidationError) as exc:
        print(f"batch_model: {args.model}: {exc}", file=sys.stderr)
        return 2
    out = Path(args.output)
    tmp = out.with_name(out.name + ".unchecked")
    onnx.save(model, str(tmp))
    try:
        result = compare(args.model, str(tmp), _images(args.images, max(sizes)), sizes, args.atol, args.rtol)
    except Exception:
        tmp.unlink(missing_ok=True)
        raise
    verdict = "equal" if result.ok else "DIFFERENT"
    print(f"batch_model: {args.model} -> batch {info.batch}: {len(info.reshapes)} Reshape target(s) rewritten "
          f"{list(info.reshapes)}; checked on {result.frames} frame(s) at batch sizes {list(result.batch_sizes)}: "
          f"outputs {verdict} to the batch-1 model's (max |diff| {result.max_abs:.3g}, max rel {result.max_rel:.3g}; "
          f"tolerance {args.atol:g} + {args.rtol:g} x |value|)")
    if not result.ok:
        tmp.unlink()
        print("batch_model: nothing written: the model hard-codes its batch somewhere the rewrite does not reach "
              "(re-export it at the batch you need, see the README)", file=sys.stderr)
        return 1
    tmp.replace(out)
    print(f"batch_model: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
