"""The kernel library: ``kernels/*.cu`` compiled with NVRTC once per process, cached on disk as cubin.

A module is compiled for the device's own architecture (``sm_<arch>`` read from the device, never hard-coded).
The cache key is the SHA-256 of the source text, the NVRTC options, the architecture, the NVRTC version and the
cuda.core version; the cubin lives under ``$XDG_CACHE_HOME/vrt_ros/kernels`` (``~/.cache`` when unset) or a
directory given by the caller, never inside the installed package. Each cached file ends with the SHA-256 of the
cubin before it: a truncated or corrupt file (a full disk, a crash while copying a cache) is detected, logged and
rebuilt, never loaded. A compile failure raises :class:`~vrt_ros.gpu.errors.KernelCompileError` carrying the full
NVRTC log.

Every entry handed out has an ``extern "C"`` signature parsed from its source (:mod:`vrt_ros.gpu.signatures`);
:meth:`KernelLibrary.signature` gives it to the callers, which check their launch arguments against it.

Kernel sources are found in ``$VRT_KERNEL_DIR``, the installed share directory (``share/vrt_ros/kernels`` through
ament_index, or under ``sys.prefix``), or the source tree (``<repo>/kernels``), in that order.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import cuda.core
from cuda.bindings import nvrtc
from cuda.core import Kernel, ObjectCode, Program, ProgramOptions

from vrt_ros.gpu.errors import KernelCompileError
from vrt_ros.gpu.signatures import Signature, parse_source

log = logging.getLogger(__name__)

# Options every module is compiled with (part of the cache key).
STD = "c++17"
# Bytes of the SHA-256 trailer after the cubin in a cache file.
_DIGEST = 32


def kernel_dir() -> Path:
    """Directory holding the ``.cu`` sources (see the module docstring for the search order).

    Raises:
        FileNotFoundError: no candidate directory holds ``preprocess.cu``.
    """
    candidates: list[Path] = []
    env = os.environ.get("VRT_KERNEL_DIR")
    if env:
        candidates.append(Path(env))
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory("vrt_ros")) / "kernels")
    except Exception:  # ament_index absent or package not installed: fall through
        pass
    candidates.append(Path(sys.prefix) / "share" / "vrt_ros" / "kernels")
    candidates.append(Path(__file__).resolve().parents[2] / "kernels")
    for c in candidates:
        if (c / "preprocess.cu").is_file():
            return c
    raise FileNotFoundError(f"kernel sources (preprocess.cu) not found in any of {[str(c) for c in candidates]}")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/vrt_ros/kernels`` or ``~/.cache/vrt_ros/kernels``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vrt_ros" / "kernels"


def nvrtc_version() -> tuple[int, int]:
    """The NVRTC library's (major, minor) version."""
    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise KernelCompileError(f"nvrtcVersion failed: {err}", log="", source="")
    return int(major), int(minor)


@dataclass
class LibraryStats:
    """What loading kernels cost (logged, and read by the cache test).

    Attributes:
        compiled: modules compiled by NVRTC.
        disk_hits: modules loaded from the on-disk cache.
        memory_hits: modules already loaded in this process.
        compile_seconds: total NVRTC time, seconds.
    """

    compiled: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    compile_seconds: float = 0.0


class KernelLibrary:
    """Compiled kernel modules of one process, for one architecture.

    Args:
        arch: compute capability digits, e.g. "90" (from ``GpuRuntime.arch``).
        cache_dir: where cubins are stored; default :func:`default_cache_dir`. ``None`` uses the default.
        source_dir: where the ``.cu`` files are; default :func:`kernel_dir`.

    Use :meth:`shared` to get the process-wide instance for an architecture (compile once per process).
    """

    _shared: dict[tuple[str, str, str], "KernelLibrary"] = {}
    _shared_lock = threading.Lock()

    def __init__(self, arch: str, cache_dir: str | Path | None = None, source_dir: str | Path | None = None) -> None:
        self.arch = str(arch)
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.source_dir = Path(source_dir) if source_dir else kernel_dir()
        self.stats = LibraryStats()
        self._modules: dict[str, ObjectCode] = {}
        self._kernels: dict[tuple[str, str], Kernel] = {}
        self._signatures: dict[str, dict[str, Signature]] = {}
        self._lock = threading.Lock()
        self._nvrtc = nvrtc_version()

    @classmethod
    def shared(cls, arch: str, cache_dir: str | Path | None = None) -> "KernelLibrary":
        """The process-wide library for ``arch`` and ``cache_dir`` (so each module compiles once per process)."""
        key = (str(arch), str(cache_dir or default_cache_dir()), str(kernel_dir()))
        with cls._shared_lock:
            lib = cls._shared.get(key)
            if lib is None:
                lib = cls._shared[key] = cls(arch, cache_dir)
            return lib

    def options(self, name: str) -> ProgramOptions:
        """The NVRTC options for module ``name`` (part of its cache key)."""
        return ProgramOptions(name=name, arch=f"sm_{self.arch}", std=STD)

    def cache_key(self, name: str, source: str) -> str:
        """SHA-256 over source, options, architecture, NVRTC and cuda.core versions."""
        h = hashlib.sha256()
        for part in (source, repr(self.options(name)), self.arch, repr(self._nvrtc), cuda.core.__version__):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def module(self, name: str) -> ObjectCode:
        """The compiled module ``kernels/<name>.cu`` (compiled, or read from the cache, on first use only).

        Raises:
            FileNotFoundError: no such source.
            KernelCompileError: NVRTC failed; the message holds the full log.
        """
        with self._lock:
            mod = self._modules.get(name)
            if mod is not None:
                self.stats.memory_hits += 1
                return mod
            path = self.source_dir / f"{name}.cu"
            source = path.read_text()
            self._signatures[name] = parse_source(source, name)
            key = self.cache_key(name, source)
            cubin_path = self.cache_dir / f"{name}-sm_{self.arch}-{key[:32]}.cubin"
            mod = self._load_cached(name, cubin_path)
            if mod is None:
                mod = self._compile(name, source, path)
                self._store(cubin_path, bytes(mod.code))
            self._modules[name] = mod
            return mod

    def _load_cached(self, name: str, cubin_path: Path) -> ObjectCode | None:
        """The cached module, or None when there is none or it is corrupt (logged; the caller rebuilds it)."""
        try:
            blob = cubin_path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("kernel cache %s unreadable (%s); recompiling", cubin_path, exc)
            return None
        cubin, digest = blob[:-_DIGEST], blob[-_DIGEST:]
        if len(blob) <= _DIGEST or hashlib.sha256(cubin).digest() != digest:
            log.warning("kernel cache %s is corrupt (%d bytes, checksum mismatch); recompiling", cubin_path, len(blob))
            return None
        try:
            mod = ObjectCode.from_cubin(cubin, name=name)
        except Exception as exc:
            log.warning("kernel cache %s does not load (%s); recompiling", cubin_path, exc)
            return None
        self.stats.disk_hits += 1
        log.info("kernel module %s: loaded from cache %s", name, cubin_path)
        return mod

    def kernel(self, module: str, entry: str) -> Kernel:
        """The kernel ``entry`` (an ``extern "C"`` name) of module ``module``.

        Raises:
            KeyError: ``entry`` is no ``extern "C" __global__`` function of the source (so it has no signature).
        """
        k = self._kernels.get((module, entry))
        if k is None:
            self.signature(module, entry)
            k = self.module(module).get_kernel(entry)
            self._kernels[(module, entry)] = k
        return k

    def signature(self, module: str, entry: str) -> Signature:
        """The ``extern "C"`` signature of ``entry`` parsed from ``kernels/<module>.cu`` (see :mod:`vrt_ros.gpu.signatures`).

        Raises:
            KeyError: no such ``extern "C" __global__`` entry in the source.
        """
        sigs = self._signatures.get(module)
        if sigs is None:
            self.module(module)
            sigs = self._signatures[module]
        try:
            return sigs[entry]
        except KeyError:
            raise KeyError(f'kernels/{module}.cu has no extern "C" __global__ entry {entry!r} (entries: {sorted(sigs)})') from None

    def _compile(self, name: str, source: str, path: Path) -> ObjectCode:
        logs = io.StringIO()
        t0 = time.perf_counter()
        try:
            prog = Program(source, "c++", self.options(name))
            mod = prog.compile("cubin", logs=logs)
        except Exception as exc:
            text = logs.getvalue()
            raise KernelCompileError(
                f"NVRTC failed to compile {path} for sm_{self.arch} (NVRTC {self._nvrtc[0]}.{self._nvrtc[1]}): "
                f"{exc}" + (f"\n--- NVRTC log ---\n{text}" if text else ""),
                log=text or str(exc),
                source=str(path),
            ) from exc
        dt = time.perf_counter() - t0
        self.stats.compiled += 1
        self.stats.compile_seconds += dt
        log.info("kernel module %s: compiled by NVRTC for sm_%s in %.3f s", name, self.arch, dt)
        return mod

    def _store(self, cubin_path: Path, data: bytes) -> None:
        try:
            cubin_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = cubin_path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(data + hashlib.sha256(data).digest())
            tmp.replace(cubin_path)  # atomic: a concurrent reader sees the whole file or none
        except OSError as exc:  # a read-only cache dir costs a recompile next start, nothing else
            log.warning("kernel cache %s not writable (%s); kernels will be recompiled next start", cubin_path, exc)
