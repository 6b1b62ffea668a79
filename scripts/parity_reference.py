"""The Ultralytics side of scripts/parity_ultralytics.py: build and export a model, its predictor run under vrt_ros's
conventions where they differ by design (README "Parity with Ultralytics' predictor"), and the reference detections.

Needs torch and ultralytics (8.4.x) for everything but :func:`greedy_keep`, :func:`drop_before_cap` and
:func:`long_side_angle`, which CI checks without them (test/test_parity_script.py).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

#: Ultralytics' max_det and vrt_ros's max_detections in the comparison.
MAX_DET = 300


def spread_scores(net, head, spread: float, images: np.ndarray) -> None:
    """Make the outputs depend on the input: the default initialisation fades the input out over the depth (every
    score equal to within ~1e-7, boxes fixed per anchor), so ties, not the decode, decide NMS, the cap and the
    class. The batch norms are set from a fixed random input (``momentum = 1``, one training-mode pass), then the
    last layer of each class-score and box branch is scaled so that its output, less its bias, has standard
    deviation ``spread`` on those frames (``images``: (B, 640, 640, 3) uint8 BGR)."""
    import torch

    last = [seq[-1] for name in ("cv2", "cv3", "cv4", "one2one_cv2", "one2one_cv3", "one2one_cv4")
            for seq in getattr(head, name, None) or ()]
    last += [m for m in [getattr(head, "enc_score_head", None), *(getattr(head, "dec_score_head", None) or ())] if m]
    last = [m for m in last if getattr(m, "bias", None) is not None]  # plain layers (not a Conv + BN block)
    x = torch.from_numpy(np.ascontiguousarray(images[..., ::-1].transpose(0, 3, 1, 2), np.float32) / 255.0)
    for m in net.modules():  # batch norms set from this input: every layer's output has mean 0, variance 1
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = 1.0
    net.train()
    net(x)
    seen: dict = {}
    hooks = [m.register_forward_hook(lambda m, i, o: seen.__setitem__(m, o)) for m in last]
    net.eval()
    net(x)
    for h in hooks:
        h.remove()
    for m in last:
        if m not in seen:  # not run in eval mode (RT-DETR: the decoder layers but the last)
            continue
        out = seen[m] if not isinstance(seen[m], tuple) else seen[m][0]
        bias = m.bias.view(-1, 1, 1) if out.dim() == 4 else m.bias
        std = float((out - bias).std())
        if std > 0:
            m.weight.mul_(spread / std)


def build_and_export(cls_name: str, yaml: str, export_args: dict, seed: int, bias: float, workdir: Path,
                     spread: float = 0.0, images: np.ndarray | None = None) -> Path:
    import torch
    import ultralytics

    torch.manual_seed(seed)
    model = getattr(ultralytics, cls_name)(yaml)
    head = model.model.model[-1]
    with torch.no_grad():
        for name in ("cv3", "one2one_cv3"):
            for seq in getattr(head, name, None) or ():
                seq[-1].bias.fill_(bias)
        for lin in [getattr(head, "enc_score_head", None), *(getattr(head, "dec_score_head", None) or ())]:
            if lin is not None:
                lin.bias.fill_(bias)
        if spread:
            spread_scores(model.model, head, spread, images)
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        try:
            f = model.export(format="onnx", imgsz=640, device="cpu", **export_args)
        except (TypeError, SyntaxError, KeyError) as exc:  # an older 8.x without nms=False: the deprecated argument
            if "nms" not in export_args:
                raise
            print(f"  export nms=False refused ({exc}); trying end2end=True", flush=True)
            f = model.export(format="onnx", imgsz=640, device="cpu", end2end=True)
    finally:
        os.chdir(cwd)
    return Path(workdir, f) if not Path(f).is_absolute() else Path(f)


def greedy_keep(over: np.ndarray) -> list[int]:
    """Greedy NMS on a score-ordered (N, N) bool matrix ``over[i, j]`` = box i overlaps box j above the threshold:
    the positions kept, a box dropped only by a *kept* earlier one (Ultralytics' Fast-NMS drops it by any earlier
    box, kept or not: ``(triu(ious) > t).sum(0) <= 0``)."""
    suppressed = np.zeros(len(over), bool)
    keep = []
    for p in range(len(over)):
        if not suppressed[p]:
            keep.append(p)
            suppressed[p + 1:] |= over[p, p + 1:]
    return keep


def greedy_fast_nms(boxes, scores, iou_threshold, use_triu=True, iou_func=None, exit_early=True):
    """:func:`greedy_keep` with ``TorchNMS.fast_nms``'s signature (vrt_ros's convention, :mod:`vrt_ros.boxes.rotated`):
    scores descending, ties by index, boxes (N, 5) xywhr of width or height <= 0 left out (vrt_ros drops them
    before NMS, :mod:`vrt_ros.boxes.postprocess`); returns the kept indices (torch int64)."""
    import torch

    order = np.argsort(-scores.detach().cpu().numpy(), kind="stable")
    size = boxes[:, 2:4].detach().cpu().numpy()
    order = order[(size[order] > 0).all(1)]  # vrt_ros drops a box of width or height <= 0 before NMS
    order = torch.from_numpy(order).to(boxes.device)
    if len(order) == 0:
        return order
    over = (iou_func(boxes[order], boxes[order]) > iou_threshold).cpu().numpy()
    return order[torch.as_tensor(greedy_keep(over), dtype=torch.long)]


def same_conventions() -> None:
    """Run Ultralytics' predictor under vrt_ros's conventions where they differ by design (README "Model heads",
    "Parity with Ultralytics"): rotated NMS greedy instead of Fast-NMS (``TorchNMS.fast_nms`` is only the OBB
    predictor's NMS), and segmentation detections kept when their mask is empty (Ultralytics drops them:
    ``SegmentationPredictor.construct_result``'s ``keep = masks.amax((-2, -1)) > 0``, skipped when ``_feats`` is
    set; vrt_ros publishes every detection and its label-image pixels, if any)."""
    from ultralytics.models.yolo.segment.predict import SegmentationPredictor
    from ultralytics.utils import nms

    nms.TorchNMS.fast_nms = staticmethod(greedy_fast_nms)
    if getattr(SegmentationPredictor.construct_result, "_parity", False):
        return
    original = SegmentationPredictor.construct_result

    def construct_result(self, *args, **kwargs):
        self._feats = ()  # not None: the empty-mask filter is skipped (postprocess has read it already)
        try:
            return original(self, *args, **kwargs)
        finally:
            self._feats = None

    construct_result._parity = True
    SegmentationPredictor.construct_result = construct_result


def load_reference(onnx_path: Path, cls_name: str, task: str):
    """Ultralytics' model object on the exported ONNX (its predictor runs ONNX Runtime)."""
    import ultralytics

    return getattr(ultralytics, cls_name)(str(onnx_path), **({} if cls_name == "RTDETR" else {"task": task}))


def reference(model, task: str, frame: np.ndarray, conf: float) -> dict:
    """Ultralytics' predictor on the ONNX: boxes (N, 4) xyxy, scores, classes, masks (N, H, W) bool, keypoints,
    corners (N, 4, 2) and the long-side angle of oriented boxes, in source pixels."""
    r = model.predict(frame, conf=conf, iou=0.7, max_det=MAX_DET, imgsz=640, device="cpu", retina_masks=True,
                      verbose=False)[0]
    out: dict = {}
    if task == "obb":
        o = r.obb
        xywhr = o.xywhr.cpu().numpy()
        out["corners"] = o.xyxyxyxy.cpu().numpy()
        out["theta"] = long_side_angle(xywhr[:, 2], xywhr[:, 3], xywhr[:, 4])
        half = np.stack([np.maximum(xywhr[:, 2], xywhr[:, 3]), np.minimum(xywhr[:, 2], xywhr[:, 3])], 1) / 2
        out["boxes"] = np.concatenate([xywhr[:, :2] - half, xywhr[:, :2] + half], 1)  # long-side own-axis box
        out["scores"], out["classes"] = o.conf.cpu().numpy(), o.cls.cpu().numpy().astype(int)
        h, w = frame.shape[:2]  # vrt_ros drops an oriented box whose centre is outside the image (postprocess.py)
        inside = (xywhr[:, 0] >= 0) & (xywhr[:, 0] <= w) & (xywhr[:, 1] >= 0) & (xywhr[:, 1] <= h)
        return drop_before_cap(out, inside & (xywhr[:, 2] > 0) & (xywhr[:, 3] > 0))  # and one without area
    b = r.boxes
    h, w = frame.shape[:2]  # vrt_ros clips every box to the image (as Ultralytics' YOLO predictors; RT-DETR's not)
    out["boxes"] = np.clip(b.xyxy.cpu().numpy(), 0, [w, h, w, h])
    out["scores"] = b.conf.cpu().numpy()
    out["classes"] = b.cls.cpu().numpy().astype(int)
    if r.masks is not None:
        out["masks"] = r.masks.data.cpu().numpy() > 0.5
    if r.keypoints is not None:
        out["keypoints"] = r.keypoints.data.cpu().numpy()
    # vrt_ros drops a box with no area once clipped (wholly in the padding); Ultralytics keeps it (zero height)
    return drop_before_cap(out, (out["boxes"][:, 2] > out["boxes"][:, 0]) & (out["boxes"][:, 3] > out["boxes"][:, 1]))


def drop_before_cap(out: dict, keep: np.ndarray) -> dict:
    """The reference without the detections vrt_ros does not publish by design (``keep`` False), which vrt_ros
    drops *before* its ``max_detections`` cap and Ultralytics would keep after its ``max_det``: the count dropped
    (``unpublished``) and whether the reference was capped let :func:`compare` leave vrt_ros's extra tail out."""
    out["capped"], out["unpublished"] = len(keep) >= MAX_DET, int((~keep).sum())
    for k in ("boxes", "scores", "classes", "masks", "keypoints", "corners", "theta"):
        if k in out:
            out[k] = out[k][keep]
    return out


def long_side_angle(w: np.ndarray, h: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The direction of the long side modulo pi, in [-pi/2, pi/2) (vrt_ros.boxes.rotated.canonical's convention)."""
    t = np.where(w < h, t + math.pi / 2, t)
    return np.mod(t + math.pi / 2, math.pi) - math.pi / 2
