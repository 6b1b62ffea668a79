"""Fault recovery on the GPU (issue 27): a real illegal memory access in the node's process (a kernel reading address
0x100 on the pipeline's stream, vrt_ros.bench.restart.recovery_probe's ``illegal_address``), twice in a row, under the
bench's supervisor respawn (what launch's ``respawn: true`` does; the GPU machine has no launch stack). Each process
ends with status 3 within 0.5 s of the fault (issue 27's fatal-exit target), publishes the ERROR on
``/diagnostics`` first, and the next one answers the camera again, loading the torch engine from the cache the first
process wrote (the archive is not rewritten). Figures: ``python -m vrt_ros.bench.restart.recovery --backend cuda
--respawn supervisor --fault-kind illegal_address`` (results/bench/recovery_h200*.md)."""

from __future__ import annotations

import math
import os

import pytest

from gpu_support import requires_gpu, torch_reason

pytest.importorskip("rclpy", reason="rclpy not installed (on the GPU machine: scripts/ros312_env.sh's bundle)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable")

pytestmark = [*requires_gpu, pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")]


#: How far two marks taken in two processes may be from the interval they bound (s; see test_launch_real).
MARK_UNCERTAINTY_S = 0.05


def test_real_illegal_address_exits_fast_and_the_respawned_node_answers_again_twice(shared_dir, tmp_path):
    from vrt_ros.bench.restart.recovery_procs import Camera, params_file
    from vrt_ros.bench.restart.recovery_respawn import supervised_run

    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONUNBUFFERED="1", VRT_RECOVERY_FAULT="illegal_address", XDG_CACHE_HOME=str(cache))
    with Camera(None, 10.0) as camera:
        result = supervised_run(env, params_file(tmp_path, shared_dir / "models" / "yolox_nano.onnx", "cuda"), camera,
                                faults=2, fault_after=3, delay=0.5, timeout_s=180.0)
    rows = result["faults"]
    assert len(rows) == 2, result
    for i, row in enumerate(rows, 1):
        s = row["seconds"]
        print(f"\nfault {i}: " + ", ".join(f"{k} {v:.2f}" for k, v in s.items() if v is not None))
        assert row["marks"]["exit_code"] == 3, row
        # each part spans two processes' marks (the probe's fault, the supervisor's view of the exit and start):
        # bounds widened by their uncertainty (issue 33: a 0.5 s delay was measured 0.4976 s)
        assert s["diagnostics_error"] is not None and s["diagnostics_error"] <= 0.5 + MARK_UNCERTAINTY_S, s
        assert 0 < s["exit"] <= 0.5 + MARK_UNCERTAINTY_S, s
        assert s["delay"] >= 0.5 - MARK_UNCERTAINTY_S and math.isfinite(s["total"]) and s["inference"] >= 0, s
    (archive,) = (cache / "vrt_ros" / "engines").glob("*.ts")
    first_fault = rows[0]["marks"]["fault"]
    assert archive.stat().st_mtime < first_fault, "the respawned processes converted the model again"
