"""The benchmark command ``python -m vrt_ros.bench`` (a tool, not part of the node).

It replays real frames (the shared bags and photos, scaled to each size, as bgr8 and 4:2:2 YUV) through, side by
side in one run:

- the vrt_ros GPU pipeline (per-stage CUDA-event times, wall time per frame, syncs and allocations per frame);
- a typical Python detector node, the baseline (:mod:`vrt_ros.bench.stages.baseline`), with the same captured engine and
  with an eager module call;
- the vrt_ros CPU path (ONNX Runtime), for reference;
- the limits: the engine alone and the pinned H2D copy of the frame alone.

Modules: :mod:`~vrt_ros.bench.frames` (frames), :mod:`~vrt_ros.bench.stats` (percentiles),
:mod:`~vrt_ros.bench.stages.baseline` (the typical node), :mod:`~vrt_ros.bench.stages.runner` (one configuration),
:mod:`~vrt_ros.bench.stages.report` (JSON and markdown), :mod:`~vrt_ros.bench.cli` (the command). The CUDA-only
measurements live in :mod:`vrt_ros.gpu.measure`. Importing this package imports numpy only.
"""
