"""Per-camera transport in the parameter schema (issue 35, item 4): ``input.compressed_cameras`` lists the cameras of
``cameras`` on ``<cam>/image_raw/compressed``; ``input.compressed: true`` still means every camera. Bad lists fail
the way a robot YAML is checked (``python -m vrt_ros.settings.config``, :func:`vrt_ros.settings.config.load_params_file`) and the node
starts (:func:`vrt_ros.settings.config.validate`), naming the parameter and the file. The node side: test_node_transport.py."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from fake_cuda import fake_cuda  # noqa: F401  (fixture)
from vrt_ros.errors import ConfigError
from vrt_ros.settings import config

RIG = """/**:
  ros__parameters:
    cameras: [front, left, rear]
    input:
{input}
"""


def rig(tmp_path: Path, *lines: str) -> Path:
    p = tmp_path / "rig.yaml"
    p.write_text(RIG.format(input="\n".join(f"      {line}" for line in lines)))
    return p


@pytest.mark.parametrize("lines, expected", [
    (["compressed: false"], {"front": "raw", "left": "raw", "rear": "raw"}),
    (["compressed: true"], {"front": "compressed", "left": "compressed", "rear": "compressed"}),
    (["compressed_cameras: [front, rear]"], {"front": "compressed", "left": "raw", "rear": "compressed"}),
    (["compressed: false", "compressed_cameras: [left]"], {"front": "raw", "left": "compressed", "rear": "raw"}),
    (["compressed: true", "compressed_cameras: []"],
     {"front": "compressed", "left": "compressed", "rear": "compressed"}),
    (["compressed_cameras: []"], {"front": "raw", "left": "raw", "rear": "raw"}),  # [] in rcl: not set
])
def test_each_camera_gets_its_transport(tmp_path, lines, expected):
    values = config.load_params_file(rig(tmp_path, *lines))
    assert config.camera_transports(values) == expected
    assert list(config.camera_transports(values)) == ["front", "left", "rear"]  # in `cameras` order
    assert config.any_compressed(values) == ("compressed" in expected.values())


@pytest.mark.parametrize("lines, words", [
    (["compressed_cameras: [front, top]"], ["input.compressed_cameras", "'top'", "not in 'cameras'"]),
    (["compressed_cameras: [front, front]"], ["input.compressed_cameras", "lists a camera twice"]),
    (["compressed: true", "compressed_cameras: [front]"], ["input.compressed_cameras", "'input.compressed' true"]),
    (["compressed_cameras: front"], ["input.compressed_cameras", "must be string_array"]),
    (["compressed_cameras: [1, 2]"], ["input.compressed_cameras", "must be"]),
])
def test_a_bad_list_names_the_parameter_and_the_file(tmp_path, lines, words):
    path = rig(tmp_path, *lines)
    with pytest.raises(ConfigError) as e:
        config.load_params_file(path)
    assert str(path) in str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_the_checker_cli_refuses_a_camera_not_in_cameras(tmp_path, capsys):
    path = rig(tmp_path, "compressed_cameras: [front, top]")
    assert config.main([str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: invalid" in err and "input.compressed_cameras" in err and "'top'" in err


def test_the_list_is_checked_against_the_cameras_the_node_gets(tmp_path):
    """The robot file lists the cameras, a later file (``params_file``) changes them: the merged values decide, so a
    list naming a camera the later file removed fails at start-up (the node validates what rcl gives it)."""
    values = {"cameras": ["front", "rear"], "input.compressed_cameras": ["left"]}
    with pytest.raises(ConfigError, match=r"parameter 'input.compressed_cameras' names \['left'\], not in 'cameras'"):
        config.validate(values, "parameters")
    assert config.camera_transports(config.validate({**values, "cameras": ["front", "left"]})) == {
        "front": "raw", "left": "compressed"}


def test_every_shipped_yaml_still_validates_and_the_mixed_rig_mixes():
    """Existing YAMLs keep their meaning (input.compressed alone); config/mixed_rig.yaml is a real mix."""
    config_dir = Path(__file__).resolve().parents[1] / "config"
    coco = config.camera_transports(config.load_params_file(config_dir / "mobile_robot_coco.yaml"))
    assert set(coco.values()) == {"compressed"}
    mixed = config.camera_transports(config.load_params_file(config_dir / "mixed_rig.yaml"))
    assert list(mixed.values()).count("compressed") == 3 and list(mixed.values()).count("raw") == 3
    default = config.camera_transports(config.load_params_file(config_dir / "default.yaml"))
    assert set(default.values()) == {"raw"}


@pytest.mark.parametrize("params, started", [
    ({"cameras": ["front", "rear"], "input.compressed_cameras": ["front"]}, True),
    ({"cameras": ["front", "rear"], "input.compressed": True}, True),
    ({"cameras": ["front", "rear"]}, False),
])
def test_the_gpu_path_starts_its_jpeg_decoder_when_any_camera_is_compressed(
        fake_cuda, monkeypatch, params, started):  # noqa: F811
    """On the CUDA stand-in: a node with one compressed camera among raw ones gets its GPU JPEG decoder detected and
    started with the pipeline (logged at start-up), not on the first frame; an all-raw node none."""
    from fake_cuda import FakeEngine
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.types import TensorInfo

    router = types.SimpleNamespace(decoder=None)  # the router without a decoder (what close() releases)
    made = []
    monkeypatch.setattr(CudaPipeline, "_make_router", lambda self: made.append(self) or router)
    values = config.validate({"model.path": "model.onnx", "backend": "cuda", "model.head": "yolov8", **params})
    engine = FakeEngine([TensorInfo("images", (1, 3, 64, 64), "float32")],
                        [TensorInfo("output0", (1, 84, 84), "float32")])
    pipe = CudaPipeline(values, log=lambda m: None, engine=engine)
    try:
        assert (pipe._router is router) is started and len(made) == int(started)
    finally:
        pipe.close()
