"""The managed node's background imports (vrt_ros.ros.prefetch, issue 27): which modules per backend, and that a
fresh process has them imported, with its log line, without any configure."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vrt_ros.ros import prefetch


CUDA = ["vrt_ros.inference.backends.cuda", "cuda.core"]
CPU = ["vrt_ros.inference.backends.cpu", "onnxruntime"]


def _find(installed: set[str]):
    return lambda name: object() if name in installed else None


@pytest.mark.parametrize("backend, installed, expected", [
    ("cuda", {"cuda.core", "torch", "onnxruntime"}, [*CUDA, "vrt_ros.engines.torch"]),
    ("cuda", {"cuda.core", "torch", "tensorrt"}, [*CUDA, "vrt_ros.engines.tensorrt", "tensorrt"]),
    ("cuda", {"cuda.core", "tensorrt_lean_bindings"}, [*CUDA, "vrt_ros.engines.tensorrt", "tensorrt_lean_bindings"]),
    ("cuda", {"cuda.core", "tensorrt_rtx_bindings", "torch"},
     [*CUDA, "vrt_ros.engines.tensorrt", "tensorrt_rtx_bindings"]),
    ("auto", {"cuda.core", "torch", "onnxruntime"}, [*CUDA, "vrt_ros.engines.torch", *CPU]),
    ("auto", {"onnxruntime", "torch"}, CPU),  # no cuda-python: the CPU path only
    ("cpu", {"cuda.core", "torch", "onnxruntime"}, CPU),
    ("cuda", set(), []),
])
def test_engine_modules_per_backend_and_what_is_installed(backend, installed, expected):
    assert prefetch.engine_modules(backend, find=_find(installed)) == expected


def test_a_missing_parent_package_is_not_installed():
    def find(name):
        raise ModuleNotFoundError(name)

    assert prefetch.engine_modules("auto", find=find) == []


@pytest.mark.skipif(prefetch.engine_modules("cpu") == [], reason="onnxruntime not installed")
def test_the_thread_imports_the_cpu_pipeline_in_a_fresh_process():
    code = ("import sys, threading; from vrt_ros.ros import prefetch; lines = []\n"
            "assert 'onnxruntime' not in sys.modules\n"
            "prefetch.start('cpu', lines.append).join(60)\n"
            "print('onnxruntime' in sys.modules, 'vrt_ros.inference.backends.cpu' in sys.modules); print(lines[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, line = out.stdout.splitlines()
    assert first == "True True"
    assert line.startswith("engine modules imported in the background for configure: vrt_ros.inference.backends.cpu, "
                           "onnxruntime (")


def test_a_failing_background_import_is_logged_and_left_to_configure(monkeypatch):
    """An import that fails in the thread ends it with one line naming the module (configure imports it again and
    reports the error itself); nothing is raised in the thread."""
    monkeypatch.setattr(prefetch, "engine_modules", lambda backend: ["vrt_ros_no_such_module_here"])
    lines: list[str] = []
    errors: list = []
    monkeypatch.setattr("threading.excepthook", lambda args: errors.append(args.exc_type))
    prefetch.start("cpu", lines.append).join(30)
    assert errors == [] and len(lines) == 1
    assert lines[0].startswith("background import of vrt_ros_no_such_module_here failed (ModuleNotFoundError")
