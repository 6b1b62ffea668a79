"""``process_serially`` (a batch run frame by frame, :mod:`vrt_ros.inference.batch_serial`): the batch's stage times are the
sum of its frames' own, read from each frame's result, also when another caller's call ran on the same pipeline
between two of the frames (the pipeline's lock is released between them; issue 34, shared pipelines)."""

from __future__ import annotations

import numpy as np

from vrt_ros.errors import FrameError
from vrt_ros.inference.batch_serial import process_serially
from vrt_ros.types import BgrFrame, Detections


class InterleavedPipeline:
    """Each call's stage times are its frame's brightness in ms; right after each call another caller's call runs
    (its times replace ``last_timings``). An empty image is an invalid frame."""

    def __init__(self) -> None:
        self.last_timings: dict[str, float] = {}

    def process_bgr(self, image: np.ndarray) -> Detections:
        if image.size == 0:
            raise FrameError("empty image")
        dets = Detections.empty()
        dets.timings = {"inference": float(image.mean()), "batch_size": 1.0}
        self.last_timings = {"inference": 1000.0}  # the other caller's frame, run before this caller reads
        return dets


def test_a_serial_batch_sums_each_frames_own_stage_times():
    frames = [BgrFrame(np.full((4, 4, 3), v, np.uint8)) for v in (3, 5)]
    pipe = InterleavedPipeline()
    results = process_serially(pipe, [frames[0], BgrFrame(np.zeros((0, 4, 3), np.uint8)), frames[1]])
    assert isinstance(results[1], FrameError)
    want = {"inference": 3.0 + 5.0, "batch_size": 2.0}  # the two valid frames' own times; batch_size: frames run
    assert results[0].timings == want and results[2].timings == want and pipe.last_timings == want
