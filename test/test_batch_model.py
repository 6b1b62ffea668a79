"""The batch-N model tool (vrt_ros.tools.batch_model, vrt_ros.model.onnx_batch): the rewrite, and its check with ONNX
Runtime against the batch-1 model, output for output, on real frames (issue 21, item 1)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine
from vrt_ros.errors import ModelError
from vrt_ros.model.onnx_batch import rebatch
from vrt_ros.tools import batch_model
from vrt_ros.tools.batch_model import compare


def hard_coded_reshape_model(path, fold_batch: bool = False):
    """Conv 3 -> 8 channels, stride 16, on 64x64, then a Reshape with the constant target [1, 8, 16] (as an exporter
    folds it at batch 1), then Sigmoid: output [1, 8, 16]. ``fold_batch``: the target is [-1, 16] instead, which
    folds the batch into rows (a model the rewrite cannot fix; the check must refuse it)."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.normal(0, 0.05, (8, 3, 16, 16)).astype(np.float32), "w")
    target = np.array([-1, 16] if fold_batch else [1, 8, 16], np.int64)
    out_shape = [8, 16] if fold_batch else [1, 8, 16]
    nodes = [
        helper.make_node("Conv", ["images", "w"], ["c"], strides=[16, 16]),
        helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(target, "shape_v")),
        helper.make_node("Reshape", ["c", "shape"], ["r"], name="head_reshape"),
        helper.make_node("Sigmoid", ["r"], ["output"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def frames(n: int):
    rng = np.random.default_rng(1)
    return [rng.integers(0, 256, (48 + 8 * i, 80, 3), np.uint8) for i in range(n)]


@pytest.mark.parametrize("batch", [3, None])
def test_hard_coded_reshape_is_rewritten_and_every_slot_equals_the_batch_1_model(tmp_path, batch):
    src = hard_coded_reshape_model(tmp_path / "m.onnx")
    model, info = rebatch(onnx.load(str(src)), batch)
    assert info.reshapes == ("head_reshape",)
    out = tmp_path / "b.onnx"
    onnx.save(model, str(out))
    eng = OnnxRuntimeEngine(str(out))
    assert eng.inputs[0].shape[0] == (batch or -1)
    result = compare(str(src), str(out), frames(5), [3] if batch else [1, 2, 4])
    assert result.ok and result.max_abs < 1e-5, result
    # without the Reshape rewrite the batched model cannot run at all (the constant says batch 1)
    for node in model.graph.node:
        if node.op_type == "Reshape":
            node.input[1] = "shape"
    onnx.save(model, str(tmp_path / "unfixed.onnx"))
    with pytest.raises(Exception):
        OnnxRuntimeEngine(str(tmp_path / "unfixed.onnx")).run(np.zeros((3, 3, 64, 64), np.float32))


def test_a_model_that_folds_the_batch_is_refused(tmp_path, capsys):
    src = hard_coded_reshape_model(tmp_path / "fold.onnx", fold_batch=True)
    rc = batch_model.main([str(src), str(tmp_path / "out.onnx"), "--batch", "2"])
    assert rc in (1, 2)  # shape inference refuses it, or the check finds the outputs differ
    assert not (tmp_path / "out.onnx").exists() and not list(tmp_path.glob("*.unchecked"))
    assert "batch_model:" in capsys.readouterr().err


def test_input_not_at_batch_1_is_refused(tmp_path):
    model, _ = rebatch(onnx.load(str(hard_coded_reshape_model(tmp_path / "m.onnx"))), 4)
    with pytest.raises(ModelError, match="not at batch 1"):
        rebatch(model, 8)


@pytest.mark.parametrize("batch", ["4", "dynamic"])
def test_shared_yolox_nano_batched_on_real_photos(shared_dir, tmp_path, capsys, batch):
    """The shared YOLOX-nano (batch 1, shapes computed in-graph) at batch 4 and dynamic: every slot's output equals
    the batch-1 model's on the shared photos (tolerance 1e-4 + 1e-4 x |value|; ONNX Runtime CPU gives 0 here)."""
    out = tmp_path / f"yolox_{batch}.onnx"
    rc = batch_model.main([str(shared_dir / "models" / "yolox_nano.onnx"), str(out), "--batch", batch,
                           "--images", str(shared_dir / "data" / "images")])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "outputs equal" in text and "checked on 9 frame(s)" in text
    eng = OnnxRuntimeEngine(str(out))
    assert eng.inputs[0].shape == ((4 if batch == "4" else -1), 3, 416, 416)
    assert eng.outputs[0].shape[1:] == (3549, 85)


def test_fix_batch_specialises_a_dynamic_model_and_keeps_its_outputs(tmp_path):
    """What the torch engine does per prepared batch size (it folds the now static Shape nodes): the dynamic model
    fixed at 3 runs at batch 3 with the same outputs as the dynamic one (ONNX Runtime)."""
    from vrt_ros.model.onnx_batch import fix_batch

    dyn, _ = rebatch(onnx.load(str(hard_coded_reshape_model(tmp_path / "m.onnx"))), None)
    onnx.save(dyn, str(tmp_path / "dyn.onnx"))
    fixed = fix_batch(dyn, 3)
    onnx.save(fixed, str(tmp_path / "b3.onnx"))
    assert OnnxRuntimeEngine(str(tmp_path / "b3.onnx")).inputs[0].shape == (3, 3, 64, 64)
    assert all(vi.type.tensor_type.shape.dim[0].dim_value == 3 for vi in fixed.graph.value_info
               if vi.type.tensor_type.shape.dim)  # every intermediate shape is static at 3
    x = np.random.default_rng(0).random((3, 3, 64, 64), np.float32)
    (a,) = OnnxRuntimeEngine(str(tmp_path / "b3.onnx")).run(x)
    (b,) = OnnxRuntimeEngine(str(tmp_path / "dyn.onnx")).run(x)
    assert np.array_equal(a, b)
    with pytest.raises(ModelError, match="fixed at batch 3"):
        fix_batch(fixed, 4)


def test_a_model_whose_graph_hard_codes_batch_1_elsewhere_is_refused_cleanly(tmp_path, capsys):
    """The blob detector (test/synthetic_models.py) concatenates a constant [1, 1] with per-frame values: batched,
    ONNX shape inference (exit 2) or ONNX Runtime (exit 1) refuses it; the tool says which, writes nothing."""
    from synthetic_models import blob_end2end

    src = blob_end2end(tmp_path / "blob.onnx", 320, 320)
    rc = batch_model.main([str(src), str(tmp_path / "out.onnx"), "--batch", "2"])
    err = capsys.readouterr().err
    assert (rc, "does not run" in err) == (1, True) or (rc, "fails ONNX shape inference" in err) == (2, True), err
    assert not list(tmp_path.glob("out.onnx*"))
