"""GPU per-box depth statistic (issue 25): the depth image uploaded and ``depth_box_stats`` (``kernels/depth.cu``)
run over the postprocess result on the pipeline's stream, before the frame's one synchronisation; the per-box
result comes back with the detections. The CPU reference is :func:`vrt_ros.depth.stats.box_stats` (bitwise the
same float32 values: the kernel does a radix select of the exact nearest-rank value). Oriented boxes (a pipeline
whose result rows carry ``theta``, ``theta_column`` >= 0): the pixels inside each rotated rectangle
(:func:`vrt_ros.depth.stats.rotated_cover`).

Batches: each batch slot has its own statistic rows and its own depth staging, so every slot of a batch gets its
statistic inside the batch's one synchronisation (the same kernel per slot, over that slot's result rows).

Buffers: the result (``MAX_DETECTIONS_CAPACITY`` rows of 4 floats per slot, device and pinned) is allocated once; a
slot's depth staging (pinned + device) is allocated on its first depth frame and grows to the largest depth frame
that slot has seen, never shrunk, so cameras of different sizes alternate without reallocating (a growth is logged).
"""

from __future__ import annotations

import logging

import numpy as np
from cuda.core import LaunchConfig, Stream, launch

from vrt_ros.depth.image import DepthImage
from vrt_ros.depth.stats import SPREAD_PERCENTILES, DepthJob
from vrt_ros.gpu.library import KernelLibrary
from vrt_ros.gpu.runtime import GpuRuntime
from vrt_ros.pools.keyed_cache import KeyedCache

log = logging.getLogger(__name__)

MODULE, ENTRY = "depth", "depth_box_stats"
BLOCK = 256
STATS = 4  # floats per row: valid count, p_lo, p_mid, p_hi


class GpuDepthStats:
    """The depth statistic of one pipeline (module docstring).

    Args:
        runtime: the process's GPU runtime.
        library: the kernel library.
        stream: the pipeline's stream (allocations are ordered on it).
        max_rows: most result rows (the postprocess result's capacity).
        theta_column: the result rows' column holding an oriented box's ``theta``
            (:data:`vrt_ros.gpu.postprocess.THETA_COLUMN` for ``yolov8_obb``), or -1 for axis-aligned boxes.
        slots: batch slots (the pipeline's ``max_batch``): each has its own rows and depth staging.
    """

    def __init__(self, runtime: GpuRuntime, library: KernelLibrary, stream: Stream, max_rows: int,
                 theta_column: int = -1, slots: int = 1) -> None:
        self._rt = runtime
        self.max_rows = int(max_rows)
        self.theta_column = int(theta_column)
        self.slots = max(1, int(slots))
        self._kernel = library.kernel(MODULE, ENTRY)
        self._sig = library.signature(MODULE, ENTRY)
        self._row_bytes = self.max_rows * STATS * 4  # one slot's statistic
        self._out = runtime.alloc_device(self._row_bytes * self.slots, stream)
        self._host = runtime.alloc_pinned(self._row_bytes * self.slots)
        self._pinned: list = [None] * self.slots
        self._device: list = [None] * self.slots
        self._capacity = [0] * self.slots
        self._rows = [0] * self.slots
        self.grows = 0
        self._launches = KeyedCache()  # (config, args) per slot, geometry, parameters and result layout

    def _staging(self, slot: int, nbytes: int, stream: Stream) -> None:
        if nbytes <= self._capacity[slot]:
            return
        if self._pinned[slot] is not None:
            self._pinned[slot].close()
        if self._device[slot] is not None:
            self._device[slot].close(stream)
        self._pinned[slot] = self._rt.alloc_pinned(nbytes)
        self._device[slot] = self._rt.alloc_device(nbytes, stream)
        self._capacity[slot] = nbytes
        self.grows += 1
        log.info("depth staging of slot %d: %d bytes (pinned + device), allocation %d", slot, nbytes, self.grows)

    def args(self, image: DepthImage, scale: float, range_m: tuple[float, float], percentile: float,
             result_ptr: int, result_header: int, row_stride: int, rows: int, slot: int = 0) -> tuple:
        """The kernel's arguments by name (the depth at ``slot``'s staging buffer's device address, the statistic
        into ``slot``'s rows)."""
        device = self._device[slot]
        return self._sig.args(
            depth=device.ptr if device is not None else 0, pitch=image.step, depth_w=image.width,
            depth_h=image.height, is_u16=image.encoding == "16UC1", units_per_m=image.units_per_m,
            near_m=range_m[0], far_m=range_m[1], scale=scale, result=result_ptr, result_header=result_header,
            row_stride=row_stride, theta_col=self.theta_column, max_rows=rows, p_lo=SPREAD_PERCENTILES[0], p_mid=percentile,
            p_hi=SPREAD_PERCENTILES[1], out=self._out.ptr + slot * self._row_bytes)

    def check_launches(self, result_ptr: int, result_header: int, row_stride: int) -> None:
        """Build the kernel's arguments for a nominal 16UC1 frame and check them against its ``extern "C"``
        signature (start-up; nothing is launched).

        Raises:
            KernelArgumentError: the arguments do not match the kernel's signature.
        """
        nominal = DepthImage(640, 480, "16UC1", 1280, b"")
        self._sig.check(self.args(nominal, 1.0, (0.1, 20.0), 50.0, result_ptr, result_header, row_stride, self.max_rows))

    def enqueue(self, stream: Stream, job: DepthJob, result_ptr: int, result_header: int, row_stride: int,
                rows: int, slot: int = 0) -> None:
        """Copy the depth into pinned memory, enqueue its upload, the kernel over the result's rows and the D2H of
        the statistic (read with :meth:`read` after the stream's synchronisation).

        Args:
            stream: the pipeline's stream, after the postprocess that writes the result.
            job: the paired depth frame (checked by :meth:`vrt_ros.ros.depth_input.DepthInputs.pair`, so of a known
                encoding and long enough) and the statistic's parameters.
            result_ptr: device address of the postprocess result (int32 count first).
            result_header: 32-bit words before its rows; row_stride: floats per row (x1, y1, x2, y2 first).
            rows: most rows to read (``max_detections``).
            slot: the frame's batch slot (its own staging and statistic rows).
        """
        image = job.image
        nbytes = int(image.step) * (int(image.height) - 1) + int(image.width) * (2 if image.encoding == "16UC1" else 4)
        self._staging(slot, nbytes, stream)
        pinned, device = self._pinned[slot], self._device[slot]
        pinned.array[:nbytes] = np.frombuffer(image.data, np.uint8, count=nbytes)  # the one host copy
        self._rt.h2d(device.ptr, pinned.ptr, nbytes, stream)
        n = self._rows[slot] = max(0, min(int(rows), self.max_rows))
        if n == 0:
            return
        key = (slot, image.width, image.height, image.step, image.encoding, job.scale, job.range_m, job.percentile,
               result_ptr, result_header, row_stride, n, device.ptr)
        config, args = self._launches.get(key, lambda: (
            LaunchConfig(grid=n, block=BLOCK),
            self.args(image, job.scale, job.range_m, job.percentile, result_ptr, result_header, row_stride, n, slot)))
        launch(stream, config, self._kernel, *args)
        off = slot * self._row_bytes
        self._rt.d2h(self._host.ptr + off, self._out.ptr + off, n * STATS * 4, stream)

    def read(self, n: int, slot: int = 0) -> np.ndarray:
        """``slot``'s last (n, 4) float32 statistic (valid count, p10, centre percentile, p90), from pinned memory
        (after the synchronisation; ``n`` = its detection count); the caller's own array."""
        n = min(int(n), self._rows[slot])
        off = slot * self._row_bytes
        return self._host.array[off: off + n * STATS * 4].view(np.float32).reshape(n, STATS).copy()

    def close(self, stream: Stream) -> None:
        """Free the buffers (after the stream's last frame)."""
        for buf in (self._out, *self._device):
            if buf is not None:
                buf.close(stream)
        for buf in (self._host, *self._pinned):
            if buf is not None:
                buf.close()
        self._out = self._host = None
        self._device, self._pinned = [None] * self.slots, [None] * self.slots
