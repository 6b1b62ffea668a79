"""Issue 27 item 2: ``import vrt_ros.ros.main`` (what ``detector_node`` runs before its first log line) imports
nothing that start-up does not need; what a backend, an option or another tool needs comes when it is used.

Held by module names, not by a wall-clock budget: a fresh interpreter imports ``vrt_ros.ros.main`` and the test
checks ``sys.modules``. The measured import time (median of several processes) is in
``results/bench/recovery.md`` (``python -m vrt_ros.bench.restart.recovery``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")

#: Top-level packages (and vrt_ros modules) that ``import vrt_ros.ros.main`` must not import, with who needs them.
NOT_AT_START = {
    "torch": "the torch engine (backend cuda, engine torch), imported by the engine",
    "onnx": "the ONNX model tools (batch_model, onnx2torch), not the node",
    "onnx2torch": "the torch engine's ONNX conversion",
    "onnxruntime": "the CPU backend, imported when its pipeline is built (configure)",
    "tensorrt": "the TensorRT engine",
    "cuda": "the GPU backend (cuda-python), imported when its pipeline is built",
    "cupy": "nothing of the node",
    "scipy": "nothing of the node",
    "matplotlib": "the benchmarks' plots",
    "cv2": "the CPU pipeline's letterbox, compressed input, debug_image and depth, imported when used",
    "rosbags": "replay and record tools",
    "vrt_ros.tracking": "tracking: imported by the camera's tracker when tracking is enabled",
    "vrt_ros.depth": "depth.enabled only",
    "vrt_ros.ros.depth_input": "depth.enabled only",
    "vrt_ros.inference.backends": "the pipeline chosen by 'backend', at configure",
    "vrt_ros.gpu": "the GPU backend",
    "vrt_ros.ros.lifecycle_node": "--lifecycle only",
    "vrt_ros.bench": "the benchmarks",
}

_PROBE = """
import json, sys
import vrt_ros.ros.main
print(json.dumps(sorted(sys.modules)))
"""


def imported_by(module_code: str) -> set[str]:
    """Every module a fresh interpreter has in ``sys.modules`` after running ``module_code``."""
    out = subprocess.run([sys.executable, "-c", module_code], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_main_loads_no_module_start_up_does_not_need():
    loaded = imported_by(_PROBE)
    assert "vrt_ros.ros.main" in loaded and "rclpy" in loaded  # the probe ran
    found = {name: why for name, why in NOT_AT_START.items()
             if name in loaded or any(m.startswith(name + ".") for m in loaded)}
    assert not found, f"import vrt_ros.ros.main imported: {found}"
