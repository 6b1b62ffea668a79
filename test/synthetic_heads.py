"""Small ONNX models with the output layouts of the segmentation, oriented-box and DETR heads (no weights needed).

Each reads what it emits from the picture, so positions through the whole pipeline (resize, engine, mapping back to
source pixels, mask assembly) can be checked against what the test drew:

``blob_seg``: YOLOv8-seg layout (Ultralytics ``Segment``: ``[1, 4 + 1 + 32, N]`` + prototypes ``[1, 32, H/4, W/4]``).
    Anchor 0 carries the box of the one bright object (:func:`synthetic_models.blob_end2end`'s edge finder), score 1
    and mask coefficients ``(10, 0, ..., 0)``; prototype 0 is ``4x4 mean of the grey input - 0.5`` (so the mask
    logit is positive on the object), the others 0; every other anchor scores 0.
``moment_obb``: YOLOv8-obb layout (Ultralytics ``OBB``: ``[1, 4 + 1 + 1, N]``, angle in [-pi/4, 3pi/4)). Anchor 0
    is the oriented box of the bright pixels from their image moments (centroid; orientation ``0.5 * atan2(2 mu11,
    mu20 - mu02)``; sides ``sqrt(12 * eigenvalue)``, exact for a uniform rectangle), written as Ultralytics writes
    it: the long side first for angles in [-pi/4, pi/2), else the short side first with the angle + pi/2.
``blob_detr``: DETR layout: boxes ``[1, Q, 4]`` normalised cx, cy, w, h and logits ``[1, Q, C]``; query 0 is the
    bright object with logit +6 for class 1, the other queries logit -6.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from synthetic_models import OPSET, _const, blob_end2end


def _graph_of(path: Path):
    model = onnx.load(str(path))
    return list(model.graph.node)


def _save(path: Path, nodes, inputs, outputs, name: str) -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _box_nodes(prefix: str = "b"):
    """Nodes splitting blob_end2end's ``output`` [1,1,6] into scalars-as-[1] ``b_x1 .. b_score``."""
    nodes = [_const(prefix + "_shape6", np.array([6], np.int64)),
             helper.make_node("Reshape", ["output", prefix + "_shape6"], [prefix + "_row"])]
    for i, n in enumerate(("x1", "y1", "x2", "y2", "score")):
        nodes += [_const(f"{prefix}_i{i}", np.array([i], np.int64)),
                  helper.make_node("Gather", [prefix + "_row", f"{prefix}_i{i}"], [f"{prefix}_{n}"], axis=0)]
    nodes += [
        helper.make_node("Add", [prefix + "_x1", prefix + "_x2"], [prefix + "_sx"]),
        helper.make_node("Add", [prefix + "_y1", prefix + "_y2"], [prefix + "_sy"]),
        _const(prefix + "_half", np.array([0.5], np.float32)),
        helper.make_node("Mul", [prefix + "_sx", prefix + "_half"], [prefix + "_cx"]),
        helper.make_node("Mul", [prefix + "_sy", prefix + "_half"], [prefix + "_cy"]),
        helper.make_node("Sub", [prefix + "_x2", prefix + "_x1"], [prefix + "_w"]),
        helper.make_node("Sub", [prefix + "_y2", prefix + "_y1"], [prefix + "_h"]),
    ]
    return nodes


def _anchor_column(nodes, parts: list[str], cells: int, out: str) -> None:
    """Append nodes making ``out`` [1, len(parts), cells]: column 0 = ``parts`` ([1] each), the rest 0."""
    c = len(parts)
    nodes += [helper.make_node("Concat", parts, [out + "_col"], axis=0),
              _const(out + "_cshape", np.array([1, c, 1], np.int64)),
              helper.make_node("Reshape", [out + "_col", out + "_cshape"], [out + "_col3"]),
              _const(out + "_rest", np.zeros((1, c, cells - 1), np.float32)),
              helper.make_node("Concat", [out + "_col3", out + "_rest"], [out], axis=2)]


def blob_seg(path: Path, width: int, height: int, cells: int) -> Path:
    """Write the YOLOv8-seg-layout blob model (module docstring) for an engine input of ``width`` x ``height``."""
    tmp = path.with_suffix(".blob.onnx")
    nodes = _graph_of(blob_end2end(tmp, width, height)) + _box_nodes()
    coef = [f"coef{i}" for i in range(32)]
    nodes += [_const("coef0", np.array([10.0], np.float32))]
    nodes += [_const(f"coef{i}", np.array([0.0], np.float32)) for i in range(1, 32)]
    _anchor_column(nodes, ["b_cx", "b_cy", "b_w", "b_h", "b_score", *coef], cells, "output0")
    nodes += [
        _const("ax0", np.array([1], np.int64)),
        helper.make_node("Unsqueeze", ["grey", "ax0"], ["grey4"]),  # [1,1,H,W]
        helper.make_node("AveragePool", ["grey4"], ["pooled"], kernel_shape=[4, 4], strides=[4, 4]),
        _const("halfp", np.array(0.5, np.float32)),
        helper.make_node("Sub", ["pooled", "halfp"], ["proto0"]),
        _const("zeros31", np.zeros((1, 31, height // 4, width // 4), np.float32)),
        helper.make_node("Concat", ["proto0", "zeros31"], ["output1"], axis=1),
    ]
    return _save(path, nodes, [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, height, width])],
                 [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 37, cells]),
                  helper.make_tensor_value_info("output1", TensorProto.FLOAT, [1, 32, height // 4, width // 4])],
                 "blob_seg")


def blob_detr(path: Path, width: int, height: int, queries: int = 300, classes: int = 3) -> Path:
    """Write the DETR-layout blob model (module docstring)."""
    tmp = path.with_suffix(".blob.onnx")
    nodes = _graph_of(blob_end2end(tmp, width, height)) + _box_nodes()
    nodes += [_const("inv_w", np.array([1.0 / width], np.float32)), _const("inv_h", np.array([1.0 / height], np.float32))]
    for n, s in (("cx", "inv_w"), ("cy", "inv_h"), ("w", "inv_w"), ("h", "inv_h")):
        nodes.append(helper.make_node("Mul", [f"b_{n}", s], [f"n_{n}"]))
    nodes += [helper.make_node("Concat", ["n_cx", "n_cy", "n_w", "n_h"], ["q0"], axis=0),
              _const("q0shape", np.array([1, 1, 4], np.int64)),
              helper.make_node("Reshape", ["q0", "q0shape"], ["q03"]),
              _const("qrest", np.full((1, queries - 1, 4), 0.25, np.float32)),
              helper.make_node("Concat", ["q03", "qrest"], ["pred_boxes"], axis=1)]
    logits = np.full((1, queries, classes), -6.0, np.float32)
    logits[0, 0, 1] = 6.0
    nodes += [_const("logits_k", logits), _const("zl", np.array(0.0, np.float32)),
              helper.make_node("Mul", ["b_score", "zl"], ["zs"]),
              helper.make_node("Add", ["logits_k", "zs"], ["pred_logits"])]
    return _save(path, nodes, [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, height, width])],
                 [helper.make_tensor_value_info("pred_logits", TensorProto.FLOAT, [1, queries, classes]),
                  helper.make_tensor_value_info("pred_boxes", TensorProto.FLOAT, [1, queries, 4])],
                 "blob_detr")


def moment_obb(path: Path, width: int, height: int, cells: int) -> Path:
    """Write the YOLOv8-obb-layout moment model (module docstring); pixels above 0.5 grey are the object."""
    pi = math.pi
    nodes = [
        _const("axc", np.array([1], np.int64)),
        helper.make_node("ReduceMean", ["images", "axc"], ["grey"], keepdims=0),  # [1,H,W]
        _const("thr", np.array(0.5, np.float32)),
        helper.make_node("Greater", ["grey", "thr"], ["onb"]),
        helper.make_node("Cast", ["onb"], ["m"], to=TensorProto.FLOAT),
        _const("xs", (np.arange(width, dtype=np.float32) + 0.5)[None, None, :]),
        _const("ys", (np.arange(height, dtype=np.float32) + 0.5)[None, :, None]),
        helper.make_node("ReduceSum", ["m"], ["m00"], keepdims=0),
        helper.make_node("Mul", ["m", "xs"], ["mx"]), helper.make_node("ReduceSum", ["mx"], ["m10"], keepdims=0),
        helper.make_node("Mul", ["m", "ys"], ["my"]), helper.make_node("ReduceSum", ["my"], ["m01"], keepdims=0),
        helper.make_node("Div", ["m10", "m00"], ["cx"]), helper.make_node("Div", ["m01", "m00"], ["cy"]),
        helper.make_node("Sub", ["xs", "cx"], ["dx"]), helper.make_node("Sub", ["ys", "cy"], ["dy"]),
    ]
    for name, a, b in (("mu20", "dx", "dx"), ("mu02", "dy", "dy"), ("mu11", "dx", "dy")):
        nodes += [helper.make_node("Mul", [a, b], [name + "_p"]), helper.make_node("Mul", ["m", name + "_p"], [name + "_q"]),
                  helper.make_node("ReduceSum", [name + "_q"], [name + "_s"], keepdims=0),
                  helper.make_node("Div", [name + "_s", "m00"], [name])]
    nodes += [
        # atan2(y, x) with y = 2 mu11, x = mu20 - mu02 (x == 0 nudged)
        _const("two", np.array(2.0, np.float32)), _const("tiny", np.array(1e-9, np.float32)),
        _const("zero", np.array(0.0, np.float32)), _const("pi", np.array(pi, np.float32)),
        _const("npi", np.array(-pi, np.float32)), _const("half", np.array(0.5, np.float32)),
        helper.make_node("Mul", ["mu11", "two"], ["ay"]), helper.make_node("Sub", ["mu20", "mu02"], ["ax0"]),
        helper.make_node("Abs", ["ax0"], ["axabs"]), helper.make_node("Less", ["axabs", "tiny"], ["axz"]),
        helper.make_node("Where", ["axz", "tiny", "ax0"], ["ax"]),
        helper.make_node("Div", ["ay", "ax"], ["ratio"]), helper.make_node("Atan", ["ratio"], ["at"]),
        helper.make_node("Less", ["ax", "zero"], ["xneg"]), helper.make_node("Less", ["ay", "zero"], ["yneg"]),
        helper.make_node("Where", ["yneg", "npi", "pi"], ["corr"]),
        helper.make_node("Add", ["at", "corr"], ["at2"]),
        helper.make_node("Where", ["xneg", "at2", "at"], ["a2"]),
        helper.make_node("Mul", ["a2", "half"], ["theta"]),  # long-axis direction in (-pi/2, pi/2]
        # eigenvalues: (mu20 + mu02)/2 +- sqrt(((mu20 - mu02)/2)^2 + mu11^2); side = sqrt(12 * lambda)
        helper.make_node("Add", ["mu20", "mu02"], ["tr"]), helper.make_node("Mul", ["tr", "half"], ["mean"]),
        helper.make_node("Mul", ["ax0", "half"], ["hd"]), helper.make_node("Mul", ["hd", "hd"], ["hd2"]),
        helper.make_node("Mul", ["mu11", "mu11"], ["m112"]), helper.make_node("Add", ["hd2", "m112"], ["disc"]),
        helper.make_node("Sqrt", ["disc"], ["root"]),
        helper.make_node("Add", ["mean", "root"], ["l1"]), helper.make_node("Sub", ["mean", "root"], ["l2"]),
        helper.make_node("Max", ["l2", "zero"], ["l2p"]),
        _const("twelve", np.array(12.0, np.float32)),
        helper.make_node("Mul", ["l1", "twelve"], ["l1x"]), helper.make_node("Sqrt", ["l1x"], ["long"]),
        helper.make_node("Mul", ["l2p", "twelve"], ["l2x"]), helper.make_node("Sqrt", ["l2x"], ["short"]),
        # Ultralytics' range [-pi/4, 3pi/4): below -pi/4 write (short, long, theta + pi/2)
        _const("npi4", np.array(-pi / 4, np.float32)), _const("pi2", np.array(pi / 2, np.float32)),
        helper.make_node("Less", ["theta", "npi4"], ["low"]),
        helper.make_node("Add", ["theta", "pi2"], ["theta_up"]),
        helper.make_node("Where", ["low", "theta_up", "theta"], ["ang"]),
        helper.make_node("Where", ["low", "short", "long"], ["ow"]),
        helper.make_node("Where", ["low", "long", "short"], ["oh"]),
        _const("one", np.array(1.0, np.float32)),
        _const("s1", np.array([1], np.int64)),
    ]
    parts = []
    for n in ("cx", "cy", "ow", "oh", "one", "ang"):
        nodes.append(helper.make_node("Reshape", [n, "s1"], [n + "_1"]))
        parts.append(n + "_1")
    _anchor_column(nodes, parts, cells, "output0")
    return _save(path, nodes, [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, height, width])],
                 [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 6, cells])], "moment_obb")


def stacked(src: Path, dst: Path, batch: int) -> Path:
    """A fixed batch-``batch`` copy of the batch-1 model ``src``: the input split along dim 0, each slice through its
    own copy of the graph (names prefixed ``s<k>_``, :func:`onnx.compose.add_prefix`), every output concatenated
    along dim 0, so slot k's outputs are exactly ``src``'s on frame k (the synthetic heads above concatenate
    batch-1 constants, which :func:`vrt_ros.model.onnx_batch.rebatch` cannot rewrite)."""
    from onnx import compose

    base = onnx.load(str(src))
    image = base.graph.input[0].name
    nodes = [_const("slot_sizes", np.ones(batch, np.int64)),
             helper.make_node("Split", [image, "slot_sizes"], [f"s{k}_{image}" for k in range(batch)], axis=0)]
    for k in range(batch):
        nodes += list(compose.add_prefix(base, f"s{k}_").graph.node)
    outputs = []
    for out in base.graph.output:
        nodes.append(helper.make_node("Concat", [f"s{k}_{out.name}" for k in range(batch)], [out.name], axis=0))
        dims = [d.dim_value for d in out.type.tensor_type.shape.dim]
        outputs.append(helper.make_tensor_value_info(out.name, TensorProto.FLOAT, [batch, *dims[1:]]))
    dims = [d.dim_value for d in base.graph.input[0].type.tensor_type.shape.dim]
    inputs = [helper.make_tensor_value_info(image, TensorProto.FLOAT, [batch, *dims[1:]])]
    return _save(dst, nodes, inputs, outputs, f"{base.graph.name}_x{batch}")
