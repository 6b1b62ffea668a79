"""The ``extern "C"`` kernel signatures of ``kernels/*.cu``, and the check of a launch's arguments against them.

The ``.cu`` sources are the single description of every kernel's arguments (DESIGN.md, "Kernels and their
callers"): this module parses each ``extern "C" __global__ void <entry>(<parameters>)`` and checks an argument
tuple against it, argument by argument (count, and the numpy scalar type each C type needs: pointers as
``numpy.uint64`` device addresses, ``int`` as ``numpy.int32``, ``float`` as ``numpy.float32``, ``double`` as
``numpy.float64`` ...). The GPU path checks every launch's arguments when it builds them (once per frame geometry,
and for a nominal frame at start-up), and the recording stand-in of the CUDA runtime the tests use checks every
launch again; a wrong argument order (of different types) or count raises :class:`KernelArgumentError`.

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
}
#: numpy type of a pointer parameter (a device address).
POINTER_TYPE = np.uint64

_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)
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
    out: dict[str, Signature] = {}
    for entry, params in _ENTRY.findall(text):
        parts = [p for p in (s.strip() for s in params.split(",")) if p and p != "void"]
        out[entry] = Signature(module, entry, tuple(_param(p, entry) for p in parts))
    return out


def load_signatures(source_dir: str | Path) -> dict[tuple[str, str], Signature]:
    """Signatures of every ``*.cu`` in ``source_dir``, keyed by ``(module, entry)``."""
    out: dict[tuple[str, str], Signature] = {}
    for path in sorted(Path(source_dir).glob("*.cu")):
        for entry, sig in parse_source(path.read_text(), path.stem).items():
            out[(path.stem, entry)] = sig
    return out
