"""``python -m vrt_ros.bench.transport.ros_e2e --quick`` runs end to end through ROS on the CPU path and writes its JSON/markdown.

The bench publishes frames drawn here (one bright rectangle each) to the detector node, which runs in a second
process with a tiny synthetic model (``blob_end2end``: one bright object -> one detection), and receives the
detections in the bench's own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from synthetic_models import bench_inputs

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")

pytestmark = [pytest.mark.ros, pytest.mark.slow]

FRAMES = 20
WARMUP = 3


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ros_e2e")
    images, model = bench_inputs(tmp)
    out = tmp / "results"
    ns = f"/e2e_test_{uuid.uuid4().hex[:8]}"
    cmd = [sys.executable, "-m", "vrt_ros.bench.transport.ros_e2e", "--quick", "--model", str(model),
           "--shared", str(tmp / "no_shared"), "--images", str(images), "--frames", str(FRAMES),
           "--warmup", str(WARMUP), "--domain-id", os.environ["ROS_DOMAIN_ID"], "--namespace", ns,
           "--start-timeout", "60", "--out", str(out),
           # the node's own default QoS (best effort): with it, a missing Fast DDS profile loses most frames (6-8 of
           # 20 arrived with --dds-profile none), while reliable delivery would hide that
           "--param", "input.qos:=sensor_data"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    json_path = out / "ros_e2e_quick.json"
    assert json_path.exists(), proc.stderr[-3000:]
    doc = json.loads(json_path.read_text())
    assert proc.returncode == 0, proc.stderr[-3000:] + (out / "ros_e2e_quick_node.log").read_text()[-2000:]
    return proc, doc, (out / "ros_e2e_quick.md").read_text()


def test_quick_run_measures_latency_through_a_node_in_another_process(quick_run):
    _, doc, _ = quick_run
    assert doc["settings"]["backends"] == ["cpu"] and doc["settings"]["sizes"] == ["640x480"]
    assert doc["settings"]["domain_id"] == int(os.environ["ROS_DOMAIN_ID"])
    assert doc["distinct_frames"] == 3
    [row] = doc["runs"]
    assert (row["backend"], row["size"], row["frame_bytes"]) == ("cpu", "640x480", 640 * 480 * 3)
    # With the large-frames Fast DDS profile (--dds-profile auto, the default) frames reach the node in another
    # process: issue 5's frame loss (most frames lost before the node's callback with Fast DDS's 512 KiB shared-
    # memory segment) must not come back: without the profile 6-8 of 20 arrive. With it, a best-effort depth-1
    # subscriber still loses the frames that arrive while the node is busy with the previous one, and how many that
    # is depends on the machine's load (17 of 20 with three other suites running beside this one): more than half.
    assert "large_frames" in doc["settings"]["dds"] and doc["settings"]["dds_profile"] == "auto"
    assert (doc["settings"]["input_qos"], doc["settings"]["input_depth"]) == ("sensor_data", 5)
    assert row["sent"] == FRAMES and FRAMES // 2 < row["received"] <= FRAMES
    assert 0 <= row["longest_loss_run"] <= FRAMES - row["received"]
    assert row["node_exit"] == 0 and "error" not in row
    assert row["detections_per_frame"] == 1.0  # the blob model finds the one rectangle of every frame
    lat = row["latency_ms"]
    assert lat["n"] == row["received"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]
    node = row["node"]
    assert node["backend"].startswith("cpu")
    # every frame the node received was processed or dropped (with a reason), and it saw at most what was sent
    assert row["warmup_received"] >= WARMUP
    assert node["processed"] + node["dropped"] == node["received"] <= FRAMES + row["warmup_sent"]
    assert node["dropped"] == sum(node["dropped_by_reason"].values())
    assert node["processed"] >= row["received"]
    # per frame, stamp -> published (age) includes reaching the callback -> published, so the percentiles do too
    assert 0 < node["callback_ms"]["p50"] <= node["callback_ms"]["p99"]
    assert node["age_ms"]["p50"] >= node["callback_ms"]["p50"]
    assert "inference" in node["stages_ms"]


def test_quick_run_prints_and_writes_the_markdown_table(quick_run):
    proc, doc, md = quick_run
    assert md.strip() in proc.stdout
    assert f"| cpu | raw | 640x480 | 0.92 | {doc['runs'][0]['received']} / {FRAMES} |" in md
    assert doc["command"].startswith("python -m vrt_ros.bench.transport.ros_e2e --quick")
    assert doc["command"] in md


def test_compressed_rows_and_the_floor_relay(tmp_path):
    """``--compressed`` adds a JPEG row per backend; backend ``floor`` (the zero-work relay) answers every frame with
    an empty array carrying its header; the targets table is written (not met or missed here: no cuda rows)."""
    images, model = bench_inputs(tmp_path)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "vrt_ros.bench.transport.ros_e2e", "--backend", "floor,cpu", "--compressed", "--sizes",
           "1920x1080", "--model", str(model), "--shared", str(tmp_path / "no_shared"), "--images", str(images),
           "--frames", "15", "--warmup", "3", "--domain-id", os.environ["ROS_DOMAIN_ID"],
           "--namespace", f"/e2e_test_{uuid.uuid4().hex[:8]}", "--start-timeout", "60", "--out", str(out),
           "--name", "rows", "--param", "input.depth:=20"]  # deeper than the run: the relay misses no frame, however busy
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:] + (out / "rows_node.log").read_text()[-2000:]
    doc = json.loads((out / "rows.json").read_text())
    rows = {(r["backend"], r["input"]): r for r in doc["runs"]}
    assert list(rows) == [("floor", "raw"), ("floor", "jpeg"), ("cpu", "raw"), ("cpu", "jpeg")]
    assert all(r["sent"] == 15 for r in rows.values())
    # the relay does no work: it answers every frame (reliable QoS, input.depth 20 > 15 frames: keep-last never
    # replaces a frame it has not taken, however loaded the machine); the node may supersede a frame under load
    assert rows["floor", "raw"]["received"] == rows["floor", "jpeg"]["received"] == 15
    for key in (("cpu", "raw"), ("cpu", "jpeg")):  # how many the CPU node answers depends on the machine's load;
        node = rows[key]["node"]                    # that every frame it got was answered or counted does not
        assert rows[key]["received"] >= 1 and node["processed"] + node["dropped"] == node["received"]
        assert set(node["dropped_by_reason"]) <= {"superseded"}, node["dropped_by_reason"]
    assert rows["floor", "raw"]["detections_per_frame"] == 0 and rows["floor", "raw"]["node"] is None
    assert rows["cpu", "jpeg"]["detections_per_frame"] == 1.0  # the blob model finds the rectangle in the JPEG
    assert rows["cpu", "jpeg"]["frame_bytes"] < rows["cpu", "raw"]["frame_bytes"] / 10
    assert rows["cpu", "jpeg"]["node"]["processed"] >= rows["cpu", "jpeg"]["received"]
    md = (out / "rows.md").read_text()
    assert "| floor | jpeg | 1920x1080 |" in md and "## Targets (issue 14, 1920x1080" in md
    assert "| cuda jpeg: stamp→received p50 ≤ 5 ms | – | not measured |" in md
    lost = sum(r["sent"] - r["received"] for r in rows.values())
    assert f"| no frame lost (all rows, all sizes) | {lost} lost | {'met' if lost == 0 else '**missed**'} |" in md
