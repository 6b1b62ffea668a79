"""FP16 conversion for the torch engine (vrt_ros.engines.torch_half), on the CPU: BatchNorm folded into its
convolution in FP32, FP32 kept for what FP16 cannot hold, and CenterFace finding the same faces on the crowd photo in
FP16 as in FP32 (HC-10's tolerance: vrt_ros.bench.stages.torch_fp16.compare, same class and IoU >= 0.85)."""

from __future__ import annotations

import copy

import numpy as np
import pytest


def _torch_reason() -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return f"torch not importable: {exc}"
    return None


def _onnx2torch_reason() -> str | None:
    reason = _torch_reason()
    if reason is not None:
        return reason
    try:
        import onnx2torch  # noqa: F401
    except Exception as exc:  # ImportError, or a torchvision built for another torch (RuntimeError at import)
        return f"onnx2torch not importable: {type(exc).__name__}: {exc}"
    return None


needs_torch = pytest.mark.skipif(_torch_reason() is not None, reason=f"torch_half: {_torch_reason()}")


@needs_torch
def test_to_half_folds_batchnorm_and_keeps_the_rest_in_fp32():
    """Conv->BN and ConvTranspose->BN are folded (FP32, before the cast); a BN whose convolution also feeds another
    layer cannot be folded and runs in FP32, as does a layer holding a value beyond 65504; with running variances
    beyond FP16's range (as after a convolution on 0..255 pixels) the result stays within FP16 rounding of FP32,
    where a plain ``.half()`` zeroes those channels."""
    import torch
    from torch import nn

    from vrt_ros.engines.torch_half import Float32, to_half

    class Big(nn.Module):  # a leaf holding a value FP16 cannot represent
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("k", torch.tensor(1e5))

        def forward(self, x):
            return x * self.k / self.k

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.up, self.bn_up = nn.ConvTranspose2d(8, 8, 2, stride=2), nn.BatchNorm2d(8)
            self.conv2, self.bn2 = nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8)
            self.big = Big()

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            y = torch.relu(self.bn_up(self.up(y)))
            z = self.conv2(y)
            return self.big(self.bn2(z) + z)

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.rand(1, 3, 32, 32) * 255  # pixels 0..255, no normalisation (as CenterFace takes them)
    with torch.no_grad():
        h = net.conv(x)
        net.bn.running_mean.copy_(h.mean((0, 2, 3)))
        net.bn.running_var.copy_(h.var((0, 2, 3)) * 40)  # some beyond 65504
        for bn in (net.bn_up, net.bn2):
            bn.running_var.uniform_(0.5, 2.0)
    assert float(net.bn.running_var.max()) > 65504
    class Layers(torch.fx.Tracer):  # every module a layer the graph calls, as onnx2torch builds it
        def is_leaf_module(self, m, name):
            return isinstance(m, Big) or super().is_leaf_module(m, name)

    gm = torch.fx.GraphModule(net, Layers().trace(net))
    with torch.inference_mode():
        want = gm(x)
        plain = copy.deepcopy(gm).half()
        plain_nan = bool(torch.isnan(plain(x.half())).any())  # Big: inf / inf
        plain.big = nn.Identity()  # x * k / k: the identity in FP32
        naive = plain(x.half()).float()
        half = to_half(copy.deepcopy(gm))
        got = half.model(x.half())
    assert (half.folded, half.kept_fp32, half.overflow) == (2, 2, ())
    mods = dict(half.model.named_modules())
    assert not any(isinstance(m, nn.BatchNorm2d) for n, m in mods.items() if not n.endswith(".inner"))
    assert isinstance(mods["bn2"], Float32) and isinstance(mods["big"], Float32)
    assert {p.dtype for p in mods["bn2"].parameters()} == {torch.float32} and mods["big"].inner.k.dtype == torch.float32
    assert mods["conv"].weight.dtype == torch.float16 and bool(torch.isfinite(mods["conv"].weight.detach()).all())
    assert got.dtype == torch.float16
    scale = float(want.abs().max())
    err, naive_err = float((got.float() - want).abs().max()) / scale, float((naive - want).abs().max()) / scale
    print(f"relative error: to_half {err:.2e}, plain .half() {naive_err:.2e}")
    assert err <= 1e-2 and naive_err > 10 * err and plain_nan


@pytest.mark.skipif(_onnx2torch_reason() is not None, reason=f"CenterFace in torch: {_onnx2torch_reason()}")
def test_HC_10_fp16_centerface_same_faces_on_the_crowd_photo(tmp_path_factory):
    """CenterFace (onnx2torch, CPU) on the crowd photo: FP32 finds the faces ONNX Runtime finds, and the FP16 model
    made by to_half the same faces (HC-10: each scoring >= 0.45 has a same-class partner at IoU >= 0.85). A plain
    ``.half()`` does not (its first BatchNorm's running variances exceed 65504: 40 of 97 faces, H200 and CPU alike)."""
    import cv2
    import onnx
    import torch
    from onnx2torch import convert
    from test_heads import centerface_files

    from vrt_ros.inference.backends.cpu import CpuPipeline
    from vrt_ros.bench.stages.torch_fp16 import compare
    from vrt_ros.settings.config import defaults
    from vrt_ros.engines.torch_convert import fold_static_shapes
    from vrt_ros.engines.torch_half import to_half
    from vrt_ros.boxes.postprocess import finish

    model, crowd = centerface_files(tmp_path_factory)
    values = defaults()
    values.update({"model.path": str(model), "backend": "cpu", "score_threshold": 0.5, "nms_iou": 0.3,
                   "max_detections": 1000})  # as in vrt_ros.bench.stages.torch_fp16
    pipe = CpuPipeline(values)
    params = pipe._params
    tensor, lb = pipe._pre(cv2.imread(str(crowd), cv2.IMREAD_COLOR))

    def detections(outs):
        outs = [o.float().numpy() for o in outs]
        return finish(pipe.head.decode(outs, params.score_threshold), lb, params, pipe.head.applies_nms)

    gm = convert(fold_static_shapes(onnx.load(str(model)))).eval()
    n_bn = sum(isinstance(m, torch.nn.BatchNorm2d) for m in gm.modules())
    max_var = max(float(m.running_var.max()) for m in gm.modules() if isinstance(m, torch.nn.BatchNorm2d))
    x = torch.from_numpy(np.ascontiguousarray(tensor))
    with torch.inference_mode():
        d32 = detections(gm(x))
        plain = compare(d32, detections(copy.deepcopy(gm).half()(x.half())))
        half = to_half(gm)
        d16 = detections(half.model(x.half()))
    ort = compare(pipe.process_bgr(cv2.imread(str(crowd), cv2.IMREAD_COLOR)), d32)
    r = compare(d32, d16)
    print(f"BatchNorm layers {n_bn}, largest running variance {max_var:.0f}; folded {half.folded}, kept in FP32 "
          f"{half.kept_fp32}\nFP32 vs ONNX Runtime: {ort}\nto_half FP16 vs FP32: {r}\nplain .half() vs FP32: {plain}")
    assert ort["ok"] and ort["n16"] == ort["n32"]
    assert max_var > 65504 and half.folded == n_bn and half.kept_fp32 == 0
    assert r["ok"] and r["min_iou"] >= 0.85, r
    assert int((d32.scores >= 0.45).sum()) >= 50  # the crowd: the comparison is not vacuous
    assert not plain["ok"]  # the failure this conversion fixes
