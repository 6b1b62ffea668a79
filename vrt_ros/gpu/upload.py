"""Per-camera upload: one host copy into a reused pinned staging buffer, then an async H2D copy."""

from __future__ import annotations

import logging

import numpy as np
from cuda.core import Stream

from vrt_ros.encodings import ENCODINGS, Encoding
from vrt_ros.frames import to_bgr, validate
from vrt_ros.gpu.runtime import DeviceBuffer, GpuRuntime, PinnedBuffer
from vrt_ros.types import ImageSpec

log = logging.getLogger(__name__)

BGR8 = "bgr8"  # what encodings without a GPU kernel are converted to on the CPU


def image_nbytes(spec: ImageSpec, enc: Encoding) -> int:
    """Bytes a kernel reads from a raw image: every full row but the last, plus the last row's pixels."""
    return (spec.height - 1) * spec.step + spec.width * enc.bytes_per_pixel


class Uploader:
    """Staging for one camera: a pinned buffer and a device buffer, sized on the first frame.

    They are reallocated only when the frame's geometry (width, height, step, bytes per pixel) changes; each
    reallocation is logged and counted by the runtime. Not thread-safe: one uploader per camera/pipeline.

    Args:
        runtime: the process's GPU runtime.
        name: camera name for the log.
    """

    def __init__(self, runtime: GpuRuntime, name: str = "camera") -> None:
        self._rt = runtime
        self._name = name
        self._geometry: tuple[int, int, int, int] | None = None
        self._pinned: PinnedBuffer | None = None
        self._device: DeviceBuffer | None = None
        self.reallocations = 0
        self._bgr: np.ndarray | None = None  # CPU conversion target, reused between frames

    def upload(self, spec: ImageSpec, data, stream: Stream) -> tuple[int, Encoding, ImageSpec]:
        """Validate the frame, copy it into pinned memory and enqueue the H2D copy on ``stream``.

        Encodings without a GPU kernel (``Encoding.kernel == ""``; every row of the table has one today) are
        converted to bgr8 on the CPU first (:func:`vrt_ros.frames.to_bgr`, the reference conversion, into a reused array) and
        uploaded as bgr8.

        The caller must not call again before the previous frame's work on ``stream`` completed (the pipeline
        synchronises once per frame, so this holds).

        Args:
            spec: the frame's geometry and encoding.
            data: the raw bytes (buffer protocol; ``bytes``, ``memoryview``, numpy array ...).

        Returns:
            ``(device_ptr, encoding, spec)``: where the image lies on the device (row ``y`` at
            ``ptr + y * spec.step``), and the encoding row and geometry of what was uploaded.

        Raises:
            FrameError: the frame is invalid (see :func:`vrt_ros.frames.validate`).
        """
        buf = memoryview(data).cast("B")
        enc = validate(spec, buf.nbytes)
        if not enc.kernel:
            self._bgr = to_bgr(spec, buf, self._bgr)
            spec = ImageSpec(width=spec.width, height=spec.height, encoding=BGR8, step=spec.width * 3)
            buf = memoryview(self._bgr).cast("B")
            enc = ENCODINGS[BGR8]
        n = image_nbytes(spec, enc)
        geometry = (spec.width, spec.height, spec.step, enc.bytes_per_pixel)
        if geometry != self._geometry:
            self._reallocate(geometry, n, stream)
        src = np.frombuffer(buf, dtype=np.uint8, count=n)
        np.copyto(self._pinned.array[:n], src)  # the one host copy
        self._rt.h2d(self._device.ptr, self._pinned.ptr, n, stream)
        return self._device.ptr, enc, spec

    def _reallocate(self, geometry: tuple[int, int, int, int], nbytes: int, stream: Stream) -> None:
        old = self._geometry
        self.close(stream)
        self._pinned = self._rt.alloc_pinned(nbytes)
        self._device = self._rt.alloc_device(nbytes, stream)
        self._geometry = geometry
        self.reallocations += 1
        if old is None:
            log.info("camera %s: staging buffers for %dx%d (step %d): %d bytes", self._name, *geometry[:3], nbytes)
        else:
            log.info(
                "camera %s: resolution changed %dx%d (step %d) -> %dx%d (step %d); staging reallocated, %d bytes",
                self._name, *old[:3], *geometry[:3], nbytes,
            )

    def close(self, stream: Stream | None = None) -> None:
        """Free the staging buffers; no work still pending on the stream may read them (true between frames)."""
        if self._pinned is not None:
            self._pinned.close()
            self._pinned = None
        if self._device is not None:
            self._device.close(stream)
            self._device = None
        self._geometry = None
