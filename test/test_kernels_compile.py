"""Every ``kernels/*.cu`` compiles for the H200 (sm_90) with the CUDA toolkit's nvcc, where one is installed.

The product compiles the same sources with NVRTC at start-up on the GPU machine; this catches a syntax or type
error in CI, on a machine without a GPU (a compile needs no device). Skipped, with the reason, without nvcc.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vrt_ros.gpu.signatures import parse_source

#: The NVRTC language standard of the product (``vrt_ros.gpu.library.STD``, which imports cuda-python to read).
STD = "c++17"
KERNELS = sorted((Path(__file__).resolve().parents[1] / "kernels").glob("*.cu"))
NVCC = shutil.which("nvcc")


def test_std_is_the_products():
    text = (Path(__file__).resolve().parents[1] / "vrt_ros" / "gpu" / "library.py").read_text()
    assert f'STD = "{STD}"' in text


@pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) not installed here")
@pytest.mark.parametrize("source", KERNELS, ids=lambda p: p.name)
def test_kernel_source_compiles(source, tmp_path):
    out = tmp_path / (source.stem + ".cubin")
    proc = subprocess.run([NVCC, "-cubin", "-arch=sm_90", f"-std={STD}", "-o", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0
    # every extern "C" entry the Python side launches is in the object (its name is not mangled)
    data = out.read_bytes()
    for entry in parse_source(source.read_text(), source.stem):
        assert entry.encode() in data, f"{source.name}: entry {entry} missing from the cubin"
