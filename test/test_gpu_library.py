"""Kernel library (compile once, on-disk cache, compile errors with the NVRTC log) and timing events."""

from __future__ import annotations

import shutil

import pytest

from gpu_support import requires_gpu

pytestmark = requires_gpu

MODULES = ("preprocess", "decode", "postprocess")


@pytest.fixture(scope="module")
def rt():
    from vrt_ros.gpu.runtime import GpuRuntime

    return GpuRuntime.get(0)


def test_second_start_compiles_nothing_and_changed_source_recompiles(rt, tmp_path):
    from vrt_ros.gpu.library import KernelLibrary, kernel_dir

    src = tmp_path / "src"
    shutil.copytree(kernel_dir(), src)
    cache = tmp_path / "cache"
    first = KernelLibrary(rt.arch, cache, src)
    for m in MODULES:
        first.module(m)
    assert first.stats.compiled == len(MODULES) and first.stats.disk_hits == 0
    print(f"first start: {first.stats.compiled} modules compiled in {first.stats.compile_seconds:.3f} s")
    second = KernelLibrary(rt.arch, cache, src)  # a new process would start like this
    for m in MODULES:
        second.module(m)
        second.module(m)  # in-process reuse
    assert second.stats.compiled == 0 and second.stats.disk_hits == len(MODULES)
    assert second.stats.memory_hits == len(MODULES)
    second.kernel("preprocess", "letterbox_u8")  # loads and runs from the cached cubin
    (src / "decode.cu").write_text((src / "decode.cu").read_text() + "\n// changed\n")
    third = KernelLibrary(rt.arch, cache, src)
    for m in MODULES:
        third.module(m)
    assert third.stats.compiled == 1 and third.stats.disk_hits == len(MODULES) - 1


def test_compile_error_carries_the_nvrtc_log(rt, tmp_path):
    from vrt_ros.gpu.errors import KernelCompileError
    from vrt_ros.gpu.library import KernelLibrary

    (tmp_path / "preprocess.cu").write_text('extern "C" __global__ void k() { int x = not_declared_here; }\n')
    lib = KernelLibrary(rt.arch, tmp_path / "cache", tmp_path)
    with pytest.raises(KernelCompileError) as info:
        lib.module("preprocess")
    assert "not_declared_here" in str(info.value) and "not_declared_here" in info.value.log
    assert str(tmp_path / "preprocess.cu") in str(info.value)


def test_timing_events_measure_and_a_failed_query_raises(rt):
    import numpy as np

    from vrt_ros.gpu.errors import GpuError

    stream = rt.create_stream()
    a, b, never = rt.timing_event(), rt.timing_event(), rt.timing_event()
    dev = rt.alloc_device(64 << 20, stream)
    a.record(stream)
    for _ in range(20):
        rt.memset32(dev.ptr, 1, (64 << 20) // 4, stream)
    b.record(stream)
    rt.sync(stream)
    ms = b.elapsed_ms(a)
    print(f"20 x 64 MiB memset: {ms:.3f} ms")
    assert np.isfinite(ms) and ms > 0
    with pytest.raises(GpuError):
        never.elapsed_ms(a)  # never recorded: the query fails, it must not read as 0 ms
    dev.close(stream)
