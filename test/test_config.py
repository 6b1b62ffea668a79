"""Parameter schema and per-robot YAML validation (HC-13); every YAML under config/ must validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from vrt_ros.errors import ConfigError
from vrt_ros.settings import config, param_files

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"


def write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "robot.yaml"
    p.write_text(body)
    return p


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_config_yaml_validates(path):
    values = config.load_params_file(path)
    assert set(values) == set(config.SCHEMA)


def test_config_dir_has_yaml():
    assert sorted(CONFIG_DIR.glob("*.yaml")), "config/ must hold at least default.yaml"


def test_defaults_validate():
    assert config.validate({}) == config.defaults()
    for spec in config.PARAMS:
        config.check_value(spec.name, spec.default)


def test_HC_13_ints_accepted_for_doubles(tmp_path):
    p = write(tmp_path, "/**:\n  ros__parameters:\n    score_threshold: 1\n    model:\n      mean: [0, 0, 0]\n")
    values = config.load_params_file(p)
    assert values["score_threshold"] == 1.0 and isinstance(values["score_threshold"], float)
    assert values["model.mean"] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "line, name",
    [
        ('nms_iou: "0.5"', "nms_iou"),
        ("input:\n      depth: 1.0", "input.depth"),
        ("queue_depth: 1.0", "queue_depth"),
        ("max_detections: true", "max_detections"),
        ("nms_iou: 1.5", "nms_iou"),
        ("backend: gpu", "backend"),
        ("model:\n      mean: [0, 0]", "model.mean"),
        ("cameras: [/front]", "cameras"),
    ],
)
def test_HC_13_wrong_types_and_unknown_keys_name_parameter_and_file(tmp_path, line, name):
    p = write(tmp_path, f"/**:\n  ros__parameters:\n    {line}\n")
    with pytest.raises(ConfigError) as e:
        config.load_params_file(p)
    assert f"'{name}'" in str(e.value) and str(p) in str(e.value)


@pytest.mark.parametrize("body", ["just text", "/**:\n  params: {}\n", "/**:\n  ros__parameters: [1]\n", "a: [\n"])
def test_bad_layout_rejected(tmp_path, body):
    with pytest.raises(ConfigError, match="robot.yaml"):
        config.load_params_file(write(tmp_path, body))


def test_missing_file_named(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml"):
        config.load_params_file(tmp_path / "nope.yaml")


def test_markdown_table_lists_every_parameter():
    table = config.markdown_table()
    for spec in config.PARAMS:
        assert f"`{spec.name}`" in table


def test_every_error_reported_with_a_suggestion(tmp_path):
    p = write(tmp_path, "/**:\n  ros__parameters:\n    score_treshold: 0.3\n    nms_iou: high\n    cameras: [a, a]\n")
    with pytest.raises(ConfigError) as e:
        config.load_params_file(p)
    msg = str(e.value)
    assert "did you mean 'score_threshold'?" in msg and "'nms_iou'" in msg and "twice" in msg
    assert len(msg.splitlines()) == 3


def test_missing_node_level_explained(tmp_path):
    with pytest.raises(ConfigError, match=r"under a node name, e.g. '/\*\*:'"):
        config.load_params_file(write(tmp_path, "ros__parameters:\n  score_threshold: 0.3\n"))


def test_cli_exit_codes(tmp_path, capsys):
    good = CONFIG_DIR / "default.yaml"
    assert config.main([str(good), "--schema-only"]) == 0
    bad = write(tmp_path, "/**:\n  ros__parameters:\n    score_treshold: 0.3\n")
    assert config.main([str(bad)]) == 1
    assert "did you mean" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        config.main([])
    assert e.value.code == 2


def test_cli_says_ok_only_for_a_file_the_node_gets_past_start_up_with(tmp_path, capsys):
    """Issue 37: ``ok`` for config/default.yaml, whose required model.path is empty, while the node refused it. The
    CLI now runs the node's start-up checks that load no model: an empty or missing model.path, an unreadable
    model.labels, each named; ``--schema-only`` checks the schema alone and says so."""
    default = CONFIG_DIR / "default.yaml"
    assert config.main([str(default)]) == 1
    err = capsys.readouterr().err
    assert f"{default}: invalid (the node would refuse it at start-up)" in err
    assert "model.path is empty: set it to an .onnx model file" in err
    assert config.main([str(default), "--schema-only"]) == 0
    out = capsys.readouterr().out
    assert f"{default}: schema ok (model.path and model.labels not checked: --schema-only)" in out
    model, labels = tmp_path / "m.onnx", tmp_path / "coco.names"
    f = write(tmp_path, f"/**:\n  ros__parameters:\n    model:\n      path: {model}\n      labels: {labels}\n")
    assert config.main([str(f)]) == 1
    assert f"model file {model} does not exist" in capsys.readouterr().err
    model.write_bytes(b"")
    assert config.main([str(f)]) == 1
    assert f"model file {model} is empty" in capsys.readouterr().err
    model.write_bytes(b"onnx")
    assert config.main([str(f)]) == 1
    assert f"labels file {labels} cannot be read" in capsys.readouterr().err
    labels.write_text("person\n")
    assert config.main([str(f)]) == 0
    assert capsys.readouterr().out.strip() == f"{f}: ok"
    # the node's -p overrides, over the file's values, as the node applies them
    assert config.main([str(default), "-p", f"model.path:={model}"]) == 0
    capsys.readouterr()
    assert config.main([str(default), "-p", f"model.path:={model}", "-p", "score_threshold:=5"]) == 1
    assert "parameter 'score_threshold' = 5.0 is outside" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="NAME:=VALUE"):
        param_files.parse_override("model.path=/m.onnx")
    assert param_files.parse_override("cameras:=[front, rear]") == ("cameras", ["front", "rear"])
    assert param_files.parse_override("input.depth:=010") == ("input.depth", 8)  # rcl's strtoll, as in a file


def test_cli_notes_a_file_whose_sections_the_default_node_name_does_not_read(tmp_path, capsys):
    named = tmp_path / "named.yaml"
    named.write_text("my_node:\n  ros__parameters:\n    score_threshold: 0.3\n")
    assert config.main([str(named), "--schema-only"]) == 0  # valid values: still ok, with a note
    out = capsys.readouterr().out
    assert f"{named}: schema ok" in out and "['/my_node']" in out and f"'{config.DEFAULT_NODE_NAME}'" in out
    for header in ("/**", config.DEFAULT_NODE_NAME):  # sections detector_node reads by default: no note
        f = tmp_path / "read.yaml"
        f.write_text(f"{header}:\n  ros__parameters:\n    score_threshold: 0.3\nmy_node:\n  ros__parameters:\n    nms_iou: 0.5\n")
        assert config.main([str(f), "--schema-only"]) == 0
        assert "note:" not in capsys.readouterr().out


@pytest.mark.ros
@pytest.mark.parametrize("case", ["empty_model", "missing_model", "missing_labels"])
def test_cli_refuses_with_the_words_the_node_refuses_with(tmp_path, capsys, case):
    """Issue 37: the CLI's start-up checks are the node's: for each file the node refuses at start-up, the CLI says
    invalid with the node's own message."""
    import os
    import subprocess
    import sys

    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
    model = tmp_path / "m.onnx"
    if case == "missing_labels":
        model.write_bytes(b"onnx")
    path = "" if case == "empty_model" else str(model)
    labels = tmp_path / "missing.names" if case == "missing_labels" else ""
    f = write(tmp_path, f"/**:\n  ros__parameters:\n    backend: cpu\n    model:\n      path: '{path}'\n"
                        f"      labels: '{labels}'\n")
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    node = subprocess.run([sys.executable, "-m", "vrt_ros.ros.main", "--ros-args", "--params-file", str(f)], env=env,
                          capture_output=True, text=True, timeout=120)
    said = [line.split("start-up failed: ", 1)[1] for line in node.stderr.splitlines() if "start-up failed: " in line]
    assert node.returncode == 2 and said, node.stderr
    assert config.main([str(f)]) == 1
    assert f"  {said[0]}" in capsys.readouterr().err.splitlines()
