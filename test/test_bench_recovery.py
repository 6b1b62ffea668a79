"""The recovery bench (issue 27 item 3) end to end, without launch: imports timed, a cold and a warm start of the
real node process with the shared YOLOX-nano on ONNX Runtime, each to its first detection, with every part of the
breakdown measured; its files written. The respawn part runs through the real launch stack in
test/test_launch_real.py, and through the bench's supervisor (with the lifecycle configure) in
test/test_bench_recovery_respawn.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_recovery_bench_times_cold_and_warm_starts_to_the_first_detection(shared_dir, tmp_path):
    from vrt_ros.bench.restart.recovery import START_PARTS

    domain = os.environ.get("VRT_TEST_DOMAIN_ID", "57")
    done = subprocess.run([sys.executable, "-m", "vrt_ros.bench.restart.recovery", "--no-launch", "--repeats", "1",
                           "--import-runs", "2", "--lifecycle-repeats", "0", "--model", str(shared_dir / "models" / "yolox_nano.onnx"),
                           "--domain-id", domain, "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "recovery.json").read_text())
    assert len(result["imports"]["this checkout"]["runs_s"]) == 2
    for label in ("cold", "warm"):
        (run,) = result["start"][label]
        seconds = run["seconds"]
        parts = [seconds[key] for key, _, _ in START_PARTS]
        assert all(p is not None and p >= 0 for p in parts), seconds  # every mark seen, in order
        assert sum(parts) == pytest.approx(seconds["total"], abs=1e-6)
        assert seconds["pipeline"] > 0 and seconds["inference"] > 0
    assert result["respawn_skipped"] == "not run (--no-launch)"
    assert result["lifecycle_skipped"] == "not run (--lifecycle-repeats 0)"  # test_bench_recovery_respawn.py
    md = (tmp_path / "recovery.md").read_text()
    assert "| cold |" in md and "| warm |" in md and md.strip() in done.stdout
