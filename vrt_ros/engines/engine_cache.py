"""The TensorRT engine cache: keys, file names, sidecars and staleness (pure Python, no TensorRT import).

An engine built from an ONNX model is only valid for the exact inputs of its build. The cache key holds all of
them: the ONNX file's SHA-256, the TensorRT flavour (``tensorrt`` or ``tensorrt_rtx``, see
:mod:`vrt_ros.engines.trt_flavours`) and its version, the GPU name and compute capability, the precision (plus the
INT8 calibration cache's SHA-256 when there is one) and the requested shapes (input size and optimisation-profile
bounds). The engine file is named from a digest of the key::

    <cache dir>/<onnx stem>-<flavour>-<precision>-<digest[:20]>.engine
    <cache dir>/<onnx stem>-<flavour>-<precision>-<digest[:20]>.json     (sidecar)

The sidecar is written after the engine and records the key fields plus the engine's size in bytes and SHA-256,
and whatever else the writer adds (the builder records the network's input/output tensors).
:meth:`EngineCache.lookup` compares all of them before an engine is used, so an entry that is stale (other
TensorRT, other GPU, other model), foreign (copied from another machine), truncated or corrupt is reported as
such and rebuilt, never handed to TensorRT. Writes go through a temporary file and an atomic rename, so a build
interrupted half-way leaves no entry that looks complete.

The cache folder is ``<engine.cache_dir>/engines`` when the parameter is set, else
``$XDG_CACHE_HOME/vrt_ros/engines`` (``~/.cache/vrt_ros/engines`` when ``XDG_CACHE_HOME`` is unset); never inside
the installed package.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Bump when the sidecar layout or the meaning of a key field changes: older entries then read as stale.
SCHEMA = 2  # 2: the TensorRT flavour joined the key
_CHUNK = 1 << 20  # bytes read at a time while hashing


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, as 64 lowercase hex digits (read in 1 MiB chunks).

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def fields_digest(fields: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON (sorted keys, no spaces) of a cache key's fields."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def safe_name(model_name: str) -> str:
    """``model_name`` made filesystem-safe for a cache file name (at most 60 characters; "model" when empty)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model_name)[:60] or "model"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/vrt_ros/engines``, or ``~/.cache/vrt_ros/engines`` when the variable is unset or empty."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vrt_ros" / "engines"


def cache_dir(configured: str | os.PathLike | None) -> Path:
    """The engine cache folder for the ``engine.cache_dir`` parameter value.

    Args:
        configured: the parameter; empty or None selects :func:`default_cache_dir`. The kernel cache lives in the
            sibling ``kernels`` folder of the same parameter.
    """
    return Path(configured) / "engines" if configured else default_cache_dir()


@dataclass(frozen=True)
class EngineKey:
    """Everything an engine built from ONNX depends on.

    Attributes:
        onnx_sha256: SHA-256 of the ONNX file (hex).
        tensorrt_version: ``__version__`` of the builder's module, e.g. "10.13.3.9" (TensorRT) or "1.7.1.116"
            (TensorRT for RTX).
        gpu_name: the device's name, e.g. "NVIDIA H200".
        compute_capability: "major.minor", e.g. "9.0" (also accepts the digits form "90", normalised).
        precision: "fp32", "fp16" or "int8".
        shapes: the requested input shapes, e.g. ``{"images": {"min": [1,3,640,640], "opt": [...], "max": [...]}}``
            or the input size ``{"input_size": [width, height]}`` — any JSON-able mapping, compared exactly.
        calibration_sha256: SHA-256 of the INT8 calibration cache ("" without one).
        model_name: the ONNX file's stem, used only to make file names readable (not part of the digest).
        flavour: the TensorRT flavour that builds and loads the plan: "tensorrt" or "tensorrt_rtx".
    """

    onnx_sha256: str
    tensorrt_version: str
    gpu_name: str
    compute_capability: str
    precision: str
    shapes: Any
    calibration_sha256: str = ""
    model_name: str = "model"
    flavour: str = "tensorrt"

    def __post_init__(self) -> None:
        cc = str(self.compute_capability)
        if re.fullmatch(r"\d{2,3}", cc):  # "90" / "100" (the GPU runtime's arch digits) -> "9.0" / "10.0"
            cc = f"{cc[:-1]}.{cc[-1]}"
        object.__setattr__(self, "compute_capability", cc)
        if self.flavour not in ("tensorrt", "tensorrt_rtx"):
            raise ValueError(f"flavour {self.flavour!r} is not one of tensorrt, tensorrt_rtx")
        if self.precision not in ("fp32", "fp16", "int8"):
            raise ValueError(f"precision {self.precision!r} is not one of fp32, fp16, int8")
        # Normalise shapes through JSON so that tuples and lists compare equal with what a sidecar holds.
        object.__setattr__(self, "shapes", json.loads(json.dumps(self.shapes, sort_keys=True)))

    def fields(self) -> dict[str, Any]:
        """The key fields that decide validity (everything except ``model_name``), plus the schema number."""
        d = asdict(self)
        d.pop("model_name")
        d["schema"] = SCHEMA
        return d

    def digest(self) -> str:
        """SHA-256 (hex) of the canonical JSON of :meth:`fields`."""
        return fields_digest(self.fields())

    def file_stem(self) -> str:
        """``<model name>-<flavour>-<precision>-<first 20 hex digits of the digest>``, filesystem-safe."""
        return f"{safe_name(self.model_name)}-{self.flavour}-{self.precision}-{self.digest()[:20]}"


@dataclass(frozen=True)
class Lookup:
    """Result of :meth:`EngineCache.lookup`.

    Attributes:
        status: "hit" (usable), "miss" (no entry) or "stale" (an entry exists but must be rebuilt).
        engine_path: where the engine is, or will be written.
        sidecar_path: its JSON sidecar.
        reason: for "stale", what did not match (names the fields and both values); "" otherwise.
        meta: for "hit", the sidecar's contents; {} otherwise.
    """

    status: str
    engine_path: Path
    sidecar_path: Path
    reason: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def hit(self) -> bool:
        return self.status == "hit"


class EngineCache:
    """Engines built from ONNX, stored in one folder with a JSON sidecar each.

    Keys are :class:`EngineKey` (TensorRT plans, ``.engine``) or any object with the same ``fields()``, ``digest()``
    and ``file_stem()`` and a ``suffix`` for the engine file (:class:`vrt_ros.engines.torch_cache.TorchKey`: the
    torch engine's TorchScript archives, ``.ts``).

    Args:
        directory: the cache folder (see :func:`cache_dir`); created on the first :meth:`store`.
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def paths(self, key: EngineKey) -> tuple[Path, Path]:
        """(engine file, sidecar file) for ``key``."""
        stem = key.file_stem()
        return self.directory / f"{stem}{getattr(key, 'suffix', '.engine')}", self.directory / f"{stem}.json"

    def lookup(self, key: EngineKey) -> Lookup:
        """Decide whether the cached engine for ``key`` may be loaded.

        An entry is a hit only when the sidecar parses, every key field in it equals ``key``'s, and the engine file
        has the recorded size and SHA-256. Never raises for a bad entry: it is reported as "stale" with the reason.
        """
        engine, sidecar = self.paths(key)
        if not engine.exists() and not sidecar.exists():
            return Lookup("miss", engine, sidecar)
        if not engine.is_file():
            return Lookup("stale", engine, sidecar, f"sidecar {sidecar.name} exists but the engine file is missing")
        if not sidecar.is_file():
            return Lookup("stale", engine, sidecar, f"engine {engine.name} has no sidecar {sidecar.name} (interrupted write?)")
        try:
            meta = json.loads(sidecar.read_text())
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            return Lookup("stale", engine, sidecar, f"sidecar {sidecar.name} is unreadable ({exc})")
        want = key.fields()
        diffs = [f"{k}: cached {meta.get(k)!r}, wanted {v!r}" for k, v in sorted(want.items()) if meta.get(k) != v]
        if diffs:
            return Lookup("stale", engine, sidecar, "; ".join(diffs))
        size = engine.stat().st_size
        if meta.get("engine_bytes") != size:
            return Lookup("stale", engine, sidecar, f"engine is {size} bytes, sidecar records {meta.get('engine_bytes')} (truncated or replaced)")
        try:
            digest = file_sha256(engine)
        except OSError as exc:
            return Lookup("stale", engine, sidecar, f"engine unreadable ({exc})")
        if meta.get("engine_sha256") != digest:
            return Lookup("stale", engine, sidecar, "engine SHA-256 differs from the sidecar's (corrupt or replaced)")
        return Lookup("hit", engine, sidecar, meta=meta)

    def store(self, key: EngineKey, data: bytes | bytearray | memoryview, extra: dict | None = None) -> Path:
        """Write a serialized engine and then its sidecar, each atomically (temporary file + rename).

        Args:
            key: the entry.
            data: the serialized engine.
            extra: more JSON-able fields for the sidecar (they never overwrite the key fields).

        Returns:
            The engine path.

        Raises:
            OSError: the folder cannot be created or written.
        """
        engine, sidecar = self.paths(key)
        self.directory.mkdir(parents=True, exist_ok=True)
        view = memoryview(data).cast("B")
        meta = dict(extra or {})
        meta.update(key.fields(), model_name=key.model_name, engine_bytes=view.nbytes,
                    engine_sha256=hashlib.sha256(view).hexdigest(), key_digest=key.digest())
        sidecar.unlink(missing_ok=True)  # no sidecar while the engine file is being replaced
        _atomic_write(engine, view)
        _atomic_write(sidecar, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
        return engine

    def remove(self, key: EngineKey) -> None:
        """Delete the entry's files (missing ones are ignored)."""
        for p in self.paths(key):
            p.unlink(missing_ok=True)


def _atomic_write(path: Path, data) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
