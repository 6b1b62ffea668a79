"""The tracker on the real street bag (issue 24): YOLOX-nano on the CPU path, then the camera's tracker as the node
runs it (``python -m vrt_ros.bench.tracker.tracking_bag`` reports the same run, results/tracking/bag_tracks.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("scipy", reason="scipy not installed (runtime dependency of tracking)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("rosbags", reason="rosbags not installed")

from vrt_ros.bench.tracker.tracking_bag import picture, run, summary  # noqa: E402


@pytest.mark.slow
def test_parked_vehicles_keep_one_id_over_the_whole_bag(shared_dir, tmp_path):
    """The two parked cars and the parked truck are seen in every frame: each keeps one track id from the second
    frame (min_hits 2) to the last; every id is one class; the picture is written."""
    frames, tracks, published = run(shared_dir / "data" / "bags" / "vtest_compressed_mcap",
                                    shared_dir / "models" / "yolox_nano.onnx", shared_dir / "models" / "coco80.names")
    s = summary(frames, tracks, published)
    assert s["frames"] == 40
    vehicles = {tid: t for tid, t in tracks.items() if t["class"] in ("car", "truck")}
    assert sorted(t["class"] for t in vehicles.values()) == ["car", "car", "truck"], vehicles.keys()
    assert all(t["frames"] == list(range(1, 40)) for t in vehicles.values())
    assert s["tracks_over_half_the_bag"] >= 5  # the vehicles and the people standing or walking slowly
    picture(frames, tracks, tmp_path / "tracks.png")
    assert (tmp_path / "tracks.png").stat().st_size > 10_000
