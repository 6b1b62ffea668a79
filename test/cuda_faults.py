"""Exceptions that carry a CUDA error code as data, as each library raises them (for fault tests, no GPU needed).

The fault table (vrt_ros.faults) recognises a sticky CUDA fault by this code only; these build the three carriers it
reads: our GpuError (``code``), PyTorch's ``torch.AcceleratorError`` (``error_code``; a stand-in class of module
``torch``, torch is not installed here) and cuda.core's ``CUDAError`` (no code attribute; its message starts with the
CUresult name cuda.core formats from the code).
"""

from __future__ import annotations

from vrt_ros.faults import STICKY_ERRORS, StickyError
from vrt_ros.gpu.errors import GpuError

ILLEGAL_ADDRESS = next(e for e in STICKY_ERRORS if e.name == "CUDA_ERROR_ILLEGAL_ADDRESS")


class AcceleratorError(RuntimeError):
    """Stand-in of ``torch.AcceleratorError`` (PyTorch >= 2.8): a RuntimeError with ``error_code`` (cudaError_t)."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


AcceleratorError.__module__ = "torch"


class CUDAError(Exception):
    """Stand-in of ``cuda.core.CUDAError``: ``"<CUresult name>: <explanation>"``, no code attribute."""


CUDAError.__module__ = "cuda.core._utils.cuda_utils"


def gpu_error(err: StickyError = ILLEGAL_ADDRESS, call: str = "cuStreamSynchronize") -> GpuError:
    """What :func:`vrt_ros.gpu.runtime.check` raises for ``err``."""
    return GpuError(f"{call} failed: {err.name}: {err.text}", code=err.code, name=err.name)


def torch_error(err: StickyError = ILLEGAL_ADDRESS) -> AcceleratorError:
    """What PyTorch raises for ``err`` (its message: ``CUDA error: <text>``)."""
    return AcceleratorError(f"CUDA error: {err.text}\nCUDA kernel errors might be asynchronously reported",
                            error_code=err.code)


def cuda_core_error(err: StickyError = ILLEGAL_ADDRESS) -> CUDAError:
    """What cuda.core raises for ``err``."""
    return CUDAError(f"{err.name}: {err.text}")


#: Each way a sticky code reaches the node: (carrier name, builder).
CARRIERS = (("GpuError", gpu_error), ("torch.AcceleratorError", torch_error), ("cuda.core.CUDAError", cuda_core_error))
