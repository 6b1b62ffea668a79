"""`import vrt_ros` and its core modules import no ROS, CUDA, TensorRT, torch or ONNX Runtime (DESIGN.md, layers)."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("rclpy", "cuda", "tensorrt", "torch", "onnxruntime", "tensorrt_lean_bindings", "tensorrt_rtx_bindings", "cupy")
CORE = ("vrt_ros", "vrt_ros.types", "vrt_ros.errors", "vrt_ros.geometry", "vrt_ros.encodings", "vrt_ros.frames",
        "vrt_ros.preprocess", "vrt_ros.config", "vrt_ros.heads", "vrt_ros.postprocess", "vrt_ros.nms",
        "vrt_ros.pipeline", "vrt_ros.labels", "vrt_ros.compressed", "vrt_ros.compressed_route", "vrt_ros.demo", "vrt_ros.assets", "vrt_ros.draw")


def test_core_imports_no_heavy_library():
    code = (
        "import sys\n"
        f"for m in {CORE!r}: __import__(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core modules imported {out.stdout.strip()}"
