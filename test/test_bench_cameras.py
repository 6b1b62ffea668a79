"""The many-camera bench (issue 21 item 4): its figures and report (pure), the scaling plot from a JSON, and one
real run end to end on the CPU path (two camera processes, a batching node) as a user would start it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from synthetic_models import bench_inputs, brightness_end2end
from vrt_ros.bench.cameras.cameras_report import camera_figures, device_ms_per_frame, histogram, markdown, mean_batch
from vrt_ros.bench.cameras.scaling_plot import main as plot_main
from vrt_ros.bench.cameras.scaling_plot import series


def test_camera_figures_count_losses_and_latency():
    sent = [1_000_000_000 + k * 33_000_000 for k in range(5)]
    received = {sent[0]: sent[0] + 5_000_000, sent[1]: sent[1] + 7_000_000, sent[3]: sent[3] + 6_000_000,
                123: 456}  # a warm-up frame's answer is not counted
    f = camera_figures(sent, received)
    assert (f["sent"], f["received"], f["lost"]) == (5, 3, 2)
    assert f["latency_ms"]["p50"] == pytest.approx(6.0) and f["latency_ms"]["max"] == pytest.approx(7.0)


def test_histogram_batch_mean_and_device_time_per_frame():
    values = {"batch.size.1": "10", "batch.size.4": "30", "batch.frames_per_batch": "3.5", "processed": "130"}
    hist = histogram(values)
    assert hist == {1: 10, 4: 30} and mean_batch(hist) == pytest.approx(130 / 40)
    stages = {"upload": 1.0, "preprocess": 0.5, "inference": 2.0, "postprocess": 0.75, "total": 9.0, "batch_wait": 1}
    assert device_ms_per_frame(stages, hist) == pytest.approx(4.25 / (130 / 40))  # total and batch_wait not summed
    assert mean_batch({}) == 1.0


def _doc():
    def row(n, batching, p99, fps, rep=0):
        cams = {f"cam{k}": {"sent": 30, "received": 30, "lost": 0,
                            "latency_ms": {"n": 30, "p50": p99 / 2, "p99": p99 + k, "max": p99 + k}} for k in range(n)}
        return {"backend": "cuda", "cameras": n, "size": "1920x1080", "input": "jpeg", "phase": "stagger",
                "batching": batching, "cameras_detail": cams, "frames_per_s": fps, "batch_sizes": {n: 10},
                "device_ms_per_frame": 1.0, "node_cpu_percent": 50.0, "repeat": rep}
    return {"date": "d", "command": "c", "machine_label": "test", "runs": [
        row(1, True, 6.0, 30.0), row(2, True, 7.0, 60.0), row(2, True, 9.0, 58.0, 1), row(2, False, 12.0, 59.0),
        {"backend": "cuda", "cameras": 4, "size": "1920x1080", "input": "jpeg", "phase": "stagger",
         "batching": True, "error": "node did not start"}]}


def test_series_takes_the_worst_camera_and_leaves_failed_rows_out():
    data = series(_doc(), "1920x1080", "jpeg", "stagger")
    assert set(data) == {("cuda", True), ("cuda", False)}
    assert data[("cuda", True)][2]["p99"] == [8.0, 10.0]  # worst camera (cam1) of each repeat
    assert 4 not in data[("cuda", True)]
    assert "| cuda | 2 | 1920x1080 | jpeg | stagger | on | 60 / 60 |" in markdown(_doc())


def test_scaling_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed (requirements/test.txt)")
    path = tmp_path / "cameras.json"
    path.write_text(json.dumps(_doc()))
    assert plot_main([str(path), "-o", str(tmp_path / "curve.png")]) == 0
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_main([str(path), "--size", "640x480"]) == 2  # no such rows


@pytest.mark.ros
def test_two_cameras_end_to_end_on_the_cpu_path(tmp_path):
    """Two camera_pub processes (stagger), a CPU node with engine.max_batch 2: every frame of both cameras comes
    back, the report has both cameras, and the node ran batches."""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`)")
    images, _ = bench_inputs(tmp_path)
    model = brightness_end2end(tmp_path / "brightness.onnx", 320, 320, (10, 20, 100, 120))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "vrt_ros.bench.cameras.cameras_e2e", "--backend", "cpu", "--model", str(model),
           "--cameras", "2", "--sizes", "320x240", "--inputs", "raw", "--phase", "sync", "--batching", "on",
           "--rate", "10", "--frames", "15", "--warmup-s", "1", "--shared", str(tmp_path / "no_shared"),
           "--images", str(images), "--out", str(out), "--param", "score_threshold:=0.01",
           "--domain-id", os.environ.get("ROS_DOMAIN_ID", "57")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    doc = json.loads((out / "cameras_e2e.json").read_text())
    (row,) = doc["runs"]
    assert set(row["cameras_detail"]) == {"cam0", "cam1"}
    for cam in row["cameras_detail"].values():
        assert cam["sent"] == 15 and cam["received"] >= 14  # a shared 2-core CI machine may supersede one
    assert sum(row["batch_sizes"].values()) > 0 and row["node_cpu_percent"] is not None
    assert "| cpu | 2 | 320x240 | raw | sync | on |" in (out / "cameras_e2e.md").read_text()


def test_scaling_table_is_generated_from_the_committed_results():
    """results/bench/cameras_scaling.md (the docs' scaling table) is what scaling_table makes of the committed
    cameras_e2e.json; its rows carry the JSON's figures."""
    from pathlib import Path

    from vrt_ros.bench.cameras.cameras_report import scaling_table

    bench = Path(__file__).resolve().parents[1] / "results" / "bench"
    doc = json.loads((bench / "cameras_e2e.json").read_text())
    lines = scaling_table(doc)
    assert (bench / "cameras_scaling.md").read_text() == "\n".join(lines) + "\n", "regenerate it: python -m " \
        "vrt_ros.bench.cameras.cameras_report results/bench/cameras_e2e.json -o results/bench/cameras_scaling.md"
    rows = [r for r in doc["runs"] if r["size"] == "1920x1080" and not r.get("error")]
    assert len(lines) == 2 + len({(r["backend"], r["input"], r["phase"], r["batching"], r["cameras"]) for r in rows})


def test_scaling_table_takes_the_median_and_range_over_repeats():
    from vrt_ros.bench.cameras.cameras_report import scaling_table

    lines = scaling_table(_doc())
    assert lines[2] == "| JPEG, staggered | 1 | 1 | 30 / 30 | 3.00 / 6.00 | 30 | 1.00 | 50 |"
    # two repeats of 2 cameras: worst camera p99 8 and 10 -> median 9, range 8-10; throughput 58-60
    assert lines[3] == ("| JPEG, staggered | 2 | 2 | 120 / 120 | 4.00 (3.50-4.50) / 9.00 (8.00-10.00) | 59 (58-60) | "
                        "1.00 | 50 |")
    assert lines[4].startswith("| JPEG, staggered, batching **off** | 2 | 1 | 60 / 60 |")
    assert len(lines) == 5  # the failed 4-camera row is left out


def test_scaling_plot_all_draws_one_curve_per_input_and_phase(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed (requirements/test.txt)")
    path = tmp_path / "cameras.json"
    doc = _doc()
    doc["runs"].append(dict(doc["runs"][0], phase="sync"))
    path.write_text(json.dumps(doc))
    assert plot_main([str(path), "--all", "--prefix", str(tmp_path / "curve")]) == 0
    assert sorted(p.name for p in tmp_path.glob("curve_*.png")) == ["curve_jpeg_stagger.png", "curve_jpeg_sync.png"]
