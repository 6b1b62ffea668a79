"""GPU measurements for the benchmark (:mod:`vrt_ros.bench`): per-stage events, the limits, upload variants.

Measurement only: nothing here changes what :class:`vrt_ros.inference.backends.cuda.CudaPipeline` does. The stage split
that the pipeline's own events do not give (host copy vs H2D inside the upload, kernels vs D2H inside the
postprocess) comes from two extra timing events recorded on the pipeline's stream just before its H2D and its D2H
call, through a runtime proxy handed to the uploader and postprocessor for the instrumented pass only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from vrt_ros.gpu.runtime import GpuRuntime, TimingEvent
from vrt_ros.types import ImageSpec

#: Stages of the instrumented pass, in frame order (ms from CUDA events).
STAGES = ("host_copy", "h2d", "preprocess", "inference", "postprocess", "d2h")


class _MarkingRuntime:
    """Delegates to a :class:`GpuRuntime`; records a timing event just before every ``h2d`` / ``d2h`` call."""

    def __init__(self, rt: GpuRuntime, before_h2d: TimingEvent | None, before_d2h: TimingEvent | None) -> None:
        self._rt = rt
        self._before_h2d = before_h2d
        self._before_d2h = before_d2h

    def __getattr__(self, name: str):
        return getattr(self._rt, name)

    def h2d(self, dst_ptr: int, src_ptr: int, nbytes: int, stream) -> None:
        if self._before_h2d is not None:
            self._before_h2d.record(stream)
        self._rt.h2d(dst_ptr, src_ptr, nbytes, stream)

    def d2h(self, dst_ptr: int, src_ptr: int, nbytes: int, stream) -> None:
        if self._before_d2h is not None:
            self._before_d2h.record(stream)
        self._rt.d2h(dst_ptr, src_ptr, nbytes, stream)


def counters(rt: GpuRuntime) -> dict[str, int]:
    """The runtime's counters (syncs, device/pinned allocations and bytes)."""
    return rt.counters.snapshot()


def run_pipeline(pipe, messages: Sequence[tuple[ImageSpec, bytes]], frames: int,
                 extra_allocs: Callable[[], int] | None = None) -> dict:
    """Time ``frames`` calls of ``pipe.process`` as a node makes them (wall clock, message in to results ready).

    Call after warm-up. Frames rotate over ``messages``.

    Args:
        pipe: a :class:`~vrt_ros.inference.backends.cuda.CudaPipeline`.
        messages: ``(spec, data)`` per frame.
        frames: measured frames.
        extra_allocs: optional count of allocations made outside the runtime (e.g. torch's allocator).

    Returns:
        ``wall_ms`` (list), ``pipeline_total_ms`` (the pipeline's own ``total``, from each call's ``Detections.timings``),
        ``syncs_per_frame``, ``allocs_per_frame`` (runtime device + pinned allocations, plus ``extra_allocs``),
        ``detections`` (list of counts).
    """
    rt = pipe.runtime
    c0 = counters(rt)
    e0 = extra_allocs() if extra_allocs else 0
    wall, own, dets = [], [], []
    n = len(messages)
    for i in range(frames):
        spec, data = messages[i % n]
        t0 = time.perf_counter()
        d = pipe.process(spec, data)
        wall.append((time.perf_counter() - t0) * 1e3)
        own.append(d.timings["total"])
        dets.append(len(d))
    c1 = counters(rt)
    e1 = extra_allocs() if extra_allocs else 0
    allocs = (c1["device_allocs"] - c0["device_allocs"]) + (c1["pinned_allocs"] - c0["pinned_allocs"]) + (e1 - e0)
    return {
        "wall_ms": wall,
        "pipeline_total_ms": own,
        "syncs_per_frame": (c1["syncs"] - c0["syncs"]) / frames,
        "allocs_per_frame": allocs / frames,
        "detections": dets,
    }


def run_stages(pipe, messages: Sequence[tuple[ImageSpec, bytes]], frames: int) -> dict[str, list[float]]:
    """Per-stage CUDA-event times (ms) of ``frames`` calls of ``pipe.process`` (instrumented pass).

    Reads the pipeline's own events (frame start, after upload/preprocess/inference/postprocess) plus two
    recorded just before its H2D and its D2H copy. ``host_copy`` is from frame start to the H2D being enqueued
    (validation and the copy into pinned memory, on the host while the stream is idle).

    Returns:
        Stage name (:data:`STAGES`) -> list of ms.
    """
    rt = pipe.runtime
    before_h2d, before_d2h = rt.timing_event(), rt.timing_event()
    up, post = pipe._upload, pipe._post
    saved = (up._rt, post._rt)
    up._rt = _MarkingRuntime(rt, before_h2d, None)
    post._rt = _MarkingRuntime(rt, None, before_d2h)
    out: dict[str, list[float]] = {s: [] for s in STAGES}
    ev = pipe._events  # frame start, after upload, preprocess, inference, postprocess (incl. D2H)
    try:
        n = len(messages)
        for i in range(frames):
            spec, data = messages[i % n]
            pipe.process(spec, data)
            out["host_copy"].append(before_h2d.elapsed_ms(ev[0]))
            out["h2d"].append(ev[1].elapsed_ms(before_h2d))
            out["preprocess"].append(ev[2].elapsed_ms(ev[1]))
            out["inference"].append(ev[3].elapsed_ms(ev[2]))
            out["postprocess"].append(before_d2h.elapsed_ms(ev[3]))
            out["d2h"].append(ev[4].elapsed_ms(before_d2h))
    finally:
        up._rt, post._rt = saved
        before_h2d.close()
        before_d2h.close()
    return out


def engine_alone(pipe, frames: int) -> dict[str, list[float]]:
    """The engine with its input already on the GPU: ``frames`` enqueues on the pipeline's buffers and stream.

    Returns:
        ``gpu_ms`` (CUDA events around the enqueue) and ``wall_ms`` (enqueue + synchronisation, host clock).
    """
    rt, s = pipe.runtime, pipe.stream
    a, b = rt.timing_event(), rt.timing_event()
    gpu, wall = [], []
    try:
        for _ in range(frames):
            t0 = time.perf_counter()
            a.record(s)
            pipe.engine.enqueue(s, pipe._input.ptr, pipe._output_ptrs)
            b.record(s)
            rt.sync(s)
            wall.append((time.perf_counter() - t0) * 1e3)
            gpu.append(b.elapsed_ms(a))
    finally:
        a.close()
        b.close()
    return {"gpu_ms": gpu, "wall_ms": wall}


class UploadBench:
    """The frame's bytes to the GPU, alone and in variants (the pipeline's way and cheap alternatives).

    Buffers are allocated once for the largest frame. Variants (wall ms from the message bytes to the copy
    complete on the GPU, one synchronisation each):

    - ``pinned_h2d``: the H2D copy alone from pinned memory (CUDA events; the hardware limit);
    - ``host_copy``: ``np.copyto`` of the message into pinned memory alone (host clock);
    - ``copy_then_h2d``: what the pipeline does: one copy into pinned, then the H2D;
    - ``chunked_pipelined``: copy chunk k into pinned, enqueue its H2D, copy chunk k+1 while it runs;
    - ``threaded_copy``: copy into pinned with a pool of threads (numpy releases the GIL), then the H2D;
    - ``pageable_h2d``: H2D straight from the message's own (pageable) bytes, no staging copy.

    Args:
        rt: the GPU runtime.
        nbytes: the largest frame in bytes.
        chunks: chunks of the pipelined and threaded variants.
    """

    VARIANTS = ("pinned_h2d", "host_copy", "copy_then_h2d", "chunked_pipelined", "threaded_copy", "pageable_h2d")

    def __init__(self, rt: GpuRuntime, nbytes: int, chunks: int = 4) -> None:
        self.rt = rt
        self.stream = rt.create_stream()
        self.pinned = rt.alloc_pinned(nbytes)
        self.device = rt.alloc_device(nbytes, self.stream)
        self.chunks = chunks
        self.pool = ThreadPoolExecutor(max_workers=chunks)
        self._a, self._b = rt.timing_event(), rt.timing_event()

    def _bounds(self, n: int) -> list[tuple[int, int]]:
        step = -(-n // self.chunks)
        return [(i, min(n, i + step)) for i in range(0, n, step)]

    def run(self, variant: str, data: bytes) -> float:
        """One upload of ``data`` by ``variant``; returns ms (see the class docstring for what is timed)."""
        rt, s = self.rt, self.stream
        src = np.frombuffer(data, np.uint8)
        n = src.size
        dst = self.pinned.array
        if variant == "pinned_h2d":
            self._a.record(s)
            rt.h2d(self.device.ptr, self.pinned.ptr, n, s)
            self._b.record(s)
            rt.sync(s)
            return self._b.elapsed_ms(self._a)
        t0 = time.perf_counter()
        if variant == "host_copy":
            np.copyto(dst[:n], src)
            return (time.perf_counter() - t0) * 1e3
        if variant == "copy_then_h2d":
            np.copyto(dst[:n], src)
            rt.h2d(self.device.ptr, self.pinned.ptr, n, s)
        elif variant == "chunked_pipelined":
            for lo, hi in self._bounds(n):
                np.copyto(dst[lo:hi], src[lo:hi])
                rt.h2d(self.device.ptr + lo, self.pinned.ptr + lo, hi - lo, s)
        elif variant == "threaded_copy":
            list(self.pool.map(lambda b: np.copyto(dst[b[0]:b[1]], src[b[0]:b[1]]), self._bounds(n)))
            rt.h2d(self.device.ptr, self.pinned.ptr, n, s)
        elif variant == "pageable_h2d":
            rt.h2d(self.device.ptr, int(src.ctypes.data), n, s)
        else:
            raise ValueError(f"unknown upload variant {variant!r}; known: {self.VARIANTS}")
        rt.sync(s)
        return (time.perf_counter() - t0) * 1e3

    def close(self) -> None:
        """Free the buffers, the events and the thread pool."""
        self.rt.sync(self.stream)
        self.pool.shutdown()
        self._a.close()
        self._b.close()
        self.pinned.close()
        self.device.close(self.stream)
        self.stream.sync()
        self.stream.close()


def device_info(rt: GpuRuntime) -> dict[str, str]:
    """GPU name, compute capability, driver version and the CUDA version the driver supports."""
    from cuda.bindings import driver

    from vrt_ros.gpu.runtime import check

    v = int(check(driver.cuDriverGetVersion(), "cuDriverGetVersion"))
    info = {"name": rt.name, "arch": f"sm_{rt.arch}", "cuda_driver_api": f"{v // 1000}.{(v % 1000) // 10}"}
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0:
            drv, sm, mem = (x.strip() for x in out.stdout.strip().splitlines()[0].split(","))
            info.update(driver=drv, clocks_sm=sm, clocks_mem=mem)
    except Exception as exc:  # no nvidia-smi: the driver API version is still reported
        info["driver"] = f"unknown ({exc})"
    return info
