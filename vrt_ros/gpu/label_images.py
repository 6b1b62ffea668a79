"""The label images of instance masks (:mod:`vrt_ros.gpu.masks`): a device image and its pinned host copy per
(batch slot, frame size), kept in a bounded pool like the staging sets (:class:`~vrt_ros.pools.keyed_cache.LruPool`:
:data:`~vrt_ros.gpu.upload.MAX_GEOMETRIES` per slot at first, growing to
:data:`~vrt_ros.gpu.upload.MAX_GEOMETRIES_LIMIT` when an evicted size comes back) and, with the pipeline's
:class:`~vrt_ros.pools.buffer_budget.ByteBudget`, bounded in bytes together with the staging sets. Cameras of a few sizes
allocate nothing after their first frames; a camera whose size changes on every frame reuses a bounded set.

An evicted image is freed at once: its device memory stream-ordered, its pinned copy immediately, which is safe
because the images of the call in progress are held by the budget and an earlier call's label image was copied
out of pinned memory before that call returned (:meth:`vrt_ros.gpu.masks.GpuMasks.read`).
"""

from __future__ import annotations

import logging

from cuda.core import Stream

from vrt_ros.gpu.runtime import DeviceBuffer, GpuRuntime, PinnedBuffer
from vrt_ros.gpu.upload import MAX_GEOMETRIES, MAX_GEOMETRIES_LIMIT
from vrt_ros.pools.keyed_cache import LruPool

log = logging.getLogger(__name__)


class LabelImages:
    """Device + pinned label images per (slot, frame size).

    Args:
        runtime: the GPU runtime.
        label_bytes: bytes per pixel (1 for mono8, 2 for mono16).
        max_batch: batch slots.
        budget: optional byte bound shared with the staging sets.
    """

    def __init__(self, runtime: GpuRuntime, label_bytes: int, max_batch: int = 1, budget=None) -> None:
        self._rt = runtime
        self._label_bytes = int(label_bytes)
        slots = max(1, int(max_batch))
        self._pool = LruPool(MAX_GEOMETRIES * slots, MAX_GEOMETRIES_LIMIT * slots, log.warning,
                             "label images of instance masks", budget)

    @property
    def allocations(self) -> int:
        """Label images allocated so far (each size's first, and each re-allocation after an eviction)."""
        return self._pool.allocations

    def __len__(self) -> int:
        return len(self._pool)

    def get(self, slot: int, height: int, width: int, stream: Stream) -> tuple[DeviceBuffer, PinnedBuffer]:
        """The (device, pinned) label image of ``slot`` for ``height`` x ``width`` frames, allocated on first use.

        Raises:
            FrameError: (reason ``frame_too_large``) it does not fit the budget beside the call's other buffers.
        """
        key = (int(slot), int(height), int(width))
        image = self._pool.get(key)
        if image is None:
            nbytes = int(height) * int(width) * self._label_bytes

            def release(old_key, old) -> None:
                old[0].close(stream)  # stream-ordered; the pinned copy is no longer read (module docstring)
                old[1].close()
                log.info("label image for slot %d, %dx%d freed (more than %d kept, or for the byte bound)",
                         old_key[0], old_key[2], old_key[1], self._pool.capacity)

            image = self._pool.add(key, lambda: (self._rt.alloc_device(nbytes, stream), self._rt.alloc_pinned(nbytes)),
                                   release, 2 * nbytes)
        return image

    def close(self, stream: Stream) -> None:
        """Free every image (after the stream's last frame completed)."""
        for dev, host in self._pool.pop_all():
            dev.close(stream)
            host.close()
