"""The torch engine's disk cache: an ONNX model converted once, loaded at later starts without onnx2torch (issue 27).

Converting an ONNX model with onnx2torch took 5.9 s of a 12.7 s start on the H200 (and imports onnx, onnx2torch and
torchvision). The converted model is kept as a **TorchScript archive** (``torch.jit.save``): a scripted wrapper
module whose submodules ``b<N>`` are the model traced (``torch.jit.trace``) at each prepared batch size N, after the
start-up conversion (static ``Shape`` nodes folded, shape constants read on the host, FP16 when asked). Tracing
records every shape argument as a constant, so the archive has no host-side shape reads left. Loading it
(``torch.jit.load``) needs neither onnx2torch nor onnx, and unpickles no Python objects: the archive holds
TorchScript code, compiled by TorchScript's own compiler (not run as Python), and tensors, which TorchScript's own
unpickler restores (it knows only TorchScript types). Format reference: the TorchScript serialization notes of
PyTorch (``torch/csrc/jit/docs/serialization.md``).

Entries live beside the TensorRT plans (:func:`vrt_ros.engines.engine_cache.cache_dir`) and go through the same
:class:`~vrt_ros.engines.engine_cache.EngineCache` (JSON sidecar with size and SHA-256, atomic writes)::

    <cache dir>/<onnx stem>-torch-<precision>-b<max batch>-<onnx sha256[:16]>.ts
    <cache dir>/<onnx stem>-torch-<precision>-b<max batch>-<onnx sha256[:16]>.json   (sidecar, its "torch" field:
                                                                                 vrt_ros.engines.torch_convert.describe)

The key (:class:`TorchKey`) holds what the archive depends on: the ONNX file's SHA-256, the torch and onnx2torch
versions, the precision, the largest batch asked for (a dynamic-batch model is prepared at 1 and that), the GPU, and
:data:`SCHEMA` (this package's conversion steps). An entry that is stale (another torch, say), truncated, corrupt or
that torch refuses is reported with the reason, deleted and converted again (the file name leaves the versions
out, so an upgrade replaces its entry, see :meth:`TorchKey.file_stem`); a cache folder that cannot be written is
logged and the engine runs from the conversion. This module imports neither torch nor onnx: the decisions are
testable without them, the torch steps are the callables :func:`load_or_convert` is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from vrt_ros.engines.engine_cache import EngineCache, fields_digest, safe_name

# Bump when the conversion changes what the archive holds (shape folding, host constants, FP16, tracing, the
# wrapper's layout, the sidecar's "torch" field): older entries then read as stale.
SCHEMA = 1
M = TypeVar("M")


@dataclass(frozen=True)
class TorchKey:
    """Everything a converted torch model depends on.

    Attributes:
        onnx_sha256: SHA-256 of the ONNX file (hex).
        torch_version: ``torch.__version__``, e.g. "2.11.0+cu130".
        onnx2torch_version: the converter's version, e.g. "1.5.15" (its op mappings decide the model).
        precision: "fp32" or "fp16" (``engine.fp16``).
        max_batch: the largest batch asked for (``engine.max_batch``; a fixed-batch model is converted at its own).
        gpu_name: the device's name, e.g. "NVIDIA H200".
        compute_capability: "major.minor", e.g. "9.0".
        device_index: the CUDA device ordinal: the archive's tensors load onto the devices they were saved from
            (weights on this GPU, shape constants on the host), and the trace records the device.
        model_name: the ONNX file's stem, for readable file names only (not part of the digest).
    """

    onnx_sha256: str
    torch_version: str
    onnx2torch_version: str
    precision: str
    max_batch: int
    gpu_name: str
    compute_capability: str
    device_index: int = 0
    model_name: str = "model"
    suffix: ClassVar[str] = ".ts"

    def __post_init__(self) -> None:
        if self.precision not in ("fp32", "fp16"):
            raise ValueError(f"precision {self.precision!r} is not one of fp32, fp16")
        object.__setattr__(self, "max_batch", max(1, int(self.max_batch)))

    def fields(self) -> dict[str, Any]:
        """The key fields that decide validity (everything except ``model_name``), the engine kind and the schema."""
        d = asdict(self)
        d.pop("model_name")
        d.update(engine="torch", schema=SCHEMA)
        return d

    def digest(self) -> str:
        """SHA-256 (hex) of the canonical JSON of :meth:`fields`."""
        return fields_digest(self.fields())

    def file_stem(self) -> str:
        """``<model name>-torch-<precision>-b<max batch>-<first 16 hex digits of the ONNX SHA-256>``, filesystem-safe.

        Named for the model and its configuration only: after an upgrade of torch, onnx2torch or this package, or on
        another GPU, the same file is found, reported stale with the field that differs, and replaced (no
        entry is left behind for every version ever run)."""
        return f"{safe_name(self.model_name)}-torch-{self.precision}-b{self.max_batch}-{self.onnx_sha256[:16]}"


@dataclass(frozen=True)
class CacheOutcome:
    """What :func:`load_or_convert` did.

    Attributes:
        status: "hit" (loaded from the cache), "miss" (no entry: converted), "stale" (an entry for other inputs, or
            truncated/corrupt by its sidecar: converted), "unusable" (the sidecar matched but loading failed:
            converted) or "off" (no cache: converted, nothing written).
        path: the archive's path (written or loaded), or None when off.
        reason: for stale/unusable, why; for a failed write, the error; else "".
        stored: whether an archive was written now.
        seconds: time in the load or the conversion (+ write), s.
    """

    status: str
    path: Path | None
    reason: str = ""
    stored: bool = False
    seconds: float = 0.0


@dataclass
class Converted(Generic[M]):
    """What a conversion returns: the model to run and the JSON-able description the sidecar keeps (``meta``: the
    inputs/outputs, batch sizes and conversion counts a later start needs without reading the ONNX file);
    ``archive``: the serialized TorchScript archive, or None when the model could not be traced (not cached)."""

    model: M
    meta: dict
    archive: bytes | None


def load_or_convert(cache: EngineCache | None, key: TorchKey, convert: Callable[[], Converted[M]],
                    load: Callable[[Path, dict], M], say: Callable[[str], None],
                    clock: Callable[[], float] | None = None) -> tuple[M, dict, CacheOutcome]:
    """The model for ``key``: loaded from the cache when a valid entry exists, else converted and written.

    Args:
        cache: the cache folder, or None to always convert and write nothing.
        key: the entry's key.
        convert: converts the model now (onnx2torch), returning a :class:`Converted`.
        load: loads an archive (the entry's path and its sidecar's "torch" field) into the model to run; any
            exception it raises marks the entry unusable (it is deleted and the model converted).
        say: log callback (one line per decision).
        clock: seconds clock (default ``time.perf_counter``).

    Returns:
        (model, meta, outcome).

    Raises:
        whatever ``convert`` raises (a model that cannot be converted is a start-up error, cache or not).
    """
    clock = clock or time.perf_counter
    start = clock()
    if cache is None:
        done = convert()
        return done.model, done.meta, CacheOutcome("off", None, seconds=clock() - start)
    found = cache.lookup(key)
    status, reason = found.status, found.reason
    if found.hit:
        try:
            meta = found.meta["torch"]
            model = load(found.engine_path, meta)
            return model, meta, CacheOutcome("hit", found.engine_path, seconds=clock() - start)
        except Exception as exc:  # noqa: BLE001 - any refusal by torch means: convert again
            status, reason = "unusable", f"{type(exc).__name__}: {exc}"
    if status != "miss":
        say(f"torch engine cache entry {found.engine_path.name} is {status} ({reason}); converting again")
        cache.remove(key)
    done = convert()
    stored = False
    if done.archive is None:
        reason = reason or "the model could not be traced: not cached"
    else:
        try:
            cache.store(key, done.archive, extra={"torch": done.meta})
            stored = True
            say(f"torch engine: converted model written to the cache: {found.engine_path} "
                f"({len(done.archive) / 1e6:.1f} MB); delete it to force a conversion (cache folder {cache.directory})")
        except OSError as exc:
            reason = f"could not write the cache {cache.directory} ({exc})"
            say(f"warning: torch engine: {reason}; the model is converted at every start until engine.cache_dir "
                "is writable")
    return done.model, done.meta, CacheOutcome(status, found.engine_path, reason, stored, clock() - start)
