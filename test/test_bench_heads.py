"""The heads benchmark command runs (CPU rows, quick) and writes its figures; the GPU rows run on the GPU machine
(scripts/gpu_check.sh)."""

from __future__ import annotations

import json

from vrt_ros.bench.outputs import heads


def test_heads_bench_quick_cpu_rows(tmp_path, capsys):
    assert heads.main(["--no-gpu", "--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "heads.json").read_text())
    assert [r["head"] for r in report["decode"]] == ["yolov8", "yolov8_seg", "yolov8_obb", "detr"]
    assert all(r["detections"] == 20 and r["p50_ms"] > 0 for r in report["decode"])
    assert [r["detections"] for r in report["masks"]] == [1, 8] and all(r["p50_ms"] > 0 for r in report["masks"])
    assert "| yolov8_obb | cpu reference | 20 |" in (tmp_path / "heads.md").read_text()
    assert "instance_mask message build" in capsys.readouterr().out
