"""The GPU edge: the only package that imports ``cuda.core`` / ``cuda.bindings``.

Importing :mod:`vrt_ros.gpu` itself imports nothing from CUDA; the submodules do:

- :mod:`vrt_ros.gpu.runtime`: device, context, stream, pinned and device buffers, timing events, and counters of
  synchronisations and allocations (the tests assert one sync per frame and no allocation after warm-up);
- :mod:`vrt_ros.gpu.library`: the kernel library (NVRTC compile once per process, on-disk cubin cache);
- :mod:`vrt_ros.gpu.launch`: launch-configuration helpers;
- :mod:`vrt_ros.gpu.preprocess`, :mod:`vrt_ros.gpu.postprocess`: the frame's kernels, enqueued on one stream.
"""

from __future__ import annotations


def cuda_unavailable_reason() -> str | None:
    """Why the GPU path cannot run here, or None when cuda-python imports and finds a CUDA device.

    Never raises; used by ``backend: auto`` and by the GPU tests to skip with a reason.
    """
    try:
        from cuda.core import Device  # noqa: F401
        from cuda.bindings import driver
    except Exception as exc:  # ImportError, or a broken install raising anything at import
        return f"cuda-python (cuda.core, cuda.bindings) is not importable: {exc}"
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return f"cuInit failed: {err.name} (no NVIDIA driver or no device)"
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count < 1:
            return "no CUDA device found"
    except Exception as exc:
        return f"CUDA driver unusable: {exc}"
    return None


def cuda_device_count() -> int:
    """CUDA devices this process sees (``CUDA_VISIBLE_DEVICES`` applies); 0 when the driver or cuda-python is unusable.

    Never raises.
    """
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, count = driver.cuDeviceGetCount()
        return int(count) if err == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:
        return 0
