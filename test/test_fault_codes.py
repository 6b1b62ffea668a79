"""Sticky CUDA faults are recognised by the error code an exception carries, never by a message's wording (issue 33,
item 1): message text may quote fields a publisher wrote (an Image's ``encoding``, a compressed ``format``, a
``frame_id``). A FrameError anywhere in the chain is an input fault, whatever else the chain holds. Pure: no ROS,
no GPU (the GPU runtime's two tests run on the CUDA stand-in)."""

from __future__ import annotations

import pytest

from cuda_faults import CARRIERS, AcceleratorError, CUDAError, cuda_core_error, gpu_error
from fake_cuda import fake_cuda  # noqa: F401  (fixture)
from vrt_ros.errors import FrameError
from vrt_ros.faults import (ENGINE, FATAL, INPUT, PIPELINE, READ, STICKY_ERRORS, FaultPolicy, classify,
                            cuda_error_code, fatal_cuda_error)
from vrt_ros.gpu.errors import GpuError, KernelCompileError

IDS = [e.name for e in STICKY_ERRORS]


def chained(outer: BaseException, inner: BaseException, explicit: bool) -> BaseException:
    """``outer`` raised while handling ``inner`` (``raise ... from`` when ``explicit``)."""
    try:
        try:
            raise inner
        except BaseException as exc:
            if explicit:
                raise outer from exc
            raise outer
    except BaseException as exc:
        return exc


@pytest.mark.parametrize("err", STICKY_ERRORS, ids=IDS)
@pytest.mark.parametrize("carrier, build", CARRIERS, ids=[c for c, _ in CARRIERS])
def test_each_sticky_code_is_fatal(err, carrier, build):
    exc = build(err)
    assert cuda_error_code(exc) == err.code
    assert fatal_cuda_error(exc) == err.name
    assert classify(exc, PIPELINE).kind == FATAL
    for explicit in (True, False):  # found through the cause and through the context
        assert fatal_cuda_error(chained(RuntimeError("enqueue failed"), exc, explicit)) == err.name
    policy = FaultPolicy(max_consecutive_failures=0)
    assert policy.failure(exc) and policy.poisoned and err.name in policy.fatal


@pytest.mark.parametrize("err", STICKY_ERRORS, ids=IDS)
def test_sticky_wording_without_a_code_is_not_fatal(err):
    """Every sticky error's name, runtime name and text, in every kind of message, carries no code: not fatal."""
    texts = (err.name, err.runtime_name, err.text, f"{err.name}: {err.text}", f"CUDA error: {err.text}",
             f"cuStreamSynchronize failed: {err.name}: {err.text}")
    for text in texts:
        for exc in (RuntimeError(text), ValueError(text), Exception(text), GpuError(text),  # a GpuError without code
                    AcceleratorError(text, error_code=None), CUDAError(f"CUDA_ERROR_INVALID_VALUE: {text}"),
                    KernelCompileError(text, log=text, source=text)):
            assert cuda_error_code(exc) is None, (type(exc).__name__, text)
            assert fatal_cuda_error(exc) is None, (type(exc).__name__, text)
            assert classify(exc, PIPELINE).kind == ENGINE
            assert classify(exc, READ).kind == INPUT
        policy = FaultPolicy(max_consecutive_failures=0)
        assert policy.failure(RuntimeError(text)) is None and not policy.poisoned


@pytest.mark.parametrize("err", STICKY_ERRORS, ids=IDS)
def test_frame_error_in_the_chain_wins(err):
    """A FrameError is an input fault wherever it is in the chain, even beside a real sticky code (a decoder's
    refusal of a frame does not make the frame an engine fault; a real poisoned context fails the next good frame)."""
    frame = FrameError(f"unsupported encoding {err.text!r}", reason="unsupported_encoding")
    for exc in (frame, chained(gpu_error(err), frame, True), chained(frame, gpu_error(err), False),
                chained(RuntimeError("wrapper"), chained(cuda_core_error(err), frame, False), True)):
        fault = classify(exc, PIPELINE)
        assert (fault.kind, fault.reason) == (INPUT, "unsupported_encoding")


def test_recoverable_codes_are_engine_faults():
    oom = GpuError("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory", code=2,
                   name="CUDA_ERROR_OUT_OF_MEMORY")
    for exc in (oom, AcceleratorError("CUDA error: out of memory", error_code=2),
                CUDAError("CUDA_ERROR_OUT_OF_MEMORY: out of memory")):
        assert fatal_cuda_error(exc) is None and classify(exc, PIPELINE).kind == ENGINE


def test_only_the_libraries_types_are_read():
    """A ``code``/``error_code`` attribute on some other exception (SystemExit, an HTTP error) is not a CUDA code,
    nor is a class named CUDAError or AcceleratorError of another module."""
    class Other(Exception):
        code = 700
        error_code = 700

    class AcceleratorErrorElsewhere(RuntimeError):
        error_code = 700

    class CUDAErrorElsewhere(Exception):
        pass

    CUDAErrorElsewhere.__name__ = "CUDAError"
    AcceleratorErrorElsewhere.__name__ = "AcceleratorError"
    for exc in (Other("x"), SystemExit(700), AcceleratorErrorElsewhere("x"),
                CUDAErrorElsewhere("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")):
        assert cuda_error_code(exc) is None and fatal_cuda_error(exc) is None


def test_a_failed_cuda_call_raises_its_curesult_as_the_code(fake_cuda):  # noqa: F811
    """vrt_ros.gpu.runtime.check (every cuda.bindings call of the GPU edge) puts the CUresult on the GpuError: the
    fault table reads it, whatever the message says."""
    from fake_cuda import CUresult
    from vrt_ros.gpu.runtime import check

    for name, sticky in (("CUDA_ERROR_ILLEGAL_ADDRESS", True), ("CUDA_ERROR_LAUNCH_FAILED", True),
                         ("CUDA_ERROR_OUT_OF_MEMORY", False)):
        err = CUresult[name]
        with pytest.raises(GpuError) as info:
            check((err, None), "cuStreamSynchronize")
        assert (info.value.code, info.value.name) == (int(err), name)
        assert fatal_cuda_error(info.value) == (name if sticky else None)
    assert check((CUresult.CUDA_SUCCESS, 5), "cuDeviceGetCount") == 5


def test_a_failed_stream_sync_carries_the_drivers_curesult(fake_cuda):  # noqa: F811
    """GpuRuntime.sync: cuda.core's error names the fault in words only; the runtime asks the driver for the stream's
    CUresult and raises it as the code (the fault table needs no message). Without a driver error, cuda.core's own
    error is raised unchanged."""
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    fake_cuda.fail_next("sync", "CUDA_ERROR_INVALID_VALUE")  # not sticky: the driver reports nothing afterwards
    with pytest.raises(Exception) as info:
        rt.sync(stream)
    assert not isinstance(info.value, GpuError) and fatal_cuda_error(info.value) is None
    fake_cuda.poison("CUDA_ERROR_LAUNCH_FAILED")
    with pytest.raises(GpuError) as info:
        rt.sync(stream)
    assert (info.value.code, info.value.name) == (719, "CUDA_ERROR_LAUNCH_FAILED")
    assert fatal_cuda_error(info.value) == "CUDA_ERROR_LAUNCH_FAILED"
