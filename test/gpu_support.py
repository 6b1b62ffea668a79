"""Helpers shared by the GPU tests (test/test_gpu_*.py): skip reasons and small device round trips.

Nothing here imports cuda-python at import time; CI (no GPU, no cuda-python) only evaluates the skip reason.
"""

from __future__ import annotations

import numpy as np
import pytest

from vrt_ros.gpu import cuda_unavailable_reason

REASON = cuda_unavailable_reason()

requires_gpu = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"GPU path unavailable: {REASON}")]


def torch_reason() -> str | None:
    """Why the torch engine cannot run here (None when torch sees CUDA and onnx2torch imports)."""
    try:
        import torch
    except ImportError as exc:
        return f"torch not importable: {exc}"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    try:
        import onnx2torch  # noqa: F401
    except ImportError as exc:
        return f"onnx2torch not importable: {exc}"
    return None


def to_device(rt, stream, array: np.ndarray):
    """Copy ``array`` into a new device buffer (test helper; syncs)."""
    array = np.ascontiguousarray(array)
    dev = rt.alloc_device(array.nbytes, stream)
    host = rt.alloc_pinned(array.nbytes)
    host.array[:] = array.view(np.uint8).ravel()
    rt.h2d(dev.ptr, host.ptr, array.nbytes, stream)
    rt.sync(stream)
    host.close()
    return dev


def from_device(rt, stream, ptr: int, shape, dtype) -> np.ndarray:
    """Copy a device array back (test helper; syncs)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    host = rt.alloc_pinned(nbytes)
    rt.d2h(host.ptr, ptr, nbytes, stream)
    rt.sync(stream)
    out = host.array[:nbytes].view(dtype).reshape(shape).copy()
    host.close()
    return out


def dynamic_yolox_pipeline(shared_dir, folder, max_batch: int, **extra):
    """A CudaPipeline on YOLOX-nano made dynamic-batch (vrt_ros.model.onnx_batch.rebatch), ``engine.max_batch`` =
    ``max_batch``, its files under ``folder`` (the caller closes it)."""
    import onnx

    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.settings.config import defaults
    from vrt_ros.model.onnx_batch import rebatch

    model, _ = rebatch(onnx.load(str(shared_dir / "models" / "yolox_nano.onnx")), None)
    onnx.save(model, str(folder / "yolox_nano_dynamic.onnx"))
    v = defaults()
    v.update({"model.path": str(folder / "yolox_nano_dynamic.onnx"), "backend": "cuda",
              "engine.max_batch": max_batch, "engine.cache_dir": str(folder / "cache"), **extra})
    return CudaPipeline(v, log=print)


def copies_at_a_barrier(monkeypatch, n: int) -> set:
    """Make every host copy of :mod:`vrt_ros.gpu.upload` wait at a barrier of ``n`` before copying: ``n`` copies
    finish only when they run at the same time (else ``BrokenBarrierError`` after 10 s). Returns the set the
    copying threads' idents are added to."""
    import threading

    from vrt_ros.gpu import upload as upload_module

    barrier = threading.Barrier(n, timeout=10.0)
    threads: set[int] = set()
    real = upload_module.copy_frame

    def copy(plan, spec, src, dst):
        threads.add(threading.get_ident())
        barrier.wait()
        real(plan, spec, src, dst)

    monkeypatch.setattr(upload_module, "copy_frame", copy)
    return threads
