"""The torch engine's disk cache on the GPU (issue 27, warm start): the first engine converts YOLOX-nano with onnx2torch
and writes the TorchScript archive, the next loads it; both give the same outputs bit for bit (the same traced graph
and weights, on the same GPU) and ONNX Runtime's on the CPU within 1e-2 (test_gpu_torch_engine's tolerance for
FP32 without TF32). A warm start in a fresh process imports neither onnx nor onnx2torch, and a damaged archive is
converted again. The cache logic itself (stale, corrupt, unwritable) is tested without torch in test/test_torch_cache.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpu_support import requires_gpu, torch_reason
from test_gpu_torch_engine import model_input, run  # noqa: F401 - model_input is a fixture

pytestmark = [*requires_gpu, pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")]
REPO = Path(__file__).resolve().parents[1]


def test_cold_converts_and_writes_warm_loads_same_outputs(model_input, tmp_path):  # noqa: F811
    import torch

    from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine
    from vrt_ros.engines.torch import TorchEngine

    path, tensor = model_input
    said: list[str] = []
    cold = TorchEngine(path, cuda_graph=True, cache_dir=str(tmp_path), log=said.append)
    assert cold.cache.status == "miss" and cold.cache.stored, cold.cache
    archive = cold.cache.path
    assert archive.parent == tmp_path / "engines" and archive.suffix == ".ts" and archive.stat().st_size > 1e6
    side = json.loads(archive.with_suffix(".json").read_text())
    assert side["torch_version"] == torch.__version__ and side["gpu_name"] == torch.cuda.get_device_name(0)
    warm = TorchEngine(path, cuda_graph=True, cache_dir=str(tmp_path), log=said.append)
    assert warm.cache.status == "hit" and not warm.cache.stored and warm.cache.path == archive
    assert (warm.inputs, warm.outputs, warm.batch_sizes) == (cold.inputs, cold.outputs, cold.batch_sizes)
    assert warm.host_constants == cold.host_constants > 0
    # the loaded archive keeps its shape constants on the host, as saved (moved to the GPU, the traced graph's
    # aten::Int reads of them became device-to-host copies and the CUDA-graph capture failed: seen on the H200)
    devices = {t.device.type for m in warm._models.values() for t in (*m.parameters(), *m.buffers())}
    assert devices == {"cpu", "cuda"}, devices
    print(f"\ncold: converted + traced + written in {cold.cache.seconds:.2f} s; warm: loaded in {warm.cache.seconds:.2f} s")
    got_cold = run(cold, tensor, torch.cuda.Stream())
    got_warm = run(warm, tensor, torch.cuda.Stream(), sync_debug=False)
    assert cold.graph_error is None and warm.graph_error is None, (cold.graph_error, warm.graph_error)
    np.testing.assert_array_equal(got_warm, got_cold)
    np.testing.assert_array_equal(run(warm, tensor, torch.cuda.Stream(), sync_debug=True), got_warm)  # no host sync
    want = OnnxRuntimeEngine(path).run(tensor)[0]
    err = float(np.abs(got_warm - want).max())
    print(f"warm (cached TorchScript, CUDA graph) vs onnxruntime CPU: max abs output diff {err:.2e}")
    assert err < 1e-2
    assert any("written to the cache" in s for s in said) and any("loaded from the cache" in s for s in said)


def test_fp16_and_dynamic_batch_entries_are_cached_too(shared_dir, tmp_path):
    import torch

    import onnx

    from vrt_ros.engines.torch import TorchEngine
    from vrt_ros.model.onnx_batch import rebatch

    src = shared_dir / "models" / "yolox_nano.onnx"
    dyn = tmp_path / "yolox_nano_dynamic.onnx"
    onnx.save(rebatch(onnx.load(str(src)), None)[0], str(dyn))
    for path, kw in ((src, dict(fp16=True)), (dyn, dict(max_batch=4))):
        first = TorchEngine(path, cache_dir=str(tmp_path), **kw)
        again = TorchEngine(path, cache_dir=str(tmp_path), **kw)
        assert (first.cache.status, again.cache.status) == ("miss", "hit"), (path.name, kw)
        assert again.batch_sizes == first.batch_sizes and again.fp16_folded == first.fp16_folded
        b = again.batch_sizes[-1]
        x = torch.rand((b, *again.inputs[0].shape[1:]), device=again.device)
        outs = []
        for engine in (first, again):
            y = torch.empty((b, *engine.outputs[0].shape[1:]), dtype=torch.float32, device=engine.device)
            stream = torch.cuda.Stream()
            engine.enqueue(stream.cuda_stream, x.data_ptr(), [y.data_ptr()], batch=b if len(again.batch_sizes) > 1 else None)
            stream.synchronize()
            outs.append(y.cpu().numpy())
        np.testing.assert_array_equal(outs[1], outs[0])
        print(f"{path.name} {kw}: batch sizes {again.batch_sizes}, cold {first.cache.seconds:.2f} s, warm "
              f"{again.cache.seconds:.2f} s")
    # two entries (one per model and configuration), each an archive and its sidecar
    assert len(list((tmp_path / "engines").glob("*.ts"))) == 2 and len(list((tmp_path / "engines").glob("*.json"))) == 2


def test_warm_start_in_a_fresh_process_imports_no_onnx2torch(model_input, tmp_path):  # noqa: F811
    from vrt_ros.engines.torch import TorchEngine

    path, _ = model_input
    TorchEngine(path, cache_dir=str(tmp_path))  # fills the cache
    code = textwrap.dedent(f"""
        import sys, time
        t0 = time.perf_counter()
        from vrt_ros.engines.torch import TorchEngine
        t1 = time.perf_counter()
        e = TorchEngine({str(path)!r}, cache_dir={str(tmp_path)!r})
        t2 = time.perf_counter()
        bad = sorted(m for m in ("onnx", "onnx2torch", "torchvision") if m in sys.modules)
        print(e.cache.status, round(t1 - t0, 3), round(t2 - t1, 3), ",".join(bad) or "-")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    status, imports, engine, bad = out.stdout.split()[-4:]
    print(f"\nwarm start in a fresh process: import vrt_ros.engines.torch {imports} s, engine (load + set-up) {engine} s;"
          f" modules it should not need imported: {bad}")
    assert status == "hit" and bad == "-"


def test_damaged_archive_is_converted_again_on_the_gpu(model_input, tmp_path):  # noqa: F811
    import hashlib

    import torch

    from vrt_ros.engines.torch import TorchEngine

    path, tensor = model_input
    first = TorchEngine(path, cache_dir=str(tmp_path))
    want = run(first, tensor, torch.cuda.Stream())
    archive = first.cache.path
    data = bytearray(archive.read_bytes())
    data[len(data) // 3] ^= 0x5A
    archive.write_bytes(bytes(data))
    said: list[str] = []
    second = TorchEngine(path, cache_dir=str(tmp_path), log=said.append)
    assert second.cache.status == "stale" and "SHA-256" in second.cache.reason and second.cache.stored
    assert any("converting again" in s for s in said)
    np.testing.assert_array_equal(run(second, tensor, torch.cuda.Stream()), want)
    # a sidecar that matches an archive torch cannot read (rewritten consistently by something else)
    archive.write_bytes(b"PK\x03\x04 not a TorchScript archive")
    side_path = archive.with_suffix(".json")
    side = json.loads(side_path.read_text())
    side.update(engine_bytes=archive.stat().st_size, engine_sha256=hashlib.sha256(archive.read_bytes()).hexdigest())
    side_path.write_text(json.dumps(side))
    third = TorchEngine(path, cache_dir=str(tmp_path))
    assert third.cache.status == "unusable" and third.cache.stored, third.cache
    np.testing.assert_array_equal(run(third, tensor, torch.cuda.Stream()), want)
