"""BASELINE — a typical Python detector node's frame path, written the way such nodes commonly are.

This is NOT vrt_ros's pipeline: it is the comparison point of the benchmark, written on purpose the way public
rclpy detector nodes usually look (cv_bridge + OpenCV + torch + numpy), and not optimised:

1. the message converted to a numpy array **with a copy** (as ``cv_bridge.imgmsg_to_cv2`` does), 4:2:2 YUV
   converted to BGR with ``cv2.cvtColor``;
2. letterbox with ``cv2.resize`` (uint8, ``INTER_LINEAR``) onto a fresh padded canvas, channel swap, ``astype``
   float32, mean/std, HWC -> CHW, all on the CPU;
3. a **pageable** upload: ``torch.from_numpy(x).cuda()``;
4. the same model on the GPU: either the same captured engine as vrt_ros (a :class:`~vrt_ros.engines.torch.TorchEngine`
   CUDA graph, fed by a copy into its static input on a side stream) or an eager call of the converted module;
5. the **full raw output** copied to the host (``.cpu().numpy()``);
6. decode + NMS in numpy: :mod:`vrt_ros.heads` and :func:`vrt_ros.boxes.postprocess.finish` (the reference).

The engine input geometry, channel order, mean, std and pad value are the model's (the pipeline's ``input_spec``),
so both paths compute the same detections. torch is imported lazily here, only when a baseline is built: this
module stands for third-party code and is not part of the node's layers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.postprocess import finish
from vrt_ros.types import Detections, ImageSpec, InputSpec, PostprocessParams

#: The baseline's two rows: the same CUDA-graph engine as vrt_ros, and an eager module call.
MODES = ("captured", "eager")


class TypicalNode:
    """The baseline's per-frame callback body (see the module docstring).

    Args:
        engine: the :class:`~vrt_ros.engines.torch.TorchEngine` vrt_ros uses (its ``model``, ``inputs``,
            ``outputs``; for ``captured``, its :meth:`enqueue`, which captures a CUDA graph on first use).
        head: the model head (numpy reference decode).
        input_spec: the engine input (size, channel order, mean, std, pad value, alignment).
        params: thresholds.
        mode: ``"captured"`` or ``"eager"``.

    Raises:
        ValueError: unknown mode.
    """

    def __init__(self, engine: Any, head: Any, input_spec: InputSpec, params: PostprocessParams, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {MODES}")
        import torch

        self.torch = torch
        self.engine = engine
        self.head = head
        self.spec = input_spec
        self.params = params
        self.mode = mode
        self.device = engine.device
        self.out_shapes = [tuple(o.shape) for o in engine.outputs]
        self.mean = np.asarray(input_spec.mean, np.float32)
        self.std = np.asarray(input_spec.std, np.float32)
        self.pad = int(np.clip(round(input_spec.pad_value), 0, 255))  # uint8 canvas, as such nodes draw it
        if mode == "captured":
            # static input/outputs for the graph, and the non-default stream a graph needs
            self.stream = torch.cuda.Stream(device=self.device)
            inp = engine.inputs[0]
            self.x_static = torch.empty(inp.shape, dtype=torch.float32, device=self.device)
            self.ys = [torch.empty(o.shape, dtype=torch.float32, device=self.device) for o in engine.outputs]

    def __call__(self, spec: ImageSpec, data: Any) -> Detections:
        """One frame: message bytes in, detections (source pixels) out."""
        import cv2

        torch = self.torch
        s = self.spec
        # 1. message -> numpy, with a copy (cv_bridge)
        bpp = 2 if spec.encoding in ("yuv422", "uyvy") else 3
        rows = np.frombuffer(data, np.uint8, count=spec.height * spec.step).reshape(spec.height, spec.step)
        img = rows[:, : spec.width * bpp].reshape(spec.height, spec.width, bpp).copy()
        if bpp == 2:
            img = cv2.cvtColor(img, cv2.COLOR_YUV2BGR_UYVY)
        # 2. letterbox + normalise on the CPU
        lb = letterbox(spec.width, spec.height, s.width, s.height, s.align, s.resize)
        resized = cv2.resize(img, (lb.resized_width, lb.resized_height), interpolation=cv2.INTER_LINEAR)
        canvas = np.full((s.height, s.width, 3), self.pad, np.uint8)
        canvas[lb.pad_y : lb.pad_y + lb.resized_height, lb.pad_x : lb.pad_x + lb.resized_width] = resized
        if s.channel_order == "rgb":
            canvas = canvas[..., ::-1]
        x = ((canvas.astype(np.float32) - self.mean) / self.std).transpose(2, 0, 1)[None]
        x = np.ascontiguousarray(x, dtype=np.float32)
        # 3. pageable upload
        xt = torch.from_numpy(x).cuda(self.device)
        # 4-5. the model, full raw outputs to the host
        with torch.inference_mode():
            if self.mode == "captured":
                self.stream.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(self.stream):
                    self.x_static.copy_(xt)
                    self.engine.enqueue(self.stream.cuda_stream, self.x_static.data_ptr(), [y.data_ptr() for y in self.ys])
                    outs = [y.cpu().numpy() for y in self.ys]
            else:
                out = self.engine.model(xt)
                out = out if isinstance(out, (list, tuple)) else (out,)
                outs = [o.reshape(shape).cpu().numpy() for o, shape in zip(out, self.out_shapes)]
        # 6. decode + NMS in numpy
        cands = self.head.decode(outs, self.params.score_threshold)
        return finish(cands, lb, self.params, self.head.applies_nms)


def torch_allocations(device: Any = None) -> int:
    """Cumulative count of torch caching-allocator allocations on ``device`` (0 when torch has no CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return 0
    return int(torch.cuda.memory_stats(device).get("allocation.all.allocated", 0))


def torch_version() -> str | None:
    """torch's version, or None when it is not importable."""
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)
