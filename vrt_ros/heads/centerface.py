"""CenterFace head: faces with 5 facial landmarks, decoded from stride-4 centre heatmaps.

Layout (../shared/models/SOURCES.md; Xu et al. 2020, "CenterFace: Joint Face Detection and Alignment Using Face
as Point", reference decode in github.com/Star-Clouds/CenterFace ``prj-python/centerface.py``):

- four outputs at stride 4 of the ``W x H`` engine input (sides multiples of 32), in this order
  (ONNX names ``537``, ``538``, ``539``, ``540`` in the released model):
  heatmap ``[1, 1, H/4, W/4]`` (sigmoid), scale ``[1, 2, H/4, W/4]`` (log; height = exp(s0)*4, width = exp(s1)*4),
  offset ``[1, 2, H/4, W/4]`` (o0 along y, o1 along x), landmarks ``[1, 10, H/4, W/4]``;
- a face is a heatmap peak: a cell that is the maximum of its 3x3 neighbourhood (the max-pool peak extraction of
  CenterNet, Zhou et al. 2019) and at least the score threshold;
- at peak (y, x): ``x1 = (x + o1 + 0.5)*4 - w/2``, ``y1 = (y + o0 + 0.5)*4 - h/2``, box ``(x1, y1, x1 + w, y1 + h)``;
- landmark j: ``(lm[2j+1]*w + x1, lm[2j]*h + y1)``; the model has no per-landmark confidence, so each
  landmark gets the face score.

Landmark order in the model: the eye on the image's left, the eye on the image's right, nose, left and right
mouth corner (image left first). Names here are from the person's own point of view, as for COCO keypoints,
so for a face looking at the camera the first landmark is ``right_eye``.

Input: RGB, 0..255, no normalisation, letterbox top-left, pad 0.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from vrt_ros.heads.base import Candidates, GpuDecode, Head, InputDefaults, as_float32, dim_is
from vrt_ros.types import InputSpec, TensorInfo

STRIDE = 4
#: Channels of heatmap, scale, offset, landmarks, in model order.
CHANNELS = (1, 2, 2, 10)
#: Names of the 5 landmarks in model order (person's point of view: model order is image-left first).
LANDMARKS = ("right_eye", "left_eye", "nose", "right_mouth_corner", "left_mouth_corner")


def _order(outputs: Sequence[TensorInfo]) -> tuple[int, int, int, int] | None:
    """Indices of (heatmap, scale, offset, landmarks) among 4 outputs by channel count, else None.

    The two 2-channel outputs keep their engine order (scale before offset), as in the released model.
    """
    if len(outputs) != 4 or any(len(o.shape) != 4 for o in outputs):
        return None
    chans = [o.shape[1] for o in outputs]
    if sorted(chans) != sorted(CHANNELS):
        return None
    two = [i for i, c in enumerate(chans) if c == 2]
    return chans.index(1), two[0], two[1], chans.index(10)


class CenterFaceHead(Head):
    """Decode of the four CenterFace outputs (see the module docstring)."""

    name = "centerface"
    applies_nms = True
    keypoint_names = LANDMARKS
    num_classes = 1
    INPUT_DEFAULTS = InputDefaults(
        channel_order="rgb", mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), pad_value=0.0, align="top_left"
    )

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        order = _order(outputs)
        if order is None or input_spec.width % STRIDE or input_spec.height % STRIDE:
            return False
        h, w = input_spec.height // STRIDE, input_spec.width // STRIDE
        return all(
            dim_is(o.shape[0], 1) and o.shape[2] == h and o.shape[3] == w for o in outputs
        )

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        w, h = input_spec.width, input_spec.height
        expected = (
            f"four outputs [1, c, {h // STRIDE}, {w // STRIDE}] with c = 1 (heatmap), 2 (scale), 2 (offset), "
            f"10 (landmarks) at stride {STRIDE}"
        )
        order = _order(outputs)
        if order is None or w % STRIDE or h % STRIDE:
            raise self._error(expected)
        if not all(
            dim_is(o.shape[0], 1) and dim_is(o.shape[2], h // STRIDE) and dim_is(o.shape[3], w // STRIDE)
            for o in outputs
        ):
            raise self._error(expected)
        self._idx = order
        self._h, self._w = h // STRIDE, w // STRIDE
        self._padded = np.full((self._h + 2, self._w + 2), -np.inf, np.float32)
        self._pooled = np.empty((self._h, self._w), np.float32)
        self._lock = threading.Lock()  # the two buffers are reused: one decode at a time per head

    def _peaks(self, heat: np.ndarray, score_threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """(ys, xs) of cells that are their 3x3 neighbourhood's maximum and >= the threshold."""
        h, w = self._h, self._w
        pad, pooled = self._padded, self._pooled
        with self._lock:
            pad[1:-1, 1:-1] = heat
            pooled[...] = pad[0:h, 0:w]
            for dy in range(3):
                for dx in range(3):
                    if dy or dx:
                        np.fmax(pooled, pad[dy : dy + h, dx : dx + w], out=pooled)
            return np.nonzero((heat >= score_threshold) & (heat >= pooled))

    def gpu_decode(self) -> GpuDecode:
        """``decode_centerface``: one thread per heatmap pixel (2-D launch); the four outputs found by name."""
        i_heat, i_scale, i_off, i_lm = self._idx
        w, h, k = self._w, self._h, self.num_keypoints
        return GpuDecode("decode_centerface", (w, h), args=lambda out, tables: dict(
            heat=out[i_heat], scale=out[i_scale], offset=out[i_off], landmarks=out[i_lm], w=w, h=h, stride=STRIDE,
            num_keypoints=k))

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        i_heat, i_scale, i_off, i_lm = self._idx
        heat = as_float32(outputs[i_heat])[0, 0]
        ys, xs = self._peaks(heat, score_threshold)
        scale = as_float32(outputs[i_scale])[0][:, ys, xs]  # (2, M)
        off = as_float32(outputs[i_off])[0][:, ys, xs]
        lm = as_float32(outputs[i_lm])[0][:, ys, xs]  # (10, M)
        with np.errstate(over="ignore", invalid="ignore"):
            bh = np.exp(scale[0]) * STRIDE
            bw = np.exp(scale[1]) * STRIDE
        x1 = (xs + off[1] + 0.5) * STRIDE - bw * 0.5
        y1 = (ys + off[0] + 0.5) * STRIDE - bh * 0.5
        boxes = np.stack([x1, y1, x1 + bw, y1 + bh], axis=1).astype(np.float32)
        scores = heat[ys, xs].astype(np.float32)
        kpts = np.empty((len(ys), len(LANDMARKS), 3), np.float32)
        kpts[:, :, 0] = (lm[1::2] * bw + x1).T
        kpts[:, :, 1] = (lm[0::2] * bh + y1).T
        kpts[:, :, 2] = scores[:, None]
        return Candidates(boxes=boxes, scores=scores, class_ids=np.zeros(len(ys), np.int32), keypoints=kpts)
