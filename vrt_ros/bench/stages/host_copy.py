"""Copying one received frame into pinned host memory: the ways measured for the GPU path's upload stage.

Usage::

    python -m vrt_ros.bench.stages.host_copy [--sizes 1920x1080] [--frames 300] [--busy] [--json FILE]

Each frame is handed over as a node receives it: a **new** buffer per frame (``bytearray`` of the frame's bytes, as
rclpy allocates a new ``array`` for every message), written by another thread (the executor thread deserialises,
the worker copies). Each method copies it into the same pinned buffer (:meth:`GpuRuntime.alloc_pinned`) and its
result is checked against the source once. Methods:

- ``numpy``: ``np.copyto`` on the calling thread (the upload stage before issue 14, item 4);
- ``opencv_lut_<N>``: OpenCV's multi-threaded ``LUT`` with the identity table (a byte copy), ``N`` OpenCV threads;
- ``opencv_swap_<N>``: ``cv2.cvtColor(BGR2RGB)`` into the pinned buffer (SIMD, multi-threaded; swaps the
  channels, so it serves 3- and 4-channel frames only);
- ``pool_<N>``: ``N`` Python threads each ``np.copyto`` one slice (the GIL is released during each copy);
- ``torch``: ``Tensor.copy_`` between CPU tensors (torch's own parallel copy), when torch is importable;
- ``pageable_h2d`` / ``register_h2d``: no host copy at all, the H2D copy from the received buffer (pageable, or
  page-locked for this frame with ``cuMemHostRegister`` and released after), timed until the copy completed;
- ``pinned_h2d``: the H2D copy alone from the pinned buffer, for reference;
- ``numpy_then_h2d``: ``np.copyto`` then the H2D, until done (the upload before item 4);
- ``vrt_ros_upload``: what the uploader does now (:func:`vrt_ros.gpu.host_copy.copy_frame`, then the H2D),
  until done. (A variant copying in 4 row bands, each band's H2D enqueued once written, measured 0.52 ms here
  against 0.41-0.47 ms for one band, and was dropped.)

``--busy`` adds a thread running Python code all the time (an executor spinning), which delays anything that
needs the GIL. Prints a table (ms, p50 / p99 / max) and writes ``--json``. Exit status 2, with the reason, when
there is no CUDA device.
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from vrt_ros.bench.common import library_versions, parse_size, say
from vrt_ros.bench.stats import summary
from vrt_ros.gpu.host_copy import PARALLEL_MIN_BYTES


class _Writer:
    """Another thread that builds each frame's new buffer on request (the executor thread's deserialisation)."""

    def __init__(self, template: np.ndarray) -> None:
        self._template = template.tobytes()
        self._req: queue.Queue = queue.Queue(1)
        self._out: queue.Queue = queue.Queue(1)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._req.get() is not None:
            self._out.put(bytearray(self._template))

    def next(self) -> bytearray:
        self._req.put(1)
        return self._out.get()

    def close(self) -> None:
        self._req.put(None)
        self._thread.join()


class _Busy:
    """A thread that runs Python code until stopped (holds the GIL most of the time)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            sum(range(200))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _methods(rt, pinned, device, stream, nbytes: int, height: int) -> dict[str, Callable[[np.ndarray], None]]:
    import cv2
    from cuda.bindings import driver

    from vrt_ros.intake.encodings import ENCODINGS
    from vrt_ros.gpu.host_copy import copy_frame, plan_copy
    from vrt_ros.gpu.runtime import check
    from vrt_ros.types import ImageSpec

    dst = pinned.array[:nbytes]
    out: dict[str, Callable[[np.ndarray], None]] = {"numpy": lambda src: np.copyto(dst, src)}
    identity = np.arange(256, dtype=np.uint8)
    for n in (2, 4, 8, 16):

        def lut(src: np.ndarray, n=n) -> None:
            cv2.setNumThreads(n)
            cv2.LUT(src.reshape(height, -1), identity, dst=dst.reshape(height, -1))

        out[f"opencv_lut_{n}"] = lut

        def swap(src: np.ndarray, n=n) -> None:
            cv2.setNumThreads(n)
            cv2.cvtColor(src.reshape(height, -1, 3), cv2.COLOR_BGR2RGB, dst=dst.reshape(height, -1, 3))

        out[f"opencv_swap_{n}"] = swap
    for n in (4, 8):
        pool = ThreadPoolExecutor(n)
        step = -(-nbytes // n)
        bounds = [(i, min(nbytes, i + step)) for i in range(0, nbytes, step)]

        def pooled(src: np.ndarray, pool=pool, bounds=bounds) -> None:
            for f in [pool.submit(np.copyto, dst[a:b], src[a:b]) for a, b in bounds]:
                f.result()

        out[f"pool_{n}"] = pooled
    try:
        import torch

        tdst = torch.from_numpy(dst)
        out["torch"] = lambda src: tdst.copy_(torch.from_numpy(src))
    except ImportError:
        pass

    def pageable(src: np.ndarray) -> None:
        rt.h2d(device.ptr, int(src.ctypes.data), nbytes, stream)
        stream.sync()

    def registered(src: np.ndarray) -> None:
        ptr = int(src.ctypes.data)
        check(driver.cuMemHostRegister(ptr, nbytes, 0), "cuMemHostRegister")
        try:
            rt.h2d(device.ptr, ptr, nbytes, stream)
            stream.sync()
        finally:
            check(driver.cuMemHostUnregister(ptr), "cuMemHostUnregister")

    def pinned_only(src: np.ndarray) -> None:
        rt.h2d(device.ptr, pinned.ptr, nbytes, stream)
        stream.sync()

    def numpy_then_h2d(src: np.ndarray) -> None:
        np.copyto(dst, src)
        rt.h2d(device.ptr, pinned.ptr, nbytes, stream)
        stream.sync()

    spec = ImageSpec(width=nbytes // 3 // height, height=height, encoding="bgr8", step=nbytes // height)
    plan = plan_copy(spec, ENCODINGS["bgr8"])

    def upload(src: np.ndarray) -> None:
        copy_frame(plan, spec, memoryview(src), dst)
        rt.h2d(device.ptr, pinned.ptr, nbytes, stream)
        stream.sync()

    out.update(pageable_h2d=pageable, register_h2d=registered, pinned_h2d=pinned_only,
               numpy_then_h2d=numpy_then_h2d, vrt_ros_upload=upload)
    return out


def run(size: tuple[int, int], frames: int, warmup: int, busy: bool) -> dict:
    """Every method on ``frames`` new 3-byte-per-pixel frames of ``size``; returns ``{method: summary}`` (ms)."""
    import cv2

    from vrt_ros.gpu.runtime import GpuRuntime

    w, h = size
    nbytes = w * h * 3
    rng = np.random.default_rng(0)
    template = rng.integers(0, 256, nbytes, dtype=np.uint8)
    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    pinned = rt.alloc_pinned(nbytes)
    device = rt.alloc_device(nbytes, stream)
    cv_threads = cv2.getNumThreads()
    writer = _Writer(template)
    hog = _Busy() if busy else None
    results: dict = {}
    try:
        for name, fn in _methods(rt, pinned, device, stream, nbytes, h).items():
            cv2.setNumThreads(cv_threads)
            src = np.frombuffer(writer.next(), np.uint8)
            pinned.array[:nbytes] = 0
            fn(src)
            swapped = "swap" in name or (name == "vrt_ros_upload" and nbytes >= PARALLEL_MIN_BYTES)
            expect = src.reshape(-1, 3)[:, ::-1].reshape(-1) if swapped else src
            if name not in ("pageable_h2d", "register_h2d", "pinned_h2d") and not np.array_equal(pinned.array[:nbytes], expect):
                raise AssertionError(f"{name}: the pinned buffer differs from the source")
            for _ in range(warmup):
                fn(np.frombuffer(writer.next(), np.uint8))
            ms = []
            for _ in range(frames):
                src = np.frombuffer(writer.next(), np.uint8)
                t0 = time.perf_counter()
                fn(src)
                ms.append((time.perf_counter() - t0) * 1e3)
            results[name] = summary(ms)
            say(f"{w}x{h} {name}: p50 {results[name]['p50']:.3f} p99 {results[name]['p99']:.3f} ms")
    finally:
        cv2.setNumThreads(cv_threads)
        if hog is not None:
            hog.close()
        writer.close()
        stream.sync()
        pinned.close()
        device.close(stream)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vrt_ros.bench.stages.host_copy", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1920x1080", help="comma-separated WIDTHxHEIGHT (bgr8 frames)")
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--busy", action="store_true", help="also run every method beside a busy Python thread")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    import os

    from vrt_ros.gpu import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason:
        say(f"host_copy needs a CUDA device (pinned memory, H2D copies): {reason}")
        return 2

    out = {"command": "python -m vrt_ros.bench.stages.host_copy " + " ".join(argv or []), "cpus": os.cpu_count(),
           "versions": library_versions(("numpy", "opencv-python-headless", "torch", "cuda-bindings")), "runs": []}
    for text in args.sizes.split(","):
        size = parse_size(text)
        for busy in ((False, True) if args.busy else (False,)):
            res = run(size, args.frames, args.warmup, busy)
            out["runs"].append({"size": text, "busy_thread": busy, "ms": res})
    print("| size | busy thread | method | p50 ms | p99 ms | max ms |\n| --- | --- | --- | ---: | ---: | ---: |")
    for r in out["runs"]:
        for name, s in r["ms"].items():
            print(f"| {r['size']} | {'yes' if r['busy_thread'] else 'no'} | {name} | {s['p50']:.3f} | {s['p99']:.3f} "
                  f"| {s['max']:.3f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
