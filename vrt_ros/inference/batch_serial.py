"""What both backends share about batches (below them, in the core): the size check, a batch of one's result, and
:func:`process_serially`, a batch run one frame at a time through a pipeline that has only the single-frame methods
(a wrapper or stand-in that defines ``process``; the backends themselves run every frame through ``process_batch``).
Pure Python; the compressed decode is OpenCV's (:func:`vrt_ros.intake.compressed.decode_compressed`).
"""

from __future__ import annotations

from typing import Sequence

from vrt_ros.errors import FrameError
from vrt_ros.types import BatchFrame, BgrFrame, CompressedFrame, Detections, RawFrame

#: What :meth:`vrt_ros.inference.pipeline.Pipeline.process_batch` returns for each slot: the frame's detections, or the
#: input fault that dropped that slot.
SlotResult = Detections | FrameError


def check_batch(frames: Sequence[BatchFrame], max_batch: int) -> None:
    """Raise ValueError when ``frames`` holds more than ``max_batch`` frames (a caller's bug, not an input fault)."""
    if len(frames) > max_batch:
        raise ValueError(f"process_batch got {len(frames)} frames; this pipeline takes at most {max_batch} (max_batch)")


def batch_of_one(results: Sequence[SlotResult]) -> Detections:
    """The one frame's result of a batch of one (a pipeline's ``process`` over its ``process_batch``).

    Raises:
        FrameError: that frame's input fault.
    """
    (result,) = results
    if isinstance(result, FrameError):
        raise result
    return result


def process_serially(pipe, frames: Sequence[BatchFrame]) -> list[SlotResult]:
    """``process_batch`` one frame at a time through ``pipe.process`` / ``process_bgr`` / ``process_compressed``.

    Every frame's ``timings`` (and ``pipe.last_timings``) become the sum of the frames' stages (ms), each frame's
    read from its own result (the pipeline's lock is released between the frames: another caller's frame may run
    in between), with ``batch_size`` = frames processed. An input fault (:class:`~vrt_ros.errors.FrameError`) fills
    its slot; any other exception propagates (the batch fails, as a batched engine call would).
    """
    results: list[SlotResult] = []
    total: dict[str, float] = {}
    done = 0
    for frame in frames:
        try:
            dets = process_frame(pipe, frame)
        except FrameError as exc:
            results.append(exc)
            continue
        results.append(dets)
        done += 1
        for stage, ms in dets.timings.items():
            if stage != "batch_size":
                total[stage] = total.get(stage, 0.0) + ms
    total["batch_size"] = float(done)
    for dets in results:
        if isinstance(dets, Detections):
            dets.timings = total
    pipe.last_timings = total
    return results


def process_frame(pipe, frame: BatchFrame) -> Detections:
    """One frame through the single-frame methods of ``pipe``; a compressed frame goes to ``process_compressed``
    when the pipeline has it (the GPU path), else is decoded on the CPU and run as BGR.

    Raises:
        FrameError: the frame is invalid.
        TypeError: ``frame`` is not a batch frame type.
    """
    if isinstance(frame, RawFrame):
        return pipe.process(frame.spec, frame.data)
    if isinstance(frame, BgrFrame):
        return pipe.process_bgr(frame.image)
    if isinstance(frame, CompressedFrame):
        gpu = getattr(pipe, "process_compressed", None)
        if gpu is not None:
            return gpu(frame.format, frame.data)
        from vrt_ros.intake.compressed import decode_compressed

        return pipe.process_bgr(decode_compressed(frame.format, frame.data))
    raise TypeError(f"a batch frame is a RawFrame, CompressedFrame or BgrFrame, not {type(frame).__name__}")
