"""Per-camera upload: one host copy into a reused pinned staging buffer (:mod:`vrt_ros.gpu.host_copy`), then an
async H2D copy."""

from __future__ import annotations

import logging

import numpy as np
from cuda.core import Stream

from vrt_ros.encodings import ENCODINGS, Encoding
from vrt_ros.frames import to_bgr, validate
from vrt_ros.gpu.host_copy import CopyPlan, copy_frame, plan_copy
from vrt_ros.gpu.runtime import DeviceBuffer, GpuRuntime, PinnedBuffer
from vrt_ros.types import ImageSpec

log = logging.getLogger(__name__)

BGR8 = "bgr8"  # what encodings without a GPU kernel are converted to on the CPU


#: Frame geometries whose staging buffers an uploader keeps per batch slot (cameras of different sizes on one
#: pipeline); the least recently used set is freed when another (slot, geometry) arrives.
MAX_GEOMETRIES = 8


class _Staging:
    """A pinned buffer and a device buffer for frames of one geometry, and how those frames are copied."""

    def __init__(self, rt: GpuRuntime, plan: CopyPlan, stream: Stream) -> None:
        self.plan = plan
        self.pinned: PinnedBuffer = rt.alloc_pinned(plan.nbytes)
        self.device: DeviceBuffer = rt.alloc_device(plan.nbytes, stream)
        self.host = self.pinned.array[: plan.nbytes]  # the copy's destination, sliced once

    def close(self, stream: Stream | None) -> None:
        self.pinned.close()
        self.device.close(stream)


class Uploader:
    """Staging for the cameras of one pipeline: a pinned buffer and a device buffer per (batch slot, frame geometry).

    Geometry = the frame's :class:`~vrt_ros.types.ImageSpec` (size, step, encoding, byte order); its copy is planned
    once (:func:`vrt_ros.gpu.host_copy.plan_copy`) with its buffers. Each geometry gets its buffers on its first frame and keeps
    them, so cameras of different sizes that alternate on one pipeline allocate nothing after their first frames
    (DESIGN.md, "The frame's path"). The frames of one batch are all copied before the batch's one sync, so each
    slot of a batch has its own staging (two cameras of the same size in one batch never share a pinned buffer):
    sets are keyed by (slot, geometry), at most ``max_batch`` x :data:`MAX_GEOMETRIES` of them are kept, and the
    least recently used one is freed (logged) for a new key. Each allocation is logged and counted by the runtime.
    Not thread-safe: the pipeline serialises its frames.

    Args:
        runtime: the process's GPU runtime.
        name: pipeline/camera name for the log.
        max_batch: batch slots (the pipeline's ``max_batch``).

    Attributes:
        reallocations: staging sets allocated (one per geometry seen, plus re-allocations after an eviction).
    """

    def __init__(self, runtime: GpuRuntime, name: str = "camera", max_batch: int = 1) -> None:
        self._rt = runtime
        self._name = name
        self.max_sets = MAX_GEOMETRIES * max(1, int(max_batch))
        self._staging: dict[tuple[int, ImageSpec], _Staging] = {}  # by (slot, geometry); most recently used last
        self.reallocations = 0
        self._bgr: dict[int, np.ndarray] = {}  # CPU conversion targets per slot, reused between frames

    def upload(self, spec: ImageSpec, data, stream: Stream, slot: int = 0) -> tuple[int, Encoding, ImageSpec]:
        """Validate the frame, copy it into pinned memory and enqueue the H2D copy on ``stream``.

        3- and 4-channel 8-bit frames of 2 MiB or more are copied by a multi-threaded channel swap
        (:mod:`vrt_ros.gpu.host_copy`): what is uploaded is then the other channel order (bgr8 -> rgb8) without row
        padding, and the returned encoding and geometry say so; the kernel reads either order, so the engine input
        is the same.

        Encodings without a GPU kernel (``Encoding.kernel == ""``; every row of the table has one today) are
        converted to bgr8 on the CPU first (:func:`vrt_ros.frames.to_bgr`, the reference conversion, into a reused array) and
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
            FrameError: the frame is invalid (see :func:`vrt_ros.frames.validate`); nothing was enqueued.
        """
        buf = memoryview(data).cast("B")
        enc = validate(spec, buf.nbytes)
        if not enc.kernel:
            self._bgr[slot] = to_bgr(spec, buf, self._bgr.get(slot))
            spec = ImageSpec(width=spec.width, height=spec.height, encoding=BGR8, step=spec.width * 3)
            buf = memoryview(self._bgr[slot]).cast("B")
            enc = ENCODINGS[BGR8]
        key = (slot, spec)
        staging = self._staging.pop(key, None)
        if staging is None:
            staging = self._allocate(key, plan_copy(spec, enc), stream)
        self._staging[key] = staging  # most recently used last
        plan = staging.plan
        copy_frame(plan, spec, buf, staging.host)  # the one host copy (multi-threaded where it can be)
        self._rt.h2d(staging.device.ptr, staging.pinned.ptr, plan.nbytes, stream)
        return staging.device.ptr, plan.enc, plan.spec

    def _allocate(self, key: tuple[int, ImageSpec], plan: CopyPlan, stream: Stream) -> _Staging:
        slot, spec = key
        if len(self._staging) >= self.max_sets:
            old_slot, old = next(iter(self._staging))
            # ordered on the stream: a copy of this batch queued before still reads it until the batch's sync
            self._staging.pop((old_slot, old)).close(stream)
            log.info("%s: staging for %dx%d %s (step %d, slot %d) freed (more than %d staging sets: %d frame "
                     "geometries x batch slots)", self._name, old.width, old.height, old.encoding, old.step,
                     old_slot, self.max_sets, MAX_GEOMETRIES)
        staging = _Staging(self._rt, plan, stream)
        self.reallocations += 1
        log.info("%s: staging buffers for %dx%d %s (step %d, slot %d): %d bytes (%d staging sets)", self._name,
                 spec.width, spec.height, spec.encoding, spec.step, slot, plan.nbytes, len(self._staging) + 1)
        return staging

    def close(self, stream: Stream | None = None) -> None:
        """Free every staging buffer; no work still pending on the stream may read them (true between frames)."""
        for staging in self._staging.values():
            staging.close(stream)
        self._staging.clear()
