"""TensorRT flavours: which TensorRT Python module the engine uses, and on which GPUs each can run.

Two flavours share one wrapper (:mod:`vrt_ros.engines.tensorrt`), because their Python APIs are the same named-tensor
API (``Builder``, ``OnnxParser``, ``Runtime``, ``ICudaEngine.get_tensor_*``, ``execute_async_v3``):

==================  ==============================================  ====================  ==========================
flavour             module (PyPI)                                   plan magic            GPUs (compute capability)
==================  ==============================================  ====================  ==========================
``tensorrt``        ``tensorrt`` (``tensorrt`` >= 10); deserialise   ``ftrt``              any the build targets
                    only: ``tensorrt_lean_bindings``
                    (``tensorrt-lean-cu13-bindings``)
``tensorrt_rtx``    ``tensorrt_rtx_bindings``                        ``vtrt``              7.5, 8.0, 8.6, 8.9, 12.0+
                    (``tensorrt-rtx-cu13-bindings`` + ``-libs``)
==================  ==============================================  ====================  ==========================

The RTX list is NVIDIA's (TensorRT for RTX support matrix and "CPU-only AOT" page, 1.x: engines run on 8.0, 8.6,
8.9 and 12.0 and later by default, Turing 7.5 when built for it; its runtime refuses e.g. the H200, 9.0, logging
"The engine cannot run on this GPU, which has compute capability 9.0"). Its builder and ONNX parser need no GPU.

The parameter ``engine.tensorrt_flavour`` picks one: ``auto`` prefers ``tensorrt`` and takes ``tensorrt_rtx`` only
when ``tensorrt`` does not import, and skips it on a GPU it cannot run on (the caller then falls back to the next
engine). Plans of one flavour are never loaded by the other: the engine cache keys them apart, and a serialized
engine's magic says which flavour made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType

from vrt_ros.errors import BackendUnavailable

AUTO = "auto"


@dataclass(frozen=True)
class Flavour:
    """One TensorRT flavour.

    Attributes:
        name: the ``engine.tensorrt_flavour`` value, also stored in the engine cache key.
        label: for messages ("TensorRT", "TensorRT for RTX").
        module: the Python module with builder and runtime.
        runtime_module: a deserialise-only module accepted when ``module`` is missing ("" = none).
        plan_magic: first bytes of the plans it writes.
        install: what to install, for messages.
        compute_capabilities: (major, minor) pairs it runs on; None = any GPU.
        from_major: it also runs on every compute capability with at least this major version (0 = none).
    """

    name: str
    label: str
    module: str
    runtime_module: str
    plan_magic: bytes
    install: str
    compute_capabilities: tuple[tuple[int, int], ...] | None = None
    from_major: int = 0

    def runs_on(self, compute_capability: str | None) -> bool:
        """Whether this flavour's runtime can run on a GPU of ``compute_capability`` ("9.0" or "90"); True when
        unknown (None) or when the flavour runs on any GPU."""
        if self.compute_capabilities is None or not compute_capability:
            return True
        cc = parse_compute_capability(compute_capability)
        return cc in self.compute_capabilities or (self.from_major > 0 and cc[0] >= self.from_major)

    def supported_text(self) -> str:
        """The supported compute capabilities as text, e.g. "7.5, 8.0, 8.6, 8.9, 12.0 and later"."""
        if self.compute_capabilities is None:
            return "any"
        items = [f"{a}.{b}" for a, b in self.compute_capabilities if not (self.from_major and a >= self.from_major)]
        return ", ".join(items + ([f"{self.from_major}.0 and later"] if self.from_major else []))


TENSORRT = Flavour("tensorrt", "TensorRT", "tensorrt", "tensorrt_lean_bindings", b"ftrt",
                   "tensorrt >= 10 (pip install tensorrt, or the JetPack/apt package)")
TENSORRT_RTX = Flavour("tensorrt_rtx", "TensorRT for RTX", "tensorrt_rtx_bindings", "", b"vtrt",
                       "tensorrt-rtx-cu13-libs + tensorrt-rtx-cu13-bindings from PyPI (or the -cu12 pair)",
                       ((7, 5), (8, 0), (8, 6), (8, 9)), from_major=12)

FLAVOURS: dict[str, Flavour] = {f.name: f for f in (TENSORRT, TENSORRT_RTX)}
"""Every flavour, in the order ``auto`` tries them."""
CHOICES = (AUTO, *FLAVOURS)
"""Values of the ``engine.tensorrt_flavour`` parameter."""


def parse_compute_capability(text: str) -> tuple[int, int]:
    """``"9.0"`` / ``"90"`` / ``"120"`` -> (major, minor).

    Raises:
        ValueError: not a compute capability.
    """
    s = str(text).strip()
    m = re.fullmatch(r"(\d+)\.(\d)", s) or re.fullmatch(r"(\d+)(\d)", s)
    if not m:
        raise ValueError(f"not a compute capability: {text!r} (expected e.g. '8.6' or '86')")
    return int(m.group(1)), int(m.group(2))


def flavour_of(trt: ModuleType) -> Flavour:
    """The flavour of an imported TensorRT module (by its name; anything else, e.g. a stand-in, is ``tensorrt``)."""
    name = str(getattr(trt, "__name__", ""))
    return TENSORRT_RTX if name.split(".")[0] == TENSORRT_RTX.module else TENSORRT


def flavour_of_plan(plan: bytes) -> Flavour | None:
    """The flavour whose plan magic starts ``plan``, or None."""
    return next((f for f in FLAVOURS.values() if plan.startswith(f.plan_magic)), None)


def import_flavour(flavour: Flavour, require_builder: bool = False) -> ModuleType:
    """Import the module of ``flavour`` (its deserialise-only module when the full one is missing and no builder
    is needed).

    Raises:
        BackendUnavailable: nothing suitable imports; the message says what to install.
    """
    try:
        return __import__(flavour.module)
    except Exception as exc:  # ImportError, or a broken install failing to load its libraries
        error = f"'{flavour.module}' does not import ({type(exc).__name__}: {exc})"
    if require_builder and flavour.runtime_module:
        raise BackendUnavailable(f"{flavour.label}: building an engine from ONNX needs the full '{flavour.module}' "
                                 f"package, and {error}; install {flavour.install}")
    if not flavour.runtime_module:
        raise BackendUnavailable(f"{flavour.label}: {error}; install {flavour.install}")
    try:
        return __import__(flavour.runtime_module)
    except Exception as exc:
        raise BackendUnavailable(f"{flavour.label}: {error}, nor its runtime '{flavour.runtime_module}' ({exc}); "
                                 f"install {flavour.install}") from None


def gpu_refusal(flavour: Flavour, trt: ModuleType | None, compute_capability: str | None,
                gpu_name: str | None = None) -> str | None:
    """Why ``flavour`` cannot run on this GPU, or None when it can (or the GPU is unknown)."""
    if flavour.runs_on(compute_capability):
        return None
    major, minor = parse_compute_capability(str(compute_capability))
    version = f" {getattr(trt, '__version__', '')}".rstrip() if trt is not None else ""
    gpu = f"{gpu_name} (compute capability {major}.{minor})" if gpu_name else f"compute capability {major}.{minor}"
    return (f"{flavour.label}{version} cannot run on this GPU, {gpu}: it runs on compute capability "
            f"{flavour.supported_text()} (RTX-class GPUs)")


def select(choice: str = AUTO, *, compute_capability: str | None = None, gpu_name: str | None = None,
           require_builder: bool = False, plan_flavour: Flavour | None = None) -> tuple[Flavour, ModuleType]:
    """The flavour and module the engine uses.

    Args:
        choice: ``engine.tensorrt_flavour``: "auto" (``tensorrt``, else ``tensorrt_rtx``), or one flavour's name.
        compute_capability: the GPU's ("9.0"/"90"); a flavour that cannot run on it is skipped (auto) or refused.
        gpu_name: for messages.
        require_builder: an ONNX model is to be built (a deserialise-only module does not do).
        plan_flavour: the flavour that wrote the serialized engine to load (only that one is tried).

    Raises:
        BackendUnavailable: no flavour can run here; the message gives each flavour's reason in one line.
        ValueError: an unknown ``choice``.
    """
    if choice not in CHOICES:
        raise ValueError(f"engine.tensorrt_flavour {choice!r} is not one of {', '.join(CHOICES)}")
    candidates = [FLAVOURS[choice]] if choice != AUTO else list(FLAVOURS.values())
    if plan_flavour is not None:
        candidates = [f for f in candidates if f is plan_flavour]
    reasons = []
    for flavour in candidates:
        try:
            trt = import_flavour(flavour, require_builder=require_builder)
        except BackendUnavailable as exc:
            reasons.append(str(exc))
            continue
        refusal = gpu_refusal(flavour, trt, compute_capability, gpu_name)
        if refusal:
            reasons.append(("skipped: " if choice == AUTO else "") + refusal)
            continue
        return flavour, trt
    raise BackendUnavailable("; ".join(reasons) or "no TensorRT flavour matches")


def unavailable_reason(choice: str = AUTO, *, compute_capability: str | None = None, gpu_name: str | None = None,
                       require_builder: bool = False) -> str | None:
    """Why no TensorRT flavour can be used here, or None when one can. Never raises (``backend: auto``, test skips)."""
    try:
        select(choice, compute_capability=compute_capability, gpu_name=gpu_name, require_builder=require_builder)
    except (BackendUnavailable, ValueError) as exc:
        return str(exc)
    return None


__all__ = ["AUTO", "CHOICES", "FLAVOURS", "Flavour", "TENSORRT", "TENSORRT_RTX", "flavour_of", "flavour_of_plan",
           "gpu_refusal", "import_flavour", "parse_compute_capability", "select", "unavailable_reason"]
