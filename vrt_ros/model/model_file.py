"""What a model file is, judged by its content rather than its name: an ONNX model or a serialized TensorRT engine.

A file's first bytes decide (an ONNX model named ``.engine`` is loaded as ONNX; a TensorRT plan named ``.onnx`` as
an engine); the suffix is only the fallback for a file that cannot be read or is neither. Core module: no third-party
imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from vrt_ros.errors import ModelError

PLAN_MAGIC = b"ftrt"
"""First bytes of a serialized TensorRT plan (TensorRT's ``kPLAN_MAGIC_TAG``)."""
_ONNX_FIELD_TAGS = (0x12, 0x1A, 0x22, 0x2A, 0x3A, 0x42, 0x52, 0x5A, 0x62, 0x72)
"""Length-delimited ``ModelProto`` field tags that may follow ``ir_version`` (producer_name, graph, opset_import...)."""
_MAX_METADATA = 1 << 20
"""Largest Ultralytics metadata block accepted before a plan (bytes)."""

ModelFormat = Literal["onnx", "tensorrt"]


def looks_like_onnx(head: bytes) -> bool:
    """True when ``head`` starts like an ONNX ``ModelProto`` (onnx.proto3): field 1 ``ir_version`` (tag 0x08, a small
    varint), then a length-delimited field such as producer_name (2), graph (7) or opset_import (8)."""
    return len(head) > 3 and head[0] == 0x08 and 1 <= head[1] <= 32 and head[2] in _ONNX_FIELD_TAGS


def model_format(path: str | Path) -> ModelFormat | None:
    """``"onnx"`` or ``"tensorrt"`` from the file's first bytes; None when it cannot be read or is neither.

    A TensorRT plan starts with :data:`PLAN_MAGIC`; an Ultralytics ``.engine`` export starts with a ``uint32``
    little-endian metadata length, the JSON metadata, then the plan.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if head.startswith(PLAN_MAGIC):
                return "tensorrt"
            if looks_like_onnx(head):
                return "onnx"
            meta_len = int.from_bytes(head[:4], "little") if len(head) >= 4 else 0
            if 0 < meta_len <= _MAX_METADATA:
                f.seek(4 + meta_len)
                if f.read(4) == PLAN_MAGIC:
                    return "tensorrt"
    except OSError:
        return None
    return None


def is_onnx_model(path: str | Path) -> bool:
    """True for an ONNX model by content; by the ``.onnx`` suffix when the content does not tell."""
    fmt = model_format(path)
    return fmt == "onnx" if fmt is not None else Path(path).suffix.lower() == ".onnx"


def check_model_file(path: str | Path) -> Path:
    """Check that ``path`` names a readable, non-empty file (the first start-up check of ``model.path``).

    Raises:
        ModelError: empty parameter, a missing path, a directory (its model files listed), an unreadable or empty
            file; the message names the path and the fix.
    """
    p = Path(path)
    if not str(path):
        raise ModelError("model.path is empty: set it to an .onnx model file")
    if p.is_dir():
        found = sorted(c.name for c in p.iterdir() if c.suffix.lower() in (".onnx", ".engine", ".plan", ".trt"))
        listed = f" (model files in it: {', '.join(found[:8])})" if found else " (it holds no .onnx/.engine file)"
        raise ModelError(f"model.path {p} is a directory, not a model file: set model.path to the model file{listed}")
    if not p.exists():
        raise ModelError(f"model file {p} does not exist: set model.path to an existing .onnx file")
    try:
        size = p.stat().st_size
        with open(p, "rb"):
            pass
    except OSError as exc:
        raise ModelError(f"model file {p} cannot be read ({exc.strerror}): check its permissions") from exc
    if size == 0:
        raise ModelError(f"model file {p} is empty: expected an ONNX model; re-export or re-download it")
    return p


#: ``ModelProto.metadata_props`` (onnx.proto3 field 14): repeated ``StringStringEntryProto`` {1: key, 2: value}.
_METADATA_FIELD = 14


def _varint(f) -> int | None:
    """One base-128 varint from the file, None at its end."""
    shift = value = 0
    while True:
        b = f.read(1)
        if not b:
            return None
        value |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return value
        shift += 7


def _entry(data: bytes) -> tuple[str, str]:
    """Key and value of one ``StringStringEntryProto``."""
    out, i = {1: b"", 2: b""}, 0
    while i < len(data):
        tag = data[i]
        i += 1
        n = shift = 0
        while True:
            n |= (data[i] & 0x7F) << shift
            i += 1
            if not data[i - 1] & 0x80:
                break
            shift += 7
        out[tag >> 3] = data[i : i + n]
        i += n
    return out[1].decode("utf-8", "replace"), out[2].decode("utf-8", "replace")


def onnx_metadata(path: str | Path) -> dict[str, str]:
    """An ONNX model's custom metadata (``metadata_props``; Ultralytics writes ``task``, ``description``, ``names``),
    read without loading the graph: the top-level fields are walked and every other field is skipped by its length.

    Used where the engine does not carry it (the GPU path's TensorRT / torch engines), so ``model.head: auto`` gets
    the same hint on both paths. Returns {} for a file that is not ONNX or cannot be read (the metadata is a hint).
    """
    if model_format(path) != "onnx":
        return {}
    found: dict[str, str] = {}
    try:
        with open(path, "rb") as f:
            while (tag := _varint(f)) is not None:
                field, wire = tag >> 3, tag & 7
                if wire == 0:
                    _varint(f)
                elif wire == 2:
                    n = _varint(f) or 0
                    if field == _METADATA_FIELD and n <= _MAX_METADATA:
                        key, value = _entry(f.read(n))
                        found[key] = value
                    else:
                        f.seek(n, 1)
                elif wire in (1, 5):
                    f.seek(8 if wire == 1 else 4, 1)
                else:
                    return found
    except (OSError, IndexError):
        return found
    return found
