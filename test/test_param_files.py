"""Parameter files read as rcl reads them (issue 11): one reader for ``python -m vrt_ros.settings.config``, detector_node's
start-up check and the launch file, checked value by value against rcl itself, and bad files reported in one line.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vrt_ros.errors import ConfigError
from vrt_ros.settings import config, param_files

REPO = Path(__file__).resolve().parents[1]
CONFIG_FILES = sorted((REPO / "config").glob("*.yaml"))

# Scalars whose type YAML 1.1 (PyYAML) and rcl disagree on, and the usual ones.
EDGE_VALUES = ["y", "n", "Off", "010", "0x10", "+5", "1e3", "1.", ".5", "inf", ".NaN", "-.inf", "99999999999999999999",
               "~", "null", "1_000", "0o17", "1:30", '"12"', "!!str 5", "'true'", "text", "[y, n]", "[1, 2]",
               "[a, 'b']", "[1.5, 2.0]", "[]"]  # fmt: skip
EDGE_FILE = "/**:\n  ros__parameters:\n" + "".join(f"    v{i}: {v}\n" for i, v in enumerate(EDGE_VALUES)) + (
    "    nested:\n      level: 1\n"
    "robot1:\n  front:\n    ros__parameters:\n      nested_ns: 1\n"
    "/**/front:\n  ros__parameters:\n    wild: 2\n"
    "front:\n  ros__parameters:\n    plain: 3\n"
    "/robot1/front:\n  ros__parameters:\n    fq: 4\n    wild: 5\n"
    "/robot1/*:\n  ros__parameters:\n    one_level: 6\n"
)
NODES = ["/front", "/robot1/front", "/robot1/rear", "/a/b/front"]
# Files rcl refuses, each with the words of our one-line message.
BAD_FILES = {
    "missing": (None, "does not exist"),
    "list_of_lists": ("/**:\n  ros__parameters:\n    cameras: [[a], [b]]\n", "a list may hold only values"),
    "not_yaml": ("a: [\n", "is not valid YAML"),
    "no_ros_parameters": ("/**:\n  params:\n    x: 1\n", "has a value where"),
    "params_at_top": ("ros__parameters:\n  score_threshold: 0.3\n", "must sit under a node name"),
    "value_at_top": ("score_threshold: 0.3\n", "has a value where"),
    "mixed_list": ("/**:\n  ros__parameters:\n    model:\n      mean: [0, 0.5, 1]\n", "a list must hold one type"),
    "no_value": ("/**:\n  ros__parameters:\n    model:\n      path:\n", "has no value"),
    "params_not_mapping": ("/**:\n  ros__parameters: [1]\n", "must hold a mapping"),
    # issue 26: what rcl refuses that PyYAML (and this reader before) accepted
    "alias": ("/**:\n  ros__parameters:\n    a: &x 1\n    b: *x\n", "rcl does not support aliases"),
    "partial_wildcard": ("/robot*/det:\n  ros__parameters:\n    a: 1\n", "'robot*' is neither a ROS name"),
    "trailing_slash": ("/robot1/det/:\n  ros__parameters:\n    a: 1\n", "has an empty name"),
    "double_slash": ("/robot1//det:\n  ros__parameters:\n    a: 1\n", "has an empty name"),
    "digit_token": ("/1robot/det:\n  ros__parameters:\n    a: 1\n", "'1robot' is neither"),
    "empty_document": ("/**:\n  ros__parameters:\n    a: 1\n---\n---\n/**:\n  ros__parameters:\n    b: 2\n",
                       "expected 'ros__parameters:' or a node name"),
}


def _bad_file(tmp_path: Path, case: str) -> tuple[Path, str]:
    """The file of a BAD_FILES case (not created for "missing") and the words its message must hold."""
    body, words = BAD_FILES[case]
    f = tmp_path / f"{case}.yaml"
    if body is not None:
        f.write_text(body)
    return f, words


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def test_empty_list_is_not_set_and_means_the_schema_default(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("/**:\n  ros__parameters:\n    engine:\n      profile_max: []\n    cameras: []\n")
    assert param_files.values_for(param_files.read(f), "/vrt_detector") == {"engine.profile_max": None, "cameras": None}
    values = config.load_params_file(f)
    assert values["engine.profile_max"] == [] and values["cameras"] == ["camera"]


def test_scalars_are_typed_as_rcl_types_them(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(EDGE_FILE)
    v = param_files.values_for(param_files.read(f), "/front")
    by_text = {EDGE_VALUES[int(k[1:])]: val for k, val in v.items() if k.startswith("v")}
    assert by_text["y"] is True and by_text["Off"] is False and by_text["010"] == 8 and by_text["0x10"] == 16
    assert by_text["1e3"] == 1000.0 and by_text["99999999999999999999"] == 1e20 and math.isnan(by_text[".NaN"])
    assert by_text["~"] == "~" and by_text["null"] == "null" and by_text["1_000"] == "1_000" and by_text["1:30"] == "1:30"
    assert by_text['"12"'] == "12" and by_text["!!str 5"] == "5" and by_text["[]"] is None


@pytest.mark.parametrize("node, expected", [
    ("/front", {"plain": 3, "wild": 2}),
    ("/robot1/front", {"nested_ns": 1, "wild": 5, "fq": 4, "one_level": 6}),
    ("/robot1/rear", {"one_level": 6}),
    ("/a/b/front", {"wild": 2}),
])  # fmt: skip
def test_sections_apply_by_rclpys_node_name_rule(tmp_path, node, expected):
    f = tmp_path / "p.yaml"
    f.write_text(EDGE_FILE)
    got = {k: v for k, v in param_files.values_for(param_files.read(f), node).items() if not k.startswith(("v", "nested."))}
    assert got == expected


def test_an_empty_file_sets_nothing_as_in_rcl(tmp_path):
    f = tmp_path / "empty.yaml"
    f.write_text("# nothing yet\n")
    assert param_files.read(f) == [] and config.load_params_file(f) == config.defaults()


def test_unmatched_sections_are_named_with_the_fix(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("/**:\n  ros__parameters:\n    backend: cpu\nfront_det:\n  ros__parameters:\n    cameras: [front]\n")
    sections = param_files.read(f)
    fqns = ["/robot1/front_det", "/robot1/rear_det"]
    missed = param_files.unmatched(sections, fqns)
    assert [s.key for s in missed] == ["/front_det"]
    hint = param_files.unmatched_hint(missed[0], fqns)
    assert str(f) in hint and "'/**/front_det:'" in hint and "/robot1/front_det" in hint


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_fail_in_one_line_naming_file_and_problem(tmp_path, case):
    f, words = _bad_file(tmp_path, case)
    with pytest.raises(ConfigError) as e:
        param_files.read(f)
    msg = str(e.value)
    assert str(f) in msg and words in msg and "\n" not in msg, msg


def test_cli_applies_the_sections_of_one_node(tmp_path, capsys):
    f = tmp_path / "two.yaml"
    f.write_text("/**:\n  ros__parameters:\n    backend: cpu\n/**/front_det:\n  ros__parameters:\n    nms_iou: 0.3\n"
                 "/**/rear_det:\n  ros__parameters:\n    nms_iou: 7.0\n")
    assert config.main([str(f), "--node", "/robot1/front_det", "--schema-only"]) == 0
    assert config.main([str(f), "--node", "/robot1/rear_det"]) == 1
    assert "'nms_iou' = 7.0" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------- against rcl itself
def _rcl_overrides(files: list[Path], fqn: str) -> dict:
    """What rclpy hands a node named ``fqn`` from ``--params-file`` arguments (rcl's parser, rclpy's matching)."""
    rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`)")
    from rclpy.context import Context
    from rclpy.node import Node

    ctx = Context()
    args = ["x", "--ros-args"] + [a for f in files for a in ("--params-file", str(f))]
    rclpy.init(context=ctx, args=args)
    try:
        ns, name = fqn.rsplit("/", 1)
        node = Node(name, namespace=ns or "/", context=ctx)
        try:
            return {k: (list(p.value) if isinstance(p.value, (list, tuple)) or hasattr(p.value, "tolist") else p.value)
                    for k, p in node._parameter_overrides.items()}
        finally:
            node.destroy_node()
    finally:
        ctx.try_shutdown()


def _ours_and_rcls(f: Path, text: str, node: str) -> tuple[dict, dict]:
    """The values this reader and rcl give ``node`` from a file holding ``text``."""
    f.write_text(text)
    return param_files.values_for(param_files.read(f), node), _rcl_overrides([f], node)


@pytest.mark.ros
@pytest.mark.parametrize("node", NODES)
def test_reader_and_rcl_agree_value_by_value(tmp_path, node):
    ours, theirs = _ours_and_rcls(tmp_path / "edge.yaml", EDGE_FILE, node)
    assert set(ours) == set(theirs)
    differ = {k: (ours[k], theirs[k]) for k in ours if not _same(ours[k], theirs[k])}
    assert not differ, differ


#: Files rcl accepts that PyYAML's single-document reading refused (issue 26): several documents, read as one.
MULTI_DOCUMENT = ("---\n/**:\n  ros__parameters:\n    a: 1\n    model:\n      path: /m.onnx\n...\n"
                  "---\n/robot1/front:\n  ros__parameters:\n    a: 3\n    b: [p, q]\n---\n/*/front:\n"
                  "  ros__parameters:\n    c: &anchor 0.5\nrobot1/:\n  rear:\n    ros__parameters:\n      d: true\n")


@pytest.mark.ros
@pytest.mark.parametrize("node", NODES)
def test_multi_document_files_read_as_rcl_reads_them(tmp_path, node):
    ours, theirs = _ours_and_rcls(tmp_path / "multi.yaml", MULTI_DOCUMENT, node)
    assert ours == theirs
    if node == "/robot1/front":
        assert ours == {"a": 3, "model.path": "/m.onnx", "b": ["p", "q"], "c": 0.5}


@pytest.mark.ros
@pytest.mark.parametrize("path", CONFIG_FILES + [None], ids=lambda p: p.name if p else "two_files")
def test_reader_and_rcl_agree_on_every_robot_yaml(tmp_path, path):
    files = [path] if path else [REPO / "config" / "default.yaml", REPO / "config" / "mobile_robot_coco.yaml"]
    ours = param_files.values_for(param_files.read_all(files), "/robot1/vrt_detector")
    theirs = _rcl_overrides(files, "/robot1/vrt_detector")
    assert ours == theirs


@pytest.mark.ros
@pytest.mark.parametrize("case", sorted(set(BAD_FILES) - {"no_ros_parameters"}))
def test_rcl_refuses_what_the_reader_refuses(tmp_path, case):
    """Every bad file our reader refuses, rcl refuses too (so our one line replaces rcl's error, never a file
    the node would have accepted). ``params: {x: 1}`` without ros__parameters rcl silently ignores; we refuse it."""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`)")
    from rclpy.context import Context

    f, _ = _bad_file(tmp_path, case)
    import rclpy

    ctx = Context()
    with pytest.raises(Exception):
        rclpy.init(context=ctx, args=["x", "--ros-args", "--params-file", str(f)])
    ctx.try_shutdown()


@pytest.mark.ros
@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.name)
def test_node_and_cli_agree_on_every_robot_yaml(path):
    """The node's declared values from ``--params-file config/<robot>.yaml`` equal ``python -m vrt_ros.settings.config``'s."""
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`)")
    from rclpy.node import Node

    from ros_testing import private_context
    from vrt_ros.ros.params import NodeParameters

    with private_context() as ctx:
        node = Node("vrt_detector", context=ctx, cli_args=["--ros-args", "--params-file", str(path)])
        try:
            values = NodeParameters(node).snapshot()
        finally:
            node.destroy_node()
    assert values == config.load_params_file(path, "/vrt_detector")


@pytest.mark.ros
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_detector_node_bad_params_file_one_line_exit_2(tmp_path, case):
    f, words = _bad_file(tmp_path, case)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "vrt_ros.ros.main", "--ros-args", "--params-file", str(f)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(f) in lines[0] and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
