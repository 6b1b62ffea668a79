"""Errors of the GPU edge."""

from __future__ import annotations

from vrt_ros.errors import CudaCodeError


class GpuError(CudaCodeError):
    """A CUDA call failed; the message names the call and the CUDA error, and :attr:`code` / :attr:`name` carry the
    ``CUresult`` (None for failures that are not a CUDA call's result, e.g. a kernel compile error)."""


class KernelCompileError(GpuError):
    """NVRTC could not compile a kernel source; the message carries the full NVRTC log.

    Attributes:
        log: the NVRTC program log (may be empty when NVRTC produced none).
        source: path of the ``.cu`` file that failed.
    """

    def __init__(self, message: str, log: str, source: str) -> None:
        super().__init__(message)
        self.log = log
        self.source = source
