"""A stand-in for the GPU JPEG decoder (:class:`vrt_ros.gpu.jpeg.NvImageCodecDecoder`) for machines without a GPU.

It reads the JPEG header itself (the SOF segment: size, components, bits per sample, as nvImageCodec's CodeStream
reports them) and decodes with OpenCV into a reused host buffer laid out as the GPU decoder's output: interleaved
RGB with a row pitch larger than the row (256-byte aligned), whose address it returns as ``DeviceImage.ptr``.
``refuse`` makes it answer None (a stream the decoder rejects), ``fail`` makes it raise.
"""

from __future__ import annotations

import ctypes

import cv2
import numpy as np

from vrt_ros.compressed_route import DeviceImage, StreamInfo

_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def jpeg_header(buf: np.ndarray) -> tuple[int, int, int, int]:
    """``(width, height, components, bits)`` from the first SOF segment of a JPEG (ITU T.81 B.2.2).

    Raises:
        ValueError: no SOF segment before the scan (not a readable JPEG header).
    """
    data = buf.tobytes()
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            raise ValueError(f"no marker at byte {i}")
        marker = data[i + 1]
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if marker in _SOF:
            bits, height, width, comps = data[i + 4], int.from_bytes(data[i + 5:i + 7], "big"), \
                int.from_bytes(data[i + 7:i + 9], "big"), data[i + 9]
            return width, height, comps, bits
        if marker == 0xDA:
            break
        i += 2 + length
    raise ValueError("no SOF segment before the scan")


class HostJpegDecoder:
    """Implements :class:`vrt_ros.compressed_route.GpuJpegDecoder` on the host (see the module docstring)."""

    name = "host stand-in"

    def __init__(self, refuse: bool = False, fail: bool = False) -> None:
        self.refuse, self.fail = refuse, fail
        self.buffers: dict[int, np.ndarray] = {}  # per batch slot, as the GPU decoder keeps an image per slot
        self.decoded = 0

    def parse(self, buf: np.ndarray) -> StreamInfo:
        width, height, comps, bits = jpeg_header(buf)
        return StreamInfo("jpeg", width, height, comps, bits, handle=buf)

    @property
    def buffer(self) -> np.ndarray:
        return self.buffers.get(0, np.zeros(0, np.uint8))

    def decode(self, info: StreamInfo, stream, slot: int = 0) -> DeviceImage | None:
        if self.fail:
            raise RuntimeError("stand-in decoder failure")
        if self.refuse:
            return None
        bgr = cv2.imdecode(info.handle, cv2.IMREAD_COLOR)
        if bgr is None:
            return None
        pitch = -(-info.width * 3 // 256) * 256
        buf = self.buffers.get(slot)
        if buf is None or buf.size < pitch * info.height:
            buf = self.buffers[slot] = np.zeros(pitch * info.height, np.uint8)
        rows = buf[: pitch * info.height].reshape(info.height, pitch)
        rows[:, : info.width * 3] = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB).reshape(info.height, -1)
        self.decoded += 1
        return DeviceImage(ptr=buf.ctypes.data, width=info.width, height=info.height, pitch=pitch, channels=3)

    def pixels(self, image: DeviceImage) -> np.ndarray:
        """The bytes ``image`` describes (row ``y`` at ``y * pitch``), as the preprocess kernel would read them."""
        n = image.pitch * image.height
        return np.frombuffer((ctypes.c_uint8 * n).from_address(image.ptr), np.uint8)
