"""Half-precision conversion of a torch model for the torch engine's FP16 mode (``engine.fp16``).

A plain ``model.half()`` casts every parameter and buffer to FP16, whose largest finite value is 65504. A BatchNorm
layer that is not fused into its convolution (what onnx2torch gives for an ONNX ``BatchNormalization``) keeps its
``running_var``, and after a convolution on a 0..255 input that variance can exceed 65504: CenterFace's first
BatchNorm has two channels with running variances 96999 and ~83000 (activation standard deviations ~250-275). In
FP16 they become ``inf``, ``weight / sqrt(inf + eps)`` is 0, and those two channels carry only their bias from then on;
the error grows through the network to 50 % of the outputs' range (40 of the crowd photo's 97 faces instead of 97).
The 1155 running variances below FP16's normal range (6.1e-5) are harmless by comparison (4e-4 relative error per
layer), and activations stay far below 65504 (at most 1110).

The rule here is the one TensorRT and ONNX Runtime apply when they build an inference graph, plus FP32 for what
half precision cannot hold:

1. every inference-mode BatchNorm whose only input is a convolution (``Conv1d/2d/3d``, ``ConvTranspose1d/2d/3d``)
   that feeds nothing else is folded into that convolution, in FP32, before the cast
   (``torch.nn.utils.fusion.fuse_conv_bn_eval``: ``w' = w * g``, ``b' = (b - mean) * g + beta`` with
   ``g = weight / sqrt(var + eps)``): the statistics never exist in FP16, only the folded weights, which are small;
2. a BatchNorm that cannot be folded, and any other layer with a parameter or buffer beyond FP16's range
   (``|v| > 65504``), runs in FP32: its floating-point inputs are cast up and its output back to FP16 (:class:`Float32`);
3. everything else (parameters and floating-point buffers) is cast to FP16.

Steps 1 and 2 need a ``torch.fx.GraphModule`` whose layers are modules (what onnx2torch produces); other models
(TorchScript, ``torch.export`` programs) only get step 3. Tensors that still overflow are reported
(:attr:`HalfModel.overflow`; the torch engine logs them).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_TRANSPOSED = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
_NORM = nn.modules.batchnorm._BatchNorm
_FP16_MAX = float(torch.finfo(torch.float16).max)  # 65504


class Float32(nn.Module):
    """Runs ``inner`` (kept in FP32) on half-precision inputs: floating-point arguments are cast to FP32, floating-point
    results back to FP16.

    Calling ``.half()`` on a model holding it would cast ``inner`` too: :func:`to_half` wraps after its cast.
    """

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner.float()

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        up = [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        out = self.inner(*up)
        if isinstance(out, torch.Tensor):
            return out.half() if out.is_floating_point() else out
        return type(out)(o.half() if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)


@dataclass(frozen=True)
class HalfModel:
    """Result of :func:`to_half`: the model, how many BatchNorm layers were folded, how many layers kept in FP32, and
    the names of FP16 tensors that overflowed anyway (e.g. a graph constant read by a function, not a layer)."""

    model: nn.Module
    folded: int
    kept_fp32: int
    overflow: tuple[str, ...] = ()  # FP16 parameters/buffers not finite (outside rule 2's reach)


def _needs_fp32(mod: nn.Module) -> bool:
    """Rule 2: an unfolded BatchNorm, or a leaf layer holding a value that overflows FP16."""
    if isinstance(mod, _NORM):
        return True
    if next(mod.children(), None) is not None:
        return False
    values = [*mod.parameters(recurse=False), *mod.buffers(recurse=False)]
    return any(v.is_floating_point() and bool((v.abs() > _FP16_MAX).any()) for v in values)


def fold_batchnorm(gm: torch.fx.GraphModule) -> int:
    """Fold each foldable BatchNorm into the convolution feeding it, in place (rule 1 of the module docstring).

    Args:
        gm: an ``torch.fx.GraphModule`` in eval mode, parameters in FP32.

    Returns:
        The number of BatchNorm layers folded (they are removed from the graph and the module).
    """
    modules = dict(gm.named_modules())
    folded = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(modules.get(node.target), _NORM) or len(node.args) != 1:
            continue
        src = node.args[0]
        if not isinstance(src, torch.fx.Node) or src.op != "call_module" or len(src.users) != 1:
            continue
        conv, bn = modules.get(src.target), modules[node.target]
        if not isinstance(conv, _CONVS + _TRANSPOSED) or bn.running_mean is None or bn.training or conv.training:
            continue
        fused = fuse_conv_bn_eval(conv, bn, transpose=isinstance(conv, _TRANSPOSED))
        parent, _, name = src.target.rpartition(".")
        setattr(gm.get_submodule(parent) if parent else gm, name, fused)
        node.replace_all_uses_with(src)
        gm.graph.erase_node(node)
        parent, _, name = node.target.rpartition(".")
        delattr(gm.get_submodule(parent) if parent else gm, name)
        folded += 1
    if folded:
        gm.graph.lint()
        gm.recompile()
    return folded


@torch.no_grad()
def to_half(model: nn.Module) -> HalfModel:
    """Convert ``model`` (FP32, any device) for half-precision inference by the rules of the module docstring.

    The model is put in eval mode and changed in place (also returned). Inputs of the returned model are FP16
    tensors; its outputs are FP16 except where a kept-FP32 layer is the last one (the torch engine casts outputs to
    their declared dtype anyway).

    Returns:
        :class:`HalfModel` with the converted model, the number of folded BatchNorm layers, the number of layers
        kept in FP32 (rule 2), and the FP16 tensors that overflowed anyway.
    """
    model.eval()
    folded = fold_batchnorm(model) if isinstance(model, torch.fx.GraphModule) else 0
    keep: dict[str, nn.Module] = {}
    if isinstance(model, torch.fx.GraphModule):  # the layers the graph calls (a traced-through module is not one)
        layers = {n.target for n in model.graph.nodes if n.op == "call_module"}
        keep = {name: copy.deepcopy(mod) for name, mod in model.named_modules()  # FP32 copies, before the cast
                if name in layers and _needs_fp32(mod)}
    model.half()
    for name, mod in keep.items():
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, Float32(mod))
    overflow = tuple(name for name, t in (*model.named_parameters(), *model.named_buffers())
                     if t.dtype == torch.float16 and not bool(torch.isfinite(t).all()))
    return HalfModel(model, folded, len(keep), overflow)
