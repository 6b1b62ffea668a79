"""Small ONNX models built in the tests, whose outputs the tests control (no weights needed).

``blob_end2end``: finds the one bright object in the engine input and emits it as an end-to-end row
``[1, 1, 6] = x1, y1, x2, y2, score, class`` in engine-input pixels — so absolute box positions through the whole
pipeline (letterbox, engine, un-letterbox) can be checked against where the test drew the object
(:func:`ramp_rectangle`).
``constant_yolov8``: emits a fixed yolov8-layout tensor (e.g. with NaN/Inf rows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18


def _const(name: str, value: np.ndarray):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name + "_v"))


def blob_end2end(path: Path, width: int, height: int, fp16: bool = False) -> Path:
    """Write the blob detector: it finds one bright object and emits its box with sub-pixel edges.

    Model: ``grey = mean over channels`` (tensor units: 0 black, 1 white for std 255, the end2end head's
    default); column and row profiles ``c = max over the other axis`` (padding included, so use pad 0);
    an edge is where a profile crosses 0.5, located by linear interpolation between the two pixel centres around
    the crossing. Objects drawn with linear-ramp edges (see :func:`ramp_rectangle`) keep their 0.5 crossing
    exactly at the drawn edge through bilinear resizing, so the box is exact to well under a pixel.
    Output ``[1, 1, 6] = x1, y1, x2, y2, score, class`` in engine-input pixels; score 1 when found else 0.
    """
    itype = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    nodes = []
    src = "images"
    if fp16:
        nodes.append(helper.make_node("Cast", ["images"], ["x32"], to=TensorProto.FLOAT))
        src = "x32"
    nodes += [
        _const("axes_c", np.array([1], np.int64)),
        helper.make_node("ReduceMean", [src, "axes_c"], ["grey"], keepdims=0),  # [1,H,W]
        _const("axes_h", np.array([1], np.int64)),
        _const("axes_w", np.array([2], np.int64)),
        helper.make_node("ReduceMax", ["grey", "axes_h"], ["cols"], keepdims=0),  # [1,W]
        helper.make_node("ReduceMax", ["grey", "axes_w"], ["rows"], keepdims=0),  # [1,H]
        _const("half", np.array(0.5, np.float32)),
        _const("big", np.array(1e9, np.float32)),
        _const("nbig", np.array(-1e9, np.float32)),
        _const("eps", np.array(1e-12, np.float32)),
        _const("zero1", np.zeros((1, 1), np.float32)),
    ]
    outs = {}
    for axis, prof, n in (("x", "cols", width), ("y", "rows", height)):
        p = f"{axis}_"
        nodes += [
            _const(p + "lo", np.array([0], np.int64)),
            _const(p + "hi", np.array([n - 1], np.int64)),
            _const(p + "ax", np.array([1], np.int64)),
            helper.make_node("Slice", [prof, p + "lo", p + "hi", p + "ax"], [p + "head"]),
            helper.make_node("Concat", ["zero1", p + "head"], [p + "prev"], axis=1),  # c[u-1], 0 before the start
            _const(p + "u", (np.arange(n, dtype=np.float32) - 0.5)[None]),  # u - 0.5: centre of u-1 plus 0
            helper.make_node("Less", [p + "prev", "half"], [p + "prev_lo"]),
            helper.make_node("GreaterOrEqual", [prof, "half"], [p + "cur_hi"]),
            helper.make_node("And", [p + "prev_lo", p + "cur_hi"], [p + "up"]),
            helper.make_node("Not", [p + "prev_lo"], [p + "prev_hi"]),
            helper.make_node("Not", [p + "cur_hi"], [p + "cur_lo"]),
            helper.make_node("And", [p + "prev_hi", p + "cur_lo"], [p + "down"]),
            helper.make_node("Sub", ["half", p + "prev"], [p + "num"]),
            helper.make_node("Sub", [prof, p + "prev"], [p + "den0"]),
            helper.make_node("Add", [p + "den0", "eps"], [p + "den"]),
            helper.make_node("Div", [p + "num", p + "den"], [p + "frac"]),
            helper.make_node("Add", [p + "u", p + "frac"], [p + "pos"]),
            helper.make_node("Where", [p + "up", p + "pos", "big"], [p + "c1"]),
            helper.make_node("Where", [p + "down", p + "pos", "nbig"], [p + "c2"]),
            helper.make_node("ReduceMin", [p + "c1"], [p + "1"], keepdims=0),
            helper.make_node("ReduceMax", [p + "c2"], [p + "2"], keepdims=0),
        ]
        outs[axis] = (p + "1", p + "2")
    nodes += [
        helper.make_node("ReduceMax", ["grey"], ["gmax"], keepdims=0),
        helper.make_node("GreaterOrEqual", ["gmax", "half"], ["found"]),
        helper.make_node("Cast", ["found"], ["score"], to=TensorProto.FLOAT),
        _const("cls", np.array(0.0, np.float32)),
        _const("shape1", np.array([1], np.int64)),
    ]
    parts = []
    for n in (outs["x"][0], outs["y"][0], outs["x"][1], outs["y"][1], "score", "cls"):
        nodes.append(helper.make_node("Reshape", [n, "shape1"], [n + "_r"]))
        parts.append(n + "_r")
    nodes += [
        helper.make_node("Concat", parts, ["row"], axis=0),
        _const("shape_out", np.array([1, 1, 6], np.int64)),
        helper.make_node("Reshape", ["row", "shape_out"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "blob_end2end",
        [helper.make_tensor_value_info("images", itype, [1, 3, height, width])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, 6])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def ramp_rectangle(width: int, height: int, box: tuple[float, float, float, float], ramp: float = 12.0) -> np.ndarray:
    """A black (height, width, 3) uint8 BGR image with one white rectangle whose edges are linear ramps.

    Each edge ramps from 0 to 255 over ``ramp`` source pixels centred on the box edge (continuous coordinates,
    pixel centres at i + 0.5), so the 50 % level sits exactly on the edge at any resize scale above
    ``2 / ramp``.
    """
    x1, y1, x2, y2 = box
    cx = np.arange(width, dtype=np.float64) + 0.5
    cy = np.arange(height, dtype=np.float64) + 0.5
    px = np.clip((cx - x1) / ramp + 0.5, 0, 1) * np.clip((x2 - cx) / ramp + 0.5, 0, 1)
    py = np.clip((cy - y1) / ramp + 0.5, 0, 1) * np.clip((y2 - cy) / ramp + 0.5, 0, 1)
    grey = np.rint(255.0 * np.outer(py, px)).astype(np.uint8)
    return np.repeat(grey[..., None], 3, axis=2)


def constant_yolov8(path: Path, width: int, height: int, output: np.ndarray) -> Path:
    """Write a model with image input [1,3,H,W] whose output is ``output`` (shape [1, 4+nc, N]) for any input.

    The input is consumed (multiplied by 0 and added) so the graph keeps it. Fewer anchors than the stride-8/16/32
    cell count of ``width`` x ``height`` are padded with zero anchors (score 0) to that count, the only N the
    Ultralytics heads accept.
    """
    out = output.astype(np.float32)
    cells = sum((height // s) * (width // s) for s in (8, 16, 32))
    if out.shape[2] < cells:
        out = np.concatenate([out, np.zeros((*out.shape[:2], cells - out.shape[2]), np.float32)], axis=2)
    nodes = [
        _const("k", out),
        _const("zero", np.array(0.0, np.float32)),
        helper.make_node("ReduceSum", ["images"], ["s"], keepdims=0),
        helper.make_node("Mul", ["s", "zero"], ["z"]),
        helper.make_node("Add", ["k", "z"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes,
        "constant_yolov8",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, height, width])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(out.shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


#: The rectangles (x1, y1, x2, y2) of :func:`bench_inputs`' three frames.
BENCH_BOXES = ((40, 30, 200, 150), (300, 200, 500, 420), (100, 250, 260, 400))


def bench_inputs(folder: Path) -> tuple[Path, Path]:
    """Inputs for the benchmark commands' quick runs: ``folder/images`` with three 640x480 PNG frames, one bright
    rectangle each (:data:`BENCH_BOXES`), and ``folder/blob.onnx`` (:func:`blob_end2end`, 320x320), which finds it.

    Returns:
        ``(images folder, model path)``.
    """
    import cv2

    images = folder / "images"
    images.mkdir()
    for i, box in enumerate(BENCH_BOXES):
        cv2.imwrite(str(images / f"frame{i}.png"), ramp_rectangle(640, 480, box))
    return images, blob_end2end(folder / "blob.onnx", 320, 320)


def brightness_end2end(path: Path, width: int, height: int, box: tuple[float, float, float, float],
                       batch: int | None = None) -> Path:
    """Write a batch-agnostic end-to-end model: input [B, 3, H, W] (``batch`` None: dynamic ``B``), output
    [B, 1, 6] = the fixed ``box`` (engine-input pixels), score = mean of the input (the frame's brightness in
    tensor units: with std 255, 0 black .. 1 white), class 0. Each slot's score says which frame it came from."""
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["m"], axes=[1, 2, 3], keepdims=1) if OPSET < 18 else
        helper.make_node("ReduceMean", ["images", "axes"], ["m"], keepdims=1),  # [B, 1, 1, 1]
        helper.make_node("Reshape", ["m", "to_b11"], ["score"]),  # [B, 1, 1]
        helper.make_node("Mul", ["score", "zeros"], ["z"]),  # [B, 1, 1] of 0, to broadcast the constants over B
        helper.make_node("Add", ["z", "box"], ["boxes"]),  # [B, 1, 4]
        helper.make_node("Add", ["z", "cls"], ["classes"]),  # [B, 1, 1]
        helper.make_node("Concat", ["boxes", "score", "classes"], ["output"], axis=2),
    ]
    inits = [
        numpy_helper.from_array(np.array([1, 2, 3], np.int64), "axes"),
        numpy_helper.from_array(np.array([0, 1, 1], np.int64), "to_b11"),  # 0: copy the batch dim
        numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "zeros"),
        numpy_helper.from_array(np.array(box, np.float32).reshape(1, 1, 4), "box"),
        numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "cls"),
    ]
    b = batch if batch is not None else "B"
    graph = helper.make_graph(nodes, "brightness_end2end",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [b, 3, height, width])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [b, 1, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
