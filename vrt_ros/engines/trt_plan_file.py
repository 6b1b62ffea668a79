"""Serialized TensorRT plan files: read and checked before any TensorRT module sees a byte.

A plan starts with its flavour's magic (``ftrt``: TensorRT, ``vtrt``: TensorRT for RTX, see
:mod:`vrt_ros.engines.trt_flavours`); Ultralytics exports put a ``uint32`` little-endian JSON length and the JSON
metadata in front of it. Each bad file (missing, a directory, empty, too short, random bytes, an ONNX model, an image)
gives one :class:`~vrt_ros.errors.ModelError` naming the file, what was expected and the fix, the same way on every
machine, whether TensorRT is installed or not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from vrt_ros.engines.trt_flavours import FLAVOURS, TENSORRT, Flavour, flavour_of_plan
from vrt_ros.errors import ModelError

PLAN_MAGIC = TENSORRT.plan_magic
"""First bytes of a serialized TensorRT plan (TensorRT's ``kPLAN_MAGIC_TAG``); TensorRT for RTX writes ``vtrt``."""
PLAN_HEADER_BYTES = 32
"""A file shorter than this cannot hold a plan header (magic, serialization version, size fields)."""
ENGINE_SUFFIXES = (".engine", ".plan", ".trt")
_MAGICS = " or ".join(f"b'{f.plan_magic.decode()}' ({f.label})" for f in FLAVOURS.values())


@dataclass(frozen=True)
class EngineFile:
    """A serialized engine read from disk and checked.

    Attributes:
        path: the file.
        plan: the TensorRT plan bytes (any Ultralytics metadata prefix removed).
        metadata: the Ultralytics JSON metadata when the file had one, else {}.
        flavour: the TensorRT flavour that wrote the plan (from its magic).
    """

    path: Path
    plan: bytes
    metadata: dict
    flavour: Flavour = TENSORRT


def rebuild_hint(path: Path) -> str:
    return (f"rebuild the engine with this TensorRT on this GPU (e.g. trtexec --onnx=model.onnx --saveEngine={path}), "
            "or set model.path to the .onnx model so vrt_ros builds and caches the engine")


def read_engine_file(path: str | Path, fix: str | None = None) -> EngineFile:
    """Read a serialized TensorRT engine and check its header before TensorRT sees it.

    Accepts a raw plan (starting with ``ftrt``, or ``vtrt`` for TensorRT for RTX) or an Ultralytics export (``uint32`` little-endian JSON length,
    the JSON metadata, then the plan).

    Args:
        path: the engine file.
        fix: how to fix a bad file (default: rebuild it / use the ONNX model).

    Raises:
        ModelError: missing path, a directory, an empty or too-short file, or a file that is not a TensorRT plan
            (random bytes, an ONNX model, an image...). The message names the file, what was expected and the fix.
    """
    p = Path(path)
    fix = fix or rebuild_hint(p)
    expected = f"a serialized TensorRT engine (plan starting with {_MAGICS}) or an .onnx model"
    if not str(path):
        raise ModelError(f"model.path is empty: expected {expected}; set model.path")
    if not p.exists():
        raise ModelError(f"engine file {p} does not exist: expected {expected}; set model.path to an existing file")
    if not p.is_file():
        raise ModelError(f"engine path {p} is not a regular file: expected {expected}; set model.path to the file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ModelError(f"engine file {p} cannot be read ({exc}); check its permissions") from exc
    if len(data) < PLAN_HEADER_BYTES:
        raise ModelError(f"engine file {p} is {len(data)} bytes, too short for a TensorRT plan "
                         f"(header alone is {PLAN_HEADER_BYTES} bytes): expected {expected}; fix: {fix}")
    flavour = flavour_of_plan(data)
    if flavour is not None:
        return EngineFile(p, data, {}, flavour)
    meta_len = int.from_bytes(data[:4], "little")
    start = 4 + meta_len
    flavour = flavour_of_plan(data[start:start + 4]) if 0 < meta_len and start + PLAN_HEADER_BYTES <= len(data) else None
    if flavour is not None:
        try:
            meta = json.loads(data[4:start].decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            meta = None
        if isinstance(meta, dict):
            return EngineFile(p, data[start:], meta, flavour)
    what = "an ONNX model (protobuf)" if _looks_like_onnx(data) else "not a TensorRT plan"
    hint = "; if it is an ONNX model, give it the .onnx suffix so it is built" if what.startswith("an ONNX") else ""
    raise ModelError(f"engine file {p} is {what}: its first bytes are {data[:8].hex(' ')}, expected {expected}{hint}; "
                     f"fix: {fix}")


def _looks_like_onnx(data: bytes) -> bool:
    """True when ``data`` starts like an ONNX ``ModelProto``: field 1 (ir_version, a small varint), then a
    length-delimited field such as producer_name (2), graph (7) or opset_import (8). A hint for the message only."""
    return (len(data) > 3 and data[0] == 0x08 and 1 <= data[1] <= 32
            and data[2] in (0x12, 0x1A, 0x22, 0x2A, 0x3A, 0x42, 0x52, 0x5A, 0x62, 0x72))


def check_onnx_file(p: Path) -> None:
    """Fail early on a missing, empty or non-ONNX ``.onnx`` path (TensorRT's parser reports the rest)."""
    if not p.is_file():
        raise ModelError(f"ONNX model {p} does not exist: expected an .onnx file; set model.path to an existing file")
    with open(p, "rb") as f:
        head = f.read(PLAN_HEADER_BYTES)
    if not head:
        raise ModelError(f"ONNX model {p} is empty: expected an ONNX model; re-export or re-download it")
    if flavour_of_plan(head) is not None:
        raise ModelError(f"ONNX model {p} is a serialized TensorRT engine, not ONNX: rename it to .engine so it is loaded as one")


__all__ = ["ENGINE_SUFFIXES", "EngineFile", "PLAN_HEADER_BYTES", "PLAN_MAGIC", "check_onnx_file", "read_engine_file",
           "rebuild_hint"]
