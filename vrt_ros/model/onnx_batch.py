"""Turn a batch-1 ONNX model into a fixed batch-N or dynamic-batch one, and check it against the original.

A detector exported at batch 1 has the batch in two places: the input's (and outputs') first dim, and shape
constants of ``Reshape`` nodes that were folded at export time (e.g. Ultralytics' DFL ``[1, 4, 16, 8400]``).
:func:`rebatch` rewrites both: the input's dim 0 becomes ``N`` (or the symbolic ``batch``), and every ``Reshape``
whose constant target shape starts with 1 while its data input's dim 0 is the batch gets ``N`` there (or ``0``,
"copy the input's dim", for a dynamic batch); shape inference then recomputes the rest. Graphs that compute their
shapes (``Shape -> Slice -> Concat``, as the shared YOLOX-nano does) need only the input dim.

Other ops can hard-code a batch too (``Expand``, ``Tile``, a ``Reshape`` that folds the batch into rows); they are
not guessed at: :func:`vrt_ros.tools.batch_model.compare` runs both models with ONNX Runtime on the same frames and the result is accepted
only when every output of every slot equals the batch-1 model's output for that frame, within a tolerance.

The ONNX operator semantics used: ``Reshape`` (opset 5+: 0 copies the input dim unless ``allowzero``=1, -1 infers),
onnx.ai/onnx/operators/onnx__Reshape.html. Imports ``onnx`` lazily (``pip install "vrt_ros[model-tools]"``).
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from vrt_ros.errors import ModelError

#: The symbolic name of a dynamic batch dim.
BATCH_PARAM = "batch"


@dataclass(frozen=True)
class Rebatched:
    """What :func:`rebatch` changed.

    Attributes:
        batch: the new batch (an int, or ``"batch"`` for a dynamic one).
        reshapes: names of the ``Reshape`` nodes whose constant batch entry was rewritten.
    """

    batch: int | str
    reshapes: tuple[str, ...]


def _constants(graph) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    out = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    out[n.output[0]] = numpy_helper.to_array(a.t)
    return out


def _dim0(model) -> dict[str, int]:
    """dim 0 of every tensor whose shape inference knows it (-1: symbolic)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    dims: dict[str, int] = {}
    g = inferred.graph
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and len(t.shape.dim) > 0:
            d = t.shape.dim[0]
            dims[vi.name] = d.dim_value if d.HasField("dim_value") else -1
    return dims


def _set_dim0(vi, batch: int | None) -> None:
    dim = vi.type.tensor_type.shape.dim[0]
    if batch is None:
        dim.ClearField("dim_value")
        dim.dim_param = BATCH_PARAM
    else:
        dim.ClearField("dim_param")
        dim.dim_value = int(batch)


def rebatch(model, batch: int | None):
    """A copy of ``model`` (an ``onnx.ModelProto`` of one NCHW input at batch 1) at batch ``batch`` (None: dynamic).

    Returns:
        ``(model, Rebatched)``.

    Raises:
        ModelError: not one 4-D input of batch 1, or a batch below 1; shape inference fails on the result.
    """
    import onnx
    from onnx import numpy_helper

    if batch is not None and int(batch) < 1:
        raise ModelError(f"batch must be >= 1 (or dynamic), got {batch}")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if len(inputs) != 1 or len(inputs[0].type.tensor_type.shape.dim) != 4:
        raise ModelError(f"expected one NCHW image input, found {[i.name for i in inputs]}")
    d0 = inputs[0].type.tensor_type.shape.dim[0]
    if not (d0.HasField("dim_value") and d0.dim_value == 1):
        raise ModelError(f"input {inputs[0].name!r} is not at batch 1 (dim 0: {d0.dim_value or d0.dim_param!r}); "
                         "export it at batch 1, or use it as it is")
    dims, consts = _dim0(model), _constants(g)
    rewritten = []
    for node in g.node:
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in consts:
            continue
        target = consts[node.input[1]]
        if target.ndim != 1 or target.size == 0 or int(target[0]) != 1 or dims.get(node.input[0]) != 1:
            continue
        allowzero = next((a.i for a in node.attribute if a.name == "allowzero"), 0)
        new = target.astype(np.int64).copy()
        if batch is not None:
            new[0] = int(batch)
        elif not allowzero:
            new[0] = 0  # copy the data input's dim 0 (the batch)
        elif -1 not in new:
            new[0] = -1
        else:
            raise ModelError(f"Reshape {node.name!r} (allowzero=1) has target {target.tolist()} with a -1 already: "
                             "its batch entry cannot be made dynamic; use a fixed batch")
        name = f"{node.input[1]}__batch_{batch or BATCH_PARAM}_{len(rewritten)}"
        g.initializer.append(numpy_helper.from_array(new, name=name))
        node.input[1] = name
        rewritten.append(node.name or node.output[0])
    _set_dim0(inputs[0], batch)
    for o in g.output:
        if len(o.type.tensor_type.shape.dim) > 0:
            _set_dim0(o, batch)
    del g.value_info[:]
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        onnx.checker.check_model(m)
    except Exception as exc:
        raise ModelError(f"the model at batch {batch or BATCH_PARAM} fails ONNX shape inference: {exc}") from exc
    return m, Rebatched(batch if batch is not None else BATCH_PARAM, tuple(rewritten))


def fix_batch(model, batch: int):
    """A copy of a dynamic-batch ``model`` with its input's (and outputs') dim 0 fixed at ``batch``, shapes
    re-inferred, so that every ``Shape`` is static again (the torch engine folds them into constants, one
    specialised model per prepared batch size). A model already fixed at ``batch`` is returned as a copy.

    Raises:
        ModelError: the input's dim 0 is fixed at another batch, or shape inference fails at ``batch``.
    """
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    d0 = inputs[0].type.tensor_type.shape.dim[0]
    if d0.HasField("dim_value") and d0.dim_value != batch:
        raise ModelError(f"input {inputs[0].name!r} is fixed at batch {d0.dim_value}, not {batch}")
    _set_dim0(inputs[0], batch)
    for o in g.output:
        dims = o.type.tensor_type.shape.dim
        if len(dims) > 0 and not dims[0].HasField("dim_value"):
            _set_dim0(o, batch)
    del g.value_info[:]
    try:
        return onnx.shape_inference.infer_shapes(m, strict_mode=True)
    except Exception as exc:
        raise ModelError(f"the model at batch {batch} fails ONNX shape inference: {exc}") from exc
