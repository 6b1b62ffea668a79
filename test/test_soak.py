"""HC-16 (short version): frames replayed in a loop keep resident memory flat after warm-up.

The long run (10 000 frames, CPU and GPU path) is ``python -m vrt_ros.bench.robustness.soak``; its figures are in the notes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is the CPU engine; installed by `make test`")
pytest.importorskip("onnx", reason="onnx builds the synthetic model; installed by `make test`")

from vrt_ros.bench.robustness import soak as soak_mod
from vrt_ros.inference.pipeline import make_pipeline
from vrt_ros.settings import config
from vrt_ros.types import ImageSpec

from synthetic_models import blob_end2end, ramp_rectangle


def test_HC_16_memory_flat_over_3000_frames(tmp_path):
    pipe = make_pipeline(config.validate({"backend": "cpu", "model.path": str(blob_end2end(tmp_path / "b.onnx", 160, 160))}),
                         log=lambda m: None)
    frames = []
    for i, (w, h) in enumerate([(320, 240), (320, 240), (200, 300), (320, 240)]):
        img = ramp_rectangle(w, h, (20 + i, 30, 150 + i, 200))
        frames.append(("raw", (ImageSpec(w, h, "bgr8", w * 3), img.tobytes())))
    frames.append(("raw", (ImageSpec(320, 240, "bgr8", 960), b"short")))  # a bad frame: dropped, counted
    result = soak_mod.soak(pipe, frames, total=3000, every=500, warmup=1000, out=lambda line: None)
    assert result["dropped"] == 600
    assert result["rss_growth"] < 0.01, [s["rss_bytes"] for s in result["samples"]]
    assert all(np.isfinite(s["p50_ms"]) for s in result["samples"])


def test_soak_command_writes_report(shared_dir, tmp_path):
    out = tmp_path / "soak.json"
    rc = soak_mod.main(["--model", str(shared_dir / "models/yolox_nano.onnx"), "--bag",
                        str(shared_dir / "data/bags/vtest_raw_sqlite3"), "--backend", "cpu", "--frames", "120",
                        "--every", "40", "--warmup", "40", "--json", str(out)])
    report = json.loads(out.read_text())
    assert [s["frames"] for s in report["samples"]] == [40, 80, 120]
    assert report["dropped"] == 0 and report["gpu_growth"] is None
    assert rc == (0 if report["rss_growth"] < 0.01 else 1)
