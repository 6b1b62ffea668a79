"""A recording stand-in for the CUDA runtime (``cuda.core`` + ``cuda.bindings``), so CI runs the GPU glue on a CPU.

:func:`installed` puts fake ``cuda``, ``cuda.core``, ``cuda.bindings``, ``cuda.bindings.driver`` and
``cuda.bindings.nvrtc`` modules into ``sys.modules`` and re-imports ``vrt_ros.gpu.*`` and
``vrt_ros.inference.backends.cuda`` against them; on exit it restores what was there. Nothing of vrt_ros is replaced: the
uploader, preprocessor, postprocessor, kernel library and ``CudaPipeline`` run their real code, and the stand-in
records and checks what they ask of CUDA:

- memory: device and pinned buffers are real host memory (so addresses are real and copies really copy); every
  allocation and free is recorded; a free while a queued copy or launch still uses the memory is a *hazard*;
  mapped pinned memory (``cuMemHostAlloc`` with DEVICEMAP) counts as both, at one address, as on an integrated GPU
  (:attr:`FakeCuda.integrated` says whether the device reports integrated memory);
- streams: copies, memsets, launches, event records and stream-ordered frees are queued and executed in order at
  the stream's ``sync()`` (as on a GPU, a host write to pinned memory before the sync changes what the device gets);
- launches: every launch's arguments are checked against the kernel's ``extern "C"`` signature parsed from the
  ``.cu`` source it was "compiled" from (count and numpy types), every pointer argument must lie in a live device
  allocation, and the launch is recorded (entry, grid, block, shared memory, arguments). Kernels compute nothing
  unless a test registers an emulator for an entry (:attr:`FakeCuda.emulators`);
- faults: :meth:`FakeCuda.poison` makes every later CUDA call fail with a sticky error, as a context-poisoning
  fault (illegal address, launch failure) does on a GPU; :meth:`FakeCuda.fail_next` fails one named call.

The stand-in knows only the parts of the API vrt_ros uses; an unknown attribute raises AttributeError, so a new
call in the product shows up here as a failing CI test to extend, never as a silent pass.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import itertools
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from vrt_ros.gpu.signatures import parse_source

#: Modules re-imported against the stand-in (vrt_ros.gpu itself and vrt_ros.gpu.errors/signatures import no CUDA).
PRODUCT_MODULES = (
    "vrt_ros.gpu.runtime", "vrt_ros.gpu.library", "vrt_ros.gpu.launch", "vrt_ros.gpu.preprocess",
    "vrt_ros.gpu.label_images", "vrt_ros.gpu.masks", "vrt_ros.gpu.postprocess", "vrt_ros.gpu.upload", "vrt_ros.gpu.depth", "vrt_ros.gpu.measure",
    "vrt_ros.bench.stages.gpu_stages",
    "vrt_ros.inference.backends.cuda",
)
CUDA_MODULES = ("cuda", "cuda.core", "cuda.bindings", "cuda.bindings.driver", "cuda.bindings.nvrtc")
MAGIC = b"FAKECUBIN\0"

_EXPLANATIONS = {
    "CUDA_ERROR_ILLEGAL_ADDRESS": "an illegal memory access was encountered",
    "CUDA_ERROR_LAUNCH_FAILED": "unspecified launch failure",
    "CUDA_ERROR_OUT_OF_MEMORY": "out of memory",
    "CUDA_ERROR_NOT_READY": "device not ready",
    "CUDA_ERROR_INVALID_IMAGE": "device kernel image is invalid",
    "CUDA_ERROR_NOT_FOUND": "named symbol not found",
    "CUDA_ERROR_INVALID_VALUE": "invalid argument",
    "CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is detected",
}


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_NOT_READY = 600
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_FAILED = 719


class nvrtcResult(enum.IntEnum):
    NVRTC_SUCCESS = 0


class CUDAError(Exception):
    """What cuda.core raises: ``"<CUresult name>: <explanation>"`` (no code attribute; the fault table reads the
    leading CUresult name of a ``cuda.*`` module's CUDAError, so the stand-in's class says it is cuda.core's)."""


CUDAError.__module__ = "cuda.core"


class FakeHazard(AssertionError):
    """The product asked something of CUDA that would be wrong on a GPU (checked by the tests)."""


def _error(name: str) -> CUDAError:
    return CUDAError(f"{name}: {_EXPLANATIONS.get(name, name)}")


@dataclass
class Allocation:
    kind: str  # "device", "pinned" or "mapped" (both: host memory the device reads in place)
    array: np.ndarray
    nbytes: int
    live: bool = True
    ptr: int = 0  # the address (kept after the free, for messages)

    def __post_init__(self) -> None:
        self.ptr = int(self.array.ctypes.data)


@dataclass
class Launch:
    entry: str
    grid: Any
    block: Any
    shmem: int
    args: tuple


@dataclass
class _Op:
    kind: str
    run: Callable[[], None]
    uses: tuple[int, ...] = ()


class FakeCuda:
    """The stand-in's state: allocations, streams, the launch record, counters, faults and kernel emulators.

    Attributes:
        launches: every kernel launch, in order.
        hazards: problems found (use after free, pageable copies, pointers outside allocations ...).
        emulators: ``{entry: fn(args)}`` run at the stream's sync in launch order (optional).
        syncs: stream synchronisations.
        fill: byte new device allocations hold (None: zeros); set it to see what reads memory nothing wrote, as a
            GPU's fresh ``cuMemAlloc`` memory holds whatever was there.
    """

    def __init__(self) -> None:
        self.fill: int | None = None
        self.allocations: dict[int, Allocation] = {}
        self.launches: list[Launch] = []
        self.hazards: list[str] = []
        self.emulators: dict[str, Callable[[tuple], None]] = {}
        self.syncs = 0
        self.copies = {"h2d": 0, "d2h": 0}
        self.poisoned: str | None = None
        self.fail_calls: dict[str, str] = {}
        self.nvrtc_missing = False
        self.streams: dict[int, "Stream"] = {}
        self.events: dict[int, "Event"] = {}
        self.integrated = False  # CU_DEVICE_ATTRIBUTE_INTEGRATED (a Jetson); a discrete GPU by default
        self._freed: list[np.ndarray] = []  # memory freed while operations were queued (see free())
        self._ids = itertools.count(1)

    # --- faults -----------------------------------------------------------------------------------------
    def poison(self, name: str = "CUDA_ERROR_ILLEGAL_ADDRESS") -> None:
        """Every later CUDA call fails with ``name`` (a sticky, context-poisoning error)."""
        self.poisoned = name

    def fail_next(self, call: str, name: str) -> None:
        """The next ``call`` ("allocate", "launch", "sync", "h2d", "d2h", "memset", "compile") fails with ``name``."""
        self.fail_calls[call] = name

    def _enter(self, call: str) -> None:
        if self.poisoned:
            raise _error(self.poisoned)
        name = self.fail_calls.pop(call, None)
        if name:
            raise _error(name)

    def _driver_status(self, call: str) -> CUresult | None:
        try:
            self._enter(call)
        except CUDAError as exc:
            return CUresult[str(exc).split(":")[0]]
        return None

    # --- memory -----------------------------------------------------------------------------------------
    def allocate(self, kind: str, nbytes: int) -> Allocation:
        self._enter("allocate")
        a = Allocation(kind, np.zeros(max(int(nbytes), 1) + 64, np.uint8), int(nbytes))
        if kind == "device" and self.fill is not None:
            a.array[:] = self.fill
        self.allocations[a.ptr] = a
        return a

    def find(self, ptr: int, nbytes: int = 1, kind: str | None = None) -> Allocation | None:
        """The live allocation holding ``[ptr, ptr + nbytes)`` (of ``kind`` when given), or None."""
        for a in self.allocations.values():  # only live ones are kept (free() drops the others)
            if a.live and a.ptr <= ptr and ptr + nbytes <= a.ptr + a.nbytes and (kind is None or a.kind in (kind, "mapped")):
                return a
        return None

    def live(self, kind: str | None = None) -> list[Allocation]:
        return [a for a in self.allocations.values() if a.live and (kind is None or a.kind == kind)]

    def free(self, a: Allocation, ordered_on: "Stream | None") -> None:
        if not a.live:
            self.hazards.append(f"double free of {a.kind} memory at {a.ptr:#x}")
            return
        for s in self.streams.values():
            if s is ordered_on:
                continue
            for op in s.pending:
                if any(a.ptr <= p < a.ptr + max(a.nbytes, 1) for p in op.uses):
                    self.hazards.append(f"{a.kind} memory at {a.ptr:#x} freed while a queued {op.kind} still uses it")
        a.live = False
        # the host memory goes back too (a test running thousands of frame sizes would otherwise keep it all), once
        # no queued operation can touch it any more (a hazard above may still run: kept alive until every stream
        # has run dry, so a product bug is recorded, not a crash)
        if self.allocations.get(a.ptr) is a:
            del self.allocations[a.ptr]
        self._freed.append(a.array)
        a.array = np.zeros(0, np.uint8)

    def pending(self) -> int:
        """Operations queued on all streams and not yet executed by a sync."""
        return sum(len(s.pending) for s in self.streams.values())


FAKE: FakeCuda | None = None


def _fake() -> FakeCuda:
    assert FAKE is not None, "fake CUDA used outside fake_cuda.installed()"
    return FAKE


# ---------------------------------------------------------------------------------------------- cuda.core
class Buffer:
    def __init__(self, alloc: Allocation) -> None:
        self._alloc = alloc
        self.handle = alloc.ptr
        self.size = alloc.nbytes

    def close(self, stream: "Stream | None" = None) -> None:
        f = _fake()
        if stream is not None:
            stream._queue(_Op("free", lambda: f.free(self._alloc, stream)))
        else:
            f.free(self._alloc, None)


class _DeviceMemoryResource:
    def allocate(self, nbytes: int, stream: "Stream | None" = None) -> Buffer:
        return Buffer(_fake().allocate("device", nbytes))


class LegacyPinnedMemoryResource:
    def allocate(self, nbytes: int, stream: "Stream | None" = None) -> Buffer:
        return Buffer(_fake().allocate("pinned", nbytes))


@dataclass
class StreamOptions:
    nonblocking: bool = True
    priority: int | None = None


@dataclass
class EventOptions:
    timing_enabled: bool = False
    busy_waited_sync: bool = False
    support_ipc: bool = False


class Event:
    def __init__(self, options: EventOptions | None) -> None:
        f = _fake()
        self.handle = next(f._ids)
        self.is_timing_enabled = bool(options and options.timing_enabled)
        self.recorded = False
        self.completed = False
        f.events[self.handle] = self

    def close(self) -> None:
        _fake().events.pop(self.handle, None)


class Stream:
    def __init__(self) -> None:
        f = _fake()
        self.handle = next(f._ids)
        self.pending: list[_Op] = []
        f.streams[self.handle] = self

    def _queue(self, op: _Op) -> None:
        self.pending.append(op)

    def record(self, event: Event) -> None:
        _fake()._enter("record")
        event.recorded, event.completed = True, False
        self._queue(_Op("event", lambda: setattr(event, "completed", True)))

    def sync(self) -> None:
        f = _fake()
        f.syncs += 1
        ops, self.pending = self.pending, []
        f._enter("sync")
        for op in ops:
            op.run()
        if f.pending() == 0:
            f._freed.clear()

    def close(self) -> None:
        if self.pending:
            _fake().hazards.append(f"stream closed with {len(self.pending)} operations still queued")
        _fake().streams.pop(self.handle, None)


class Device:
    _instances: dict[int, "Device"] = {}

    def __new__(cls, device_id: int = 0):
        if device_id != 0:
            raise _error("CUDA_ERROR_INVALID_VALUE")
        dev = cls._instances.get(device_id)
        if dev is None:
            dev = super().__new__(cls)
            dev.device_id = device_id
            dev.arch = "90"
            dev.name = "fake GPU (recording stand-in)"
            dev.memory_resource = _DeviceMemoryResource()
            cls._instances[device_id] = dev
        return dev

    def set_current(self) -> None:
        _fake()._enter("set_current")

    def create_stream(self, obj: Any = None, options: StreamOptions | None = None) -> Stream:
        _fake()._enter("create_stream")
        return Stream()

    def create_event(self, options: EventOptions | None = None) -> Event:
        _fake()._enter("create_event")
        return Event(options)


@dataclass
class LaunchConfig:
    grid: Any = 1
    block: Any = 1
    shmem_size: int = 0


class Kernel:
    def __init__(self, entry: str, signature) -> None:
        self.entry = entry
        self.signature = signature


class ObjectCode:
    def __init__(self, code: bytes, name: str) -> None:
        self.code = code
        self.name = name

    @classmethod
    def from_cubin(cls, data: bytes, name: str = "") -> "ObjectCode":
        return cls(bytes(data), name)

    def get_kernel(self, entry: str) -> Kernel:
        _fake()._enter("get_kernel")
        if not self.code.startswith(MAGIC):
            raise _error("CUDA_ERROR_INVALID_IMAGE")
        sigs = parse_source(self.code[len(MAGIC):].decode(), self.name)
        if entry not in sigs:
            raise _error("CUDA_ERROR_NOT_FOUND")
        return Kernel(entry, sigs[entry])


@dataclass
class ProgramOptions:
    name: str = ""
    arch: str = ""
    std: str = ""


class Program:
    def __init__(self, code: str, code_type: str, options: ProgramOptions | None = None) -> None:
        f = _fake()
        if f.nvrtc_missing:
            raise RuntimeError("Failed to dlopen libnvrtc.so (fake: NVRTC missing)")
        self._code = code
        self._options = options or ProgramOptions()

    def compile(self, target_type: str, logs=None) -> ObjectCode:
        _fake()._enter("compile")
        return ObjectCode(MAGIC + self._code.encode(), self._options.name)


def launch(stream: Stream, config: LaunchConfig, kernel: Kernel, *args: Any) -> None:
    """Check the arguments against the kernel's signature and every pointer against the live allocations; record."""
    f = _fake()
    f._enter("launch")
    kernel.signature.check(args)  # raises KernelArgumentError on a wrong count or type
    uses = []
    for p, a in zip(kernel.signature.params, args):
        if p.pointer:
            if f.find(int(a), 1, "device") is None:
                f.hazards.append(f"{kernel.entry}: pointer argument {p.name} = {int(a):#x} is in no live device allocation")
            uses.append(int(a))
    rec = Launch(kernel.entry, config.grid, config.block, config.shmem_size, tuple(args))
    f.launches.append(rec)
    emulate = f.emulators.get(kernel.entry)
    stream._queue(_Op("launch " + kernel.entry, (lambda: emulate(rec.args)) if emulate else (lambda: None), tuple(uses)))


# ---------------------------------------------------------------------------------------------- cuda.bindings
def _ok(*values):
    return (CUresult.CUDA_SUCCESS, *values)


def cuInit(flags: int):
    return (_fake()._driver_status("init") or CUresult.CUDA_SUCCESS,)


def cuDeviceGetCount():
    err = _fake()._driver_status("device_count")
    return (err, 0) if err else _ok(1)


def cuGetErrorString(err):
    return _ok(_EXPLANATIONS.get(CUresult(err).name, CUresult(err).name).encode())


def cuGetErrorName(err):
    return _ok(CUresult(err).name.encode())


def cuMemGetInfo():
    f = _fake()
    used = sum(a.nbytes for a in f.live("device"))
    total = 1 << 34
    return _ok(total - used, total)


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19


CU_MEMHOSTALLOC_DEVICEMAP = 0x02


def cuDeviceGetAttribute(attrib, dev):
    f = _fake()
    err = f._driver_status("attribute")
    if err:
        return (err, 0)
    if int(dev) != 0:
        return (CUresult.CUDA_ERROR_INVALID_VALUE, 0)
    return _ok(int(f.integrated) if attrib == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_INTEGRATED else 1)


def cuMemHostAlloc(nbytes, flags):
    f = _fake()
    err = f._driver_status("allocate")
    if err:
        return (err, 0)
    if not int(flags) & CU_MEMHOSTALLOC_DEVICEMAP:
        f.hazards.append("cuMemHostAlloc without CU_MEMHOSTALLOC_DEVICEMAP: the device cannot read it in place")
    a = Allocation("mapped", np.zeros(max(int(nbytes), 1) + 64, np.uint8), int(nbytes))
    f.allocations[a.ptr] = a
    return _ok(a.ptr)


def cuMemHostGetDevicePointer(ptr, flags):
    f = _fake()
    a = f.allocations.get(int(ptr))
    if a is None or not a.live or a.kind != "mapped":
        f.hazards.append(f"cuMemHostGetDevicePointer({int(ptr):#x}) of no live mapped allocation")
        return (CUresult.CUDA_ERROR_INVALID_VALUE, 0)
    return _ok(a.ptr)  # unified addressing: the same address


def cuMemFreeHost(ptr):
    f = _fake()
    a = f.allocations.get(int(ptr))
    if a is None or a.kind != "mapped":
        f.hazards.append(f"cuMemFreeHost({int(ptr):#x}) of no mapped allocation")
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    f.free(a, None)
    return (CUresult.CUDA_SUCCESS,)


def cuEventElapsedTime(start: int, end: int):
    f = _fake()
    err = f._driver_status("elapsed")
    if err:
        return (err, None)
    a, b = f.events.get(start), f.events.get(end)
    if a is None or b is None or not (a.completed and b.completed) or not (a.is_timing_enabled and b.is_timing_enabled):
        return (CUresult.CUDA_ERROR_NOT_READY, None)
    return _ok(0.01)


def _copy(kind: str, dst: int, src: int, nbytes: int, stream_handle: int):
    f = _fake()
    err = f._driver_status(kind)
    if err:
        return (err,)
    dst_kind, src_kind = ("device", "pinned") if kind == "h2d" else ("pinned", "device")
    if f.find(dst, nbytes, dst_kind) is None:
        f.hazards.append(f"{kind}: destination {dst:#x} + {nbytes} is in no live {dst_kind} allocation")
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    if f.find(src, nbytes, src_kind) is None:
        f.hazards.append(f"{kind}: source {src:#x} + {nbytes} is in no live {src_kind} allocation (pageable or freed)")
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    f.copies[kind] += 1
    f.streams[int(stream_handle)]._queue(_Op(kind, lambda: ctypes.memmove(dst, src, nbytes), (dst, src)))
    return (CUresult.CUDA_SUCCESS,)


def cuMemcpyHtoDAsync(dst, src, nbytes, stream_handle):
    return _copy("h2d", int(dst), int(src), int(nbytes), stream_handle)


def cuMemcpyDtoHAsync(dst, src, nbytes, stream_handle):
    return _copy("d2h", int(dst), int(src), int(nbytes), stream_handle)


def cuStreamQuery(stream_handle):
    """A poisoned context's error (a sticky error repeats on every call), else success (the stand-in's streams
    run at their sync)."""
    f = _fake()
    if f.poisoned:
        return (CUresult[f.poisoned] if f.poisoned in CUresult.__members__ else CUresult.CUDA_ERROR_INVALID_VALUE,)
    return (CUresult.CUDA_SUCCESS,)


def cuMemsetD32Async(ptr, value, count, stream_handle):
    f = _fake()
    err = f._driver_status("memset")
    if err:
        return (err,)
    ptr, count = int(ptr), int(count)
    if f.find(ptr, 4 * count, "device") is None:
        f.hazards.append(f"memset: {ptr:#x} + {4 * count} is in no live device allocation")
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)

    def run():
        (ctypes.c_uint32 * count).from_address(ptr)[:] = [int(value)] * count

    f.streams[int(stream_handle)]._queue(_Op("memset", run, (ptr,)))
    return (CUresult.CUDA_SUCCESS,)


def nvrtcVersion():
    if _fake().nvrtc_missing:
        raise RuntimeError("Failed to dlopen libnvrtc.so.13 (fake: NVRTC missing)")
    return (nvrtcResult.NVRTC_SUCCESS, 13, 0)


# ---------------------------------------------------------------------------------------------- installation
def _modules() -> dict[str, types.ModuleType]:
    g = globals()
    cuda = types.ModuleType("cuda")
    core = types.ModuleType("cuda.core")
    core.__version__ = "0.0-fake"
    for name in ("Buffer", "Device", "Event", "EventOptions", "Kernel", "LaunchConfig", "LegacyPinnedMemoryResource",
                 "ObjectCode", "Program", "ProgramOptions", "Stream", "StreamOptions", "launch", "CUDAError"):
        setattr(core, name, g[name])
    bindings = types.ModuleType("cuda.bindings")
    bindings.__version__ = "0.0-fake"
    driver = types.ModuleType("cuda.bindings.driver")
    for name in ("CUresult", "cuInit", "cuDeviceGetCount", "cuGetErrorString", "cuGetErrorName", "cuMemGetInfo",
                 "cuEventElapsedTime", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemsetD32Async",
                 "CUdevice_attribute", "CU_MEMHOSTALLOC_DEVICEMAP", "cuDeviceGetAttribute", "cuMemHostAlloc",
                 "cuMemHostGetDevicePointer", "cuMemFreeHost", "cuStreamQuery"):
        setattr(driver, name, g[name])
    nvrtc = types.ModuleType("cuda.bindings.nvrtc")
    nvrtc.nvrtcResult = nvrtcResult
    nvrtc.nvrtcVersion = nvrtcVersion
    cuda.core, cuda.bindings = core, bindings
    bindings.driver, bindings.nvrtc = driver, nvrtc
    return {"cuda": cuda, "cuda.core": core, "cuda.bindings": bindings, "cuda.bindings.driver": driver,
            "cuda.bindings.nvrtc": nvrtc}


@contextlib.contextmanager
def installed() -> Iterator[FakeCuda]:
    """The stand-in in ``sys.modules`` for the ``with`` block; vrt_ros's GPU modules re-imported against it."""
    global FAKE
    saved = {n: sys.modules.get(n) for n in (*CUDA_MODULES, *PRODUCT_MODULES)}
    # `from vrt_ros.gpu import upload` reads the package attribute first: drop those too, restore them after
    parents = {n: sys.modules.get(n.rpartition(".")[0]) for n in PRODUCT_MODULES}
    attrs = {n: getattr(p, n.rpartition(".")[2], None) for n, p in parents.items() if p is not None}
    FAKE = FakeCuda()
    Device._instances.clear()
    for n in PRODUCT_MODULES:
        sys.modules.pop(n, None)
        if parents.get(n) is not None and attrs.get(n) is not None:
            delattr(parents[n], n.rpartition(".")[2])
    sys.modules.update(_modules())
    try:
        yield FAKE
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
        for n, parent in parents.items():
            if parent is None:
                continue
            if attrs.get(n) is not None:
                setattr(parent, n.rpartition(".")[2], attrs[n])
            elif hasattr(parent, n.rpartition(".")[2]):
                delattr(parent, n.rpartition(".")[2])
        FAKE = None


@pytest.fixture
def fake_cuda(tmp_path, monkeypatch) -> Iterator[FakeCuda]:
    """The stand-in installed, with the kernel cache in a temporary folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with installed() as fake:
        yield fake


@dataclass
class FakeEngine:
    """A GPU engine for the stand-in: fixed tensor descriptions; ``enqueue`` checks its buffers and records.

    ``outputs_data`` (optional): arrays written into the output buffers on the stream (at its sync), as a real
    engine's results would be. A dynamic batch (dim 0 = -1) takes ``batch`` at each enqueue, as the torch and
    TensorRT engines do; ``enqueued`` records ``(input_ptr, output_ptrs, batch)`` (batch None: the fixed shape).
    ``input_nonzero``: per execution (in stream order), how many bytes of its input were not zero when it ran.
    """

    inputs: list
    outputs: list
    outputs_data: list | None = None
    name: str = "fake"
    calls: int = 0
    fail_with: BaseException | None = None
    closed: bool = False
    enqueued: list = field(default_factory=list)
    input_nonzero: list = field(default_factory=list)

    def enqueue(self, stream, input_ptr: int, output_ptrs, batch: int | None = None) -> None:
        f = _fake()
        f._enter("launch")
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        i = self.inputs[0]
        dynamic = i.shape[0] < 0
        if dynamic != (batch is not None):
            f.hazards.append(f"engine input {i.shape}: enqueue with batch={batch}")
        n = int(batch) if dynamic and batch is not None else 1

        def nbytes(t) -> int:
            dims = (n, *t.shape[1:]) if t.shape[0] < 0 else t.shape
            return int(np.prod(dims)) * np.dtype(t.dtype).itemsize

        if f.find(int(input_ptr), nbytes(i), "device") is None:
            f.hazards.append(f"engine input {input_ptr:#x} + {nbytes(i)} is in no live device allocation")
        for o, p in zip(self.outputs, output_ptrs):
            if f.find(int(p), nbytes(o), "device") is None:
                f.hazards.append(f"engine output {o.name} {p:#x} + {nbytes(o)} is in no live device allocation")
        self.enqueued.append((int(input_ptr), tuple(int(p) for p in output_ptrs), batch))
        need = nbytes(i)
        stream._queue(_Op("engine_input", lambda: self.input_nonzero.append(int(np.count_nonzero(
            np.frombuffer(ctypes.string_at(int(input_ptr), need), np.uint8)))), (int(input_ptr),)))
        if self.outputs_data is not None:
            data = [np.ascontiguousarray(d) for d in self.outputs_data]

            def run():
                for d, p in zip(data, output_ptrs):
                    ctypes.memmove(int(p), d.ctypes.data, d.nbytes)

            stream._queue(_Op("engine", run, (int(input_ptr), *map(int, output_ptrs))))

    def close(self) -> None:
        self.closed = True
