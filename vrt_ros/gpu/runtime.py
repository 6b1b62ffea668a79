"""Device, stream, buffers and timing events, with counters the tests read.

Every stream synchronisation and every device/pinned allocation of the GPU path goes through
:class:`GpuRuntime`, which counts them: the tests assert exactly one sync per frame and no allocation after
warm-up. One runtime exists per device per process (:meth:`GpuRuntime.get`); every pipeline and node instance of
the process shares its primary context, which :meth:`GpuRuntime.make_current` binds to the calling thread.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import dataclass, field

import numpy as np
from cuda.bindings import driver
from cuda.core import Device, EventOptions, LegacyPinnedMemoryResource, Stream, StreamOptions

from vrt_ros.gpu.errors import GpuError

log = logging.getLogger(__name__)


def check(result, call: str):
    """Unpack a ``cuda.bindings`` result tuple; raise :class:`GpuError` naming ``call`` on failure, with the
    ``CUresult`` as its ``code`` and ``name`` (the fault table reads those, never the message)."""
    err = result[0]
    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        raise GpuError(f"{call} failed: {err.name}: {text.decode() if text else ''}", code=int(err), name=err.name)
    rest = result[1:]
    return rest[0] if len(rest) == 1 else (rest or None)


def _stream_error(stream: Stream):
    """The ``CUresult`` the driver reports for ``stream`` after a failed sync (a sticky error repeats on every
    call), or None when it reports none (success, not ready) or cannot be asked."""
    try:
        err = driver.cuStreamQuery(stream.handle)[0]
    except Exception:  # noqa: BLE001 - the original error is the one to raise
        return None
    ok = (driver.CUresult.CUDA_SUCCESS, driver.CUresult.CUDA_ERROR_NOT_READY)
    return None if err in ok else err


@dataclass
class Counters:
    """What the runtime has done since start (read by tests and diagnostics).

    Attributes:
        syncs: stream synchronisations.
        device_allocs, pinned_allocs: allocations made.
        device_bytes, pinned_bytes: bytes allocated in total.
    """

    syncs: int = 0
    device_allocs: int = 0
    pinned_allocs: int = 0
    device_bytes: int = 0
    pinned_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def snapshot(self) -> dict[str, int]:
        """The counters as a plain dict."""
        with self.lock:
            return {
                "syncs": self.syncs,
                "device_allocs": self.device_allocs,
                "pinned_allocs": self.pinned_allocs,
                "device_bytes": self.device_bytes,
                "pinned_bytes": self.pinned_bytes,
            }


class DeviceBuffer:
    """Device memory of ``nbytes`` bytes (stream-ordered allocation from the device's pool).

    Attributes:
        ptr: device address (int).
        nbytes: size in bytes.
    """

    def __init__(self, buf, nbytes: int) -> None:
        self._buf = buf
        self.ptr = int(buf.handle)
        self.nbytes = nbytes

    def close(self, stream: Stream | None = None) -> None:
        """Free the memory (ordered on ``stream`` when given)."""
        if self._buf is not None:
            self._buf.close(stream)
            self._buf = None


class PinnedBuffer:
    """Page-locked host memory (``cuMemHostAlloc``) with a numpy view.

    Attributes:
        ptr: host address (int), usable as the source/target of async copies.
        nbytes: size in bytes.
        array: uint8 numpy view of all ``nbytes`` bytes (use ``.view(dtype)`` for other types).
    """

    def __init__(self, buf, nbytes: int) -> None:
        self._buf = buf
        self.ptr = int(buf.handle)
        self.nbytes = nbytes
        raw = (ctypes.c_uint8 * max(nbytes, 1)).from_address(self.ptr)
        self.array = np.frombuffer(raw, dtype=np.uint8, count=nbytes)

    def close(self) -> None:
        """Free the memory; the numpy view must not be used afterwards."""
        if self._buf is not None:
            self.array = np.zeros(0, np.uint8)
            self._buf.close()
            self._buf = None


class MappedBuffer:
    """Mapped page-locked host memory (``cuMemHostAlloc`` with ``CU_MEMHOSTALLOC_DEVICEMAP``): the CPU writes it
    through a numpy view and kernels read it in place at :attr:`device_ptr`, with no H2D copy. Worth it only where
    the GPU shares the CPU's memory (integrated GPUs: Jetson Orin, Thor); on a discrete GPU every kernel read would
    cross PCIe.

    Attributes:
        ptr: host address (int).
        device_ptr: the device address of the same memory (``cuMemHostGetDevicePointer``).
        nbytes: size in bytes.
        array: uint8 numpy view of all ``nbytes`` bytes.
    """

    def __init__(self, nbytes: int) -> None:
        self.ptr = int(check(driver.cuMemHostAlloc(nbytes, driver.CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc"))
        try:
            self.device_ptr = int(check(driver.cuMemHostGetDevicePointer(self.ptr, 0), "cuMemHostGetDevicePointer"))
        except GpuError:
            driver.cuMemFreeHost(self.ptr)
            raise
        self.nbytes = nbytes
        raw = (ctypes.c_uint8 * max(nbytes, 1)).from_address(self.ptr)
        self.array = np.frombuffer(raw, dtype=np.uint8, count=nbytes)

    def close(self) -> None:
        """Free the memory; no queued work may still read it (true between frames)."""
        if self.ptr:
            self.array = np.zeros(0, np.uint8)
            check(driver.cuMemFreeHost(self.ptr), "cuMemFreeHost")
            self.ptr = self.device_ptr = 0


class TimingEvent:
    """A CUDA event created once with timing ENABLED, re-recorded every frame.

    The default CUDA event flag disables timing, and an elapsed-time query on such an event fails; this class
    refuses to exist without timing, and :meth:`elapsed_ms` raises on any failing query (never a silent 0 ms).
    """

    def __init__(self, device: Device) -> None:
        self._event = device.create_event(EventOptions(timing_enabled=True))
        if not self._event.is_timing_enabled:
            raise GpuError("CUDA event was created without timing although timing_enabled=True was asked")

    def record(self, stream: Stream) -> None:
        """Record the event on ``stream`` (asynchronous)."""
        stream.record(self._event)

    def elapsed_ms(self, start: "TimingEvent") -> float:
        """Milliseconds from ``start`` to this event; both must have completed (call after the frame's sync).

        Raises:
            GpuError: the query failed (event not recorded, not completed, or timing disabled).
        """
        return float(check(driver.cuEventElapsedTime(start._event.handle, self._event.handle), "cuEventElapsedTime"))

    def close(self) -> None:
        self._event.close()


class GpuRuntime:
    """One CUDA device and its primary context, shared by every pipeline of the process.

    Args:
        device_id: CUDA device ordinal.

    Attributes:
        device: the ``cuda.core.Device``.
        arch: compute capability as digits, e.g. "90" for sm_90 (kernels are compiled for it).
        counters: :class:`Counters` of syncs and allocations.
        integrated: the device reports integrated memory (``CU_DEVICE_ATTRIBUTE_INTEGRATED``: it shares the CPU's
            memory, as Jetson GPUs do) and can map host memory (``CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY``).
    """

    _by_device: dict[int, "GpuRuntime"] = {}
    _registry_lock = threading.Lock()

    def __init__(self, device_id: int = 0) -> None:
        self.device = Device(device_id)
        self.device.set_current()
        self.device_id = device_id
        self.arch = self.device.arch
        self.name = self.device.name
        self.counters = Counters()
        self._pinned_mr = LegacyPinnedMemoryResource()
        attr = driver.CUdevice_attribute
        self.integrated = all(
            check(driver.cuDeviceGetAttribute(a, device_id), f"cuDeviceGetAttribute({a.name})") == 1
            for a in (attr.CU_DEVICE_ATTRIBUTE_INTEGRATED, attr.CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY))
        log.info("CUDA device %d: %s (sm_%s%s)", device_id, self.name, self.arch,
                 ", integrated memory" if self.integrated else "")

    @classmethod
    def get(cls, device_id: int = 0) -> "GpuRuntime":
        """The process's runtime for ``device_id`` (created on first use) made current on this thread."""
        with cls._registry_lock:
            rt = cls._by_device.get(device_id)
            if rt is None:
                rt = cls._by_device[device_id] = cls(device_id)
        rt.make_current()
        return rt

    def make_current(self) -> None:
        """Bind the device's primary context to the calling thread (executor threads differ per callback)."""
        self.device.set_current()

    # --- streams and synchronisation -------------------------------------------------------------------
    def create_stream(self) -> Stream:
        """A new non-blocking stream (does not synchronise with the legacy default stream)."""
        return self.device.create_stream(options=StreamOptions(nonblocking=True))

    def sync(self, stream: Stream) -> None:
        """Wait for everything enqueued on ``stream``; counted in :attr:`counters` ``.syncs``.

        Raises:
            GpuError: the stream's work failed, with the ``CUresult`` the driver reports for the stream
                (``cuStreamQuery``) as its ``code`` (cuda.core's own error, chained, names it only in words);
                cuda.core's error as it is when the driver reports none.
        """
        with self.counters.lock:
            self.counters.syncs += 1
        try:
            stream.sync()
        except Exception as exc:
            err = _stream_error(stream)
            if err is None:
                raise
            raise GpuError(f"cuStreamSynchronize failed: {err.name}: {exc}", code=int(err), name=err.name) from exc

    # --- memory ----------------------------------------------------------------------------------------
    def device_memory_used(self) -> int:
        """Bytes of device memory in use on this device by every process (``cuMemGetInfo``: total - free)."""
        self.make_current()
        free, total = check(driver.cuMemGetInfo(), "cuMemGetInfo")
        return int(total) - int(free)

    def alloc_device(self, nbytes: int, stream: Stream) -> DeviceBuffer:
        """Allocate ``nbytes`` (>= 1) of device memory, ordered on ``stream``; counted."""
        nbytes = max(int(nbytes), 1)
        buf = self.device.memory_resource.allocate(nbytes, stream=stream)
        with self.counters.lock:
            self.counters.device_allocs += 1
            self.counters.device_bytes += nbytes
        return DeviceBuffer(buf, nbytes)

    def alloc_pinned(self, nbytes: int) -> PinnedBuffer:
        """Allocate ``nbytes`` (>= 1) of page-locked host memory; counted."""
        nbytes = max(int(nbytes), 1)
        buf = self._pinned_mr.allocate(nbytes)
        with self.counters.lock:
            self.counters.pinned_allocs += 1
            self.counters.pinned_bytes += nbytes
        return PinnedBuffer(buf, nbytes)

    def alloc_mapped(self, nbytes: int) -> MappedBuffer:
        """Allocate ``nbytes`` (>= 1) of mapped page-locked host memory (see :class:`MappedBuffer`); counted as
        pinned."""
        nbytes = max(int(nbytes), 1)
        buf = MappedBuffer(nbytes)
        with self.counters.lock:
            self.counters.pinned_allocs += 1
            self.counters.pinned_bytes += nbytes
        return buf

    @staticmethod
    def h2d(dst_ptr: int, src_ptr: int, nbytes: int, stream: Stream) -> None:
        """Asynchronous host-to-device copy on ``stream`` (``src_ptr`` should be pinned to be truly async)."""
        if nbytes > 0:
            check(driver.cuMemcpyHtoDAsync(dst_ptr, src_ptr, nbytes, stream.handle), "cuMemcpyHtoDAsync")

    @staticmethod
    def d2h(dst_ptr: int, src_ptr: int, nbytes: int, stream: Stream) -> None:
        """Asynchronous device-to-host copy on ``stream`` into pinned memory at ``dst_ptr``."""
        if nbytes > 0:
            check(driver.cuMemcpyDtoHAsync(dst_ptr, src_ptr, nbytes, stream.handle), "cuMemcpyDtoHAsync")

    @staticmethod
    def memset32(ptr: int, value: int, count: int, stream: Stream) -> None:
        """Set ``count`` 32-bit words at ``ptr`` to ``value`` asynchronously on ``stream``."""
        if count > 0:
            check(driver.cuMemsetD32Async(ptr, value, count, stream.handle), "cuMemsetD32Async")

    def timing_event(self) -> TimingEvent:
        """A new :class:`TimingEvent` (create once, record per frame)."""
        return TimingEvent(self.device)
