"""``python -m vrt_ros.bench.raw_read`` end to end at a small size: both measurements run (a publisher process and
typed / raw subscriptions), every frame arrives, and the JSON and markdown are written with the figures printed."""

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
    done = subprocess.run([sys.executable, "-m", "vrt_ros.bench.raw_read", "--sizes", "64x48", "--frames", "8",
                           "--rate", "50", "--domain-id", domain, "--out", str(tmp_path)],
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
