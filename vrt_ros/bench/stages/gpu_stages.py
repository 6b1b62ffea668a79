"""Benchmark of the CUDA pipeline: per-stage GPU times (CUDA events) at several camera resolutions.

Usage: ``python -m vrt_ros.bench.stages.gpu_stages MODEL.onnx [--frames N] [--image PHOTO]``. Prints, per resolution, the
median and p99 of upload, preprocess, inference, postprocess (GPU ms) and the host wall time per frame, and
checks that every frame made exactly one stream synchronisation.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

RESOLUTIONS = ((640, 480), (1280, 720), (1920, 1080))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--image", default="", help="photo to resize to each resolution (default: random pixels)")
    ap.add_argument("--eager", action="store_true", help="torch engine without CUDA graph")
    args = ap.parse_args(argv)

    import cv2

    from vrt_ros.inference.backends.cuda import STAGES, CudaPipeline
    from vrt_ros.settings.config import defaults
    from vrt_ros.types import ImageSpec

    values = defaults()
    values.update({"model.path": args.model, "backend": "cuda"})
    from vrt_ros.engines.torch import TorchEngine

    engine = TorchEngine(args.model, cuda_graph=not args.eager)
    pipe = CudaPipeline(values, log=lambda m: print(m, file=sys.stderr), engine=engine)
    src = cv2.imread(args.image, cv2.IMREAD_COLOR) if args.image else None
    cols = (*STAGES, "total")
    print(f"{'resolution':>10} | " + " | ".join(f"{c:>17}" for c in cols) + " | detections")
    print(f"{'':>10} | " + " | ".join(f"{'p50 / p99 ms':>17}" for _ in cols) + " |")
    for w, h in RESOLUTIONS:
        img = cv2.resize(src, (w, h)) if src is not None else np.random.default_rng(0).integers(0, 256, (h, w, 3), np.uint8)
        spec, data = ImageSpec(w, h, "bgr8", w * 3), img.tobytes()
        for _ in range(20):
            pipe.process(spec, data)
        syncs0 = pipe.runtime.counters.syncs
        rows = []
        n = 0
        for _ in range(args.frames):
            dets = pipe.process(spec, data)
            n = len(dets)
            rows.append([dets.timings[c] for c in cols])
        assert pipe.runtime.counters.syncs - syncs0 == args.frames, "more than one sync per frame"
        t = np.asarray(rows)
        cells = [f"{np.median(t[:, i]):7.3f} / {np.percentile(t[:, i], 99):7.3f}" for i in range(len(cols))]
        print(f"{w:>5}x{h:<4} | " + " | ".join(cells) + f" | {n}")
    print(f"device: {pipe.runtime.name}; engine: {pipe.engine.name}; {args.frames} frames per resolution; one sync per frame")
    pipe.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
