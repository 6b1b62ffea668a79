"""GPU JPEG decode time per batch size: one nvImageCodec list call against N single calls (issue 35).

Usage::

    python -m vrt_ros.bench.stages.jpeg_batch [--shared DIR] [--size 1920x1080] [--quality 90] [--batches 1,2,4,8]
                                       [--repeats 40] [--warmup 5] [--backends default,hw,hw+gpu] [--out results/bench]

Frames: the real frames of the shared data (:func:`vrt_ros.bench.frames.load_sources`), the first ``max(batches)``
resized to ``--size`` and encoded by OpenCV at ``--quality``. For each backend (:data:`vrt_ros.gpu.jpeg.BACKENDS`)
and batch size N, per repeat, both ways in turn on one stream, each frame of the batch into its own slot's image
(kept from the warm-up, as the node does):

- ``list``: the N headers parsed, ONE :meth:`~vrt_ros.gpu.jpeg.NvImageCodecDecoder.decode_batch` call, one sync;
- ``single``: per frame its header parsed and one :meth:`~vrt_ros.gpu.jpeg.NvImageCodecDecoder.decode` call, then
  one sync (the path before issue 35).

Host wall time from the first parse until the stream is synchronised (decoded pixels in device memory): median, p90
and min of ``--repeats`` batches, ms, and per frame. Prints a markdown table; writes ``jpeg_batch.json`` and
``jpeg_batch.md`` into ``--out``. Without a GPU or nvImageCodec it says why and exits 0, writing nothing.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np

from vrt_ros.bench.common import parse_size, say, write_result


def _stats(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"median": float(np.median(a)), "p90": float(np.percentile(a, 90)), "min": float(a.min())}


def _one_batch(dec, stream, bufs: list[np.ndarray], batched: bool) -> float:
    """ms from the first parse until the stream is synchronised; raises when a frame is not decoded."""
    t0 = time.perf_counter()
    if batched:
        images = dec.decode_batch([dec.parse(b) for b in bufs], stream, list(range(len(bufs))))
    else:
        images = [dec.decode(dec.parse(b), stream, slot=k) for k, b in enumerate(bufs)]
    stream.sync()
    ms = (time.perf_counter() - t0) * 1e3
    if any(image is None for image in images):
        raise RuntimeError("nvImageCodec decoded no image for a frame")
    return ms


def measure(dec, stream, jpegs: list[np.ndarray], batches: list[int], repeats: int, warmup: int) -> list[dict]:
    """Rows ``{"batch", "list_ms", "single_ms", "speedup"}`` for one decoder (both ways alternate per repeat)."""
    rows = []
    for n in batches:
        bufs = jpegs[:n]
        times: dict[bool, list[float]] = {True: [], False: []}
        for r in range(warmup + repeats):
            for batched in ((True, False) if r % 2 == 0 else (False, True)):
                ms = _one_batch(dec, stream, bufs, batched)
                if r >= warmup:
                    times[batched].append(ms)
        lst, one = _stats(times[True]), _stats(times[False])
        rows.append({"batch": n, "list_ms": lst, "single_ms": one, "speedup": one["median"] / lst["median"],
                     "list_ms_per_frame": lst["median"] / n, "single_ms_per_frame": one["median"] / n})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 (also without a GPU / nvImageCodec: it says so and measures nothing)."""
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.stages.jpeg_batch", description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=None, help="shared data folder (default: $VRT_SHARED_DIR, ../shared)")
    ap.add_argument("--images", action="append", default=[], type=Path, help="more photo folders")
    ap.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT of the encoded frames")
    ap.add_argument("--quality", type=int, default=90, help="JPEG quality of the encoded frames")
    ap.add_argument("--batches", default="1,2,4,8", help="batch sizes, comma-separated")
    ap.add_argument("--repeats", type=int, default=40, help="batches measured per size and way")
    ap.add_argument("--warmup", type=int, default=5, help="batches first decoded unmeasured")
    ap.add_argument("--backends", default="default,hw,hw+gpu", help="nvImageCodec backends (vrt_ros.gpu.jpeg.BACKENDS)")
    ap.add_argument("--out", type=Path, default=Path("results/bench"))
    args = ap.parse_args(argv)
    batches = sorted({int(b) for b in args.batches.split(",")})
    if min(batches) < 1 or args.repeats < 1:
        ap.error("batch sizes and --repeats must be >= 1")
    from vrt_ros.gpu import cuda_unavailable_reason
    from vrt_ros.gpu.jpeg import NvImageCodecDecoder, nvimgcodec_unavailable_reason

    reason = cuda_unavailable_reason() or nvimgcodec_unavailable_reason()
    if reason:
        print(f"jpeg_batch: SKIPPED, nothing measured: needs a CUDA device and nvImageCodec: {reason}")
        return 0
    import cv2

    from vrt_ros.bench.cli import _default_shared
    from vrt_ros.bench.frames import load_sources
    from vrt_ros.gpu.runtime import GpuRuntime

    shared = args.shared if args.shared is not None else _default_shared()
    sources, _ = load_sources(shared if shared is not None and shared.is_dir() else None, args.images)
    w, h = parse_size(args.size)
    picks = [sources[k * len(sources) // max(batches) % len(sources)] for k in range(max(batches))]  # spread out
    jpegs = [np.frombuffer(cv2.imencode(".jpg", cv2.resize(s, (w, h), interpolation=cv2.INTER_LINEAR),
                                        [cv2.IMWRITE_JPEG_QUALITY, args.quality])[1].tobytes(), np.uint8) for s in picks]
    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "command": "python -m vrt_ros.bench.stages.jpeg_batch " + " ".join(sys.argv[1:] if argv is None else argv),
           "gpu": rt.name, "size": args.size, "quality": args.quality, "mean_kb": float(np.mean([j.size for j in jpegs])) / 1e3,
           "repeats": args.repeats, "warmup": args.warmup,
           "method": "host wall time from the first header parse until the stream is synchronised; list: one "
                     "decode_batch call; single: one decode call per frame; one sync per batch either way",
           "backends": {}}
    lines = [f"GPU JPEG decode per batch ({args.size} q{args.quality}, {doc['mean_kb']:.0f} kB mean, {rt.name}; "
             f"decode + sync, median of {args.repeats})", "",
             "| backend | batch | one list call ms (p90) | N single calls ms (p90) | per frame list / single ms | speed-up |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for backend in args.backends.split(","):
        say(f"jpeg_batch: backend {backend}")
        try:
            dec = NvImageCodecDecoder(0, max_sizes=8 * max(batches), backend=backend)
            rows = measure(dec, stream, jpegs, batches, args.repeats, args.warmup)
            dec.close()
        except Exception as exc:  # a backend this GPU or build does not have
            doc["backends"][backend] = {"error": f"{type(exc).__name__}: {exc}"}
            lines.append(f"| {backend} | – | {type(exc).__name__}: {exc} | | | |")
            continue
        doc["backends"][backend] = {"rows": rows}
        for r in rows:
            lines.append(f"| {backend} | {r['batch']} | {r['list_ms']['median']:.2f} ({r['list_ms']['p90']:.2f}) | "
                         f"{r['single_ms']['median']:.2f} ({r['single_ms']['p90']:.2f}) | "
                         f"{r['list_ms_per_frame']:.2f} / {r['single_ms_per_frame']:.2f} | {r['speedup']:.2f}x |")
    stream.close()
    write_result(args.out, "jpeg_batch", doc, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
