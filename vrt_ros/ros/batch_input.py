"""The worker's batch assembly: the frames taken from the cameras become one ``process_batch`` call's input.

Per frame, by its camera's transport (``frame.cam.transport``, so one batch may hold JPEG and raw slots):

- stale frames (header stamp older than ``input.max_age_ms``) are dropped;
- a ``compressed`` frame goes to the pipeline as it came (:class:`~vrt_ros.types.CompressedFrame`) when the
  pipeline decodes compressed frames itself (``decodes_compressed``: the GPU path, one decoder call per batch), else
  it is decoded here on the CPU, outside the pipeline lock (several nodes on one pipeline decode in parallel), and
  goes as :class:`~vrt_ros.types.BgrFrame`; a frame the CPU decode refuses is dropped (fault stage ``decode``);
- a ``raw`` frame goes as a zero-copy view of its pixels (:class:`~vrt_ros.types.RawFrame`), also when the raw-bytes
  reader made it (``input.raw_subscription``: a view into the serialized message).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from vrt_ros.faults import DECODE
from vrt_ros.ros.convert import compressed_to_bgr, image_view
from vrt_ros.ros.frame_taking import Frame
from vrt_ros.types import BatchFrame, BgrFrame, CompressedFrame, RawFrame


class BatchInput:
    """Batch assembly of one worker (module docstring).

    Args:
        clock: the node's clock (header stamp ages).
        drop: ``(camera, reason, message)``: count and log a dropped frame.
        fault: ``(camera, exception, stage)``: a failed frame, by the fault table.
    """

    def __init__(self, clock: Any, drop: Callable[..., None], fault: Callable[..., None]) -> None:
        self._clock = clock
        self._drop = drop
        self._fault = fault

    def ready(self, frames: Sequence[Frame], max_age_ms: float, gpu_decodes: bool) -> list[Frame]:
        """The frames to run: the fresh ones, each compressed frame CPU-decoded unless ``gpu_decodes``; the others
        are dropped (counted, logged)."""
        now_ns = self._clock.now().nanoseconds if max_age_ms > 0 else 0
        out = []
        for frame in frames:
            if max_age_ms > 0 and frame.stamp_ns > 0:
                age_ms = (now_ns - frame.stamp_ns) / 1e6
                if age_ms > max_age_ms:
                    self._drop(frame.cam, "stale",
                               f"header stamp is {age_ms:.0f} ms old, more than input.max_age_ms {max_age_ms:g}")
                    continue
            if frame.cam.transport == "compressed" and not gpu_decodes:
                try:
                    frame.bgr = compressed_to_bgr(frame.msg)
                except Exception as exc:  # noqa: BLE001 - classified by the fault table
                    self._fault(frame.cam, exc, DECODE)
                    continue
            out.append(frame)
        return out


def batch_frame(frame: Frame) -> BatchFrame:
    """The frame as the pipeline's batch value: its CPU-decoded image, its compressed payload (for the pipeline's
    own decode), or a zero-copy view of its raw pixels."""
    if frame.bgr is not None:
        return BgrFrame(frame.bgr)
    msg = frame.msg
    if frame.cam.transport == "compressed":
        return CompressedFrame(str(msg.format), msg.data)
    return RawFrame(*image_view(msg))
