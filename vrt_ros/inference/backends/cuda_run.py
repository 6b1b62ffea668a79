"""The part of a CUDA batch after staging: letterbox per slot -> ONE engine call -> decode / NMS / finalize per slot
-> each slot's depth statistic -> ONE D2H of every slot's result -> the batch's ONE host synchronisation -> the
detections read back, with the batch's stage times (:class:`vrt_ros.inference.backends.cuda.CudaPipeline` owns the buffers).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from vrt_ros.types import Detections, PostprocessParams

#: The stages timed by CUDA events, in order (the first is ``decode`` when a frame was decoded on the GPU).
STAGES = ("upload", "preprocess", "inference", "postprocess")


class BatchRun:
    """Runs a staged batch through the engine and the postprocess on one stream (module docstring).

    Args:
        runtime: the GPU runtime (``sync``).
        stream: the pipeline's stream.
        engine: the GPU engine (``enqueue(stream, input_ptr, output_ptrs[, batch])``).
        engine_batch: the engine input's batch dimension (-1: dynamic).
        batch_sizes: the batch sizes prepared at start-up (dynamic engines: a batch is padded to the next).
        pre: the :class:`~vrt_ros.gpu.preprocess.GpuPreprocessor`.
        post: the :class:`~vrt_ros.gpu.postprocess.GpuPostprocessor`.
        depth: the :class:`~vrt_ros.gpu.depth.GpuDepthStats`.
        events: ``len(STAGES) + 1`` timing events (event 0 is recorded by the caller before staging).
        input_ptr: the ``[slots, 3, H, W]`` engine input; ``in_slot``: its bytes per slot.
        output_ptrs: the engine outputs' bases; ``slot_outputs``: per slot, each output's address for that slot.
        result_header: 32-bit words before a result's rows (:data:`vrt_ros.gpu.postprocess.RESULT_HEADER`).
    """

    def __init__(self, runtime: Any, stream: Any, engine: Any, engine_batch: int, batch_sizes: Sequence[int],
                 pre: Any, post: Any, depth: Any, events: Sequence[Any], input_ptr: int, in_slot: int,
                 output_ptrs: tuple, slot_outputs: Sequence[tuple], result_header: int) -> None:
        self._rt, self._stream, self._engine = runtime, stream, engine
        self._engine_batch, self._sizes = engine_batch, tuple(batch_sizes)
        self._pre, self._post, self._depth, self._ev = pre, post, depth, list(events)
        self._input, self._in_slot = input_ptr, in_slot
        self._outputs, self._slot_outputs = output_ptrs, list(slot_outputs)
        self._header = result_header

    def enqueue_engine(self, frames: int) -> None:
        """The engine on ``frames`` slots, padded to the next prepared batch size (a fixed batch: its size)."""
        if self._engine_batch > 0:
            self._engine.enqueue(self._stream, self._input, self._outputs)
            return
        size = next(b for b in self._sizes if b >= frames)
        self._engine.enqueue(self._stream, self._input, self._outputs, batch=size)

    def run(self, t0: float, first_stage: str, sources: Sequence[tuple], params: PostprocessParams,
            masks: Sequence[bool], depth: Sequence[Any]) -> tuple[list[Detections], dict[str, float]]:
        """Preprocess -> engine -> postprocess -> the one sync, from the staged images ``sources`` (``(ptr,
        encoding, geometry)`` per engine slot, in slot order).

        Args:
            t0: ``time.perf_counter()`` at the call's start (``total``).
            first_stage: the name of the work between events 0 and 1 (``upload`` or ``decode``).
            sources: the staged images, one per engine slot (may be empty: nothing runs, the stream is synced).
            params: the thresholds of every slot.
            masks: per slot, assemble its label image.
            depth: per slot, its :class:`~vrt_ros.depth.stats.DepthJob` or None: the statistic is computed on
                the stream over that slot's result rows, before the one sync, and becomes its ``depth_stats``.

        Returns:
            the detections per slot (their ``timings`` the returned dict, shared), and the batch's stage times, ms.

        Raises:
            the engine's or the GPU's error; the caller drains the stream.
        """
        s, ev, post = self._stream, self._ev, self._post
        ev[1].record(s)
        lbs = [self._pre.enqueue(s, ptr, image, enc, self._input + j * self._in_slot)
               for j, (ptr, enc, image) in enumerate(sources)]
        ev[2].record(s)
        if lbs:
            self.enqueue_engine(len(lbs))
        ev[3].record(s)
        for j, lb in enumerate(lbs):
            post.enqueue_slot(s, self._slot_outputs[j], lb, params, j, masks[j])
            if depth[j] is not None:  # the slot's depth statistic over its own result rows
                self._depth.enqueue(s, depth[j], post.result_ptr + j * post.slot_stride, self._header,
                                    post.out_stride, params.max_detections, slot=j)
        if lbs:
            post.copy_back(s, len(lbs))  # every slot's result in one copy
        ev[4].record(s)
        self._rt.sync(s)  # the batch's one synchronisation
        dets = post.read_batch() if lbs else []
        for j, d in enumerate(dets):
            if depth[j] is not None:
                d.depth_stats = self._depth.read(len(d), slot=j)
        timings = {(first_stage if i == 0 else name): ev[i + 1].elapsed_ms(ev[i]) for i, name in enumerate(STAGES)}
        timings["total"] = (time.perf_counter() - t0) * 1e3
        timings["batch_size"] = float(len(lbs))
        for d in dets:  # the call's own dict (a batch's frames share it)
            d.timings = timings
        return dets, timings
