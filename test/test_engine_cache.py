"""Engine cache: key fields, file names, sidecars, and every way an entry goes stale (no TensorRT needed)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from vrt_ros.engines.engine_cache import EngineCache, EngineKey, cache_dir, default_cache_dir, file_sha256

SHAPES = {"images": {"min": [1, 3, 320, 320], "opt": [1, 3, 640, 640], "max": [1, 3, 1280, 1280]}}


def make_key(**kw) -> EngineKey:
    base = dict(onnx_sha256="ab" * 32, tensorrt_version="10.13.3.9", gpu_name="NVIDIA H200",
                compute_capability="9.0", precision="fp16", shapes=SHAPES, model_name="yolox_nano")
    base.update(kw)
    return EngineKey(**base)


# One changed value per key field: each must give another digest (another file) and read as stale in a sidecar.
CHANGES = {
    "onnx_sha256": "cd" * 32,
    "tensorrt_version": "11.4.0.106",
    "gpu_name": "Orin (nvgpu)",
    "compute_capability": "8.7",
    "precision": "fp32",
    "shapes": {"images": {"min": [1, 3, 640, 640], "opt": [1, 3, 640, 640], "max": [1, 3, 640, 640]}},
    "calibration_sha256": "ef" * 32,
    "flavour": "tensorrt_rtx",  # TensorRT for RTX: its plans never go to TensorRT, nor the reverse
}


def test_every_key_field_changes_the_digest():
    key = make_key()
    assert set(CHANGES) == set(key.fields()) - {"schema"}, "a key field has no test change"
    digests = {key.digest()}
    for name, value in CHANGES.items():
        other = make_key(**{name: value})
        assert other.digest() != key.digest(), name
        assert other.file_stem() != key.file_stem(), name
        digests.add(other.digest())
    assert len(digests) == len(CHANGES) + 1


def test_key_normalisation():
    # The GPU runtime reports the architecture as digits ("90"); tuples and lists of dims are the same shapes.
    assert make_key(compute_capability="90").compute_capability == "9.0"
    assert make_key(compute_capability="100").compute_capability == "10.0"
    tup = {"images": {"min": (1, 3, 320, 320), "opt": (1, 3, 640, 640), "max": (1, 3, 1280, 1280)}}
    assert make_key(shapes=tup).digest() == make_key().digest()
    # model_name only makes the file readable; it is not part of validity.
    assert make_key(model_name="other").digest() == make_key().digest()
    with pytest.raises(ValueError, match="precision"):
        make_key(precision="bf16")


def test_file_stem_is_filesystem_safe():
    stem = make_key(model_name="my model/../x:y").file_stem()
    assert "/" not in stem and ":" not in stem and " " not in stem
    assert stem.endswith("-fp16-" + make_key().digest()[:20])


def test_store_then_hit(tmp_path):
    cache = EngineCache(tmp_path / "engines")
    key = make_key()
    assert cache.lookup(key).status == "miss"
    data = os.urandom(5000)
    path = cache.store(key, data)
    assert path.read_bytes() == data
    found = cache.lookup(key)
    assert found.hit and found.engine_path == path and found.reason == ""
    meta = json.loads(found.sidecar_path.read_text())
    assert meta["engine_bytes"] == 5000 and meta["engine_sha256"] == file_sha256(path)
    for name, value in key.fields().items():
        assert meta[name] == value
    # Only the two files remain: no temporary files left behind.
    assert sorted(p.name for p in (tmp_path / "engines").iterdir()) == sorted([path.name, found.sidecar_path.name])


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_foreign_sidecar_is_stale(tmp_path, field):
    """An entry copied from another machine/version under the same name is rebuilt, and the reason names the field."""
    cache = EngineCache(tmp_path)
    key = make_key()
    cache.store(key, b"ftrt" + os.urandom(100))
    _, sidecar = cache.paths(key)
    meta = json.loads(sidecar.read_text())
    meta[field] = dataclasses.asdict(make_key(**{field: CHANGES[field]}))[field]
    sidecar.write_text(json.dumps(meta))
    found = cache.lookup(key)
    assert found.status == "stale"
    assert field in found.reason


def test_truncated_engine_is_stale(tmp_path):
    cache = EngineCache(tmp_path)
    key = make_key()
    path = cache.store(key, os.urandom(4096))
    path.write_bytes(path.read_bytes()[:2048])
    found = cache.lookup(key)
    assert found.status == "stale" and "2048 bytes" in found.reason and "4096" in found.reason


def test_corrupt_engine_is_stale(tmp_path):
    cache = EngineCache(tmp_path)
    key = make_key()
    path = cache.store(key, bytes(4096))
    data = bytearray(path.read_bytes())
    data[1000] ^= 0xFF  # same size, one byte flipped
    path.write_bytes(bytes(data))
    found = cache.lookup(key)
    assert found.status == "stale" and "SHA-256" in found.reason


def test_missing_or_broken_sidecar_is_stale(tmp_path):
    cache = EngineCache(tmp_path)
    key = make_key()
    engine, sidecar = cache.paths(key)
    cache.store(key, b"x" * 10)
    sidecar.unlink()
    assert cache.lookup(key).status == "stale" and "no sidecar" in cache.lookup(key).reason
    sidecar.write_text("{not json")
    assert cache.lookup(key).status == "stale" and "unreadable" in cache.lookup(key).reason
    sidecar.write_text("[1, 2]")
    assert cache.lookup(key).status == "stale"
    engine.unlink()
    cache.store(key, b"x" * 10)
    engine.unlink()
    assert cache.lookup(key).status == "stale" and "engine file is missing" in cache.lookup(key).reason


def test_old_schema_is_stale(tmp_path):
    cache = EngineCache(tmp_path)
    key = make_key()
    cache.store(key, b"y" * 64)
    _, sidecar = cache.paths(key)
    meta = json.loads(sidecar.read_text())
    meta["schema"] = 0
    sidecar.write_text(json.dumps(meta))
    assert "schema" in cache.lookup(key).reason


def test_store_replaces_and_remove(tmp_path):
    cache = EngineCache(tmp_path)
    key = make_key()
    cache.store(key, b"a" * 100)
    cache.store(key, b"b" * 50)
    assert cache.lookup(key).hit
    assert cache.paths(key)[0].read_bytes() == b"b" * 50
    cache.remove(key)
    assert cache.lookup(key).status == "miss"
    cache.remove(key)  # idempotent


def test_cache_locations(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "vrt_ros" / "engines"
    assert cache_dir("") == default_cache_dir()
    assert cache_dir(None) == default_cache_dir()
    assert cache_dir(str(tmp_path / "c")) == tmp_path / "c" / "engines"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert default_cache_dir() == default_cache_dir().home() / ".cache" / "vrt_ros" / "engines"


def test_file_sha256_matches_hashlib(tmp_path):
    import hashlib

    data = os.urandom(3 * (1 << 20) + 17)  # spans several read chunks
    p = tmp_path / "f.bin"
    p.write_bytes(data)
    assert file_sha256(p) == hashlib.sha256(data).hexdigest()
