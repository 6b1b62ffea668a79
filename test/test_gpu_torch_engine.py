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
    from vrt_ros.preprocess import CpuPreprocessor
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
