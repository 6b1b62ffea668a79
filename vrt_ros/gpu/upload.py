"""Per-camera upload: one host copy into a reused pinned staging buffer (:mod:`vrt_ros.gpu.host_copy`), then an
async H2D copy; on an integrated GPU with ``input.mapped_memory``, one host copy into mapped pinned memory that the
kernels read in place (no H2D copy).

A batch's raw frames (:meth:`Uploader.upload_batch`) are validated and given their staging one after the other
(cheap: no pixel is touched), then their host copies run at the same time on the uploader's copy threads (one per
batch slot; the copies release the GIL: ``np.copyto`` and OpenCV's conversions), then their H2D copies are enqueued
in slot order. Measured by ``python -m vrt_ros.bench.stages.batch_staging``.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np
from cuda.core import Stream

from vrt_ros.errors import FrameError
from vrt_ros.gpu.host_copy import CopyPlan, copy_frame, plan_copy
from vrt_ros.gpu.runtime import DeviceBuffer, GpuRuntime, MappedBuffer, PinnedBuffer
from vrt_ros.intake.encodings import ENCODINGS, Encoding
from vrt_ros.intake.frames import to_bgr, validate
from vrt_ros.pools.keyed_cache import LruPool
from vrt_ros.types import ImageSpec

log = logging.getLogger(__name__)

BGR8 = "bgr8"  # what encodings without a GPU kernel are converted to on the CPU


#: Frame geometries whose staging buffers an uploader keeps at first, per batch slot (cameras of different sizes on
#: one pipeline); the least recently used set is freed when another (slot, geometry) arrives. When a freed one comes
#: back (more cameras than that alternate), the number kept doubles, up to :data:`MAX_GEOMETRIES_LIMIT` per slot.
MAX_GEOMETRIES = 8
MAX_GEOMETRIES_LIMIT = 64


class _Staging:
    """A pinned buffer and a device buffer for frames of one geometry (or one mapped buffer, which is both), and
    how those frames are copied."""

    def __init__(self, rt: GpuRuntime, plan: CopyPlan, stream: Stream, mapped: bool) -> None:
        self.plan = plan
        self.mapped: MappedBuffer | None = rt.alloc_mapped(plan.nbytes) if mapped else None
        self.pinned: PinnedBuffer | None = None if mapped else rt.alloc_pinned(plan.nbytes)
        self.device: DeviceBuffer | None = None if mapped else rt.alloc_device(plan.nbytes, stream)
        host = self.mapped.array if self.mapped is not None else self.pinned.array
        self.host = host[: plan.nbytes]  # the copy's destination, sliced once
        # where the kernels read the frame
        self.device_ptr = self.mapped.device_ptr if self.mapped is not None else self.device.ptr

    def close(self, stream: Stream | None) -> None:
        if self.mapped is not None:
            self.mapped.close()
        else:
            self.pinned.close()
            self.device.close(stream)


class Uploader:
    """Staging for the cameras of one pipeline: a pinned buffer and a device buffer per (batch slot, frame geometry).

    Geometry = the frame's :class:`~vrt_ros.types.ImageSpec` (size, step, encoding, byte order); its copy is planned
    once (:func:`vrt_ros.gpu.host_copy.plan_copy`) with its buffers. Each geometry gets its buffers on its first frame and keeps
    them, so cameras of different sizes that alternate on one pipeline allocate nothing after their first frames
    (DESIGN.md, "The frame's path"). The frames of one batch are all copied before the batch's one sync, so each
    slot of a batch has its own staging (two cameras of the same size in one batch never share a pinned buffer):
    sets are keyed by (slot, geometry); at most ``max_batch`` x :data:`MAX_GEOMETRIES` are kept at first, the least
    recently used one freed for a new key, and more (up to ``max_batch`` x :data:`MAX_GEOMETRIES_LIMIT`) once a freed
    key comes back (:class:`~vrt_ros.pools.keyed_cache.LruPool`), so nine or more alternating cameras do not reallocate
    every frame. The sets of the batch in flight are the most recently used ones, and the pool always holds at
    least ``max_batch`` of them, so an eviction never frees a buffer a queued copy still reads. Each allocation is
    logged (a re-allocation after an eviction as a warning) and counted by the runtime. Not thread-safe: the
    pipeline serialises its frames.

    Args:
        runtime: the process's GPU runtime.
        name: pipeline/camera name for the log.
        max_batch: batch slots (the pipeline's ``max_batch``).
        mapped: stage frames in mapped pinned memory the kernels read in place, with no H2D copy (the caller
            chooses it only on an integrated GPU, :attr:`GpuRuntime.integrated`; :func:`use_mapped`).
        parallel: the host copies of a batch's frames run at the same time on copy threads; False (the default):
            one after the other on the caller's thread, measured faster on the H200 (1920x1080 bgr8, batch of 4:
            1.13 ms serial against 1.81 ms parallel, batch of 8: 2.13 against 3.14 ms; ``results/bench/
            batch_staging.json``, ``python -m vrt_ros.bench.stages.batch_staging``).
        budget: optional :class:`~vrt_ros.pools.buffer_budget.ByteBudget` bounding the staging sets' bytes (pinned +
            device; mapped memory once) together with the pipeline's label images; a frame whose set does not fit
            is refused (:class:`~vrt_ros.errors.FrameError`, reason ``frame_too_large``) before anything is copied.

    Attributes:
        reallocations: staging sets allocated (one per geometry seen, plus re-allocations after an eviction).
    """

    def __init__(self, runtime: GpuRuntime, name: str = "camera", max_batch: int = 1, mapped: bool = False,
                 budget=None, parallel: bool = False) -> None:
        self._rt = runtime
        self.parallel = bool(parallel)
        self._slots = max(1, int(max_batch))
        self._copiers: ThreadPoolExecutor | None = None  # started on the first batch of two or more frames
        self._name = name
        self.mapped = bool(mapped)
        slots = max(1, int(max_batch))
        self._staging = LruPool(MAX_GEOMETRIES * slots, MAX_GEOMETRIES_LIMIT * slots, log.warning,
                                f"{name}: staging buffers", budget)
        self.reallocations = 0
        self._bgr: dict[int, np.ndarray] = {}  # CPU conversion targets per slot, reused between frames

    @property
    def max_sets(self) -> int:
        """Staging sets kept now (``max_batch`` x :data:`MAX_GEOMETRIES` at first; grows as the class says)."""
        return self._staging.capacity

    def upload(self, spec: ImageSpec, data, stream: Stream, slot: int = 0) -> tuple[int, Encoding, ImageSpec]:
        """Validate the frame, copy it into pinned memory and enqueue the H2D copy on ``stream`` (mapped: copy it
        into mapped memory the kernels read in place; nothing is enqueued).

        3- and 4-channel 8-bit frames of 2 MiB or more are copied by a multi-threaded channel swap
        (:mod:`vrt_ros.gpu.host_copy`): what is uploaded is then the other channel order (bgr8 -> rgb8) without row
        padding, and the returned encoding and geometry say so; the kernel reads either order, so the engine input
        is the same.

        Encodings without a GPU kernel (``Encoding.kernel == ""``; every row of the table has one today) are
        converted to bgr8 on the CPU first (:func:`vrt_ros.intake.frames.to_bgr`, the reference conversion, into a reused array) and
        uploaded as bgr8.

        The caller must not upload into the same ``slot`` again before the previous batch's work on ``stream``
        completed (the pipeline synchronises once per batch, also when a batch fails, so this holds).

        Args:
            spec: the frame's geometry and encoding.
            data: the raw bytes (buffer protocol; ``bytes``, ``memoryview``, numpy array ...).
            stream: the pipeline's stream.
            slot: the frame's slot in its batch (0 for a single frame).

        Returns:
            ``(device_ptr, encoding, spec)``: where the image lies on the device (row ``y`` at
            ``ptr + y * spec.step``), and the encoding row and geometry of what was uploaded (may differ from the
            message's: see above).

        Raises:
            FrameError: the frame is invalid (see :func:`vrt_ros.intake.frames.validate`), or its staging does not fit the
                budget (reason ``frame_too_large``); nothing was enqueued.
        """
        (result,) = self.upload_batch([(spec, data, slot)], stream)
        if isinstance(result, FrameError):
            raise result
        return result

    def upload_batch(self, items: Sequence[tuple[ImageSpec, Any, int]], stream: Stream
                     ) -> list[tuple[int, Encoding, ImageSpec] | FrameError]:
        """:meth:`upload` of a batch's frames (module docstring): each ``(spec, data, slot)`` item (distinct slots)
        gives ``(device_ptr, encoding, spec)`` as :meth:`upload`, or the :class:`FrameError` refusing that frame
        alone (nothing of it enqueued); the others are staged."""
        out: list = []
        jobs = []  # (staging, spec, buffer) of the frames to copy
        for spec, data, slot in items:
            try:
                staging, spec, buf = self._stage(spec, data, slot, stream)
            except FrameError as exc:
                out.append(exc)
                continue
            jobs.append((staging, spec, buf))
            out.append((staging.device_ptr, staging.plan.enc, staging.plan.spec))
        if len(jobs) > 1 and self.parallel:  # the batch's host copies at the same time
            if self._copiers is None:
                self._copiers = ThreadPoolExecutor(self._slots, thread_name_prefix=f"{self._name}_copy")
            for done in [self._copiers.submit(copy_frame, st.plan, spec, buf, st.host) for st, spec, buf in jobs]:
                done.result()
        else:
            for st, spec, buf in jobs:
                copy_frame(st.plan, spec, buf, st.host)  # the one host copy (multi-threaded where it can be)
        for st, _, _ in jobs:  # in slot order, after every copy
            if st.mapped is None:
                self._rt.h2d(st.device.ptr, st.pinned.ptr, st.plan.nbytes, stream)
        return out

    def _stage(self, spec: ImageSpec, data: Any, slot: int, stream: Stream) -> tuple[_Staging, ImageSpec, memoryview]:
        """Validate a frame and find (or allocate) its staging: ``(staging, spec, bytes to copy)``; nothing copied.

        Raises:
            FrameError: invalid frame, or its staging over the budget.
        """
        buf = memoryview(data).cast("B")
        enc = validate(spec, buf.nbytes)
        if not enc.kernel:
            self._bgr[slot] = to_bgr(spec, buf, self._bgr.get(slot))
            spec = ImageSpec(width=spec.width, height=spec.height, encoding=BGR8, step=spec.width * 3)
            buf = memoryview(self._bgr[slot]).cast("B")
            enc = ENCODINGS[BGR8]
        key = (slot, spec)  # by batch slot and the frame's geometry and encoding
        staging = self._staging.get(key)
        if staging is None:
            staging = self._allocate(key, plan_copy(spec, enc), stream)
        return staging, spec, buf

    def _allocate(self, key: tuple[int, ImageSpec], plan: CopyPlan, stream: Stream) -> _Staging:
        slot, spec = key

        def release(old_key: tuple[int, ImageSpec], evicted: _Staging) -> None:
            old_slot, old = old_key
            evicted.close(stream)  # not one of this batch's sets (module docstring): nothing in flight reads it
            log.info("%s: staging for %dx%d %s (step %d, slot %d) freed (more than %d staging sets)", self._name,
                     old.width, old.height, old.encoding, old.step, old_slot, self._staging.capacity)

        again = self._staging.reallocations
        nbytes = plan.nbytes * (1 if self.mapped else 2)  # pinned + device, or one mapped buffer
        staging = self._staging.add(key, lambda: _Staging(self._rt, plan, stream, self.mapped), release, nbytes)
        self.reallocations += 1
        level = logging.WARNING if self._staging.reallocations > again else logging.INFO
        log.log(level, "%s: staging buffers for %dx%d %s (step %d, slot %d): %d bytes%s (%d staging sets)%s",
                self._name, spec.width, spec.height, spec.encoding, spec.step, slot, plan.nbytes,
                ", mapped pinned memory (no H2D copy)" if self.mapped else "", len(self._staging),
                " (re-allocated: it had been freed for another geometry)" if level == logging.WARNING else "")
        return staging

    def close(self, stream: Stream | None = None) -> None:
        """Free every staging buffer and stop the copy threads; no work still pending on the stream may read them
        (true between frames)."""
        copiers, self._copiers = self._copiers, None
        if copiers is not None:
            copiers.shutdown(wait=True)
        for staging in self._staging.pop_all():
            staging.close(stream)


def use_mapped(values, rt: GpuRuntime, log) -> bool:
    """``input.mapped_memory``, taken only where the device reports integrated memory (logged either way)."""
    if not values.get("input.mapped_memory"):
        return False
    if not rt.integrated:
        log(f"input.mapped_memory: ignored, {rt.name} is a discrete GPU (frames are copied to device memory)")
        return False
    log(f"input.mapped_memory: frames go to mapped pinned memory on {rt.name} (integrated memory: no H2D copy)")
    return True
