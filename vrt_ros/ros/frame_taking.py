"""The node's frames between the subscription callbacks and the worker thread: each camera's newest frame waits in
its slot, and the worker takes the next batch of them (:class:`FrameSlots`; the planning is
:class:`vrt_ros.inference.batching.BatchPlanner`'s, the same for one frame or ``max_batch``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from vrt_ros.inference.batching import BatchPlanner
from vrt_ros.ros.camera import Camera, header_stamp_ns


@dataclass
class Frame:
    """One frame taken from a camera's slot.

    Attributes:
        cam: its camera (``cam.transport``: ``raw`` or ``compressed``, the kind of ``msg``).
        msg: the ``sensor_msgs/Image`` or ``CompressedImage`` (or what the raw-bytes reader made of it).
        arrived: ``time.monotonic()`` when it reached the callback, s.
        stamp_ns: its header stamp, ns since the epoch (0: unset).
        bgr: the CPU-decoded image (HxWx3 uint8) of a compressed frame the pipeline does not decode itself.
        depth: with depth input, its paired depth or the refusal (:meth:`vrt_ros.ros.depth_input.DepthInputs.pair`).
    """

    cam: Camera
    msg: Any
    arrived: float
    stamp_ns: int = 0
    bgr: np.ndarray | None = None
    depth: Any = None


class FrameSlots:
    """The cameras' newest-frame slots of one worker, guarded by one condition (notified when a frame arrives).

    Args:
        cameras: the node's cameras, in parameter order.
        max_batch: most frames per batch (the pipeline's ``max_batch``; 1: one camera's frame at a time, in turn).
        batch_wait_ms: ``input.batch_wait_ms``: longest wait for other cameras' frames to join a batch.

    Attributes:
        planner: the batch planner (turn-taking and the wait bound).
        batch_wait_ms: the last batch's wait for other cameras, ms.
    """

    def __init__(self, cameras: Sequence[Camera], max_batch: int, batch_wait_ms: float = 0.0) -> None:
        self.cameras = list(cameras)
        self.cond = threading.Condition()  # guards every camera's slot and stopping
        self.stopping = True
        self.planner = BatchPlanner(len(self.cameras), max_batch, batch_wait_ms)
        self._index = {id(cam): i for i, cam in enumerate(self.cameras)}
        self.batch_wait_ms = 0.0

    def start(self) -> None:
        with self.cond:
            self.stopping = False

    def stop(self) -> None:
        """Take no further frame; wakes a waiting :meth:`take`, which returns ``[]``."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    def put(self, cam: Camera, msg: Any, now: float) -> None:
        """Count a received frame of ``cam`` and make ``msg`` its newest (a frame still waiting is superseded);
        ``msg`` None: counted as received only (its bytes were refused)."""
        with self.cond:
            with cam.slot_lock:
                cam.counters.received += 1
                cam.last_frame_mono = now
                if msg is not None and cam.slot is not None:
                    cam.counters.dropped["superseded"] += 1
            if msg is not None:
                cam.slot = (msg, now)
                self.planner.arrived(self._index[id(cam)], now)
                self.cond.notify()

    def take(self) -> list[Frame]:
        """Block until a camera has a frame, wait as the planner says (new frames wake it), then take the planner's
        pick of the waiting cameras' frames (1 .. ``max_batch``, in turn); ``[]`` once stopping."""
        cameras, planner = self.cameras, self.planner
        with self.cond:
            while True:
                while not self.stopping and all(c.slot is None for c in cameras):
                    self.cond.wait()
                if self.stopping:
                    return []
                started = time.monotonic()
                while True:
                    ready = [i for i, c in enumerate(cameras) if c.slot is not None]
                    if self.stopping or not ready:
                        break
                    now = time.monotonic()
                    wait = planner.wait_s(ready, min(cameras[i].slot[1] for i in ready), now)
                    if wait <= 0:
                        break
                    self.cond.wait(timeout=wait)
                if self.stopping:
                    return []
                if not ready:  # the waiting frames were discarded while the batch waited: wait for the next one
                    continue
                self.batch_wait_ms = (time.monotonic() - started) * 1e3
                taken = []
                for i in planner.pick(ready):
                    cam = cameras[i]
                    (msg, arrived), cam.slot = cam.slot, None
                    taken.append(Frame(cam, msg, arrived, header_stamp_ns(msg.header)))
                return taken

    def discard(self, reason: str) -> None:
        """Drop the frames still waiting in the slots, counted under ``reason`` (not logged)."""
        with self.cond:
            for cam in self.cameras:
                if cam.slot is not None:
                    cam.slot = None
                    with cam.slot_lock:
                        cam.counters.dropped[reason] += 1
