"""What a new user met setting up a two-camera robot from the docs alone (issue 37, results/newuser/account.md), each
fixed where it was:

- ``python -m vrt_ros.settings.config`` said ``ok`` for ``depth.cameras`` naming a camera not in ``cameras``, which
  the node refuses at start-up (exit status 2);
- ``record --count N`` wrote N + 1 messages (the ones already on their way to the writer when the count was reached
  were written too);
- the node's ``depth_unpaired`` warning did not name the depth topic it listens on, so a user whose depth never
  arrives could not tell where the node expected it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vrt_ros.errors import ConfigError
from vrt_ros.settings import config

REPO = Path(__file__).resolve().parents[1]

TWO_CAMERAS = """/**:
  ros__parameters:
    model:
      path: {model}
    cameras: [front, rear]
    input:
      compressed_cameras: [front]
    depth:
      enabled: {enabled}
      cameras: {depth_cameras}
"""


def two_cameras(tmp_path: Path, depth_cameras: str, enabled: str = "true") -> Path:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"onnx")
    f = tmp_path / "robot.yaml"
    f.write_text(TWO_CAMERAS.format(model=model, enabled=enabled, depth_cameras=depth_cameras))
    return f


@pytest.mark.parametrize("depth_cameras, words", [
    ("[front, back]", "parameter 'depth.cameras' names ['back'], not in 'cameras' ['front', 'rear']"),
    ("[rear, rear]", "parameter 'depth.cameras' lists a camera twice: ['rear', 'rear']"),
])
def test_the_checker_refuses_a_depth_camera_list_the_node_refuses(tmp_path, capsys, depth_cameras, words):
    f = two_cameras(tmp_path, depth_cameras)
    assert config.main([str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}: invalid (the node would refuse it at start-up)" in err and f"  {f}: {words}" in err, err
    with pytest.raises(ConfigError, match=r"parameter 'depth\.cameras'"):  # the node's own check: the same code
        config.validate({"cameras": ["front", "rear"], "depth.enabled": True,
                         "depth.cameras": [c.strip() for c in depth_cameras.strip("[]").split(",")]}, "parameters")


@pytest.mark.parametrize("name", ["depth.topic", "depth.camera_info_topic"])
def test_an_absolute_depth_topic_is_refused_naming_the_parameter(tmp_path, capsys, name):
    """Both depth topics are read under each camera (<cam>/<value>): an absolute one was silently made relative
    (``/front/aligned_depth/image_raw`` became ``<cam>/front/aligned_depth/image_raw``). Now the checker and the
    node's own validation refuse it with the parameter's name; a nested relative name stays valid."""
    f = two_cameras(tmp_path, "[front]")
    f.write_text(f.read_text() + f"      {name.split('.')[1]}: /front/aligned_depth/image_raw\n")
    assert config.main([str(f)]) == 1
    err = capsys.readouterr().err
    assert (f"parameter '{name}' = '/front/aligned_depth/image_raw' is absolute, but it is read relative to each "
            "camera (<cam>/front/aligned_depth/image_raw): drop the leading '/'") in err, err
    with pytest.raises(ConfigError, match=f"parameter '{name}'"):
        config.validate({"cameras": ["front"], "depth.enabled": True, name: "/d/image_raw"}, "parameters")
    ok = config.validate({"cameras": ["front"], "depth.enabled": True, name: "aligned_depth_to_color/image_raw"})
    assert ok[name] == "aligned_depth_to_color/image_raw"


def test_the_depth_camera_list_is_not_checked_while_depth_is_off(tmp_path, capsys):
    """The node builds its depth inputs only with depth.enabled: a stale list in a file with depth off starts."""
    f = two_cameras(tmp_path, "[back]", enabled="false")
    assert config.main([str(f)]) == 0
    assert capsys.readouterr().out.strip() == f"{f}: ok"
    assert config.main([str(two_cameras(tmp_path, "[rear]"))]) == 0


@pytest.mark.ros
def test_record_count_writes_exactly_that_many_messages(tmp_path):
    """``record --count 2`` while a bag of 6 frames is replayed as fast as possible: 2 lines, and says 2."""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
    pytest.importorskip("rosbags", reason="rosbags not installed")
    from ros_testing import unique_namespace
    from test_replay_record import TOPIC, _write_bag

    src = tmp_path / "src"
    _write_bag(src, "mcap", 6, period_ns=1_000_000)
    ns = unique_namespace()
    out = tmp_path / "rec.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rec = subprocess.Popen(
        [sys.executable, "-m", "vrt_ros.tools.record", str(out), f"{ns}/img:sensor_msgs/msg/Image", "--count", "2",
         "--duration", "60"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        play = subprocess.run(
            [sys.executable, "-m", "vrt_ros.tools.replay", str(src), "--rate", "0", "--topic", f"{TOPIC}={ns}/img",
             "--wait-timeout", "30"], env=env, capture_output=True, text=True, timeout=90)
        assert play.returncode == 0 and "published 6 messages" in play.stdout, play.stdout + play.stderr
        rec_out, _ = rec.communicate(timeout=60)
    finally:
        if rec.poll() is None:
            rec.kill()
    assert rec.returncode == 0, rec_out
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [m["msg"]["header"]["frame_id"] for m in lines] == ["cam_0", "cam_1"], rec_out
    assert f"recorded {{'{ns}/img': 2}}" in rec_out


@pytest.mark.ros
def test_the_unpaired_depth_warning_names_the_depth_topic(tmp_path, capfd):
    """Depth enabled, colour frames arriving, nothing on the depth topic: the warning says where the node listens
    for depth and that nothing came there."""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
    pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    pytest.importorskip("onnx", reason="onnx not installed (test dependency)")
    import depth_scenes as ds
    from ros_testing import private_context, spinning, unique_namespace
    from synthetic_models import blob_end2end
    from test_node_depth import Rig
    from vrt_ros.depth import reasons

    model = blob_end2end(tmp_path / "blob.onnx", ds.W, ds.H)
    ns = unique_namespace()
    with private_context() as ctx:
        rig = Rig(ctx, ns, model, **{"depth.wait_ms": 50.0})
        with spinning(ctx, rig.node, rig.client):
            rig.wait_matched()
            rig.frame(ds.OBJECTS[0], None)  # colour + camera_info, no depth
            counters = rig.node.counters()["cam"]
        rig.client.destroy_node()
        rig.node.destroy_node()
    assert counters.depth == {reasons.UNPAIRED: 1}
    err = capfd.readouterr().err
    warned = [line for line in err.splitlines() if reasons.UNPAIRED in line]
    assert warned and f"0 received on {ns}/cam/depth/image_raw since start" in warned[0], err


def test_rgbd_trial_bag_gives_each_colour_frame_its_depth_and_camera_info_first(shared_dir, tmp_path):
    """scripts/rgbd_trial_bag.py (docs/depth.md, "Try it without an RGB-D camera") on the two shared bags: per
    colour frame, a depth image and a camera_info with its header and size, written before it in bag time."""
    pytest.importorskip("rosbags", reason="rosbags not installed")
    import importlib.util

    import numpy as np
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    spec = importlib.util.spec_from_file_location("rgbd_trial_bag", REPO / "scripts" / "rgbd_trial_bag.py")
    trial = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trial)
    bags = shared_dir / "data" / "bags"
    out = tmp_path / "rgbd"
    assert trial.main([str(out), "--camera", f"front={bags / 'vtest_compressed_mcap'}",
                       "--camera", f"rear={bags / 'vtest_raw_sqlite3'}", "--distance-m", "6"]) == 0
    ts = get_typestore(Stores.ROS2_JAZZY)
    seen: dict[str, list] = {}
    with Reader(out) as reader:
        for conn, t, raw in reader.messages():
            seen.setdefault(conn.topic, []).append((t, ts.deserialize_cdr(raw, conn.msgtype)))
    assert {k: len(v) for k, v in seen.items()} == {
        "/front/image_raw/compressed": 40, "/front/depth/image_raw": 40, "/front/camera_info": 40,
        "/rear/image_raw": 8, "/rear/depth/image_raw": 8, "/rear/camera_info": 8}
    for cam, colour, (w, h) in (("front", "/front/image_raw/compressed", (768, 576)),
                                ("rear", "/rear/image_raw", (384, 288))):
        for (tc, c), (td, d), (ti, i) in zip(seen[colour], seen[f"/{cam}/depth/image_raw"],
                                             seen[f"/{cam}/camera_info"]):
            assert td < tc and ti < tc  # the node holds depth and camera_info when the colour frame comes
            assert d.header.stamp == c.header.stamp == i.header.stamp
            assert d.header.frame_id == c.header.frame_id == i.header.frame_id
            assert (d.width, d.height, i.width, i.height) == (w, h, w, h) and d.encoding == "16UC1"
            assert np.all(np.frombuffer(d.data.tobytes(), np.uint16) == 6000)
            assert list(i.k) == [0.8 * w, 0, w / 2, 0, 0.8 * w, h / 2, 0, 0, 1]
    with pytest.raises(SystemExit, match="already exists"):
        trial.main([str(out), "--camera", f"front={bags / 'vtest_raw_sqlite3'}"])
