"""ONNX → torch for the torch engine: the onnx2torch conversion made runnable on the GPU, and its TorchScript archive.

Imported only by :mod:`vrt_ros.engines.torch` (it imports torch; onnx and onnx2torch only when converting).

- :func:`convert_onnx`: ``Shape`` nodes of statically known shapes folded into constants (:func:`fold_static_shapes`),
  converted with onnx2torch at each prepared batch size, moved to the GPU with the small constants that only feed
  shape arguments kept on the host (:func:`keep_shape_constants_on_host`; onnx2torch would otherwise copy them back
  from the GPU every frame, a hidden host synchronisation that also breaks CUDA-graph capture).
- :func:`trace_sizes`: each converted model traced (``torch.jit.trace``) on zeros at its batch size, which turns the
  remaining shape reads into constants, and the traced models serialized as one TorchScript archive (a scripted
  wrapper whose submodules are ``b<N>``), the entry :mod:`vrt_ros.engines.torch_cache` stores;
  :func:`load_sizes` reads it back without onnx or onnx2torch.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from vrt_ros.errors import BackendUnavailable, ModelError
from vrt_ros.types import TensorInfo

log = logging.getLogger(__name__)

# Module types (onnx2torch class names) whose arguments after the first are shapes/indices, read on the host.
_SHAPE_CONSUMERS = {
    "OnnxReshape": 1, "OnnxSlice": 1, "OnnxResize": 1, "OnnxExpand": 1, "OnnxTile": 1, "OnnxConstantOfShape": 0,
}


def fold_static_shapes(model):
    """Replace ``Shape`` nodes whose input shape is fully static with int64 constants (returns a new model)."""
    import onnx
    from onnx import helper, numpy_helper

    inferred = onnx.shape_inference.infer_shapes(model)
    dims: dict[str, list[int]] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            dims[vi.name] = [d.dim_value for d in t.shape.dim]
    folded = 0
    nodes = []
    for node in model.graph.node:
        if node.op_type == "Shape" and node.input[0] in dims:
            shape = dims[node.input[0]]
            start = next((a.i for a in node.attribute if a.name == "start"), 0)
            end = next((a.i for a in node.attribute if a.name == "end"), len(shape))
            value = numpy_helper.from_array(np.asarray(shape[start:end], np.int64), name=node.output[0])
            nodes.append(helper.make_node("Constant", [], [node.output[0]], value=value, name=node.name + "_folded"))
            folded += 1
        else:
            nodes.append(node)
    if folded:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    log.info("torch engine: folded %d Shape nodes into constants", folded)
    return model


def keep_shape_constants_on_host(gm: torch.nn.Module) -> int:
    """Move constants that only feed shape arguments (transitively) back to the CPU. Returns how many."""
    import torch.fx

    if not isinstance(gm, torch.fx.GraphModule):
        return 0
    modules = dict(gm.named_modules())
    host: set[torch.fx.Node] = set()

    def feeds_shapes_only(node: torch.fx.Node) -> bool:
        if not node.users:
            return False
        for user in node.users:
            if user in host:
                continue
            if user.op == "call_module":
                first = _SHAPE_CONSUMERS.get(type(modules[user.target]).__name__)
                if first is not None and all(a is not node for a in user.args[:first]):
                    continue
            return False
        return True

    nodes = list(gm.graph.nodes)
    changed = True
    while changed:  # propagate backwards: a Concat of shape constants is itself a shape value
        changed = False
        for node in reversed(nodes):
            if node in host or node.op in ("placeholder", "output"):
                continue
            if feeds_shapes_only(node):
                host.add(node)
                changed = True
    moved = 0
    for node in host:
        if node.op == "get_attr":
            owner_name, _, attr = node.target.rpartition(".")
            owner = gm.get_submodule(owner_name) if owner_name else gm
            value = getattr(owner, attr)
            if isinstance(value, torch.Tensor) and value.is_cuda:
                owner._buffers[attr] = value.cpu()
                moved += 1
        elif node.op == "call_module" and type(modules[node.target]).__name__ == "OnnxConstant":
            mod = modules[node.target]
            for name, buf in list(mod._buffers.items()):
                if buf is not None and buf.is_cuda:
                    mod._buffers[name] = buf.cpu()
                    moved += 1
    return moved


def onnx_io(model) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """The graph's inputs (initializers left out) and outputs as :class:`TensorInfo` (a dim without a value: -1)."""
    import onnx

    def info(vi) -> TensorInfo:
        t = vi.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim)
        return TensorInfo(vi.name, shape, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)).name)

    inits = {i.name for i in model.graph.initializer}
    return [info(v) for v in model.graph.input if v.name not in inits], [info(v) for v in model.graph.output]


def convert_onnx(path: Path, device: torch.device, max_batch: int,
                 half: Callable[[torch.nn.Module], torch.nn.Module] | None = None):
    """Convert an ONNX model with onnx2torch for the GPU, at its own batch or (dim 0 dynamic) at 1 and ``max_batch``.

    Args:
        path: the ONNX file.
        device: the CUDA device the models are moved to.
        max_batch: the largest batch a dynamic-batch model is prepared for.
        half: applied to each converted model on the device (FP16), or None.

    Returns:
        (models by batch size, inputs, outputs, shape constants kept on the host).

    Raises:
        BackendUnavailable: onnx2torch (or onnx) is not importable.
        ModelError: the file cannot be read, has dynamic dims other than the batch, or cannot be converted.
    """
    try:
        import onnx
        from onnx2torch import convert
    except ImportError as exc:
        raise BackendUnavailable(f"torch engine needs onnx2torch to run {path.name} (pip install onnx2torch): {exc}") from exc
    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise ModelError(f"cannot read ONNX model {path}: {exc}") from exc
    inputs, outputs = onnx_io(model)
    dynamic_batch = bool(inputs) and inputs[0].shape[:1] == (-1,)
    rest = [d for t in inputs + outputs for d in (t.shape[1:] if dynamic_batch else t.shape)]
    if any(d < 0 for d in rest):
        raise ModelError(f"{path}: the torch engine needs static input/output shapes (a dynamic batch, dim 0, "
                         f"is allowed), got {inputs} -> {outputs}")
    sizes = sorted({1, max(1, int(max_batch))}) if dynamic_batch else [inputs[0].shape[0]]
    models, host = {}, 0
    for b in sizes:
        try:
            if dynamic_batch:
                from vrt_ros.model.onnx_batch import fix_batch

                gm = convert(fold_static_shapes(fix_batch(model, b)))
            else:
                gm = convert(fold_static_shapes(model))
        except Exception as exc:
            raise ModelError(f"onnx2torch cannot convert {path} (batch {b}): {exc}") from exc
        gm = gm.to(device)
        if half is not None:  # float parameters and buffers (shape constants are int64 and stay as they are)
            gm = half(gm)
        host = keep_shape_constants_on_host(gm)
        models[b] = gm.eval()
    log.info("torch engine: %s converted at batch %s; %d shape constants kept on the host", path.name,
             "/".join(map(str, sizes)), host)
    return models, inputs, outputs, host


class _Sizes(torch.nn.Module):
    """The archive's root: one traced model per batch size, as submodules ``b<N>`` (no forward of its own)."""

    def __init__(self, models: dict[int, torch.nn.Module]) -> None:
        super().__init__()
        for b, m in sorted(models.items()):
            self.add_module(f"b{b}", m)


def trace_sizes(models: dict[int, torch.nn.Module], input_info: TensorInfo, dtype: torch.dtype, device: torch.device):
    """Trace each model on zeros of its batch's input shape and serialize them as one TorchScript archive.

    Args:
        models: converted models by batch size (on ``device``).
        input_info: the model's input (dim 0 = -1 for a dynamic batch).
        dtype: the dtype the model takes (float16 for an FP16 model fed from its half buffer).
        device: the models' device.

    Returns:
        (traced models by batch size, the archive bytes, "") or, when a model cannot be traced or scripted (control
        flow on values, say), (None, None, the reason): the caller runs the converted models and caches nothing.
        Tracing runs each model once (start-up only).
    """
    try:
        traced = {}
        for b, m in models.items():
            for p in m.parameters():
                p.requires_grad_(False)
            x = torch.zeros((b, *input_info.shape[1:]), dtype=dtype, device=device)
            with torch.no_grad():
                traced[b] = torch.jit.trace(m, (x,), check_trace=False)
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(_Sizes(traced)), buf)
        return traced, buf.getvalue(), ""
    except Exception as exc:  # noqa: BLE001 - any tracing failure leaves the converted model running
        return None, None, f"the converted model could not be traced to TorchScript ({type(exc).__name__}: {exc})"


def load_sizes(path: Path, device: torch.device, sizes: Sequence[int]) -> dict[int, torch.nn.Module]:
    """The traced models of an archive written by :func:`trace_sizes`, by batch size, on ``device``.

    Raises:
        ModelError: the archive's weights are not on ``device`` (saved for another GPU).
        RuntimeError, KeyError, AttributeError: the archive is not one of ours or torch refuses it (the cache then
            converts again).
    """
    # No map_location: every tensor goes back to the device it was saved from (the key holds the GPU ordinal). A
    # map_location would also move the shape constants kept on the host onto the GPU, and the traced graph reads
    # them (aten::Int): a device-to-host copy per frame, which fails CUDA-graph capture.
    root = torch.jit.load(str(path))
    models = {int(b): getattr(root, f"b{int(b)}") for b in sizes}
    for b, m in models.items():
        m.eval()
        devices = {p.device for p in m.parameters()}
        if devices - {device}:
            raise ModelError(f"{path}: batch {b} weights are on {sorted(map(str, devices))}, wanted {device}")
    return models


def describe(inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo], sizes: Sequence[int], **counts) -> dict:
    """The JSON-able description a cache entry keeps (its sidecar's "torch" field): inputs, outputs, batch sizes and
    the conversion's counts (``host_constants``, ``fp16_folded``, ``fp16_fp32_layers``)."""
    tensors = lambda ts: [[t.name, list(t.shape), t.dtype] for t in ts]  # noqa: E731
    return {"inputs": tensors(inputs), "outputs": tensors(outputs), "batch_sizes": sorted(int(b) for b in sizes),
            **{k: int(v) for k, v in counts.items()}}


def tensors_of(meta: dict, which: str) -> list[TensorInfo]:
    """The "inputs" or "outputs" of a :func:`describe` result as :class:`TensorInfo`."""
    return [TensorInfo(str(n), tuple(int(d) for d in shape), str(dt)) for n, shape, dt in meta[which]]
