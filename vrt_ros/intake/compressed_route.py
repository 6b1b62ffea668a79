"""Which decoder a compressed frame takes on the GPU path: the GPU JPEG decoder, or the CPU decode, counted per reason.

The GPU path decodes ``sensor_msgs/CompressedImage`` JPEGs straight into device memory (:mod:`vrt_ros.gpu.jpeg`,
nvImageCodec); everything the GPU decoder does not take falls back to :func:`vrt_ros.intake.compressed.decode_compressed`
(OpenCV, the reference) and is counted under one of :data:`FALLBACK_REASONS`. This module is the routing only, pure
Python + numpy: the decoder is passed in (the real one, or a stand-in in the tests), so the fallback logic is tested
without a GPU.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from vrt_ros.errors import FrameError
from vrt_ros.intake.compressed import decode_compressed, sniff

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
        decoder refuses the stream; raises :class:`~vrt_ros.errors.FrameError` for a frame it must drop (its image
        does not fit the byte bound), any other exception when it fails."""

    def decode_batch(self, infos: Sequence[StreamInfo], stream: Any,
                     slots: Sequence[int]) -> list[DeviceImage | FrameError | None]:
        """Enqueue the decodes of ``infos`` on ``stream`` in ONE decoder call, each into the device image reused for
        its (``slot``, size) as :meth:`decode`; per stream, its image or None when the decoder refuses that stream
        (the others are decoded), or a :class:`~vrt_ros.errors.FrameError` for a frame the decoder must drop (its
        image does not fit the byte bound). Raises (any exception) when the call as a whole fails: nothing of it
        can be trusted, the caller decodes the streams one by one."""


class CompressedRouter:
    """Route each compressed frame to the GPU decoder or to the CPU decode, and count the CPU fallbacks.

    Args:
        decoder: the GPU JPEG decoder, or None (then every frame is decoded on the CPU, reason ``no_gpu_decoder``).
        log: called with a message the first time each fallback reason occurs (later ones are only counted).

    Attributes:
        gpu_frames: frames decoded on the GPU.
        fallbacks: CPU-decoded frames per reason (:data:`FALLBACK_REASONS`).
        batch_retries: batches whose one decoder call failed as a whole, so that their JPEGs were decoded one by one
            (:meth:`decode_batch`; in :meth:`stats` as ``gpu.batch_retried`` once non-zero).
    """

    def __init__(self, decoder: GpuJpegDecoder | None, log: Callable[[str], None] = print) -> None:
        self.decoder = decoder
        self.gpu_frames = 0
        self.batch_retries = 0
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
                :func:`vrt_ros.intake.compressed.decode_compressed`).
        """
        codec, buf = sniff(fmt, data)
        reason, detail, info = self._gpu_verdict(codec, buf)
        if info is None:
            return self._on_cpu(reason, detail, fmt, buf), None
        image, detail = self._one(info, stream, slot)
        return self._answer(image, info, detail, fmt, buf)

    def decode_batch(self, items: Sequence[tuple[str, Any]], stream: Any,
                     slots: Sequence[int]) -> list[tuple[DeviceImage | np.ndarray, StreamInfo | None] | Exception]:
        """Decode a batch's ``CompressedImage`` payloads, each into its own slot's image.

        The JPEGs the GPU decoder takes go to it in ONE call (:meth:`GpuJpegDecoder.decode_batch`: nvImageCodec
        decodes a list, on several NVJPG engines at once where the chip has them); the others are decoded on the
        CPU one by one, counted per reason as in :meth:`decode`. A stream the GPU decoder refuses in the list
        (nvImageCodec answers None at its position) is tried again on its own, then decoded on the CPU
        (``gpu_refused``), whose verdict is the frame's: a corrupt JPEG fails its own frame only, and the good JPEGs
        of a hardware batch that one bad stream failed as a whole are still decoded on the GPU. When the list call fails as a whole, its JPEGs are
        decoded one by one (:meth:`decode`'s path), so the good frames are still decoded on the GPU; counted in
        :attr:`batch_retries`.

        Args:
            items: ``(format, payload)`` per frame (payloads alive until the batch's sync).
            stream: the pipeline's stream (GPU decodes ordered on it).
            slots: each frame's slot in the batch (distinct).

        Returns:
            per item, in order: ``(image, info)`` as :meth:`decode`, or the exception that frame raised (a
            :class:`~vrt_ros.errors.FrameError` for a bad payload): one bad frame never fails the others.
        """
        out: list = [None] * len(items)
        queued: list[tuple[int, StreamInfo, str, np.ndarray, int]] = []  # (item, header, format, bytes, slot)
        for k, ((fmt, data), slot) in enumerate(zip(items, slots)):
            try:
                codec, buf = sniff(fmt, data)
                reason, detail, info = self._gpu_verdict(codec, buf)
                if info is None:
                    out[k] = self._on_cpu(reason, detail, fmt, buf), None
                else:
                    queued.append((k, info, fmt, buf, int(slot)))
            except Exception as exc:  # noqa: BLE001 - returned for that frame alone
                out[k] = exc
        if not queued:
            return out
        infos, qslots = [q[1] for q in queued], [q[4] for q in queued]
        whole = ""  # the list call's own failure: nothing of it can be trusted, every stream again on its own
        try:
            images = list(self.decoder.decode_batch(infos, stream, qslots))
            if len(images) != len(infos):
                raise RuntimeError(f"{len(images)} images for {len(infos)} streams")
        except Exception as exc:  # noqa: BLE001 - the call as a whole
            images, whole = [None] * len(infos), f"{type(exc).__name__}: {exc}"
        answers = [(image, "") for image in images]
        refused = [i for i, image in enumerate(images) if image is None]
        if refused and (whole or len(infos) > 1):
            # each refused stream again on its own: a whole-call failure, or nvJPEG's hardware batch failing as a
            # whole on one bad stream (nvImageCodec 0.9 then answers None for every stream of it, H200), so the good
            # frames are still decoded on the GPU and only a bad one goes to the CPU's verdict
            self.batch_retries += 1
            if self.batch_retries == 1:
                why = (f"the GPU decoder's batch call failed ({whole})" if whole else
                       f"the GPU decoder refused {len(refused)} of a batch's {len(infos)} JPEGs")
                self._log(f"{why}; those decoded one by one; further ones are counted (gpu.batch_retried)")
            for i in refused:
                answers[i] = self._one(infos[i], stream, qslots[i])
        for (k, info, fmt, buf, _), (image, detail) in zip(queued, answers):
            try:
                out[k] = self._answer(image, info, detail, fmt, buf)
            except Exception as exc:  # noqa: BLE001 - the CPU decode's verdict on this frame alone
                out[k] = exc
        return out

    def _one(self, info: StreamInfo, stream: Any, slot: int) -> tuple[DeviceImage | FrameError | None, str]:
        """``(image or None, why not)`` from the GPU decoder for one stream; its exceptions become a refusal, but a
        :class:`FrameError` (the frame's image does not fit the byte bound) is the frame's verdict, returned."""
        try:
            return self.decoder.decode(info, stream, slot=slot), ""
        except FrameError as exc:
            return exc, ""
        except Exception as exc:  # the decoder's own error: the CPU decode gives the frame's verdict
            return None, f"{type(exc).__name__}: {exc}"

    def _answer(self, image: DeviceImage | FrameError | None, info: StreamInfo, detail: str, fmt: str,
                buf: np.ndarray) -> tuple[DeviceImage | np.ndarray, StreamInfo | None]:
        """The GPU-decoded image counted, or (refused) the CPU decode counted as ``gpu_refused`` (FrameError), or
        the decoder's FrameError raised."""
        if isinstance(image, FrameError):
            raise image
        if image is not None:
            self.gpu_frames += 1
            return image, info
        return self._on_cpu("gpu_refused", detail or "the GPU decoder returned no image", fmt, buf), None

    def _on_cpu(self, reason: str, detail: str, fmt: str, buf: np.ndarray) -> np.ndarray:
        """The CPU decode of ``buf``, counted (and logged the first time) under ``reason`` (FrameError)."""
        self.fallbacks[reason] += 1
        if self.fallbacks[reason] == 1:
            self._log(f"compressed frame decoded on the CPU ({reason}: {detail}); further ones are counted")
        return decode_compressed(fmt, buf)

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
        """``{"gpu": frames decoded on the GPU, "cpu.<reason>": CPU fallbacks per reason}``, and
        ``"gpu.batch_retried"`` (:attr:`batch_retries`) once a batch call has failed."""
        retried = {"gpu.batch_retried": self.batch_retries} if self.batch_retries else {}
        return {"gpu": self.gpu_frames, **retried, **{f"cpu.{k}": v for k, v in sorted(self.fallbacks.items())}}
