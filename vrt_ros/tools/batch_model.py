"""Make a batch-N (or dynamic-batch) ONNX model from a batch-1 one, checked output for output with ONNX Runtime.

    python -m vrt_ros.tools.batch_model yolox_nano.onnx yolox_nano_b8.onnx --batch 8 --images photos/
    python -m vrt_ros.tools.batch_model yolox_nano.onnx yolox_nano_dyn.onnx --batch dynamic --images photos/

The rewrite is :func:`vrt_ros.model.onnx_batch.rebatch`; the check (:func:`compare`) runs the new model
on batches of the given frames (a fixed batch N: N frames; dynamic: batches of 1, 2 and ``--check-batch``) and the
original on each frame alone; the new file is written only when every output of every slot agrees within
``--atol`` + ``--rtol`` x |value|. Exit status 0: written and checked; 1: the check failed (nothing written);
2: bad arguments or an unusable model.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from vrt_ros.errors import ModelError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


@dataclass(frozen=True)
class Comparison:
    """Batched vs batch-1 outputs on the same frames (:func:`compare`).

    Attributes:
        batch_sizes: batches run through the batched model.
        frames: frames compared per batch.
        max_abs: largest absolute difference over every output, slot and batch.
        max_rel: largest ``|a - b| / (|b| + 1)``.
        ok: ``max_abs <= atol + rtol * |b|`` held for every element.
    """

    batch_sizes: tuple[int, ...]
    frames: int
    max_abs: float
    max_rel: float
    ok: bool


def compare(original: str, batched: str, images: Sequence[np.ndarray], batch_sizes: Sequence[int],
            atol: float = 1e-4, rtol: float = 1e-4) -> Comparison:
    """Run ``batched`` on batches of the letterboxed ``images`` (every frame in each batch size; cycled to fill the
    last batch) and ``original`` on each frame alone, with ONNX Runtime on the CPU, and compare every output of every slot.

    The frames are letterboxed to the model's input size as the node does (:class:`vrt_ros.intake.preprocess.CpuPreprocessor`,
    YOLOX defaults: BGR, pad 114, no normalisation; the comparison holds for any input, this keeps it realistic).

    Raises:
        ModelError: the models cannot be loaded, or their input sizes are not fixed.
    """
    from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine
    from vrt_ros.intake.preprocess import CpuPreprocessor
    from vrt_ros.types import InputSpec

    one, many = OnnxRuntimeEngine(original), OnnxRuntimeEngine(batched)
    _, _, h, w = one.inputs[0].shape
    if h < 0 or w < 0:
        raise ModelError(f"{original}: compare needs a fixed input size, got {one.inputs[0].shape}")
    pre = CpuPreprocessor(InputSpec(width=w, height=h))
    tensors = [pre(img)[0].copy() for img in images]
    alone = [one.run(t) for t in tensors]
    fixed = int(many.inputs[0].shape[0])
    max_abs = max_rel = 0.0
    ok = True
    for n, start in ((n, s) for n in batch_sizes for s in range(0, len(tensors), n)):  # every frame in each size
        idx = [(start + k) % len(tensors) for k in range(n)]
        x = np.concatenate([tensors[i] for i in idx] + [tensors[0]] * max(0, fixed - n), axis=0)
        outs = many.run(x)
        for slot, i in enumerate(idx):
            for got, want in zip(outs, alone[i]):
                a, b = np.asarray(got[slot : slot + 1], np.float64), np.asarray(want, np.float64)
                if a.shape != b.shape:
                    raise ModelError(f"slot {slot} output shape {a.shape} != batch-1 output shape {b.shape}")
                diff = np.abs(a - b)
                max_abs = max(max_abs, float(diff.max(initial=0.0)))
                max_rel = max(max_rel, float((diff / (np.abs(b) + 1.0)).max(initial=0.0)))
                ok = ok and bool(np.all(diff <= atol + rtol * np.abs(b)))
    return Comparison(tuple(int(n) for n in batch_sizes), len(tensors), max_abs, max_rel, ok)


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
    from vrt_ros.model.onnx_batch import rebatch

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
    except Exception as exc:  # noqa: BLE001 - e.g. ONNX Runtime refusing the batched graph (a batch hard-coded in it)
        tmp.unlink(missing_ok=True)
        print(f"batch_model: nothing written: the model at batch {info.batch} does not run ({type(exc).__name__}: "
              f"{str(exc).strip().splitlines()[0][:300]}); it hard-codes its batch somewhere the rewrite does not "
              "reach (re-export it at the batch you need, see docs/models.md, 'Making a batch-N model')",
              file=sys.stderr)
        return 1
    verdict = "equal" if result.ok else "DIFFERENT"
    print(f"batch_model: {args.model} -> batch {info.batch}: {len(info.reshapes)} Reshape target(s) rewritten "
          f"{list(info.reshapes)}; checked on {result.frames} frame(s) at batch sizes {list(result.batch_sizes)}: "
          f"outputs {verdict} to the batch-1 model's (max |diff| {result.max_abs:.3g}, max rel {result.max_rel:.3g}; "
          f"tolerance {args.atol:g} + {args.rtol:g} x |value|)")
    if not result.ok:
        tmp.unlink()
        print("batch_model: nothing written: the model hard-codes its batch somewhere the rewrite does not reach "
              "(re-export it at the batch you need, see docs/models.md, 'Making a batch-N model')", file=sys.stderr)
        return 1
    tmp.replace(out)
    print(f"batch_model: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
