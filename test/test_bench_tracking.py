"""The tracking benchmark and metrics commands run end to end and write their files (issue 24; the figures
themselves are in results/bench/tracking.md and results/tracking/synthetic.md, no timing is asserted here)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("scipy", reason="scipy not installed (runtime dependency of tracking)")

from vrt_ros.bench.tracker import tracking, tracking_eval  # noqa: E402


def test_cost_benchmark_prints_and_writes_its_figures(tmp_path, capsys):
    rc = tracking.main(["--detections", "10,100", "--frames", "20", "--warmup", "5", "--repeats", "1",
                        "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "tracking.json").read_text())
    assert rc in (0, 1)  # 1: the 0.3 ms target missed on this machine (said in the output)
    assert [r["detections"] for r in doc["rows"]] == [10, 100]
    assert all(r["n"] == 20 and r["p50"] > 0 and r["cpu"]["p50"] >= 0 for r in doc["rows"])
    assert doc["rows"][1]["tracks"] >= 90  # the crowd's objects are tracked
    out = capsys.readouterr().out
    assert "| 100 |" in out and "100 detections: p50" in out and (tmp_path / "tracking.md").is_file()


def test_metrics_command_writes_tracker_oracle_and_baseline(tmp_path, capsys):
    pytest.importorskip("trackeval", reason="trackeval not installed (test dependency: requirements/test-nodeps.txt)")
    assert tracking_eval.main(["--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "synthetic.json").read_text())
    assert len(doc["rows"]) == len(doc["oracle"]) == len(doc["baseline"]) == 8
    assert "| crossing | 10 |" in capsys.readouterr().out
