"""Torch engine (YOLOX-nano converted by onnx2torch): no host sync inside enqueue, CUDA graph = eager, and the
outputs match ONNX Runtime on the CPU."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from gpu_support import requires_gpu, torch_reason

pytestmark = [*requires_gpu, pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")]


@pytest.fixture(scope="module")
def model_input(shared_dir):
    from vrt_ros.intake.preprocess import CpuPreprocessor
    from vrt_ros.types import InputSpec

    bgr = cv2.imread(str(shared_dir / "data" / "images" / "darknet_dog.jpg"), cv2.IMREAD_COLOR)
    tensor, _ = CpuPreprocessor(InputSpec(416, 416))(bgr)
    return shared_dir / "models" / "yolox_nano.onnx", tensor.copy()


def run(engine, tensor: np.ndarray, stream, sync_debug: bool = False) -> np.ndarray:
    import torch

    x = torch.from_numpy(tensor).to(engine.device)
    y = torch.empty(engine.outputs[0].shape, dtype=torch.float32, device=engine.device)
    torch.cuda.synchronize()
    if sync_debug:
        torch.cuda.set_sync_debug_mode("error")  # any synchronising op inside raises
    try:
        for _ in range(3):
            engine.enqueue(stream.cuda_stream, x.data_ptr(), [y.data_ptr()])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    stream.synchronize()
    return y.cpu().numpy()


def test_eager_enqueue_makes_no_host_sync_and_matches_onnxruntime(model_input):
    import torch

    from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine
    from vrt_ros.engines.torch import TorchEngine

    path, tensor = model_input
    engine = TorchEngine(path, cuda_graph=False)
    print(f"shape constants kept on the host: {engine.host_constants}")
    got = run(engine, tensor, torch.cuda.Stream(), sync_debug=True)
    want = OnnxRuntimeEngine(path).run(tensor)[0]
    err = np.abs(got - want).max()
    print(f"torch (eager, no TF32) vs onnxruntime CPU: max abs output diff {err:.2e}")
    assert got.shape == want.shape and err < 1e-2


def test_cuda_graph_captures_and_equals_eager(model_input):
    import torch

    from vrt_ros.engines.torch import TorchEngine

    path, tensor = model_input
    graph_engine = TorchEngine(path, cuda_graph=True)
    stream = torch.cuda.Stream()
    got = run(graph_engine, tensor, stream)
    assert graph_engine.graph_error is None, graph_engine.graph_error
    assert len(graph_engine._graphs) == 1
    eager = run(TorchEngine(path, cuda_graph=False), tensor, torch.cuda.Stream())
    err = np.abs(got - eager).max()
    print(f"CUDA graph replay vs eager: max abs diff {err:.2e}")
    assert err <= 1e-5
    # replays make no host sync either
    got2 = run(graph_engine, tensor, stream, sync_debug=True)
    np.testing.assert_array_equal(got, got2)


def test_fp16_keeps_fp32_io_runs_in_a_cuda_graph_without_host_sync(model_input):
    """engine.fp16 on the torch engine: FP32 in and out (the FP16 TensorRT contract), half-precision weights, the
    cast inside the captured graph, no host sync on replay; outputs within FP16 rounding of the FP32 engine."""
    import torch

    from vrt_ros.engines.torch import TorchEngine

    path, tensor = model_input
    fp16 = TorchEngine(path, cuda_graph=True, fp16=True)
    assert fp16.fp16 and "FP16" in fp16.name
    assert [t.dtype for t in fp16.inputs + fp16.outputs] == ["float32", "float32"]
    params = {p.dtype for p in fp16.model.parameters()} | {b.dtype for b in fp16.model.buffers() if b.is_floating_point()}
    assert params == {torch.float16}, params
    stream = torch.cuda.Stream()
    got = run(fp16, tensor, stream)
    assert fp16.graph_error is None and len(fp16._graphs) == 1, fp16.graph_error
    np.testing.assert_array_equal(run(fp16, tensor, stream, sync_debug=True), got)  # replays: no host sync
    eager = run(TorchEngine(path, cuda_graph=False, fp16=True), tensor, torch.cuda.Stream())
    want = run(TorchEngine(path, cuda_graph=True), tensor, torch.cuda.Stream())
    box_err = float(np.abs(got[..., :4] - want[..., :4]).max())
    score_err = float(np.abs(got[..., 4:] - want[..., 4:]).max())
    print(f"FP16 vs FP32 torch engine: max raw box output diff {box_err:.3f}, max score diff "
          f"{score_err:.2e}; FP16 graph vs eager {np.abs(got - eager).max():.2e}")
    assert np.abs(got - eager).max() <= 1e-3
    assert np.isfinite(got).all() and box_err <= 2.0 and score_err <= 0.1  # H200, torch 2.11: 0.47, 0.073


def test_HC_10_fp16_torch_engine_same_detections_on_real_photos(shared_dir, tmp_path):
    """HC-10 through the CUDA pipeline: YOLOX-nano with engine.fp16 true and false on real photos give the same
    detections (vrt_ros.bench.stages.torch_fp16.compare: each >= 0.45 has a same-class partner at IoU >= 0.85); the full set, bags
    and CenterFace included, is `python -m vrt_ros.bench.stages.torch_fp16` (results/bench/torch_fp16.md)."""
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.bench.stages.torch_fp16 import compare
    from vrt_ros.settings.config import defaults

    pipes = {}
    for fp16 in (False, True):
        values = defaults()
        values.update({"model.path": str(shared_dir / "models" / "yolox_nano.onnx"), "engine.cache_dir": str(tmp_path),
                       "backend": "cuda", "engine.fp16": fp16})
        pipes[fp16] = CudaPipeline(values, log=print)
    assert "FP16" in pipes[True].engine.name and "FP16" not in pipes[False].engine.name
    strong = 0
    for photo in sorted((shared_dir / "data" / "images").iterdir()):
        img = cv2.imread(str(photo), cv2.IMREAD_COLOR)
        a, b = pipes[False].process_bgr(img), pipes[True].process_bgr(img)
        r = compare(a, b)
        print(f"{photo.name}: {r}")
        assert r["ok"], (photo.name, r)
        strong += int((a.scores >= 0.45).sum())
    assert strong >= 10  # the comparison is not vacuous
    for p in pipes.values():
        p.close()


def test_HC_10_fp16_torch_engine_centerface_same_faces_on_the_crowd_photo(tmp_path_factory):
    """CenterFace through the CUDA pipeline with engine.fp16 true and false: the same faces on the crowd photo
    (compare: each >= 0.45 has a same-class partner at IoU >= 0.85). Its unfused BatchNorm layers are folded into the
    convolutions before the cast (a plain .half() found 40 of 97 faces here: running variances beyond 65504)."""
    from test_heads import centerface_files

    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.bench.stages.torch_fp16 import compare
    from vrt_ros.settings.config import defaults

    model, crowd = centerface_files(tmp_path_factory)
    pipes = {}
    for fp16 in (False, True):
        values = defaults()
        values.update({"model.path": str(model), "engine.cache_dir": str(tmp_path_factory.mktemp("cache")),
                       "backend": "cuda", "engine.fp16": fp16, "score_threshold": 0.5, "nms_iou": 0.3,
                       "max_detections": 1000})  # as in vrt_ros.bench.stages.torch_fp16
        pipes[fp16] = CudaPipeline(values, log=print)
    engine = pipes[True].engine
    assert "FP16" in engine.name and engine.fp16_folded > 0, (engine.name, engine.fp16_folded)
    img = cv2.imread(str(crowd), cv2.IMREAD_COLOR)
    a, b = pipes[False].process_bgr(img), pipes[True].process_bgr(img)
    r = compare(a, b)
    print(f"crowd.jpg: BatchNorm folded {engine.fp16_folded}, kept in FP32 {engine.fp16_fp32_layers}: {r}")
    assert r["ok"], r
    assert int((a.scores >= 0.45).sum()) >= 50  # the crowd: the comparison is not vacuous
    for p in pipes.values():
        p.close()
