"""Errors raised by vrt_ros. Every message names the bad value and, where there is one, the fix."""

from __future__ import annotations


class VrtError(Exception):
    """Base class of every error vrt_ros raises on purpose."""


class FrameError(VrtError):
    """A frame cannot be processed (bad size, step, data length, encoding or compressed payload).

    The node drops such a frame, counts it under :attr:`reason` and keeps running.
    """

    def __init__(self, message: str, reason: str = "bad_frame") -> None:
        super().__init__(message)
        self.reason = reason


class ConfigError(VrtError):
    """A parameter or parameter file is invalid. Raised at start-up; the message names the parameter and file."""


class ModelError(VrtError):
    """A model or engine file cannot be used. Raised at start-up; the message names the file and the fix."""


class BackendUnavailable(VrtError):
    """The requested backend (GPU, TensorRT, torch) cannot run on this machine; the message says why."""


class CudaCodeError(VrtError):
    """An error that carries the CUDA error code it was raised for, as data (the base of
    :class:`vrt_ros.gpu.errors.GpuError`; :func:`vrt_ros.faults.cuda_error_code` reads it).

    Args:
        message: what failed, for people.
        code: the ``CUresult`` (driver API) or ``cudaError_t`` (runtime API) value, or None when the error is not a
            failed CUDA call (e.g. a kernel compile error).
        name: the enum name of ``code`` (e.g. ``CUDA_ERROR_ILLEGAL_ADDRESS``), or None.
    """

    def __init__(self, message: str, code: int | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.code = None if code is None else int(code)
        self.name = name
