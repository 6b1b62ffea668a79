"""PEER — a detector node written the way Ultralytics-based rclpy nodes (e.g. yolo_ros) process a frame on the GPU.

Not vrt_ros's pipeline: a stronger comparison point than :mod:`vrt_ros.bench.stages.baseline`. Everything after the
upload runs in torch on the GPU, as Ultralytics' ``YOLO.predict`` with a CUDA device does, and the engine is the
same captured one vrt_ros uses:

1. the message viewed as an HWC uint8 array without a copy (``cv_bridge.imgmsg_to_cv2``; encodings other than
   bgr8/rgb8 converted to BGR on the CPU first, as ``imgmsg_to_cv2(msg, "bgr8")`` does);
2. a **uint8** upload: the frame copied into a reused pinned tensor (torch's multi-threaded ``copy_``), then
   ``copy_(..., non_blocking=True)`` into a reused device tensor;
3. letterbox and normalise in torch on the GPU: HWC -> CHW float32, ``F.interpolate`` (bilinear,
   ``align_corners=False``) to the letterbox size, padded with the model's pad value into the engine's static
   input, ``(x - mean) / std``, channel order as the model wants;
4. the same :class:`~vrt_ros.engines.torch.TorchEngine` CUDA graph;
5. decode in torch on the GPU (YOLOX grid decode, the formulas of :mod:`vrt_ros.heads.yolox`), a score filter by
   boolean mask (a host sync inside torch, as Ultralytics' ``non_max_suppression`` has), ``torchvision.ops``
   ``batched_nms`` (or ``nms`` when class-agnostic), the top ``max_detections``, boxes mapped to source pixels
   and clipped on the GPU, then ``.cpu()`` of the kept rows only.

YOLOX heads only (the decode in step 5 is written for its layout); other heads raise :class:`PeerUnavailable`.
torch and torchvision are imported only when a peer is built: this module stands for third-party code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vrt_ros.boxes.geometry import letterbox
from vrt_ros.intake.frames import image_view, to_bgr
from vrt_ros.types import Detections, ImageSpec, InputSpec, PostprocessParams


class PeerUnavailable(RuntimeError):
    """The peer cannot run this model or here (message says why)."""


class TorchGpuNode:
    """The peer's per-frame callback body (see the module docstring).

    Args:
        engine: the :class:`~vrt_ros.engines.torch.TorchEngine` vrt_ros uses (its ``enqueue`` with a CUDA graph).
        head: the model head; must be a YOLOX head (its ``gpu_decode()`` grid table: cell x, y, stride).
        input_spec: engine input (size, channel order, mean, std, pad value, alignment).
        params: thresholds (score, IoU, class-agnostic, max detections).

    Raises:
        PeerUnavailable: not a YOLOX head, or torchvision is not importable.
    """

    def __init__(self, engine: Any, head: Any, input_spec: InputSpec, params: PostprocessParams) -> None:
        if getattr(head, "name", "") != "yolox":
            raise PeerUnavailable(f"the torch peer decodes YOLOX heads only, not {getattr(head, 'name', head)!r}")
        try:
            import torch
            import torch.nn.functional as F
            import torchvision
        except ImportError as exc:
            raise PeerUnavailable(f"torch/torchvision not importable: {exc}") from exc
        self.torch, self.F, self.ops = torch, F, torchvision.ops
        self.engine = engine
        self.spec = input_spec
        self.params = params
        self.device = engine.device
        self.stream = torch.cuda.Stream(device=self.device)  # a CUDA graph replays on a non-default stream
        grid = head.gpu_decode().tables["grid"]  # (cells, 3): x, y, stride per cell
        self.grid = torch.as_tensor(grid, device=self.device)
        self.x_static = torch.empty(engine.inputs[0].shape, dtype=torch.float32, device=self.device)
        self.ys = [torch.empty(o.shape, dtype=torch.float32, device=self.device) for o in engine.outputs]
        self.mean = torch.tensor(input_spec.mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(input_spec.std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self._staging: dict[tuple[int, int], tuple[Any, Any]] = {}

    def _upload(self, img: np.ndarray):
        torch = self.torch
        key = img.shape[:2]
        staging = self._staging.get(key)
        if staging is None:
            host = torch.empty(img.shape, dtype=torch.uint8).pin_memory()
            staging = self._staging[key] = (host, torch.empty(img.shape, dtype=torch.uint8, device=self.device))
        host, dev = staging
        host.copy_(torch.from_numpy(img))
        dev.copy_(host, non_blocking=True)
        return dev

    def __call__(self, spec: ImageSpec, data: Any) -> Detections:
        """One frame: message bytes in, detections (source pixels, highest score first) out."""
        torch, F, s, p = self.torch, self.F, self.spec, self.params
        if spec.encoding in ("bgr8", "rgb8"):
            img, order = image_view(spec, data), spec.encoding[:3]  # cv_bridge: a view of the message
        else:
            img, order = to_bgr(spec, data), "bgr"  # cv_bridge's conversion to bgr8 on the CPU
        lb = letterbox(spec.width, spec.height, s.width, s.height, s.align, s.resize)
        with torch.cuda.stream(self.stream), torch.inference_mode():
            dev = self._upload(np.ascontiguousarray(img))
            x = dev.permute(2, 0, 1).unsqueeze(0).float()
            if order != s.channel_order:
                x = x.flip(1)
            x = F.interpolate(x, size=(lb.resized_height, lb.resized_width), mode="bilinear", align_corners=False)
            self.x_static.fill_(float(s.pad_value))
            self.x_static[:, :, lb.pad_y : lb.pad_y + lb.resized_height, lb.pad_x : lb.pad_x + lb.resized_width] = x
            self.x_static.sub_(self.mean).div_(self.std)
            self.engine.enqueue(self.stream.cuda_stream, self.x_static.data_ptr(), [y.data_ptr() for y in self.ys])
            out = self.ys[0][0]  # (cells, 5 + classes)
            cls_score, cls_id = out[:, 5:].max(dim=1)
            scores = out[:, 4] * cls_score
            keep = scores >= p.score_threshold  # boolean-mask indexing below syncs with the host (as Ultralytics)
            rows, scores, cls_id, grid = out[keep], scores[keep], cls_id[keep], self.grid[keep]
            stride = grid[:, 2]
            cx = (rows[:, 0] + grid[:, 0]) * stride
            cy = (rows[:, 1] + grid[:, 1]) * stride
            hw = torch.exp(rows[:, 2]) * stride * 0.5
            hh = torch.exp(rows[:, 3]) * stride * 0.5
            boxes = torch.stack([cx - hw, cy - hh, cx + hw, cy + hh], dim=1)
            if p.class_agnostic:
                idx = self.ops.nms(boxes, scores, p.nms_iou)
            else:
                idx = self.ops.batched_nms(boxes, scores, cls_id, p.nms_iou)
            idx = idx[: p.max_detections]
            boxes, scores, cls_id = boxes[idx], scores[idx], cls_id[idx]
            boxes[:, 0::2] = ((boxes[:, 0::2] - lb.pad_x) / lb.scale_x).clamp_(0.0, float(spec.width))
            boxes[:, 1::2] = ((boxes[:, 1::2] - lb.pad_y) / lb.scale_y).clamp_(0.0, float(spec.height))
            result = torch.cat([boxes, scores[:, None], cls_id[:, None].float()], dim=1).cpu().numpy()
        return Detections(boxes=np.ascontiguousarray(result[:, :4]), scores=np.ascontiguousarray(result[:, 4]),
                          class_ids=result[:, 5].astype(np.int32))
