"""Enqueue the fused preprocess kernel (``kernels/preprocess.cu``) on a stream."""

from __future__ import annotations

import numpy as np
from cuda.core import Stream, launch

from vrt_ros.boxes.geometry import letterbox
from vrt_ros.gpu.launch import cfg_2d
from vrt_ros.gpu.library import KernelLibrary
from vrt_ros.intake.encodings import BGR_INDEX, ENCODINGS, Encoding
from vrt_ros.pools.keyed_cache import CAPACITY, KeyedCache
from vrt_ros.types import ImageSpec, InputSpec, Letterbox

MODULE = "preprocess"
# Tensor plane c holds BGR channel _PLANES[channel_order][c] (as vrt_ros.intake.preprocess, the CPU reference).
_PLANES = {"bgr": (0, 1, 2), "rgb": (2, 1, 0)}
_ENTRY_SUFFIX = {"float32": "", "float16": "_f16"}
U8_ENTRY = "letterbox_u8"
YUV422_ENTRY = "letterbox_yuv422"
BAYER_ENTRY = "letterbox_bayer8"
# Byte offsets of (Y of the even pixel, U, V) inside a 4-byte 4:2:2 pixel pair, per sample order of the table.
_YUV422_LAYOUT = {"uyvy": (1, 0, 2), "yuyv": (0, 1, 3)}
# Parity (column, row) of the red sites of each Bayer pattern (ROS names the 2x2 block at (0, 0), row-major).
_BAYER_RED = {"bayer_rggb": (0, 0), "bayer_bggr": (1, 1), "bayer_gbrg": (0, 1), "bayer_grbg": (1, 0)}


class GpuPreprocessor:
    """Letterbox + normalise a raw device image into the engine input, one kernel launch per frame.

    Args:
        library: the kernel library (compiled once per process).
        spec: engine input description (size, channel order, mean, std, pad value, alignment, dtype).
        slots: batch slots (each slot's letterbox goes to its own part of the [N, 3, H, W] input: ``dst_ptr`` of
            :meth:`enqueue` is the slot's address, ``input + slot * output_nbytes``).

    Raises:
        ValueError: unknown channel order or dtype, or a zero std.
    """

    def __init__(self, library: KernelLibrary, spec: InputSpec, slots: int = 1) -> None:
        if spec.channel_order not in _PLANES:
            raise ValueError(f"channel order {spec.channel_order!r} is not one of {tuple(_PLANES)}")
        if spec.dtype not in _ENTRY_SUFFIX:
            raise ValueError(f"engine input dtype {spec.dtype!r} is not one of {tuple(_ENTRY_SUFFIX)}")
        if any(s == 0 for s in spec.std):
            raise ValueError(f"std {spec.std} contains 0")
        self.spec = spec
        self._library = library
        self._kernels = {}
        self._mean = [np.float32(m) for m in spec.mean]
        self._std = [np.float32(s) for s in spec.std]  # divided by, as Ultralytics' im /= 255 (bit-equal)
        self._pad = np.float32(spec.pad_value)
        self._suffix = _ENTRY_SUFFIX[spec.dtype]
        self._config = cfg_2d(spec.width, spec.height)
        # (kernel, args, letterbox) per frame geometry, encoding and buffers (a batch slot's own source and input)
        self._launches = KeyedCache(CAPACITY * max(1, int(slots)))
        # Compile/load now (start-up), never during a frame.
        for entry in (U8_ENTRY, YUV422_ENTRY, BAYER_ENTRY):
            self._kernel(entry)

    def _kernel(self, entry: str):
        name = entry + self._suffix
        k = self._kernels.get(name)
        if k is None:
            k = self._kernels[name] = self._library.kernel(MODULE, name)
        return k

    @property
    def output_nbytes(self) -> int:
        """Bytes of one (1, 3, H, W) slot of the engine input tensor."""
        itemsize = 2 if self.spec.dtype == "float16" else 4
        return 3 * self.spec.width * self.spec.height * itemsize

    def enqueue(self, stream: Stream, src_ptr: int, image: ImageSpec, enc: Encoding, dst_ptr: int) -> Letterbox:
        """Launch the kernel for one frame (its arguments are built once per geometry, encoding and buffers).

        Args:
            stream: the pipeline's stream.
            src_ptr: device address of the raw image (row ``y`` at ``src_ptr + y * image.step``).
            image: geometry and encoding of the raw image (already validated); ``is_bigendian`` selects the
                byte read for mono16.
            enc: the encoding's table row (``enc.kernel`` is the entry point; not "").
            dst_ptr: device address of the (1, 3, H, W) engine input.

        Returns:
            The frame's :class:`~vrt_ros.types.Letterbox`.

        Raises:
            ValueError: the row names no kernel this class launches (convert such frames to bgr8 first).
        """
        key = (src_ptr, image.width, image.height, image.step, bool(image.is_bigendian), enc.name, dst_ptr)
        kernel, args, lb = self._launches.get(key, lambda: self._prepare(src_ptr, image, enc, dst_ptr))
        launch(stream, self._config, kernel, *args)
        return lb

    def _prepare(self, src_ptr: int, image: ImageSpec, enc: Encoding, dst_ptr: int) -> tuple:
        """The kernel, its argument tuple and the letterbox of frames of this geometry and encoding."""
        spec = self.spec
        lb = letterbox(image.width, image.height, spec.width, spec.height, spec.align, spec.resize)
        planes = dict(zip(("plane0", "plane1", "plane2"), _PLANES[spec.channel_order]))  # BGR channel per plane
        if enc.kernel == YUV422_ENTRY:
            # byte offsets of Y (even pixel), U, V in a 4-byte pixel pair
            layout = dict(zip(("y_offset", "u_offset", "v_offset"), _YUV422_LAYOUT[enc.order]), **planes)
        elif enc.kernel == BAYER_ENTRY:
            # parity of the red sites' column and row
            layout = dict(zip(("red_x", "red_y"), _BAYER_RED[enc.order]), **planes)
        elif enc.kernel == U8_ENTRY and enc.order == "mono16":
            # every plane reads the sample's high byte (= sample >> 8) of each 2-byte pixel
            high = 0 if image.is_bigendian else 1
            layout = dict(channels=enc.bytes_per_pixel, plane0=high, plane1=high, plane2=high)
        elif enc.kernel == U8_ENTRY:
            order = BGR_INDEX[enc.order]
            layout = dict(channels=enc.bytes_per_pixel, **{k: order[c] for k, c in planes.items()})
        else:
            raise ValueError(f"encoding {enc.name!r} names no preprocess kernel ({enc.kernel!r})")
        mean, std = self._mean, self._std
        args = self._library.signature(MODULE, enc.kernel + self._suffix).args(
            src=src_ptr, src_w=image.width, src_h=image.height, src_step=image.step, **layout,
            dst=dst_ptr, dst_w=spec.width, dst_h=spec.height,
            pad_x=lb.pad_x, pad_y=lb.pad_y, resized_w=lb.resized_width, resized_h=lb.resized_height,
            inv_scale_x=image.width / lb.resized_width, inv_scale_y=image.height / lb.resized_height,
            pad_value=self._pad, mean0=mean[0], mean1=mean[1], mean2=mean[2],
            std0=std[0], std1=std[1], std2=std[2],
        )
        return self._kernel(enc.kernel), args, lb

    def check_launches(self) -> None:
        """Build the arguments of a nominal frame of every encoding the kernels read, and check each against its
        kernel's ``extern "C"`` signature (start-up; nothing is launched).

        Raises:
            KernelArgumentError: an argument tuple does not match its kernel's signature.
        """
        for enc in ENCODINGS.values():
            if enc.kernel:
                w, h = 64, 48
                self._prepare(0, ImageSpec(width=w, height=h, encoding=enc.name, step=w * enc.bytes_per_pixel), enc, 0)
