"""When a frame's failure means the process must stop (DESIGN.md, "Failure behaviour on a robot"). Pure Python.

A CUDA fault that poisons the context (an illegal address, a failed launch, a device-side assert, an ECC error,
a lost device) makes every later CUDA call of the process fail with the same error: the node would stay up and
publish nothing, for ever. And an engine that fails on K consecutive frames is as useless. In both cases the node
logs an ERROR, publishes ERROR on ``/diagnostics`` and the process exits non-zero (:data:`EXIT_FATAL`), so the
launch file's ``respawn`` starts a fresh process with a fresh CUDA context.

A sticky fault is recognised by the CUDA error *code* an exception carries (:func:`cuda_error_code`), never by the
wording of a message: messages quote fields a publisher wrote (an ``Image``'s ``encoding``, a compressed
``format``, a ``frame_id``), so ``"an illegal memory access was encountered"`` in a message means nothing. The codes
come from :class:`vrt_ros.gpu.errors.GpuError` (``code``, the ``CUresult`` of a failed ``cuda.bindings`` call),
PyTorch's ``torch.AcceleratorError`` (``error_code``, the ``cudaError_t``; PyTorch >= 2.8) and cuda.core's
``CUDAError`` (it carries no code attribute: its message, ``"<CUresult name>: <explanation>"``, is formatted by
cuda.core from the ``CUresult`` itself, so the name in it is read, and only for that type; a failed stream sync is
re-raised by :meth:`vrt_ros.gpu.runtime.GpuRuntime.sync` as a GpuError with the driver's code). TensorRT reports no
CUDA code (``execute_async_v3`` returns False and logs): its failure is an engine fault, and a sticky fault behind
it reaches the pipeline at its stream sync, with the code. The exception's causes (``__cause__``/``__context__``)
are searched too.

:func:`classify` is the fault table (:data:`FAULT_TABLE`, quoted in the README): every failed frame is an *input*
fault (the frame is dropped and counted under its reason; the engine's failure count is untouched), an *engine*
fault (counted as ``engine_error``; fatal after ``engine.max_consecutive_failures`` in a row, see
:class:`FaultPolicy`) or *fatal* at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

from vrt_ros.errors import CudaCodeError, FrameError

#: Process exit status after a fatal fault (2 is a start-up failure).
EXIT_FATAL = 3

class StickyError(NamedTuple):
    """One sticky CUDA error (:data:`STICKY_ERRORS`).

    Attributes:
        code: its value, the same in the driver API (``CUresult``) and the runtime API (``cudaError_t``).
        name: the driver API name (``CUresult``), e.g. ``CUDA_ERROR_ILLEGAL_ADDRESS``.
        runtime_name: the runtime API name (``cudaError_t``), e.g. ``cudaErrorIllegalAddress``.
        text: the driver's error string (``cuGetErrorString``); for logs and tests, never matched.
    """

    code: int
    name: str
    runtime_name: str
    text: str


#: Sticky CUDA errors: the context is unusable after them (CUDA driver API ``CUresult``, runtime API
#: ``cudaError_t``: the two enums give these errors the same values, cuda.h and driver_types.h).
STICKY_ERRORS: tuple[StickyError, ...] = (
    StickyError(700, "CUDA_ERROR_ILLEGAL_ADDRESS", "cudaErrorIllegalAddress",
                "an illegal memory access was encountered"),
    StickyError(719, "CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure", "unspecified launch failure"),
    StickyError(715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "cudaErrorIllegalInstruction",
                "an illegal instruction was encountered"),
    StickyError(716, "CUDA_ERROR_MISALIGNED_ADDRESS", "cudaErrorMisalignedAddress", "misaligned address"),
    StickyError(717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "cudaErrorInvalidAddressSpace",
                "operation not supported on global/shared address space"),
    StickyError(718, "CUDA_ERROR_INVALID_PC", "cudaErrorInvalidPc", "invalid program counter"),
    StickyError(714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "cudaErrorHardwareStackError", "hardware stack error"),
    StickyError(710, "CUDA_ERROR_ASSERT", "cudaErrorAssert", "device-side assert triggered"),
    StickyError(702, "CUDA_ERROR_LAUNCH_TIMEOUT", "cudaErrorLaunchTimeout", "the launch timed out and was terminated"),
    StickyError(214, "CUDA_ERROR_ECC_UNCORRECTABLE", "cudaErrorECCUncorrectable",
                "uncorrectable ECC error encountered"),
    StickyError(709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "cudaErrorContextIsDestroyed", "context is destroyed"),
    StickyError(46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "cudaErrorDevicesUnavailable",
                "CUDA-capable device(s) is/are busy or unavailable"),
    StickyError(4, "CUDA_ERROR_DEINITIALIZED", "cudaErrorCudartUnloading", "driver shutting down"),
)
_STICKY_BY_CODE = {e.code: e for e in STICKY_ERRORS}
_STICKY_BY_NAME = {e.name: e for e in STICKY_ERRORS}
#: The CUresult name in a cuda.core CUDAError's message (its first, whole: cuda.core formats it from the code).
_CUDA_CORE_NAME = re.compile(r"\b(CUDA_ERROR_[A-Z_]+)\b")


def cuda_error_code(exc: BaseException) -> int | None:
    """The CUDA error code ``exc`` itself carries as data (not its causes), or None.

    Read from: :class:`vrt_ros.errors.CudaCodeError` ``code`` (:class:`vrt_ros.gpu.errors.GpuError`);
    ``torch.AcceleratorError`` ``error_code`` (checked by type name and module, torch is not imported); cuda.core's
    ``CUDAError`` (a class named ``CUDAError`` of a ``cuda.*`` module): a ``code`` attribute where it has one, else
    the first ``CUresult`` name in its message (the whole message is cuda.core's, formatted from the code; only
    sticky names map to a code here, any other gives None). No other exception's message is read.
    """
    kind, module = type(exc), type(exc).__module__ or ""
    if isinstance(exc, CudaCodeError):
        return _int_or_none(getattr(exc, "code", None))
    if kind.__name__ == "AcceleratorError" and module.split(".")[0] == "torch":
        return _int_or_none(getattr(exc, "error_code", None))
    if kind.__name__ == "CUDAError" and module.split(".")[0] == "cuda":
        code = _int_or_none(getattr(exc, "code", None))
        if code is not None:
            return code
        found = _CUDA_CORE_NAME.search(str(exc.args[0]) if exc.args else "")
        sticky = _STICKY_BY_NAME.get(found.group(1)) if found else None
        return sticky.code if sticky is not None else None
    return None


def _int_or_none(value: object) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, (str, bytes, float)) else None
    except (TypeError, ValueError):
        return None


def exception_chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then its explicit cause (``raise ... from``) or, where it has none, the exception it was raised while
    handling (``__context__``), and so on (each once)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def fatal_cuda_error(exc: BaseException | None) -> str | None:
    """The sticky CUDA error ``exc`` (or one of its causes) carries as its code (:func:`cuda_error_code`), by its
    driver name, e.g. ``"CUDA_ERROR_ILLEGAL_ADDRESS"``; None when it carries none (a bad frame, a Python error, a
    recoverable CUDA error such as out of memory, any message that merely quotes a CUDA error's name or text)."""
    for link in exception_chain(exc):
        sticky = _STICKY_BY_CODE.get(cuda_error_code(link))
        if sticky is not None:
            return sticky.name
    return None


#: Fault kinds (:func:`classify`).
INPUT, ENGINE, FATAL = "input", "engine", "fatal"
#: Stages a frame can fail in: ``read`` (the raw-bytes reader of ``input.raw_subscription``, in the callback),
#: ``decode`` (the node's CPU decode of a compressed frame, before the pipeline) and ``pipeline`` (everything the
#: pipeline does, its own decode and validation included).
READ, DECODE, PIPELINE = "read", "decode", "pipeline"
STAGES = (READ, DECODE, PIPELINE)
#: Drop reason of an engine fault, and of a decoder's or the reader's own exception (one that is not a FrameError).
ENGINE_ERROR = "engine_error"
CORRUPT_COMPRESSED = "corrupt_compressed"
BAD_CDR = "bad_cdr"

@dataclass(frozen=True)
class Fault:
    """A failed frame, classified (:func:`classify`).

    Attributes:
        kind: :data:`INPUT`, :data:`ENGINE` or :data:`FATAL`.
        reason: the drop reason it is counted under.
        message: what went wrong, for the log (``Type: message``).
    """

    kind: str
    reason: str
    message: str


@dataclass(frozen=True)
class FaultRow:
    """One row of :data:`FAULT_TABLE`.

    Attributes:
        condition: the exception or condition, in words (the README quotes them).
        stage: the stage it applies in (one of :data:`STAGES`), or ``"any"``.
        kind: :data:`INPUT`, :data:`ENGINE` or :data:`FATAL`.
        reason: the drop reason, in words.
        match: ``(exception) -> (drop reason, message) or None``: whether the row applies.
    """

    condition: str
    stage: str
    kind: str
    reason: str
    match: Callable[[BaseException], tuple[str, str] | None]


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _sticky(exc: BaseException) -> tuple[str, str] | None:
    return (ENGINE_ERROR, _text(exc)) if fatal_cuda_error(exc) is not None else None


def _frame_error(exc: BaseException) -> tuple[str, str] | None:
    found = next((e for e in exception_chain(exc) if isinstance(e, FrameError)), None)
    return (found.reason, str(found)) if found is not None else None


def _always(reason: str) -> Callable[[BaseException], tuple[str, str]]:
    return lambda exc: (reason, _text(exc))


#: The fault table, first matching row wins: a FrameError anywhere in the chain is an input fault, whatever else
#: the chain holds. The header checks and decoders (vrt_ros.intake.compressed, vrt_ros.intake.frames,
#: vrt_ros.ros.cdr_read) turn absurd declared sizes, truncated data and unsupported formats into FrameErrors before
#: anything is decoded or uploaded; the CPU decode turns OpenCV's own errors (``cv2.error``) into FrameErrors;
#: nvImageCodec's errors send the frame to the CPU decode, which gives its verdict.
FAULT_TABLE: tuple[FaultRow, ...] = (
    FaultRow("FrameError in the exception's chain: bad size, step, encoding or data length; empty, truncated, "
             "undecodable, unsupported (depth, 16-bit, neither JPEG nor PNG) or oversized (declared in its JPEG SOF "
             "or PNG IHDR) compressed data; an OpenCV decode error", "any", INPUT, "the FrameError's reason",
             _frame_error),
    FaultRow("a sticky CUDA error code (STICKY_ERRORS: a GpuError's code, torch.AcceleratorError's error_code, the "
             "CUresult of cuda.core's CUDAError) on the exception or any in its chain; never a message's wording",
             "any", FATAL, ENGINE_ERROR, _sticky),
    FaultRow("any other exception of the raw-bytes reader", READ, INPUT, BAD_CDR, _always(BAD_CDR)),
    FaultRow("any other exception (cv2.error, MemoryError, ...) of the node's CPU decode", DECODE, INPUT,
             CORRUPT_COMPRESSED, _always(CORRUPT_COMPRESSED)),
    FaultRow("any other exception (the engine, a recoverable CUDA error such as out of memory, a bug in a stage)",
             PIPELINE, ENGINE, ENGINE_ERROR, _always(ENGINE_ERROR)),
)


def classify(exc: BaseException, stage: str = PIPELINE) -> Fault:
    """The first row of :data:`FAULT_TABLE` that applies to ``exc`` raised in ``stage`` (one of :data:`STAGES`).

    Raises:
        ValueError: an unknown ``stage``.
    """
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r} is not one of {STAGES}")
    for row in FAULT_TABLE:
        if row.stage in ("any", stage):
            found = row.match(exc)
            if found is not None:
                return Fault(row.kind, *found)
    raise AssertionError(f"no row of the fault table for stage {stage}")  # pragma: no cover - the last rows match all


@dataclass
class FaultPolicy:
    """Decides, frame by frame, whether the process must stop.

    Args:
        max_consecutive_failures: engine failures in a row that are fatal (K, parameter
            ``engine.max_consecutive_failures``); 0 disables the count (a sticky CUDA error stays fatal).

    Attributes:
        consecutive: engine failures since the last good frame.
        fatal: why the process must stop (set once; None while it may run).
        poisoned: the fatal fault is a sticky CUDA error (only a new process recovers).
    """

    max_consecutive_failures: int = 10
    consecutive: int = 0
    fatal: str | None = None
    poisoned: bool = False

    def success(self) -> None:
        """A frame went through the engine: the run of failures ends."""
        self.consecutive = 0

    def failure(self, exc: BaseException) -> str | None:
        """Record an engine failure; returns the reason the process must stop, or None to carry on."""
        self.consecutive += 1
        sticky = fatal_cuda_error(exc)
        if sticky and self.fatal is None:
            self.fatal = f"CUDA context poisoned ({sticky}): {type(exc).__name__}: {exc}"
            self.poisoned = True
        elif self.max_consecutive_failures > 0 and self.consecutive >= self.max_consecutive_failures and self.fatal is None:
            self.fatal = (f"{self.consecutive} consecutive engine failures (engine.max_consecutive_failures "
                          f"{self.max_consecutive_failures}); last: {type(exc).__name__}: {exc}")
        return self.fatal
