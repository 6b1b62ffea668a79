"""JPEG decode latency per nvImageCodec backend against OpenCV (issue 14): which backend the GPU path should use.

Usage::

    python -m vrt_ros.bench.stages.jpeg_decode [--shared DIR] [--sizes 1920x1080] [--frames 200] [--warmup 20]
                                        [--backends default,hw,hybrid,gpu] [--out results/bench]

Frames: the real frames of the shared data (:func:`vrt_ros.bench.frames.load_sources`) resized to each size and
encoded as JPEG quality 90 (as ``ros_e2e --compressed``), decoded in rotation. Per backend
(:data:`vrt_ros.gpu.jpeg.BACKENDS`) and size: the host time of the decode call (header parse + ``decode``, which
enqueues the GPU work and runs any CPU part), and the time until the stream is synchronised (decoded pixels in
device memory), p50 / p99 ms; ``cv2.imdecode`` on the host for reference. Writes ``jpeg_decode.json`` and prints a
markdown table. Needs a GPU and nvImageCodec.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np

from vrt_ros.bench.common import parse_size, say


def _pct(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99))}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0, or 2 without a GPU / nvImageCodec."""
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.stages.jpeg_decode", description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=None)
    ap.add_argument("--images", action="append", default=[], type=Path)
    ap.add_argument("--sizes", default="1920x1080")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--backends", default="default,hw,hybrid,gpu")
    ap.add_argument("--out", type=Path, default=Path("results/bench"))
    args = ap.parse_args(argv)
    import cv2

    from vrt_ros.bench.cli import _default_shared
    from vrt_ros.bench.frames import load_sources
    from vrt_ros.gpu import cuda_unavailable_reason
    from vrt_ros.gpu.jpeg import NvImageCodecDecoder, nvimgcodec_unavailable_reason

    reason = cuda_unavailable_reason() or nvimgcodec_unavailable_reason()
    if reason:
        say(reason)
        return 2
    from vrt_ros.gpu.runtime import GpuRuntime

    shared = args.shared if args.shared is not None else _default_shared()
    sources, _ = load_sources(shared if shared is not None and shared.is_dir() else None, args.images)
    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "command": "python -m vrt_ros.bench.stages.jpeg_decode " + " ".join(sys.argv[1:] if argv is None else argv),
           "gpu": rt.name, "frames": args.frames, "distinct_frames": len(sources), "rows": []}
    lines = ["| size | mean kB | decoder | host call p50 / p99 ms | until synced p50 / p99 ms |",
             "| --- | ---: | --- | ---: | ---: |"]
    for size in args.sizes.split(","):
        w, h = parse_size(size)
        jpegs = [np.frombuffer(cv2.imencode(".jpg", cv2.resize(s, (w, h), interpolation=cv2.INTER_LINEAR),
                                            [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes(), np.uint8) for s in sources]
        kb = float(np.mean([j.size for j in jpegs])) / 1e3
        host = []
        for k in range(args.warmup + args.frames):
            t0 = time.perf_counter()
            cv2.imdecode(jpegs[k % len(jpegs)], cv2.IMREAD_COLOR)
            if k >= args.warmup:
                host.append((time.perf_counter() - t0) * 1e3)
        doc["rows"].append({"size": size, "decoder": "cv2.imdecode (host)", "mean_kb": kb, "synced_ms": _pct(host)})
        lines.append(f"| {size} | {kb:.0f} | cv2.imdecode (host) | – | {_pct(host)['p50']:.2f} / {_pct(host)['p99']:.2f} |")
        for backend in args.backends.split(","):
            row = {"size": size, "decoder": f"nvImageCodec {backend}", "mean_kb": kb}
            try:
                dec = NvImageCodecDecoder(0, backend=backend)
                calls, synced = [], []
                for k in range(args.warmup + args.frames):
                    t0 = time.perf_counter()
                    image = dec.decode(dec.parse(jpegs[k % len(jpegs)]), stream)
                    t1 = time.perf_counter()
                    stream.sync()
                    t2 = time.perf_counter()
                    if image is None:
                        raise RuntimeError("decode returned None")
                    if k >= args.warmup:
                        calls.append((t1 - t0) * 1e3)
                        synced.append((t2 - t0) * 1e3)
                dec.close()
                row.update(host_call_ms=_pct(calls), synced_ms=_pct(synced))
                lines.append(f"| {size} | {kb:.0f} | {row['decoder']} | {row['host_call_ms']['p50']:.2f} / "
                             f"{row['host_call_ms']['p99']:.2f} | {row['synced_ms']['p50']:.2f} / {row['synced_ms']['p99']:.2f} |")
            except Exception as exc:  # a backend this GPU or build does not have
                row["error"] = f"{type(exc).__name__}: {exc}"
                lines.append(f"| {size} | {kb:.0f} | {row['decoder']} | {row['error']} | |")
            doc["rows"].append(row)
    stream.close()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "jpeg_decode.json").write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
