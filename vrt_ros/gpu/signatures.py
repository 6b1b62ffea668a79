"""The ``extern "C"`` kernel signatures of ``kernels/*.cu``, and the check of a launch's arguments against them.

The ``.cu`` sources are the single description of every kernel's arguments (DESIGN.md, "Kernels and their
callers"): this module parses each ``extern "C" __global__ void <entry>(<parameters>)`` (also with
``__launch_bounds__(...)`` and inside an ``extern "C" { }`` block; C++-linkage kernels are skipped) and checks an argument
tuple against it, argument by argument (count, and the numpy scalar type each C type needs: pointers as
``numpy.uint64`` device addresses, ``int`` as ``numpy.int32``, ``float`` as ``numpy.float32``, ``double`` as
``numpy.float64`` ...). Launch sites build their argument tuples by parameter name (:meth:`Signature.args`), so a
launch site reads like the kernel's parameter list and a renamed, added or removed parameter fails by name. The
GPU path builds every launch's arguments once per frame geometry (and for a nominal frame at start-up), and the
recording stand-in of the CUDA runtime the tests use checks every launch again (:meth:`Signature.check`); a wrong
count or type raises :class:`KernelArgumentError`.

Pure Python (no CUDA import): it runs in CI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from vrt_ros.gpu.errors import GpuError

#: numpy scalar type a kernel parameter of each C type (qualifiers removed) is passed as.
SCALAR_TYPES: dict[str, type] = {
    "int": np.int32,
    "unsigned int": np.uint32,
    "unsigned": np.uint32,
    "long long": np.int64,
    "unsigned long long": np.uint64,
    "short": np.int16,
    "unsigned short": np.uint16,
    "char": np.int8,
    "signed char": np.int8,
    "unsigned char": np.uint8,
    "float": np.float32,
    "double": np.float64,
    "bool": np.bool_,
    "int8_t": np.int8,
    "uint8_t": np.uint8,
    "int16_t": np.int16,
    "uint16_t": np.uint16,
    "int32_t": np.int32,
    "uint32_t": np.uint32,
    "int64_t": np.int64,
    "uint64_t": np.uint64,
    "size_t": np.uint64,  # 64-bit device code
}
#: numpy type of a pointer parameter (a device address).
POINTER_TYPE = np.uint64

_BOUNDS = r"(?:__launch_bounds__\s*\([^()]*\)\s*)?"
# A __global__ function: optional extern "C" before it, __launch_bounds__(...) before or after ``void``.
_ENTRY = re.compile(
    r'(extern\s+"C"\s+)?' + _BOUNDS + r"__global__\s+" + _BOUNDS + r"void\s+" + _BOUNDS + r"(\w+)\s*\(([^)]*)\)", re.S
)
_EXTERN_C_BLOCK = re.compile(r'extern\s+"C"\s*\{')
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict)\b")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


class KernelArgumentError(GpuError):
    """A launch's arguments do not match the kernel's ``extern "C"`` signature (count or type)."""


@dataclass(frozen=True)
class Param:
    """One kernel parameter.

    Attributes:
        ctype: C type without qualifiers, e.g. ``"float"``, ``"int"``, ``"unsigned char*"``.
        name: parameter name in the source.
    """

    ctype: str
    name: str

    @property
    def pointer(self) -> bool:
        return self.ctype.endswith("*")

    @property
    def numpy_type(self) -> type:
        """The numpy scalar type a launch passes for this parameter."""
        return POINTER_TYPE if self.pointer else SCALAR_TYPES[self.ctype]


@dataclass(frozen=True)
class Signature:
    """The parameters of one ``extern "C"`` kernel entry.

    Attributes:
        module: the source's stem (``kernels/<module>.cu``).
        entry: the entry name.
        params: the parameters, in order.
    """

    module: str
    entry: str
    params: tuple[Param, ...]

    def args(self, **values: object) -> tuple:
        """The launch's argument tuple built by parameter name, so a launch site reads like the kernel's parameter
        list: ``sig.args(src=ptr, src_w=640, ...)``. Each value is converted to its parameter's numpy type
        (pointers are device addresses, passed as ``numpy.uint64``; ``bool`` becomes 0/1).

        Raises:
            KernelArgumentError: a parameter without a value, a name the kernel has no parameter for, or a
                non-integral value for an integer or pointer parameter (the message names the kernel and parameter).
        """
        names = [p.name for p in self.params]
        missing = [n for n in names if n not in values]
        unknown = sorted(set(values) - set(names))
        if missing or unknown:
            raise KernelArgumentError(
                f"kernel {self.module}.{self.entry}({', '.join(f'{p.ctype} {p.name}' for p in self.params)}): "
                + "; ".join(x for x in (f"no value for {missing}" if missing else "",
                                        f"no parameter named {unknown}" if unknown else "") if x)
            )
        out = []
        for p in self.params:
            want, value = p.numpy_type, values[p.name]
            if issubclass(want, np.integer) and isinstance(value, (float, np.floating)) and not float(value).is_integer():
                raise KernelArgumentError(
                    f"kernel {self.module}.{self.entry}: parameter '{p.ctype} {p.name}' needs an integer, got {value!r}")
            out.append(want(int(value)) if issubclass(want, np.integer) else want(value))
        return tuple(out)

    def check(self, args: Sequence[object]) -> None:
        """Check a launch's argument tuple against this signature.

        Raises:
            KernelArgumentError: wrong count, or an argument whose type is not the parameter's numpy type
                (the message names the kernel, the parameter, its C type and what was passed).
        """
        if len(args) != len(self.params):
            raise KernelArgumentError(
                f"kernel {self.module}.{self.entry} takes {len(self.params)} arguments "
                f"({', '.join(f'{p.ctype} {p.name}' for p in self.params)}); the launch passes {len(args)}"
            )
        for i, (p, a) in enumerate(zip(self.params, args)):
            want = p.numpy_type
            if type(a) is not want:
                raise KernelArgumentError(
                    f"kernel {self.module}.{self.entry}: argument {i} '{p.ctype} {p.name}' needs numpy.{want.__name__}, "
                    f"the launch passes {type(a).__module__}.{type(a).__name__} ({a!r})"
                )


def _param(text: str, entry: str) -> Param:
    t = " ".join(_QUALIFIERS.sub(" ", text).split())
    m = re.fullmatch(r"(.+?)\s*(\**)\s*(\w+)", t)
    if not m:
        raise ValueError(f"kernel {entry}: cannot parse parameter {text!r}")
    base, stars, name = m.group(1).strip(), m.group(2), m.group(3)
    if not stars and base not in SCALAR_TYPES:
        raise ValueError(f"kernel {entry}: parameter {text!r} has a type with no numpy equivalent ({base!r})")
    return Param(ctype=base + stars, name=name)


def parse_source(text: str, module: str) -> dict[str, Signature]:
    """Every ``extern "C" __global__`` entry of one CUDA source.

    Raises:
        ValueError: a parameter whose type has no numpy equivalent, or that does not parse.
    """
    text = _COMMENTS.sub(" ", text)
    blocks = _extern_c_blocks(text)
    out: dict[str, Signature] = {}
    for m in _ENTRY.finditer(text):
        extern_c, entry, params = m.groups()
        if not extern_c and not any(a <= m.start() < b for a, b in blocks):
            continue  # C++ linkage (mangled name): not loadable by its name, not an entry
        parts = [p for p in (s.strip() for s in params.split(",")) if p and p != "void"]
        out[entry] = Signature(module, entry, tuple(_param(p, entry) for p in parts))
    return out


def _extern_c_blocks(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of each ``extern "C" { ... }`` block (braces matched)."""
    out = []
    for m in _EXTERN_C_BLOCK.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append((m.end(), i))
    return out


def load_signatures(source_dir: str | Path) -> dict[tuple[str, str], Signature]:
    """Signatures of every ``*.cu`` in ``source_dir``, keyed by ``(module, entry)``."""
    out: dict[tuple[str, str], Signature] = {}
    for path in sorted(Path(source_dir).glob("*.cu")):
        for entry, sig in parse_source(path.read_text(), path.stem).items():
            out[(path.stem, entry)] = sig
    return out
