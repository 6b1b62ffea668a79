"""The transport benchmarks end to end at a small size: ``vrt_ros.bench.transport.raw_read`` (typed vs raw subscription) and
``vrt_ros.bench.transport.dds_floor`` (one row per transport variant, fresh processes), their files written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")

pytestmark = pytest.mark.ros


def test_raw_read_bench_runs_and_writes_its_figures(tmp_path):
    domain = os.environ.get("VRT_TEST_DOMAIN_ID", "57")
    done = subprocess.run([sys.executable, "-m", "vrt_ros.bench.transport.raw_read", "--sizes", "64x48", "--frames", "8",
                           "--rate", "50", "--domain-id", domain, "--out", str(tmp_path),
                           "--depth", "20"],  # deeper than the run: no frame replaced, however loaded the machine
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "raw_read.json").read_text())
    (row,) = result["rows"]
    assert row["size"] == "64x48"
    for kind in ("typed", "raw"):
        assert row["convert"][kind]["n"] == 8 and row["convert"][kind]["p50"] > 0
        assert row["take"][kind]["received"] == row["take"][kind]["sent"] == 13  # 5 warm-up frames + 8
        assert row["take"][kind]["n"] == 8
    md = (tmp_path / "raw_read.md").read_text()
    assert "| 64x48 |" in md and md.strip() in done.stdout


def test_dds_floor_profiles_are_valid_fast_dds_xml():
    import xml.etree.ElementTree as ET

    from vrt_ros.bench.transport.dds_floor import VARIANTS, profile_xml

    ns = "{http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles}"
    for v in VARIANTS.values():
        if v.transports is None:
            continue
        root = ET.fromstring(profile_xml(v.transports))
        declared = [e.text for e in root.iter(f"{ns}transport_id") if e.text]
        used = [e.text for e in root.find(f"{ns}participant").iter(f"{ns}transport_id")]
        assert used == list(v.transports) and set(used) <= set(declared), v.name


def test_dds_floor_study_runs_one_variant_end_to_end(tmp_path):
    domain = os.environ.get("VRT_TEST_DOMAIN_ID", "57")
    done = subprocess.run([sys.executable, "-m", "vrt_ros.bench.transport.dds_floor", "--sizes", "64x48", "--frames", "6",
                           "--rate", "50", "--variants", "shipped,raw_subscription", "--domain-id", domain, "--depth", "20",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((tmp_path / "dds_floor.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == ["shipped", "raw_subscription"]
    for r in rows:
        assert r["sent"] == 6 and r["answered"] == 6 and r["latency_ms"]["n"] == 6 and r["relay_cpu_ms_per_frame"] > 0
    assert "| 64x48 | raw_subscription | 6 / 6 |" in (tmp_path / "dds_floor.md").read_text()
