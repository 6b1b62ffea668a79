"""A stand-in for the GPU JPEG decoder (:class:`vrt_ros.gpu.jpeg.NvImageCodecDecoder`) for machines without a GPU.

It reads the JPEG header with :func:`vrt_ros.intake.compressed.jpeg_header` (the SOF segment: size, components, bits per
sample, as nvImageCodec's CodeStream
reports them) and decodes with OpenCV into a reused host buffer laid out as the GPU decoder's output: interleaved
RGB with a row pitch larger than the row (256-byte aligned), whose address it returns as ``DeviceImage.ptr``.
``refuse`` makes it answer None (a stream the decoder rejects), ``fail`` makes it raise. ``decode_batch`` decodes a
list in one call as nvImageCodec's ``Decoder.decode(list)``: None at the position of a stream it cannot decode (the
others are decoded), ``fail_batch`` makes the whole call raise; ``batch_calls`` counts the calls and
``allocations`` the slot buffers created.
"""

from __future__ import annotations

import ctypes

import cv2
import numpy as np

from vrt_ros.intake.compressed import jpeg_header
from vrt_ros.intake.compressed_route import DeviceImage, StreamInfo

def undefined_quant_table(data: bytes) -> bytes:
    """The JPEG with its first component pointing at quantization table 3, which it does not define: its header
    (SOF) and end marker are intact, so it passes the CPU checks and reaches the GPU decoder, but no decoder can
    decode it (libjpeg: "Quantization table 0x03 was not defined")."""
    i = data.index(b"\xff\xc0")
    out = bytearray(data)
    out[i + 4 + 8] = 3  # SOF payload: P, Y(2), X(2), Nf, then C1, H1V1, Tq1 at offset 8
    return bytes(out)


class HostJpegDecoder:
    """Implements :class:`vrt_ros.intake.compressed_route.GpuJpegDecoder` on the host (see the module docstring)."""

    name = "host stand-in"

    def __init__(self, refuse: bool = False, fail: bool = False, fail_batch: bool = False,
                 hw_batch: bool = False) -> None:
        """``hw_batch``: one undecodable stream makes the list call answer None for every stream of it, as nvJPEG's
        hardware batch does through nvImageCodec 0.9 on the H200 ("nvjpeg error #4 (Jpeg not supported) when
        running nvjpegDecodeBatchedEx")."""
        self.refuse, self.fail, self.fail_batch, self.hw_batch = refuse, fail, fail_batch, hw_batch
        self.buffers: dict[int, np.ndarray] = {}  # per batch slot, as the GPU decoder keeps an image per slot
        self.decoded = self.allocations = self.batch_calls = 0
        self.batch_sizes: list[int] = []

    def parse(self, buf: np.ndarray) -> StreamInfo:
        width, height, comps, bits = jpeg_header(buf)
        return StreamInfo("jpeg", width, height, comps, bits, handle=buf)

    @property
    def buffer(self) -> np.ndarray:
        return self.buffers.get(0, np.zeros(0, np.uint8))

    def decode(self, info: StreamInfo, stream, slot: int = 0) -> DeviceImage | None:
        if self.fail:
            raise RuntimeError("stand-in decoder failure")
        return None if self.refuse else self._into(info, slot)

    def decode_batch(self, infos, stream, slots) -> list[DeviceImage | None]:
        self.batch_calls += 1
        self.batch_sizes.append(len(infos))
        if self.fail or self.fail_batch:
            raise RuntimeError("stand-in batch decode failure")
        out = [None if self.refuse else self._into(info, slot) for info, slot in zip(infos, slots)]
        return [None] * len(out) if self.hw_batch and any(o is None for o in out) else out

    def _into(self, info: StreamInfo, slot: int) -> DeviceImage | None:
        bgr = cv2.imdecode(info.handle, cv2.IMREAD_COLOR)
        if bgr is None:
            return None
        pitch = -(-info.width * 3 // 256) * 256
        buf = self.buffers.get(slot)
        if buf is None or buf.size < pitch * info.height:
            buf = self.buffers[slot] = np.zeros(pitch * info.height, np.uint8)
            self.allocations += 1
        rows = buf[: pitch * info.height].reshape(info.height, pitch)
        rows[:, : info.width * 3] = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB).reshape(info.height, -1)
        self.decoded += 1
        return DeviceImage(ptr=buf.ctypes.data, width=info.width, height=info.height, pitch=pitch, channels=3)

    def pixels(self, image: DeviceImage) -> np.ndarray:
        """The bytes ``image`` describes (row ``y`` at ``y * pitch``), as the preprocess kernel would read them."""
        n = image.pitch * image.height
        return np.frombuffer((ctypes.c_uint8 * n).from_address(image.ptr), np.uint8)
