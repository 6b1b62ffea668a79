"""The benchmark command runs on a CPU-only machine (GPU rows marked unavailable) and writes its JSON and markdown.

Runs ``python -m vrt_ros.bench --quick`` in a subprocess, as a user would, on a tiny synthetic model
(``blob_end2end``: one bright object -> one detection) and frames drawn here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from synthetic_models import bench_inputs
from vrt_ros.bench.frames import bgr_to_uyvy
from vrt_ros.bench.stages.report import readme_table
from vrt_ros.bench.stages.runner import GPU_ROWS, merge_repeats
from vrt_ros.gpu import cuda_unavailable_reason

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def quick_run(tmp_path):
    images, model = bench_inputs(tmp_path)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "vrt_ros.bench", "--quick", "--shared", str(tmp_path / "no_shared"),
           "--images", str(images), "--model", f"blob={model}", "--encodings", "bgr8,yuv422", "--repeats", "2", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads((out / "bench_quick.json").read_text()), (out / "bench_quick.md").read_text()


def test_quick_mode_writes_json_and_markdown(quick_run):
    proc, doc, md = quick_run
    assert [(c["model"], c["size"], c["encoding"]) for c in doc["configs"]] == [
        ("blob", "640x480", "bgr8"), ("blob", "640x480", "yuv422")]
    assert doc["distinct_frames"] == 3
    assert doc["settings"]["repeats"] == 2 and all(c["repeats"] == 2 for c in doc["configs"])
    assert doc["versions"]["numpy"] == np.__version__
    for c in doc["configs"]:
        cpu = c["vrt_ros_cpu"]
        assert cpu["wall_ms"]["n"] == doc["settings"]["cpu_frames"] == 5
        assert 0 < cpu["wall_ms"]["p50"] <= cpu["wall_ms"]["p99"] <= cpu["wall_ms"]["max"]
        assert cpu["detections_per_frame"] == 1.0  # the blob model finds the one rectangle in every frame
        assert c["frame_bytes"] == 640 * 480 * (3 if c["encoding"] == "bgr8" else 2)
    assert not doc["ros_end_to_end"]["run"]
    # the printed report is the markdown file, with its header and sections
    assert md.strip() in proc.stdout
    for text in ("- command: `python -m vrt_ros.bench --quick", "- GPU:", "- libraries:", doc["date"],
                 "| blob | 640x480 | yuv422 | vrt_ros CPU path (ONNX Runtime) |", "End to end through ROS"):
        assert text in md


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a CUDA device is present: the GPU rows run there")
def test_gpu_rows_unavailable_with_the_reason_on_a_cpu_machine(quick_run):
    _, doc, md = quick_run
    reason = cuda_unavailable_reason()
    assert doc["gpu"] == {"available": False, "reason": reason}
    for c in doc["configs"]:
        for key in GPU_ROWS:
            assert c[key] == {"unavailable": reason}
        assert c["derived"]["speedup_vs_captured"] is None
    assert f"vrt_ros GPU pipeline | unavailable: {reason}" in md
    assert md.count(reason) == 4  # header, first row, the line replacing the GPU-only sections, the engine note
    assert "unavailable (as above)" in md and "## Targets" not in md and "## Against the limits" not in md
    assert f"are not measured here: {reason}." in md
    assert all(t["met"] is None for t in doc["targets"])


def test_uyvy_encoding_round_trips_through_opencv():
    # pixel pairs of one colour: 4:2:2 loses nothing, only 8-bit rounding remains
    rng = np.random.default_rng(5)
    img = np.repeat(rng.integers(0, 256, (48, 32, 3), np.uint8), 2, axis=1)
    back = cv2.cvtColor(bgr_to_uyvy(img).reshape(48, 64, 2), cv2.COLOR_YUV2BGR_UYVY)
    err = np.abs(back.astype(int) - img.astype(int))
    assert err.max() <= 3, err.max()
    with pytest.raises(ValueError, match="even width"):
        bgr_to_uyvy(img[:, :63])


def test_fresh_messages_write_each_frame_into_one_reused_buffer_on_access():
    from vrt_ros.bench.frames import FreshMessages, as_received, make_messages

    rng = np.random.default_rng(3)
    sources = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(3)]
    cold = make_messages(sources, 32, 24, "bgr8")
    fresh = as_received(cold, "fresh")
    assert isinstance(fresh, FreshMessages) and len(fresh) == 3 and as_received(cold, "cold") is cold
    addresses = set()
    for i in (0, 2, 1, 0):
        spec, view = fresh[i]
        assert spec == cold[i][0] and view.tobytes() == cold[i][1]  # the frame's exact bytes
        addresses.add(np.frombuffer(view, np.uint8).ctypes.data)
    assert len(addresses) == 1  # one buffer, rewritten per access: no allocation per frame
    stale_spec, stale = fresh[1]
    fresh[2]
    assert stale.tobytes() == cold[2][1]  # only the latest item is valid, as documented
    with pytest.raises(ValueError, match="lukewarm"):
        as_received(cold, "lukewarm")


def _cfg(p50s: dict, derived: dict) -> dict:
    rows = {k: {"wall_ms": {"p50": v, "p99": v * 1.1}, "detections_per_frame": 1.0} for k, v in p50s.items()}
    return {"model": "m", "size": "1920x1080", "encoding": "bgr8", **rows, "derived": derived}


def test_repeats_keep_the_median_run_per_row_and_the_range_of_each_ratio():
    runs = [[_cfg({"vrt_ros_gpu": g, "torch_gpu": t}, {"speedup_vs_torch_gpu": t / g, "overhead_ms": None})]
            for g, t in ((2.0, 5.0), (1.0, 4.5), (3.0, 9.0))]
    (c,) = merge_repeats(runs)
    assert c["repeats"] == 3
    assert c["vrt_ros_gpu"]["wall_ms"]["p50"] == 2.0 and c["torch_gpu"]["wall_ms"]["p50"] == 5.0
    assert c["derived"]["speedup_vs_torch_gpu"] == 3.0  # median of 2.5, 4.5, 3.0 (each within one run)
    assert c["derived_range"]["speedup_vs_torch_gpu"] == [2.5, 4.5]
    assert c["derived"]["overhead_ms"] is None and c["derived_range"]["overhead_ms"] is None
    with pytest.raises(ValueError, match="different configurations"):
        merge_repeats([runs[0], [dict(runs[1][0], size="640x480")]])
    with pytest.raises(ValueError, match="no run"):
        merge_repeats([])


def test_readme_performance_table_is_generated_from_the_committed_results():
    doc = json.loads((ROOT / "results" / "bench" / "bench.json").read_text())
    table = readme_table(doc)
    assert len(table) > 3 and "Ultralytics-style" in table[0]
    for page in (ROOT / "README.md", ROOT / "docs" / "performance.md"):  # scripts/docs_gen.py writes both
        text = page.read_text()
        missing = [line for line in table if line.strip() and line.strip() not in text]
        assert not missing, (f"{page.name}'s performance table differs from results/bench/bench.json (regenerate: "
                             "python scripts/docs_gen.py): " + "; ".join(missing))


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a CUDA device is present: the command measures there")
def test_host_copy_bench_says_why_it_cannot_run_without_a_gpu():
    proc = subprocess.run([sys.executable, "-m", "vrt_ros.bench.stages.host_copy", "--frames", "5"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "host_copy needs a CUDA device" in proc.stderr and cuda_unavailable_reason() in proc.stderr
