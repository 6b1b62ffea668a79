"""Which decoder a compressed frame takes on the GPU path: the GPU JPEG decoder, or the CPU decode, counted per reason.

The GPU path decodes ``sensor_msgs/CompressedImage`` JPEGs straight into device memory (:mod:`vrt_ros.gpu.jpeg`,
nvImageCodec); everything the GPU decoder does not take falls back to :func:`vrt_ros.compressed.decode_compressed`
(OpenCV, the reference) and is counted under one of :data:`FALLBACK_REASONS`. This module is the routing only, pure
Python + numpy: the decoder is passed in (the real one, or a stand-in in the tests), so the fallback logic is tested
without a GPU.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from vrt_ros.compressed import decode_compressed, sniff

#: Why a compressed frame was decoded on the CPU although the GPU path runs:
#: ``no_gpu_decoder`` (nvImageCodec not installed or failed to start), ``png`` (PNG payloads: not decoded on the GPU),
#: ``bit_depth`` (a JPEG of more than 8 bits per sample), ``channels`` (a JPEG of neither 1 nor 3 components, e.g.
#: CMYK), ``gpu_refused`` (the GPU decoder could not read the header or returned no image).
FALLBACK_REASONS = ("no_gpu_decoder", "png", "bit_depth", "channels", "gpu_refused")


@dataclass(frozen=True)
class StreamInfo:
    """What the GPU decoder read from a JPEG's header.

    Attributes:
        codec: codec name as the decoder reports it (``"jpeg"``).
        width, height: image size, pixels.
        channels: colour components in the stream (1 grey, 3 YCbCr/RGB, 4 CMYK/YCCK).
        bits: bits per sample (8 for baseline JPEG, 12 for extended).
        handle: the decoder's parsed stream, passed back to ``decode`` (kept alive until the frame is done).
    """

    codec: str
    width: int
    height: int
    channels: int
    bits: int
    handle: Any = None


@dataclass(frozen=True)
class DeviceImage:
    """A decoded image in device memory: interleaved uint8, row ``y`` at ``ptr + y * pitch``.

    Attributes:
        ptr: device address of pixel (0, 0).
        width, height: pixels.
        pitch: bytes from one row to the next (>= width * channels).
        channels: 3 (RGB order) or 1 (grey).
    """

    ptr: int
    width: int
    height: int
    pitch: int
    channels: int

    @property
    def encoding(self) -> str:
        """The ``sensor_msgs`` encoding of the pixels (``rgb8`` or ``mono8``): the preprocess kernel's input."""
        return "rgb8" if self.channels == 3 else "mono8"


class GpuJpegDecoder(Protocol):
    """What :class:`CompressedRouter` needs from a GPU JPEG decoder (:class:`vrt_ros.gpu.jpeg.NvImageCodecDecoder`)."""

    name: str

    def parse(self, buf: np.ndarray) -> StreamInfo:
        """Read the header of the JPEG in ``buf`` (uint8); raises (any exception) when it cannot."""

    def decode(self, info: StreamInfo, stream: Any, slot: int = 0) -> DeviceImage | None:
        """Enqueue the decode on ``stream`` into a device image reused per (batch ``slot``, size); None when the
        decoder refuses the stream."""


class CompressedRouter:
    """Route each compressed frame to the GPU decoder or to the CPU decode, and count the CPU fallbacks.

    Args:
        decoder: the GPU JPEG decoder, or None (then every frame is decoded on the CPU, reason ``no_gpu_decoder``).
        log: called with a message the first time each fallback reason occurs (later ones are only counted).

    Attributes:
        gpu_frames: frames decoded on the GPU.
        fallbacks: CPU-decoded frames per reason (:data:`FALLBACK_REASONS`).
    """

    def __init__(self, decoder: GpuJpegDecoder | None, log: Callable[[str], None] = print) -> None:
        self.decoder = decoder
        self.gpu_frames = 0
        self.fallbacks: Counter = Counter()
        self._log = log

    def decode(self, fmt: str, data: Any, stream: Any, slot: int = 0) -> tuple[DeviceImage | np.ndarray, StreamInfo | None]:
        """Decode one ``CompressedImage`` payload.

        Args:
            fmt: the message's ``format`` field.
            data: the payload (buffer protocol); must stay alive until the frame's work on ``stream`` is done.
            stream: the pipeline's stream (the GPU decode is ordered on it).
            slot: the frame's slot in its batch: frames of one batch are decoded into different images.

        Returns:
            ``(image, info)``: a :class:`DeviceImage` (GPU decode enqueued on ``stream``; ``info`` is its parsed
            header, to keep alive until the frame's sync) or an (H, W, 3) uint8 BGR array (CPU decode; ``info``
            None).

        Raises:
            FrameError: empty, truncated, undecodable or unsupported payloads (as
                :func:`vrt_ros.compressed.decode_compressed`).
        """
        codec, buf = sniff(fmt, data)
        reason, detail, info = self._gpu_verdict(codec, buf)
        if info is not None:
            try:
                image = self.decoder.decode(info, stream, slot=slot)
            except Exception as exc:  # the decoder's own error: the CPU decode gives the frame's verdict
                image, detail = None, f"{type(exc).__name__}: {exc}"
            if image is not None:
                self.gpu_frames += 1
                return image, info
            reason, detail = "gpu_refused", detail or "the GPU decoder returned no image"
        self.fallbacks[reason] += 1
        if self.fallbacks[reason] == 1:
            self._log(f"compressed frame decoded on the CPU ({reason}: {detail}); further ones are counted")
        return decode_compressed(fmt, buf), None

    def decode_batch(self, items: Sequence[tuple[str, Any]], stream: Any,
                     slots: Sequence[int]) -> list[tuple[DeviceImage | np.ndarray, StreamInfo | None] | Exception]:
        """Decode a batch's ``CompressedImage`` payloads, each into its own slot's image.

        Args:
            items: ``(format, payload)`` per frame (payloads alive until the batch's sync).
            stream: the pipeline's stream (GPU decodes ordered on it).
            slots: each frame's slot in the batch (distinct).

        Returns:
            per item, in order: ``(image, info)`` as :meth:`decode`, or the exception that frame raised (a
            :class:`~vrt_ros.errors.FrameError` for a bad payload): one bad frame never fails the others.
        """
        out: list = []
        for (fmt, data), slot in zip(items, slots):
            try:
                out.append(self.decode(fmt, data, stream, slot))
            except Exception as exc:  # noqa: BLE001 - returned for that frame alone
                out.append(exc)
        return out

    def _gpu_verdict(self, codec: str, buf: np.ndarray) -> tuple[str, str, StreamInfo | None]:
        """``(reason, detail, None)`` when the frame goes to the CPU, else ``("", "", parsed header)``."""
        if self.decoder is None:
            return "no_gpu_decoder", "no GPU JPEG decoder (nvImageCodec) in this process", None
        if codec != "jpeg":
            return "png", f"{codec} payloads are decoded on the CPU", None
        try:
            info = self.decoder.parse(buf)
        except Exception as exc:
            return "gpu_refused", f"header not readable by {self.decoder.name}: {type(exc).__name__}: {exc}", None
        if info.bits > 8:
            return "bit_depth", f"{info.bits}-bit JPEG", None
        if info.channels not in (1, 3):
            return "channels", f"JPEG with {info.channels} components", None
        return "", "", info

    def stats(self) -> dict[str, int]:
        """``{"gpu": frames decoded on the GPU, "cpu.<reason>": CPU fallbacks per reason}``."""
        return {"gpu": self.gpu_frames, **{f"cpu.{k}": v for k, v in sorted(self.fallbacks.items())}}
