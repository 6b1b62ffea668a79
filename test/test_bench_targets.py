"""Issue 35's target rows of the many-camera bench (vrt_ros.bench.cameras.cameras_targets): which runs, the summaries over
repeats and the met/missed table (pure), and the mixed-transport row end to end on the CPU path as the lead starts it
on the GPU (small frames: --shrink)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from vrt_ros.bench.cameras import cameras_targets as ct


def test_select_keeps_the_table_order_and_names_the_rows_on_a_typo():
    assert [r.key for r in ct.select("jpeg1,raw4_sync")] == ["raw4_sync", "jpeg1"]
    assert len(ct.select(None)) == len(ct.TARGET_ROWS) == 6
    with pytest.raises(ValueError, match="jpeg8_sync"):
        ct.select("jpeg9_sync")


def test_jobs_interleave_the_repeats_and_shrink_keeps_422_widths_even():
    jobs = ct.jobs(ct.select("mixed_sync,jpeg1"), 3, "cuda", shrink=3)
    assert [(j["target"], j["repeat"]) for j in jobs] == [(k, r) for r in range(3) for k in ("mixed_sync", "jpeg1")]
    mixed = jobs[0]
    assert mixed["input"] == "mixed" and mixed["cameras"] == 6 and mixed["phase"] == "sync"
    assert [c["input"] for c in mixed["camera_specs"]] == ["jpeg"] * 3 + ["raw"] * 3
    assert [c["encoding"] for c in mixed["camera_specs"]][3:] == ["bgr8", "bgr8", "yuv422"]
    assert mixed["camera_specs"][5]["size"] == (212, 160)  # 640 / 3 = 213 -> 212: 4:2:2 pairs
    assert jobs[1]["input"] == "jpeg" and jobs[1]["camera_specs"][0]["size"] == (640, 360)


def _run(target: str, rep: int, p50: list[float], p99: list[float], lost: int = 0, device: float = 1.0,
         batch: float = 1.0, decode: float = 2.0) -> dict:
    cams = {f"cam{k}": {"sent": 100, "received": 100 - (lost if k == 0 else 0), "lost": lost if k == 0 else 0,
                        "latency_ms": {"n": 100, "p50": a, "p99": b, "max": b}}
            for k, (a, b) in enumerate(zip(p50, p99))}
    stages = {c: {"decode": {"p50": decode + k, "p99": decode + k + 1}} for k, c in enumerate(cams)}
    return {"target": target, "repeat": rep, "backend": "cuda", "cameras": len(cams), "size": "1920x1080",
            "input": "jpeg", "phase": "sync", "batching": True, "cameras_detail": cams, "stages_by_camera": stages,
            "device_ms_per_frame": device, "mean_batch": batch, "batch_sizes": {str(int(batch)): 100 // int(batch)}}


def _doc() -> dict:
    runs = []
    for rep, (worst99, lost) in enumerate(((11.0, 0), (13.0, 0), (11.5, 2))):
        runs.append(_run("jpeg8_sync", rep, [5.0] * 7 + [6.0 + rep], [10.0] * 7 + [worst99], lost=lost,
                         device=0.5 + 0.1 * rep, batch=8.0))
        runs.append(_run("jpeg1", rep, [4.0 + rep], [5.0], device=2.0))
    runs.append({"target": "raw4_sync", "repeat": 0, "error": "node did not subscribe to every camera"})
    return {"runs": runs}


def test_summary_takes_each_cameras_median_and_range_over_the_repeats():
    s = ct.summarise(_doc())
    j8 = s["jpeg8_sync"]
    assert j8["runs"] == 3 and j8["lost"] == [0, 0, 2]
    assert j8["cameras"]["cam7"]["p99"] == (11.5, 11.0, 13.0)
    assert j8["worst_p99"] == (11.5, 11.0, 13.0) and j8["worst_p50"] == (7.0, 6.0, 8.0)
    assert j8["stages"]["decode"] == (9.0, 9.0, 9.0)  # the slowest camera's (cam7: 2 + 7) in every run
    assert j8["device_ms_per_frame"] == pytest.approx((0.6, 0.5, 0.7))
    assert s["raw4_sync"]["runs"] == 0 and s["raw4_sync"]["failed"] == 1
    assert j8["batch_sizes"] == {8: 36} and s["jpeg1"]["batch_sizes"] == {1: 300}
    stage_lines = ct.stage_table(_doc())
    assert stage_lines[0] == "| target row | device ms / frame | mean batch | batch sizes (all runs) | decode |"
    assert stage_lines[2] == "| jpeg8_sync | 0.600 (0.500-0.700) | 8.0 | 8:36 | 9.00 |"


def test_target_table_says_met_or_missed_by_the_median():
    lines = ct.target_table(_doc())
    by_title = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    j8 = by_title["8 x 1920x1080 JPEG, synchronised"]
    assert "| 3 | 0, 0, 2 | 7.00 (6.00-8.00) | 11.50 (11.00-13.00) | met |" in j8  # median lost 0, p99 11.5 <= 12
    assert by_title["1 x 1920x1080 JPEG"].endswith("| 5.00 (4.00-6.00) | 5.00 | **missed** |")  # p50 5.0 > 4.5
    assert by_title["4 x 1920x1080 raw bgr8, synchronised"].endswith("not measured |")
    assert by_title["8 x 1920x1080 JPEG, staggered"].endswith("| 0 | - | - | - | not measured |")
    ratio = by_title["device time per frame, 8 JPEG synchronised ÷ 1 JPEG"]
    assert "0.600 (0.500-0.700) at mean batch 8.0 ÷ 2.000 = 0.30 x" in ratio and ratio.endswith("| met |")
    doc = _doc()
    doc["runs"][1]["device_ms_per_frame"] = doc["runs"][3]["device_ms_per_frame"] = 1.5  # jpeg1 median 1.5
    assert ct.device_ratio_line(ct.summarise(doc)).endswith("= 0.40 x | - | **missed** |")


@pytest.mark.ros
def test_mixed_rig_target_row_end_to_end_on_the_cpu_path(tmp_path):
    """The mixed row (3 JPEG + 2 raw bgr8 + 1 yuv422 cameras, one node, input.compressed_cameras) through
    ``--targets`` on the CPU path with small frames: every camera's frames come back on its own transport, and the
    report has the target table with the row measured."""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`)")
    from synthetic_models import bench_inputs, brightness_end2end

    images, _ = bench_inputs(tmp_path)
    model = brightness_end2end(tmp_path / "brightness.onnx", 320, 320, (10, 20, 100, 120))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "vrt_ros.bench.cameras.cameras_e2e", "--targets", "--only", "mixed_sync", "--repeats", "1",
           "--backend", "cpu", "--model", str(model), "--shrink", "8", "--rate", "10", "--frames", "10",
           "--warmup-s", "1", "--shared", str(tmp_path / "no_shared"), "--images", str(images), "--out", str(out),
           "--param", "score_threshold:=0.01", "--start-timeout", "60",
           "--domain-id", os.environ.get("ROS_DOMAIN_ID", "57")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (row,) = json.loads((out / "cameras_targets.json").read_text())["runs"]
    assert row["target"] == "mixed_sync" and row["input"] == "mixed" and row["size"] == "mixed"
    assert [(c["input"], c["size"], c["encoding"]) for c in row["camera_specs"].values()] == \
        [("jpeg", "240x135", "bgr8")] * 3 + [("raw", "160x90", "bgr8")] * 2 + [("raw", "80x60", "yuv422")]
    for cam in row["cameras_detail"].values():
        assert cam["sent"] == 10 and cam["received"] >= 9  # a shared 2-core CI machine may supersede one
    assert set(row["stages_by_camera"]) == set(row["cameras_detail"])
    report = (out / "cameras_targets.md").read_text()
    assert "| 3 JPEG 1920x1080 + 2 raw bgr8 1280x720 + 1 yuv422 640x480, one node, synchronised |" in report
    assert "| mixed_sync | cam5 |" in report


@pytest.mark.ros
def test_targets_budget_starts_no_run_that_would_end_past_it(tmp_path):
    """``--budget-s`` 1 with two repeats of one row: the first run goes (nothing to estimate from), the second is
    not started but listed under ``not_run``, and the exit status says the set is incomplete."""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`)")
    from synthetic_models import bench_inputs, brightness_end2end

    images, _ = bench_inputs(tmp_path)
    model = brightness_end2end(tmp_path / "brightness.onnx", 320, 320, (10, 20, 100, 120))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "vrt_ros.bench.cameras.cameras_e2e", "--targets", "--only", "jpeg1", "--repeats", "2",
           "--budget-s", "1", "--backend", "cpu", "--model", str(model), "--shrink", "8", "--rate", "10",
           "--frames", "5", "--warmup-s", "1", "--shared", str(tmp_path / "no_shared"), "--images", str(images),
           "--out", str(out), "--param", "score_threshold:=0.01", "--start-timeout", "60",
           "--domain-id", os.environ.get("ROS_DOMAIN_ID", "57")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    doc = json.loads((out / "cameras_targets.json").read_text())
    (row,) = doc["runs"]
    assert row["target"] == "jpeg1" and row["repeat"] == 0 and not row.get("error")
    assert row["cameras_detail"]["cam0"]["received"] >= 4 and row["wall_s"] > 1
    assert doc["not_run"] == ["jpeg1 cpu 1 x 240x135 jpeg sync batching on (repeat 1)"]
    assert "Not started (``--budget-s``): jpeg1 cpu" in (out / "cameras_targets.md").read_text()


def test_camera_pub_prepares_yuv422_frames_that_decode_to_its_bgr8_frames(tmp_path):
    """The mixed rig's 4:2:2 camera: UYVY payloads of 2 bytes a pixel whose OpenCV decode is the bgr8 payload (to
    BT.601 4:2:2 rounding)."""
    import cv2
    import numpy as np
    from synthetic_models import bench_inputs

    from vrt_ros.bench.cameras.camera_pub import prepare

    images, _ = bench_inputs(tmp_path)
    bgr = prepare(None, (64, 48), False, images=[images])
    uyvy = prepare(None, (64, 48), False, images=[images], encoding="yuv422")
    assert len(uyvy) == len(bgr) and {len(p) for p in uyvy} == {64 * 48 * 2}
    back = cv2.cvtColor(np.frombuffer(uyvy[0], np.uint8).reshape(48, 64, 2), cv2.COLOR_YUV2BGR_UYVY)
    want = np.frombuffer(bgr[0], np.uint8).reshape(48, 64, 3)
    assert np.abs(back.astype(int) - want).mean() < 6
    with pytest.raises(ValueError, match="even width"):
        prepare(None, (63, 48), False, images=[images], encoding="yuv422")


def test_wait_publishers_kills_a_publisher_whose_teardown_hangs_after_its_stamps(tmp_path):
    """The mixed row's H200 run (2026-12-03) stopped on ``TimeoutExpired``: a camera publisher had sent every frame
    but its DDS teardown never ended. Three real processes: one writes its stamps and ends, one writes them and
    hangs (killed after the grace, its stamps kept), one ends without writing (not killed: its row error is the
    bench's "wrote no stamps"). Nothing raises; the wait ends soon after the last stamps file."""
    from vrt_ros.bench.cameras.cameras_e2e import wait_publishers

    outs = [tmp_path / f"cam{k}.json" for k in range(3)]
    write = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).write_text('{}'); time.sleep(float(sys.argv[2]))"
    pubs = [subprocess.Popen([sys.executable, "-c", write, str(outs[0]), "0"]),
            subprocess.Popen([sys.executable, "-c", write, str(outs[1]), "600"]),
            subprocess.Popen([sys.executable, "-c", "pass"])]
    try:
        killed = wait_publishers(pubs, outs, timeout_s=60, exit_grace_s=1.0)
    finally:
        for p in pubs:
            if p.poll() is None:
                p.kill()
    assert killed == [1]
    assert [p.returncode for p in pubs][0::2] == [0, 0] and pubs[1].returncode != 0
    assert outs[0].is_file() and outs[1].is_file() and not outs[2].exists()


def test_pyspy_summary_counts_each_threads_samples_of_the_committed_h200_profile():
    """scripts/pyspy_summary.py on the committed profile of the losing 8-raw-camera run: the GIL holder's samples per
    thread (the executor's 835 and the worker's 90 quoted in results/bench/node_profile_2026-12-03/README.md) and the
    worker's top leaf frame."""
    import importlib.util
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("pyspy_summary", repo / "scripts" / "pyspy_summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    folder = repo / "results" / "bench" / "node_profile_2026-12-03"
    gil = mod.summarise((folder / "raw8_stagger_gil.txt").read_text().splitlines(), top=3)
    assert gil[0].startswith("- **thread (2520): MainThread**: 835 samples (90 % of all)")
    assert any(line.startswith("- **thread (2703): vrt_detector_worker**: 90 samples") for line in gil)
    threads = mod.summarise((folder / "raw8_stagger_threads.txt").read_text().splitlines(), top=1)
    worker = threads.index(next(line for line in threads if "vrt_detector_worker" in line))
    assert "copy_frame (vrt_ros/gpu/host_copy.py:101)" in threads[worker + 1]
    readme = (folder / "README.md").read_text()
    assert "835 samples (about 84 %)" in readme and "| 90 (9 %) |" in readme


@pytest.mark.ros
def test_the_bench_starts_the_cameras_only_once_the_nodes_detections_reach_it():
    """The bench's start condition (Listener.subscribed): the node subscribed to every camera AND this process's
    detections subscriptions matched the node's publishers. A stand-in node in another context that subscribes to
    the camera topic but has no detections publisher yet: not ready; once it publishes detections: ready. (Without
    the second half the measured frames could start while discovery of the node's publishers was still under way,
    and their detections never reach the bench.)"""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`)")
    import time

    from rclpy.node import Node
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from ros_testing import private_context, unique_namespace
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    from vrt_ros.bench.cameras.listener import Listener

    ns = unique_namespace()
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
    with private_context() as bench_ctx, private_context() as node_ctx:
        listener = Listener(bench_ctx, ns, ["cam0"])
        node = Node("stand_in", namespace=ns, context=node_ctx)
        try:
            node.create_subscription(Image, "cam0/image_raw", lambda m: None, qos)
            deadline = time.monotonic() + 20
            while not listener.node.count_subscribers(f"{ns}/cam0/image_raw") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert listener.node.count_subscribers(f"{ns}/cam0/image_raw") == 1
            assert not listener.subscribed([f"{ns}/cam0/image_raw"])  # no detections publisher matched yet
            node.create_publisher(Detection2DArray, "cam0/detections", qos)
            while not listener.subscribed([f"{ns}/cam0/image_raw"]) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert listener.subscribed([f"{ns}/cam0/image_raw"])
        finally:
            node.destroy_node()
            listener.close()
