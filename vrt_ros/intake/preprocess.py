"""CPU reference preprocessing: BGR frame -> letterboxed (or stretched), normalised CHW float32 engine input.

The GPU kernels in ``kernels/preprocess.cu`` compute the same function; tests compare them within 1e-3.
Resampling is bilinear with half-pixel centres (OpenCV ``INTER_LINEAR`` on float32 data, borders clamped), the
mapping of :mod:`vrt_ros.boxes.geometry`.
"""

from __future__ import annotations

import cv2
import numpy as np

from vrt_ros.boxes.geometry import letterbox
from vrt_ros.pools.keyed_cache import KeyedCache
from vrt_ros.types import InputSpec, Letterbox

# Tensor plane c reads BGR channel _PLANES[order][c].
_PLANES = {"bgr": (0, 1, 2), "rgb": (2, 1, 0)}
# Frame geometries whose letterbox and float32 scratch buffers are kept (one per camera resolution in use).
_GEOMETRIES = 4


class CpuPreprocessor:
    """Letterbox + normalise on the CPU into a reused (1, 3, H, W) float32 tensor.

    The letterbox and the float32 scratch buffers (the frame converted, then resized) are made on the first frame
    of each geometry and reused, so a steady stream of frames allocates nothing.

    Args:
        spec: the engine input description (size, channel order, mean, std, pad value, alignment).

    Raises:
        ValueError: unknown channel order or zero std.
    """

    def __init__(self, spec: InputSpec) -> None:
        if spec.channel_order not in _PLANES:
            raise ValueError(f"channel order {spec.channel_order!r} is not one of {tuple(_PLANES)}")
        if any(s == 0 for s in spec.std):
            raise ValueError(f"std {spec.std} contains 0")
        self.spec = spec
        self._planes = _PLANES[spec.channel_order]
        self._tensor = np.empty((1, 3, spec.height, spec.width), np.float32)
        self._mean = np.asarray(spec.mean, np.float32).reshape(3, 1, 1)
        self._std = np.asarray(spec.std, np.float32).reshape(3, 1, 1)
        self._geometries = KeyedCache(_GEOMETRIES)  # frame shape -> (letterbox, float32 frame, float32 resized)

    def _geometry(self, shape: tuple[int, ...]) -> tuple[Letterbox, np.ndarray, np.ndarray]:
        spec = self.spec
        h, w = shape[:2]
        lb = letterbox(w, h, spec.width, spec.height, spec.align, spec.resize)
        resized = (lb.resized_height, lb.resized_width) + tuple(c for c in shape[2:] if c != 1)
        return lb, np.empty(shape, np.float32), np.empty(resized, np.float32)

    def __call__(self, bgr: np.ndarray) -> tuple[np.ndarray, Letterbox]:
        """Preprocess one frame.

        Args:
            bgr: (height, width, 3) uint8 BGR image.

        Returns:
            ``(tensor, letterbox)``: the (1, 3, H, W) float32 tensor (reused: valid until the next call) and the
            geometry needed to map results back to source pixels.
        """
        spec = self.spec
        lb, frame, resized = self._geometries.get(bgr.shape, lambda: self._geometry(bgr.shape))
        np.copyto(frame, bgr)  # uint8 -> float32: resampling in float, as the GPU kernel does
        resized = cv2.resize(frame, (lb.resized_width, lb.resized_height), dst=resized, interpolation=cv2.INTER_LINEAR)
        if resized.ndim == 2:  # OpenCV drops a trailing axis of size 1 only for 1-channel input; keep 3
            resized = resized[..., None]
        t = self._tensor[0]
        t[:] = spec.pad_value
        y0, x0 = lb.pad_y, lb.pad_x
        for c, src in enumerate(self._planes):
            t[c, y0 : y0 + lb.resized_height, x0 : x0 + lb.resized_width] = resized[..., src]
        t -= self._mean
        t /= self._std  # a division, as Ultralytics' im /= 255: x * (1 / 255) differs by 1 ulp for half the x
        return self._tensor, lb
