"""The torch engine's disk cache (vrt_ros.engines.torch_cache, issue 27): hit, miss, stale (another torch version,
another onnx2torch, another GPU), corrupt, truncated, refused by torch, a cache folder that cannot be written; on the real
:class:`~vrt_ros.engines.engine_cache.EngineCache` in a temporary folder, with the real YOLOX-nano file's SHA-256 in
the key. torch is not needed: the conversion and the load are stand-ins that count their calls and carry real bytes
(the archive is the ONNX file's own bytes, so a corrupt byte is a real corrupt byte). The real TorchScript archive
round trip runs on the GPU machine (test/test_gpu_torch_cache.py) and, where torch and onnx2torch import, on the
CPU (the last test here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vrt_ros.engines.engine_cache import EngineCache, file_sha256
from vrt_ros.engines.torch_cache import SCHEMA, Converted, TorchKey, load_or_convert


class StandIn:
    """convert / load for :func:`load_or_convert`: convert "converts" the ONNX file (its bytes are the archive),
    load reads the archive back and checks it against the file; both count their calls."""

    def __init__(self, onnx: Path, refuse: bool = False, traceable: bool = True) -> None:
        self.onnx, self.refuse, self.traceable = onnx, refuse, traceable
        self.converted = self.loaded = 0
        self.said: list[str] = []

    def convert(self) -> Converted:
        self.converted += 1
        data = self.onnx.read_bytes()
        meta = {"inputs": [["images", [1, 3, 416, 416], "float32"]], "outputs": [["output", [1, 3549, 85], "float32"]],
                "batch_sizes": [1], "host_constants": 7}
        return Converted(("converted", len(data)), meta, data if self.traceable else None)

    def load(self, path: Path, meta: dict):
        self.loaded += 1
        if self.refuse:
            raise RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central directory")
        data = path.read_bytes()
        assert data == self.onnx.read_bytes() and meta["host_constants"] == 7
        return ("loaded", len(data))

    def run(self, cache, key):
        return load_or_convert(cache, key, self.convert, self.load, self.said.append)


@pytest.fixture
def onnx_file(shared_dir) -> Path:
    path = shared_dir / "models" / "yolox_nano.onnx"
    if not path.is_file():
        pytest.skip(f"{path} not found (the shared data folder, VRT_SHARED_DIR)")
    return path


def key_for(onnx: Path, **changes) -> TorchKey:
    fields = dict(onnx_sha256=file_sha256(onnx), torch_version="2.11.0+cu130", onnx2torch_version="1.5.15",
                  precision="fp32", max_batch=1, gpu_name="NVIDIA H200", compute_capability="9.0",
                  model_name=onnx.stem)
    fields.update(changes)
    return TorchKey(**fields)


def test_key_fields_digest_and_file_name(onnx_file):
    key = key_for(onnx_file)
    fields = key.fields()
    assert fields["engine"] == "torch" and fields["schema"] == SCHEMA and "model_name" not in fields
    assert fields["onnx_sha256"] == file_sha256(onnx_file) and len(fields["onnx_sha256"]) == 64
    # every validity field changes the digest; the readable name does not
    for change in (dict(torch_version="2.12.0"), dict(onnx2torch_version="1.5.16"), dict(precision="fp16"),
                   dict(max_batch=8), dict(gpu_name="NVIDIA L4"), dict(compute_capability="8.9"), dict(device_index=1),
                   dict(onnx_sha256="0" * 64)):
        assert key_for(onnx_file, **change).digest() != key.digest(), change
    assert key_for(onnx_file, model_name="other").digest() == key.digest()
    # the file is named for the model and its configuration, not for the versions (an upgrade replaces it)
    assert key.file_stem() == f"yolox_nano-torch-fp32-b1-{file_sha256(onnx_file)[:16]}"
    assert key_for(onnx_file, torch_version="2.12.0").file_stem() == key.file_stem()
    assert key_for(onnx_file, max_batch=8).file_stem() != key.file_stem()
    assert EngineCache("/c").paths(key)[0].name == key.file_stem() + ".ts"
    with pytest.raises(ValueError, match="precision 'int8'"):
        key_for(onnx_file, precision="int8")
    assert key_for(onnx_file, max_batch=0).max_batch == 1


def test_miss_then_hit_without_converting(onnx_file, tmp_path):
    cache, key, s = EngineCache(tmp_path / "engines"), key_for(onnx_file), StandIn(onnx_file)
    model, meta, out = s.run(cache, key)
    assert (out.status, out.stored, s.converted, s.loaded) == ("miss", True, 1, 0) and model[0] == "converted"
    archive, sidecar = cache.paths(key)
    assert archive.read_bytes() == onnx_file.read_bytes() and out.path == archive
    side = json.loads(sidecar.read_text())
    assert side["torch"] == meta and side["torch_version"] == "2.11.0+cu130" and side["engine"] == "torch"
    assert any("written to the cache" in line and str(archive) in line for line in s.said)
    # the next start: loaded, not converted, with the description the sidecar kept
    model, meta2, out = s.run(cache, key)
    assert (out.status, s.converted, s.loaded) == ("hit", 1, 1) and model[0] == "loaded" and meta2 == meta
    assert out.seconds >= 0 and not out.stored


@pytest.mark.parametrize("change, field", [(dict(torch_version="2.12.0+cu130"), "torch_version"),
                                           (dict(onnx2torch_version="1.6.0"), "onnx2torch_version"),
                                           (dict(gpu_name="NVIDIA L4", compute_capability="8.9"), "gpu_name")])
def test_entry_of_another_torch_version_or_gpu_is_stale_and_replaced(onnx_file, tmp_path, change, field):
    cache, s = EngineCache(tmp_path), StandIn(onnx_file)
    s.run(cache, key_for(onnx_file))
    newer = key_for(onnx_file, **change)
    model, _, out = s.run(cache, newer)
    assert out.status == "stale" and field in out.reason and s.converted == 2 and s.loaded == 0, out
    assert any("is stale" in line and field in line for line in s.said)
    # replaced in place: one entry, now for the newer key, and a hit from then on
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in cache.paths(newer))
    assert json.loads(cache.paths(newer)[1].read_text())[field] == newer.fields()[field]
    assert s.run(cache, newer)[2].status == "hit" and s.converted == 2


def test_corrupt_or_truncated_archive_is_converted_again(onnx_file, tmp_path):
    cache, key, s = EngineCache(tmp_path), key_for(onnx_file), StandIn(onnx_file)
    s.run(cache, key)
    archive = cache.paths(key)[0]
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: same size, other SHA-256
    archive.write_bytes(bytes(data))
    _, _, out = s.run(cache, key)
    assert out.status == "stale" and "SHA-256" in out.reason and s.converted == 2 and s.loaded == 0
    assert archive.read_bytes() == onnx_file.read_bytes()  # rewritten
    with open(archive, "r+b") as f:  # an interrupted copy
        f.truncate(1000)
    _, _, out = s.run(cache, key)
    assert out.status == "stale" and "truncated" in out.reason and s.converted == 3
    cache.paths(key)[1].write_text("{not json")  # a damaged sidecar
    _, _, out = s.run(cache, key)
    assert out.status == "stale" and "unreadable" in out.reason and s.converted == 4
    assert s.run(cache, key)[2].status == "hit" and s.loaded == 1


def test_archive_that_torch_refuses_is_deleted_and_converted_again(onnx_file, tmp_path):
    cache, key = EngineCache(tmp_path), key_for(onnx_file)
    StandIn(onnx_file).run(cache, key)
    refusing = StandIn(onnx_file, refuse=True)
    model, _, out = refusing.run(cache, key)
    assert out.status == "unusable" and "central directory" in out.reason and out.stored
    assert (refusing.loaded, refusing.converted, model[0]) == (1, 1, "converted")
    # a sidecar without our description (written by something else) is unusable too
    sidecar = cache.paths(key)[1]
    side = json.loads(sidecar.read_text())
    del side["torch"]
    sidecar.write_text(json.dumps(side))
    s = StandIn(onnx_file)
    _, _, out = s.run(cache, key)
    assert out.status == "unusable" and "KeyError" in out.reason and s.converted == 1


def test_file_in_place_of_the_folder_is_logged_and_the_model_still_runs(onnx_file, tmp_path):
    blocker = tmp_path / "engines"
    blocker.write_text("a file where the cache folder should be")
    s = StandIn(onnx_file)
    model, _, out = s.run(EngineCache(blocker), key_for(onnx_file))
    assert model[0] == "converted" and not out.stored and "could not write" in out.reason and s.converted == 1


def test_untraceable_model_runs_converted_and_is_not_cached(onnx_file, tmp_path):
    cache, key, s = EngineCache(tmp_path), key_for(onnx_file), StandIn(onnx_file, traceable=False)
    model, _, out = s.run(cache, key)
    assert model[0] == "converted" and not out.stored and "not cached" in out.reason
    assert not any(tmp_path.iterdir())
    assert s.run(cache, key)[2].status == "miss" and s.converted == 2


def test_no_cache_converts_every_time(onnx_file):
    s = StandIn(onnx_file)
    for _ in range(2):
        _, _, out = s.run(None, key_for(onnx_file))
        assert out.status == "off" and out.path is None
    assert s.converted == 2 and s.loaded == 0


def _torch_onnx2torch_reason() -> str | None:
    try:
        import torch  # noqa: F401
        import onnx2torch  # noqa: F401
    except Exception as exc:  # ImportError, or a torchvision built for another torch
        return f"torch/onnx2torch not importable: {type(exc).__name__}: {exc}"
    return None


@pytest.mark.skipif(_torch_onnx2torch_reason() is not None, reason=str(_torch_onnx2torch_reason()))
def test_real_torchscript_archive_round_trip_on_cpu(onnx_file, tmp_path):
    """The real conversion, trace, archive and load (torch_convert) on the CPU: the loaded model gives the traced
    model's outputs exactly (same TorchScript graph, same weights) and the converted model's within 1e-5."""
    import torch

    from vrt_ros.engines.torch_convert import convert_onnx, describe, load_sizes, trace_sizes

    cpu = torch.device("cpu")
    models, inputs, outputs, host = convert_onnx(onnx_file, cpu, 1)
    traced, archive, error = trace_sizes(models, inputs[0], torch.float32, cpu)
    assert error == "" and archive.startswith(b"PK")  # a TorchScript archive is a zip file
    key = key_for(onnx_file, torch_version=torch.__version__, gpu_name="cpu", compute_capability="0.0")
    cache = EngineCache(tmp_path)
    cache.store(key, archive, extra={"torch": describe(inputs, outputs, models, host_constants=host)})
    found = cache.lookup(key)
    loaded = load_sizes(found.engine_path, cpu, found.meta["torch"]["batch_sizes"])
    x = torch.from_numpy(np.random.default_rng(0).random((1, 3, 416, 416), dtype=np.float32))
    with torch.no_grad(), torch.jit.optimized_execution(False):
        want, got, conv = traced[1](x), loaded[1](x), models[1](x)
    assert torch.equal(want, got)
    assert torch.allclose(conv, got, rtol=0, atol=1e-5)
