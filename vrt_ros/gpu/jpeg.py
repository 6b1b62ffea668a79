"""GPU JPEG decode with nvImageCodec (optional): ``CompressedImage`` bytes → interleaved RGB in device memory.

nvImageCodec (NVIDIA, PyPI ``nvidia-nvimgcodec-cu13`` + ``nvidia-nvjpeg``; ``-cu12`` builds, and ``-tegra-cu12``
for Jetson; the ``gpu-decode`` extras of setup.py pin them) decodes a JPEG with nvJPEG (the hardware NVJPG engine
where the chip has one, else CUDA) on the stream it is given. The decoded image stays in device memory, where the
preprocess kernel reads it with its row pitch (:class:`vrt_ros.intake.compressed_route.DeviceImage`): no host decode and
no host copy of pixels. One decoded image per frame size is kept and reused (``Decoder.decode(image=...)``), so a
steady stream allocates nothing after its first frame.

The decode matches OpenCV's ``cv2.imdecode(..., IMREAD_UNCHANGED)`` (the CPU reference): no EXIF rotation, sRGB,
8 bits; pixels agree within 1 LSB (libjpeg-turbo and nvJPEG round the IDCT and the colour conversion differently).
The routing (which frames go to the CPU instead, counted per reason) is :mod:`vrt_ros.intake.compressed_route`.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Sequence

import numpy as np

from vrt_ros.errors import FrameError
from vrt_ros.intake.compressed_route import DeviceImage, StreamInfo
from vrt_ros.pools.buffer_budget import ByteBudget
from vrt_ros.pools.keyed_cache import LruPool

log = logging.getLogger(__name__)

#: Decoded-image buffers kept at first per batch slot, one per frame size (several cameras of different sizes never
#: reallocate); when an evicted (slot, size) comes back, the number kept doubles, up to :data:`MAX_SIZES_LIMIT` per
#: slot.
MAX_SIZES = 8
MAX_SIZES_LIMIT = 64
#: nvImageCodec backend choices (``BackendKind`` names, tried in order per image; "default" lets nvImageCodec choose
#: among all it has, and it then splits a list call between the NVJPG engines and CUDA: 4.8 ms for eight 1080p JPEGs
#: on the H200 against 2.6 ms on the engines alone, and the CUDA-decoded ones differ by up to 3 LSB):
#: ``hw`` the NVJPG hardware engine (A100, H100/H200, Jetson Orin), ``hybrid`` CPU Huffman + CUDA, ``gpu`` CUDA only,
#: ``hw+gpu`` the engines for every JPEG they take, CUDA for the others (and on chips without NVJPG engines).
BACKENDS = {"default": (), "hw": ("HW_GPU_ONLY",), "hybrid": ("HYBRID_CPU_GPU",), "gpu": ("GPU_ONLY",),
            "hw+hybrid": ("HW_GPU_ONLY", "HYBRID_CPU_GPU"), "hw+gpu": ("HW_GPU_ONLY", "GPU_ONLY")}
#: The backend the node uses (``results/bench/jpeg_batch.md``, H200).
DEFAULT_BACKEND = "hw+gpu"
#: Environment variable selecting one of :data:`BACKENDS` (benchmarks; unset: :data:`DEFAULT_BACKEND`).
BACKEND_ENV = "VRT_NVIMGCODEC_BACKEND"


def nvimgcodec_unavailable_reason() -> str | None:
    """Why nvImageCodec cannot be used here, or None when ``nvidia.nvimgcodec`` imports. Never raises."""
    try:
        from nvidia import nvimgcodec  # noqa: F401
    except Exception as exc:  # ImportError, or a library that fails to load
        return f"nvImageCodec is not importable ({type(exc).__name__}: {exc}); install the gpu-decode extra"
    return None


class NvImageCodecDecoder:
    """nvImageCodec JPEG decoder into reused device images (implements :class:`~vrt_ros.intake.compressed_route.GpuJpegDecoder`).

    Not thread-safe: one per pipeline, called under the pipeline's lock.

    Args:
        device_id: CUDA device ordinal (the pipeline's; the decoder runs in its primary context).
        max_sizes: decoded-image buffers kept at first (one per batch slot and frame size: give ``MAX_SIZES`` x the
            pipeline's ``max_batch``); the least recently used is released beyond it, and the number kept grows (up
            to :data:`MAX_SIZES_LIMIT` x ``max_sizes // MAX_SIZES``) when a released one comes back.
        budget: optional :class:`~vrt_ros.pools.buffer_budget.ByteBudget` (the pipeline's ``engine.frame_buffers_mb``)
            bounding the decoded images' bytes (height x width x 3 each) together with the other per-geometry
            buffers: room is made before nvImageCodec allocates a new image, and a frame whose image does not fit
            beside those its call holds is refused (FrameError ``frame_too_large``).

    Attributes:
        name: ``"nvImageCodec <version>"``.
        allocations: decoded-image buffers created (a steady stream of one size: 1); a re-allocation after an
            eviction is logged as a warning.
        batch_calls: ``Decoder.decode`` calls made with a list of several streams (:meth:`decode_batch`).

    Raises:
        ImportError: nvImageCodec not installed.
        RuntimeError: the decoder could not be created (nvImageCodec's message).
    """

    def __init__(self, device_id: int = 0, max_sizes: int = MAX_SIZES, backend: str = DEFAULT_BACKEND,
                 budget: ByteBudget | None = None) -> None:
        from nvidia import nvimgcodec

        if backend not in BACKENDS:
            raise ValueError(f"nvImageCodec backend {backend!r} is not one of {sorted(BACKENDS)}")
        self._nv = nvimgcodec
        kinds = [nvimgcodec.Backend(getattr(nvimgcodec.BackendKind, k)) for k in BACKENDS[backend]]
        self._decoder = nvimgcodec.Decoder(device_id=device_id, backends=kinds or None)
        self._params = nvimgcodec.DecodeParams(
            apply_exif_orientation=False,  # as cv2.IMREAD_UNCHANGED, the CPU reference
            color_spec=nvimgcodec.ColorSpec.SRGB,
            allow_any_depth=False,
            sample_format=nvimgcodec.SampleFormat.I_RGB,
        )
        sizes = max(1, int(max_sizes))
        slots = max(1, sizes // MAX_SIZES)
        self._images = LruPool(sizes, max(sizes, MAX_SIZES_LIMIT * slots), log.warning, "nvImageCodec decoded images",
                               budget)
        self._budget = budget
        self.allocations = self.batch_calls = 0
        self.backend = backend
        self.name = f"nvImageCodec {getattr(nvimgcodec, '__version__', '?')} ({backend} backends)"

    def parse(self, buf: np.ndarray) -> StreamInfo:
        """Read the JPEG header in ``buf`` (uint8, kept alive by the caller until the frame is done).

        Raises:
            RuntimeError, ValueError: nvImageCodec cannot parse it.
        """
        cs = self._nv.CodeStream(buf)
        bits = int(cs.precision or 8)
        return StreamInfo(codec=str(cs.codec_name), width=int(cs.width), height=int(cs.height),
                          channels=int(cs.num_channels), bits=bits, handle=cs)

    def decode(self, info: StreamInfo, stream: Any, slot: int = 0) -> DeviceImage | None:
        """Enqueue the decode of ``info`` on ``stream`` (a ``cuda.core`` Stream or a raw handle) into the image kept
        for this batch slot and frame size (created on the first frame of a size in that slot: the frames of one
        batch are all decoded before the batch's preprocess reads them).

        Returns:
            The decoded RGB image in device memory (valid in stream order until the next decode of this size), or
            None when nvImageCodec cannot decode the stream.

        Raises:
            FrameError: (``frame_too_large``) with a budget, a new image that does not fit it.
        """
        (image,) = self.decode_batch([info], stream, [slot])
        if isinstance(image, FrameError):
            raise image
        return image

    def decode_batch(self, infos: Sequence[StreamInfo], stream: Any, slots: Sequence[int]) -> list[DeviceImage | None]:
        """Enqueue the decodes of ``infos`` on ``stream`` in one ``Decoder.decode(list)`` call, each into the image
        kept for its (``slot``, frame size), as :meth:`decode` (``slots`` distinct).

        Streams of a (slot, size) seen before are decoded into their kept images (``images=[...]``): one call, no
        allocation. The first stream of a (slot, size) is decoded without an image, in a second call of the same
        batch (nvImageCodec allocates it; kept from then on), so a batch makes one call once every camera's size
        has been seen.

        Returns:
            per stream, its decoded RGB image in device memory, or None where nvImageCodec could not decode it
            (nvImageCodec answers None at that position and decodes the others), or with a budget a
            :class:`~vrt_ros.errors.FrameError` (``frame_too_large``) where a new image does not fit it (not decoded).

        Raises:
            RuntimeError, TypeError, ValueError: nvImageCodec failed the call as a whole (the caller decodes the
                streams one by one: :meth:`vrt_ros.intake.compressed_route.CompressedRouter.decode_batch`).
        """
        handle = int(getattr(stream, "handle", stream))
        keys = [(int(slot), info.width, info.height) for info, slot in zip(infos, slots)]
        kept = [self._images.get(key) for key in keys]  # each now the most recently used
        out: list[DeviceImage | FrameError | None] = [None] * len(infos)
        reuse = [k for k, image in enumerate(kept) if image is not None]
        fresh = self._room([k for k, image in enumerate(kept) if image is None], infos, out)
        if reuse:
            images = self._call([infos[k].handle for k in reuse], handle, [kept[k] for k in reuse])
            for k, image in zip(reuse, images):
                out[k] = None if image is None else _device_image(image)
        if fresh:
            images = self._call([infos[k].handle for k in fresh], handle, None)
            for k, image in zip(fresh, images):
                if image is not None:  # nvImageCodec allocated it: kept for this size (the least recently used released)
                    self._keep(keys[k], image, infos[k].width * infos[k].height * 3)
                    out[k] = _device_image(image)
        return out

    def _room(self, fresh: list[int], infos: Sequence[StreamInfo], out: list) -> list[int]:
        """With a budget, room for the new images of ``fresh`` (made before nvImageCodec allocates them): those that
        fit, in order; a :class:`FrameError` in ``out`` for each that does not."""
        if self._budget is None:
            return fresh
        fits, reserved = [], 0
        for k in fresh:
            nbytes = infos[k].width * infos[k].height * 3
            try:
                self._budget.make_room(reserved + nbytes, self._images,
                                       f"the decoded image of a {infos[k].width}x{infos[k].height} JPEG")
            except FrameError as exc:
                out[k] = exc
                continue
            reserved += nbytes
            fits.append(k)
        return fits

    def _call(self, streams: list, handle: int, images: list | None) -> list:
        """One ``Decoder.decode`` call: a single stream as nvImageCodec's single form (``image=`` one Image), several
        as its list form (``images=`` a list, one Image per stream: nvImageCodec 0.9's keyword for the list form,
        ``image=`` with a list raises TypeError there); a list of results (Image or None) either way."""
        if len(streams) == 1:
            one = self._decoder.decode(streams[0], image=None if images is None else images[0], params=self._params,
                                       cuda_stream=handle)
            return [one]
        kwargs = {} if images is None else {"images": images}
        images = self._decoder.decode(streams, params=self._params, cuda_stream=handle, **kwargs)
        self.batch_calls += 1
        return list(images)

    def _keep(self, key: tuple[int, int, int], image: Any, nbytes: int) -> None:
        again = self._images.reallocations
        self._images.add(key, lambda: image, lambda old, _image: None, nbytes)
        self.allocations += 1
        if self._images.reallocations > again:
            log.warning("decoded image for slot %d, %dx%d re-allocated (it had been released for another size)", *key)

    def close(self) -> None:
        """Release the decoded images and the decoder (no decode may be pending: call after the stream's sync)."""
        self._images.pop_all()
        self._decoder = None


def _device_image(image: Any) -> DeviceImage:
    """The :class:`DeviceImage` of an ``nvimgcodec.Image`` (its ``__cuda_array_interface__``: shape, row stride)."""
    cai = image.__cuda_array_interface__
    h, w, c = (tuple(cai["shape"]) + (1,))[:3]
    pitch = int(cai["strides"][0]) if cai.get("strides") else int(w) * int(c)
    return DeviceImage(ptr=int(cai["data"][0]), width=int(w), height=int(h), pitch=pitch, channels=int(c))


def make_decoder(device_id: int, log: Callable[[str], None] = print, max_batch: int = 1,
                 budget: ByteBudget | None = None) -> NvImageCodecDecoder | None:
    """The GPU JPEG decoder when nvImageCodec is installed and starts, else None; logs which, and why not.

    ``budget``: the pipeline's byte bound of per-geometry buffers (``engine.frame_buffers_mb``), shared by the
    decoded images (:class:`NvImageCodecDecoder`).

    Never raises: without it compressed frames are decoded on the CPU (counted as ``no_gpu_decoder``).
    """
    reason = nvimgcodec_unavailable_reason()
    if reason is None:
        try:
            decoder = NvImageCodecDecoder(device_id, max_sizes=MAX_SIZES * max(1, int(max_batch)),
                                          backend=os.environ.get(BACKEND_ENV, DEFAULT_BACKEND), budget=budget)
        except Exception as exc:
            reason = f"nvImageCodec decoder could not start: {type(exc).__name__}: {exc}"
        else:
            log(f"compressed input: JPEG decoded on the GPU ({decoder.name}, device {device_id}); PNG and "
                "anything it refuses on the CPU")
            return decoder
    log(f"compressed input: decoded on the CPU (OpenCV): {reason}")
    return None
