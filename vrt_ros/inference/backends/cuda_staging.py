"""Staging of a CUDA batch: every frame of a batch into its slot's device image, before the batch's engine call.

Raw and BGR frames go through the uploader (:meth:`vrt_ros.gpu.upload.Uploader.upload_batch`: validated one after
the other, host copies at the same time, H2D copies in slot order); compressed frames through the router's one
batch call (:meth:`vrt_ros.intake.compressed_route.CompressedRouter.decode_batch`, GPU JPEG decode into each slot's image
or the CPU decode, whose BGR image is then uploaded with the raw frames). The JPEG decodes are enqueued first, so
the GPU decodes while the host copies run. A frame that fails (a :class:`~vrt_ros.errors.FrameError`: invalid,
corrupt, over the frame-buffer bound) drops its own slot only; the others are compacted into engine slots
``0 .. n - 1`` in frame order. Pure orchestration: the CUDA work is the uploader's and the decoder's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from vrt_ros.errors import FrameError
from vrt_ros.intake.encodings import ENCODINGS
from vrt_ros.types import BatchFrame, BgrFrame, CompressedFrame, ImageSpec, RawFrame


@dataclass
class StagedBatch:
    """A batch after staging.

    Attributes:
        taken: per engine slot, the index of its frame in the batch (frame order).
        sources: per engine slot, ``(device_ptr, encoding row, geometry)`` of its staged image.
        faults: the frames refused, by index: their :class:`~vrt_ros.errors.FrameError`.
        infos: the GPU decoder's parsed streams, kept alive until the batch's sync.
        gpu_decoded: a frame was decoded on the GPU (the first stage is then ``decode``, else ``upload``).
        enqueued: a decode or an upload was queued on the stream (a frame refused after it, e.g. its label image did
            not fit, still needs the batch's sync before its staging is reused).
    """

    taken: list[int] = field(default_factory=list)
    sources: list[tuple] = field(default_factory=list)
    faults: dict[int, FrameError] = field(default_factory=dict)
    infos: list = field(default_factory=list)
    enqueued: bool = False
    gpu_decoded: bool = False


def bgr_spec(image: np.ndarray) -> ImageSpec:
    """The geometry of a contiguous (H, W, 3) uint8 BGR image."""
    h, w = image.shape[:2]
    return ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3)


def stage_batch(frames: Sequence[BatchFrame], upload: Any, router: Callable[[], Any], stream: Any,
                reserve: Callable[[int, tuple, bool], None], wants: Sequence[bool]) -> StagedBatch:
    """Stage ``frames`` (module docstring).

    Args:
        frames: the batch.
        upload: the pipeline's :class:`~vrt_ros.gpu.upload.Uploader`.
        router: returns the pipeline's :class:`~vrt_ros.intake.compressed_route.CompressedRouter` (made on first use).
        stream: the pipeline's stream.
        reserve: ``(engine slot, source, masks)``: takes the slot's label image when it wants masks (FrameError
            when over the bound).
        wants: per frame, whether its label image is assembled.

    Raises:
        TypeError: a frame of no batch type.
        any non-FrameError exception of a decoder: the batch fails (the caller drains the stream).
    """
    staged = StagedBatch()
    sources: dict[int, tuple] = {}
    raw: list[tuple[ImageSpec, Any, int]] = []
    compressed = [i for i, f in enumerate(frames) if isinstance(f, CompressedFrame)]
    if compressed:  # ONE decoder call for the batch's JPEGs, each into its own slot's image
        items = [(str(frames[i].format), frames[i].data) for i in compressed]
        for i, got in zip(compressed, router().decode_batch(items, stream, compressed)):
            if isinstance(got, FrameError):
                staged.faults[i] = got
            elif isinstance(got, BaseException):
                raise got
            elif isinstance(got[0], np.ndarray):  # decoded on the CPU (counted by the router): uploaded below
                raw.append((bgr_spec(got[0]), got[0], i))
            else:
                image, info = got
                staged.infos.append(info)
                staged.gpu_decoded = True
                spec = ImageSpec(width=image.width, height=image.height, encoding=image.encoding, step=image.pitch)
                sources[i] = (image.ptr, ENCODINGS[image.encoding], spec)
    for i, frame in enumerate(frames):
        if isinstance(frame, RawFrame):
            raw.append((frame.spec, frame.data, i))
        elif isinstance(frame, BgrFrame):
            image = np.ascontiguousarray(frame.image, dtype=np.uint8)
            raw.append((bgr_spec(image), image, i))
        elif not isinstance(frame, CompressedFrame):
            raise TypeError(f"a batch frame is a RawFrame, CompressedFrame or BgrFrame, not {type(frame).__name__}")
    if raw:
        for (_, _, i), got in zip(raw, upload.upload_batch(raw, stream)):
            if isinstance(got, FrameError):
                staged.faults[i] = got
            else:
                sources[i] = got
    staged.enqueued = bool(sources)
    for i in sorted(sources):
        try:
            reserve(len(staged.taken), sources[i], wants[i])
        except FrameError as exc:  # its label image does not fit: this slot only
            staged.faults[i] = exc
            continue
        staged.taken.append(i)
        staged.sources.append(sources[i])
    return staged
