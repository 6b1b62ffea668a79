"""The one host copy of a received frame into pinned memory, multi-threaded where OpenCV can (numpy and OpenCV only).

One thread copies a 1920x1080 bgr8 frame (6.2 MB) into pinned memory in 0.55 ms p50 on the H200's host. One core
cannot use the memory bandwidth the machine has, so the copy is split over threads; Python threads would need the
GIL to start and finish each slice, which the node's executor thread often holds. OpenCV's colour conversions
run on OpenCV's own thread pool (``parallel_for_`` over row stripes, ``modules/imgproc/src/color*.cpp``), SIMD,
with the GIL released, and the channel swap BGR <-> RGB (BGRA <-> RGBA) is a copy that moves bytes within each
pixel. The preprocess kernel reads either channel order at no cost, so for 3- and 4-channel 8-bit frames of at
least :data:`PARALLEL_MIN_BYTES` the copy is that swap, and the kernel is told the swapped encoding
(:data:`SWAPS`). Other layouts (mono, 4:2:2, Bayer, 16-bit) and small frames are copied by ``np.copyto``.

Measured by ``python -m vrt_ros.bench.stages.host_copy`` on the H200's host (16 cores, 1920x1080 bgr8, a new source
buffer per frame written by another thread, results/bench/host_copy.json): ``np.copyto`` 0.60 ms p50, the swap
0.12 ms on OpenCV's 16 threads (0.20 ms on 4). The H2D copy that follows is slower after a write by many cores
(0.28 ms against 0.14 ms; presumably the copy engine reads lines still held in several cores' caches: not
verified), so copy + H2D went
from 0.70 to 0.47 ms in the pipeline benchmark; copying in row bands with each band's H2D started early was
slower (0.60 ms) and was dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from vrt_ros.intake.encodings import ENCODINGS, Encoding
from vrt_ros.types import ImageSpec

#: Frames smaller than this (bytes) are copied by one ``np.copyto``: waking OpenCV's threads costs more than it
#: saves (measured in the pipeline at 640x480 bgr8, 0.92 MB: 0.135 ms swapped against 0.063 ms).
PARALLEL_MIN_BYTES = 2 << 20

#: Encoding -> (OpenCV conversion, encoding of the copy): the copies done by a multi-threaded channel swap.
SWAPS: dict[str, tuple[int, str]] = {
    "bgr8": (cv2.COLOR_BGR2RGB, "rgb8"),
    "8UC3": (cv2.COLOR_BGR2RGB, "rgb8"),
    "rgb8": (cv2.COLOR_RGB2BGR, "bgr8"),
    "bgra8": (cv2.COLOR_BGRA2RGBA, "rgba8"),
    "rgba8": (cv2.COLOR_RGBA2BGRA, "bgra8"),
}


def image_nbytes(spec: ImageSpec, enc: Encoding) -> int:
    """Bytes a kernel reads from a raw image: every full row but the last, plus the last row's pixels."""
    return (spec.height - 1) * spec.step + spec.width * enc.bytes_per_pixel


@dataclass(frozen=True)
class CopyPlan:
    """How frames of one geometry and encoding are copied into pinned memory (made once, at the first frame).

    Attributes:
        spec: the staged image's geometry (pixels; ``step`` in bytes) and encoding name.
        enc: the staged image's row of :data:`vrt_ros.intake.encodings.ENCODINGS` (what the kernel is told).
        nbytes: bytes staged (``image_nbytes(spec, enc)``).
        code: the OpenCV channel-swap conversion (:data:`SWAPS`), or None for a plain ``np.copyto``.
    """

    spec: ImageSpec
    enc: Encoding
    nbytes: int
    code: int | None


def plan_copy(spec: ImageSpec, enc: Encoding) -> CopyPlan:
    """The copy of frames like ``spec``: a channel swap for the :data:`SWAPS` encodings from
    :data:`PARALLEL_MIN_BYTES` on, stored without row padding (``step = width * bytes_per_pixel``) in the swapped
    encoding; otherwise a byte copy keeping the frame's geometry and encoding."""
    swap = SWAPS.get(enc.name)
    if swap is None or spec.height * spec.width * enc.bytes_per_pixel < PARALLEL_MIN_BYTES:
        return CopyPlan(spec, enc, image_nbytes(spec, enc), None)
    out = ENCODINGS[swap[1]]
    staged = ImageSpec(width=spec.width, height=spec.height, encoding=out.name, step=spec.width * out.bytes_per_pixel)
    return CopyPlan(staged, out, image_nbytes(staged, out), swap[0])


def copy_frame(plan: CopyPlan, spec: ImageSpec, src: memoryview, dst: np.ndarray) -> None:
    """Copy one validated frame into ``dst`` as ``plan`` (made by :func:`plan_copy` for this geometry) says.

    Args:
        plan: the copy of this frame's geometry and encoding.
        spec: the frame's geometry (pixels; ``step`` in bytes), already validated (:func:`vrt_ros.intake.frames.validate`:
            ``src`` holds at least ``(height - 1) * step + width * bpp`` bytes).
        src: the message bytes, ``uint8`` buffer.
        dst: 1-D ``uint8`` array (the pinned buffer) of exactly ``plan.nbytes`` bytes.

    Raises:
        ValueError: ``dst`` is not the staged size.
        RuntimeError: OpenCV did not write into ``dst`` (it would have allocated instead).
    """
    if dst.size != plan.nbytes:
        raise ValueError(f"staging holds {dst.size} bytes, the frame {plan.nbytes}")
    if plan.code is None:
        np.copyto(dst, np.frombuffer(src, np.uint8, count=plan.nbytes))
        return
    h, w, bpp = spec.height, spec.width, plan.enc.bytes_per_pixel
    image = np.ndarray((h, w, bpp), np.uint8, buffer=src, strides=(spec.step, bpp, 1))
    out = dst.reshape(h, w, bpp)
    if cv2.cvtColor(image, plan.code, dst=out).ctypes.data != out.ctypes.data:
        raise RuntimeError("cv2.cvtColor did not write into the pinned buffer")
