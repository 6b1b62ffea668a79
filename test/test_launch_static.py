"""launch/detector.launch.py without ROS launch installed (the registries here have no launch/launch_ros).

Three levels:
1. static (always): the file parses; it names only this package, an existing console script, existing configs,
   the documented arguments, and declares no detector parameter (the YAML is the single source of values);
2. logic (always): ``generate_launch_description`` runs against minimal stand-ins of the launch API and yields the
   expected process (robot YAML then params_file, names, namespace, log level, use_sim_time);
3. real (when ``launch_ros`` is importable): the description is built and the node action is evaluated.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest
import yaml

from vrt_ros.settings import config

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch" / "detector.launch.py"
ARGUMENTS = {"robot", "params_file", "namespace", "use_sim_time", "log_level", "node_names", "dds_profile", "respawn",
             "respawn_delay", "lifecycle", "autostart", "executor", "warm_standby"}


def _console_scripts() -> set[str]:
    text = (REPO / "setup.py").read_text()
    return set(re.findall(r'"([\w.-]+)\s*=\s*[\w.]+:\w+"', text))


def _string_constants(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_launch_file_names_only_existing_things():
    tree = ast.parse(LAUNCH.read_text(), filename=str(LAUNCH))
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in funcs
    consts = {
        t.id: n.value.value
        for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets if isinstance(t, ast.Name)
    }
    package_name = _package_name()
    assert consts["PACKAGE"] == package_name
    assert consts["EXECUTABLE"] in _console_scripts(), "the executable must be a console script in setup.py"
    declared = {
        c.args[0].value
        for c in ast.walk(tree)
        if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "DeclareLaunchArgument"
    }
    assert declared == ARGUMENTS
    robot_default = next(
        kw.value.value
        for c in ast.walk(tree)
        if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "DeclareLaunchArgument" and c.args[0].value == "robot"
        for kw in c.keywords if kw.arg == "default_value"
    )
    assert (REPO / "config" / f"{robot_default}.yaml").is_file()
    # the YAML is the single source of parameter values: no detector parameter is named in the launch file
    assert not (_string_constants(tree) & set(config.SCHEMA))
    # the only parameter set in the launch file is rclpy's own use_sim_time
    dict_keys = {k.value for d in ast.walk(tree) if isinstance(d, ast.Dict) for k in d.keys if isinstance(k, ast.Constant)}
    assert dict_keys <= {"use_sim_time"}


def _package_name() -> str:
    import xml.etree.ElementTree as ET

    return ET.parse(REPO / "package.xml").getroot().findtext("name")


def test_setup_installs_launch_and_config():
    text = (REPO / "setup.py").read_text()
    assert 'glob("launch/*.py")' in text and 'glob("config/*.yaml")' in text


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_config_files_use_ros_layout_and_validate(path):
    doc = yaml.safe_load(path.read_text())
    assert list(doc) == ["/**"] and list(doc["/**"]) == ["ros__parameters"]
    config.load_params_file(path)


def test_default_yaml_lists_every_parameter_at_its_default():
    flat = config.parse_params_file(REPO / "config" / "default.yaml")["/**"]
    assert set(flat) == set(config.SCHEMA), "default.yaml must document every parameter"
    assert config.validate(flat, "default.yaml") == config.defaults()


# ----------------------------------------------------------------------------------- logic with stand-ins
class _Conf:
    def __init__(self, name: str) -> None:
        self.name = name

    def perform(self, context: dict) -> str:
        return context[self.name]


class _Share:
    def __init__(self, package: str) -> None:
        self.package = package

    def perform(self, context: dict) -> str:
        return context["__share__"]


def _stub_modules() -> dict[str, types.ModuleType]:
    launch = types.ModuleType("launch")
    launch.LaunchDescription = lambda entities: list(entities)
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = lambda name, default_value="", description="": ("arg", name, default_value)
    actions.OpaqueFunction = lambda function: ("opaque", function)
    actions.RegisterEventHandler = lambda handler: ("register", handler)
    handlers = types.ModuleType("launch.event_handlers")
    handlers.OnProcessStart = lambda target_action, on_start: ("on_start", target_action, on_start)
    handlers.OnProcessExit = lambda target_action, on_exit: ("on_exit", target_action, on_exit)
    handlers.OnProcessIO = lambda target_action, on_stdout, on_stderr: ("on_io", target_action, on_stdout, on_stderr)
    subs = types.ModuleType("launch.substitutions")
    subs.LaunchConfiguration = _Conf
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.Node = lambda **kw: ("node", kw)
    ros_subs = types.ModuleType("launch_ros.substitutions")
    ros_subs.FindPackageShare = _Share
    return {"launch": launch, "launch.actions": actions, "launch.event_handlers": handlers,
            "launch.substitutions": subs, "launch_ros": launch_ros, "launch_ros.actions": ros_actions,
            "launch_ros.substitutions": ros_subs}


def _node(actions, kind: str = "node") -> dict:
    """The one node action among ``actions`` (the rest are its event handlers)."""
    (node,) = [a[1] for a in actions if a[0] == kind]
    return node


def _load_with_stubs(monkeypatch):
    for name, module in _stub_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("detector_launch_under_test", LAUNCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launch_logic_with_stand_in_launch_api(monkeypatch, tmp_path):
    (tmp_path / "x.yaml").write_text("/**/a:\n  ros__parameters:\n    score_threshold: 0.5\n")
    module = _load_with_stubs(monkeypatch)
    entities = module.generate_launch_description()
    args = {e[1]: e[2] for e in entities if e[0] == "arg"}
    assert set(args) == ARGUMENTS
    (opaque,) = [e[1] for e in entities if e[0] == "opaque"]
    context = {**args, "__share__": str(REPO), "robot": "mobile_robot_coco", "params_file": str(tmp_path / "x.yaml"),
               "namespace": "robot1", "use_sim_time": "True", "log_level": "debug", "node_names": "a b",
               "dds_profile": "/etc/robot/fastdds.xml", "executor": "single"}
    node = _node(opaque(context))
    assert node["executable"] in _console_scripts()
    assert node["parameters"] == [str(REPO / "config" / "mobile_robot_coco.yaml"), str(tmp_path / "x.yaml"),
                                  {"use_sim_time": True}]
    assert node["arguments"] == ["--names", "a", "b", "--dds-profile", "/etc/robot/fastdds.xml", "--exit-with-parent",
                                 "--executor", "single"]
    assert node["namespace"] == "robot1" and node["ros_arguments"] == ["--log-level", "debug"]
    # defaults: the default robot's YAML only
    node = _node(opaque({**args, "__share__": str(REPO)}))
    assert node["parameters"] == [str(REPO / "config" / "default.yaml"), {"use_sim_time": False}]
    assert node["respawn"] is False and node["respawn_delay"] == module.DEFAULT_RESPAWN_DELAY_S == 0.5  # issue 27
    assert node["arguments"] == ["--names", "vrt_detector", "--dds-profile", "auto", "--exit-with-parent",
                                 "--executor", "events"]
    for written in ("[a,b]", "['a', 'b']", "a,b", "a b", " a , b "):  # the ways ROS users write a list
        assert _node(opaque({**args, "__share__": str(REPO), "node_names": written}))["arguments"][:3] == ["--names", "a", "b"]


def test_launch_takes_the_mixed_rig_yaml(monkeypatch, tmp_path):
    """``robot:=mixed_rig``: the robot YAML of one node with JPEG and raw cameras reaches the node as its parameter
    file, after it passed the launch's own check (vrt_ros.settings.param_files), with a params_file that lists other cameras
    (later values win: the node gets the merged values, checked by the schema at its start; the real launch:
    test_launch_real.py)."""
    module = _load_with_stubs(monkeypatch)
    entities = module.generate_launch_description()
    args = {e[1]: e[2] for e in entities if e[0] == "arg"}
    (opaque,) = [e[1] for e in entities if e[0] == "opaque"]
    node = _node(opaque({**args, "__share__": str(REPO), "robot": "mixed_rig"}))
    rig = REPO / "config" / "mixed_rig.yaml"
    assert node["parameters"] == [str(rig), {"use_sim_time": False}]
    transports = config.camera_transports(config.load_params_file(rig, "/vrt_detector"))
    assert sorted(transports.values()) == ["compressed"] * 3 + ["raw"] * 3
    extra = tmp_path / "two.yaml"
    extra.write_text("/**:\n  ros__parameters:\n    cameras: [front, arm]\n    input:\n      compressed_cameras: [front]\n")
    node = _node(opaque({**args, "__share__": str(REPO), "robot": "mixed_rig", "params_file": str(extra)}))
    assert node["parameters"][:2] == [str(rig), str(extra)]
    merged = config.validate({**config.parse_params_file(rig)["/**"], **config.parse_params_file(extra)["/**"]})
    assert config.camera_transports(merged) == {"front": "compressed", "arm": "raw"}


@pytest.mark.parametrize("written, words", [("[]", "no node name"), ("a,1b", "'1b' is not a valid ROS node name"),
                                            ("a-b", "not a valid"), ("a a", "given twice")])
def test_launch_bad_node_names_one_line_exit_2(monkeypatch, capsys, written, words):
    module = _load_with_stubs(monkeypatch)
    args = {e[1]: e[2] for e in module.generate_launch_description() if e[0] == "arg"}
    (opaque,) = [e[1] for e in module.generate_launch_description() if e[0] == "opaque"]
    with pytest.raises(SystemExit) as e:
        opaque({**args, "__share__": str(REPO), "node_names": written})
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "node_names:=" in err[0] and words in err[0], err


class _Exited:
    def __init__(self, returncode: int) -> None:
        self.returncode = returncode


class _Output:
    def __init__(self, text: str) -> None:
        self.text = text.encode()


@pytest.mark.parametrize("respawn, returncode, ends", [(False, 2, True), (True, 2, True), (False, 3, True),
                                                       (True, 3, False), (False, 0, False), (True, 0, False),
                                                       (False, -9, True)])
def test_launch_exit_handlers_end_the_launch_naming_the_node_and_reason(monkeypatch, respawn, returncode, ends):
    """The node action's exit handler: a start-up failure (2) always ends the launch (respawn or not), with one
    line naming the node and the reason the process printed; a respawned fatal fault (3) and clean exits do not."""
    module = _load_with_stubs(monkeypatch)
    args = {e[1]: e[2] for e in module.generate_launch_description() if e[0] == "arg"}
    (opaque,) = [e[1] for e in module.generate_launch_description() if e[0] == "opaque"]
    actions = opaque({**args, "__share__": str(REPO), "node_names": "a b", "respawn": str(respawn).lower()})
    node = [a for a in actions if a[0] == "node"][0]
    handlers = {a[1][0]: a[1] for a in actions if a[0] == "register"}
    assert handlers["on_io"][1] is node and handlers["on_exit"][1] is node
    on_stdout, on_exit = handlers["on_io"][2], handlers["on_exit"][2]
    on_stdout(_Output("[INFO] starting\r\ndetector_node: start-up failed: model.path: /m.onnx does not exist\n"))
    context = types.SimpleNamespace(is_shutdown=False)
    if not ends:
        assert on_exit(_Exited(returncode), context) is None
        return
    with pytest.raises(RuntimeError) as e:
        on_exit(_Exited(returncode), context)
    line = str(e.value)
    assert "\n" not in line and line.startswith("node a b ") and f"status {returncode}" in line
    assert "model.path: /m.onnx does not exist" in line and "ros2 launch exits with status 1" in line
    assert ("not respawned" in line) == (returncode == 2)
    assert on_exit(_Exited(returncode), types.SimpleNamespace(is_shutdown=True)) is None  # exits during shutdown

def test_launch_bad_robot_or_params_file_one_line_exit_2(monkeypatch, tmp_path, capsys):
    """Issue 11: a missing robot, a missing or malformed params_file end the launch with one line and exit code 2."""
    module = _load_with_stubs(monkeypatch)
    args = {e[1]: e[2] for e in module.generate_launch_description() if e[0] == "arg"}
    (opaque,) = [e[1] for e in module.generate_launch_description() if e[0] == "opaque"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("score_threshold: 0.3\n")
    cases = {"robot": ("no_such_robot", "available robots: default"),
             "params_file": (str(tmp_path / "nope.yaml"), "does not exist")}
    for key, (value, words) in [*cases.items(), ("params_file", (str(bad), "has a value where"))]:
        with pytest.raises(SystemExit) as e:
            opaque({**args, "__share__": str(REPO), key: value})
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and words in err[0] and value in err[0], err


@pytest.fixture
def restore_logger_class():
    """Importing launch makes every logger created afterwards a non-propagating LaunchLogger (launch.logging.reset);
    put Python's class back so later tests' loggers (vrt_ros's logging bridge) propagate again."""
    import logging

    yield
    logging.setLoggerClass(logging.Logger)


def test_launch_evaluates_with_real_launch_ros(restore_logger_class):
    pytest.importorskip("launch_ros", reason="launch_ros is not installable here (no ROS launch on the registries)")
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    spec = importlib.util.spec_from_file_location("detector_launch_real", LAUNCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    context = LaunchContext()
    for entity in description.entities:
        if isinstance(entity, DeclareLaunchArgument):
            entity.visit(context)
    assert {e.name for e in description.entities if isinstance(e, DeclareLaunchArgument)} == ARGUMENTS
    assert context.launch_configurations["robot"] == "default"
    assert any(isinstance(e, OpaqueFunction) for e in description.entities)
    try:
        from ament_index_python.packages import get_package_share_directory

        get_package_share_directory("vrt_ros")
    except Exception:
        return  # not installed with colcon: the node action cannot resolve share/vrt_ros
    (opaque,) = [e for e in description.entities if isinstance(e, OpaqueFunction)]
    (node,) = opaque.execute(context)
    assert node.node_executable == "detector_node"


def test_launch_respawn_arguments(monkeypatch, capsys):
    """respawn:=true and respawn_delay:=5 reach the node action as respawn=True, respawn_delay=5.0 (launch then restarts
    the process whenever it exits, e.g. with status 3 after a fatal fault; the restart itself is launch's and is not
    run here: CI has no launch stack); bad values are refused naming the argument."""
    module = _load_with_stubs(monkeypatch)
    entities = module.generate_launch_description()
    args = {e[1]: e[2] for e in entities if e[0] == "arg"}
    (opaque,) = [e[1] for e in entities if e[0] == "opaque"]
    node = _node(opaque({**args, "__share__": str(REPO), "respawn": "true", "respawn_delay": "5"}))
    assert node["respawn"] is True and node["respawn_delay"] == 5.0
    node = _node(opaque({**args, "__share__": str(REPO), "respawn": "true", "respawn_delay": "0"}))
    assert node["respawn_delay"] == module.MIN_RESPAWN_DELAY_S  # time to end the launch on exit 2 before a restart
    assert "--warm-standby" not in node["arguments"]  # off unless asked: the standby costs host memory
    # warm_standby:=true: the process supervises its node and a standby, with respawn_delay as its restart delay
    node = _node(opaque({**args, "__share__": str(REPO), "respawn": "true", "respawn_delay": "0.8",
                         "warm_standby": "true"}))
    assert node["arguments"][-3:] == ["--warm-standby", "--restart-delay", "0.8"] and node["respawn"] is True
    # respawn_delay:=0 with a warm standby: a take-over at once (the supervisor's delay), launch's own restart of the
    # supervisor still waits launch's minimum
    node = _node(opaque({**args, "__share__": str(REPO), "respawn": "true", "respawn_delay": "0",
                         "warm_standby": "true"}))
    assert node["arguments"][-3:] == ["--warm-standby", "--restart-delay", "0"]
    assert node["respawn_delay"] == module.MIN_RESPAWN_DELAY_S
    with pytest.raises(SystemExit):
        opaque({**args, "__share__": str(REPO), "warm_standby": "maybe"})
    assert "warm_standby:=maybe: expected true or false" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        opaque({**args, "__share__": str(REPO), "warm_standby": "true", "lifecycle": "true"})
    assert "warm_standby:=true is not for lifecycle:=true" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="respawn:=sometimes"):
        opaque({**args, "__share__": str(REPO), "respawn": "sometimes"})
    with pytest.raises(RuntimeError, match="respawn_delay:=-1"):
        opaque({**args, "__share__": str(REPO), "respawn": "true", "respawn_delay": "-1"})


def _lifecycle_stub_modules() -> dict[str, types.ModuleType]:
    """Stand-ins for the launch and launch_ros lifecycle API that ``lifecycle:=true`` imports."""
    stubs = _stub_modules()
    stubs["launch.actions"].EmitEvent = lambda event: ("emit", event)
    stubs["launch.actions"].RegisterEventHandler = lambda handler: ("register", handler)
    events = types.ModuleType("launch.events")
    events.matches_action = lambda action: ("matches", action)
    stubs["launch_ros.actions"].LifecycleNode = lambda **kw: ("lifecycle_node", kw)
    ros_handlers = types.ModuleType("launch_ros.event_handlers")
    ros_handlers.OnStateTransition = lambda target_lifecycle_node, start_state, entities: (
        "on_transition", target_lifecycle_node, start_state, entities)
    ros_events = types.ModuleType("launch_ros.events")
    lifecycle_events = types.ModuleType("launch_ros.events.lifecycle")
    lifecycle_events.ChangeState = lambda lifecycle_node_matcher, transition_id: (
        "change_state", lifecycle_node_matcher, transition_id)
    msgs = types.ModuleType("lifecycle_msgs")
    msg = types.ModuleType("lifecycle_msgs.msg")
    msg.Transition = types.SimpleNamespace(TRANSITION_CONFIGURE=1, TRANSITION_ACTIVATE=3)
    stubs.update({"launch.events": events, "launch_ros.event_handlers": ros_handlers,
                  "launch_ros.events": ros_events, "launch_ros.events.lifecycle": lifecycle_events,
                  "lifecycle_msgs": msgs, "lifecycle_msgs.msg": msg})
    return stubs


def test_launch_lifecycle_logic_with_stand_in_launch_api(monkeypatch):
    """lifecycle:=true: one LifecycleNode per name running ``detector_node --lifecycle`` (the other names as peers:
    their sections are not warned about); autostart registers, per node, configure on process start and activate
    after that configure's configuring → inactive only (not after a manual configure, nor after a failed one)."""
    for name, module in _lifecycle_stub_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("detector_launch_lifecycle_under_test", LAUNCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    entities = module.generate_launch_description()
    args = {e[1]: e[2] for e in entities if e[0] == "arg"}
    assert args["lifecycle"] == "false" and args["autostart"] == "true"
    (opaque,) = [e[1] for e in entities if e[0] == "opaque"]
    context = {**args, "__share__": str(REPO), "lifecycle": "true", "node_names": "a b", "namespace": "robot1"}
    actions = opaque(context)
    nodes = [a[1] for a in actions if a[0] == "lifecycle_node"]
    assert [n["name"] for n in nodes] == ["a", "b"]
    for node, name in zip(nodes, ("a", "b")):
        assert node["executable"] in _console_scripts() and node["namespace"] == "robot1"
        peer = "b" if name == "a" else "a"
        assert node["arguments"] == ["--lifecycle", "--names", name, "--peer-names", peer, "--dds-profile", "auto",
                                     "--exit-with-parent", "--executor", "events"]
        assert node["parameters"] == [str(REPO / "config" / "default.yaml"), {"use_sim_time": False}]
    registered = [a[1] for a in actions if a[0] == "register"]
    assert sorted(h[0] for h in registered) == sorted(["on_io", "on_exit", "on_start", "on_transition"] * 2)
    lifecycle_nodes = [a for a in actions if a[0] == "lifecycle_node"]
    for target in lifecycle_nodes:
        (on_start,) = [h[2] for h in registered if h[0] == "on_start" and h[1] is target]
        ((_, _, start, ((_, activate),)),) = [h for h in registered if h[0] == "on_transition" and h[1] is target]
        assert start == "configuring"

        def after(goal: str):
            return activate(types.SimpleNamespace(locals=types.SimpleNamespace(event=types.SimpleNamespace(goal_state=goal))))

        assert after("inactive") == []  # a manual configure before the process start's: not activated
        ((_, (_, (_, matched), transition)),) = on_start(None, None)
        assert transition == 1 and matched is target  # configure, when that node's process starts
        ((_, (_, (_, matched), transition)),) = after("inactive")
        assert transition == 3 and matched is target  # activate after autostart's own configure
        assert after("inactive") == []  # a later manual configure (after cleanup) is left inactive
        on_start(None, None)
        assert after("unconfigured") == [] and after("inactive") == []  # a failed configure, then a manual one
    # autostart:=false: the nodes and their exit handlers only, left unconfigured
    actions = opaque({**context, "autostart": "false"})
    assert [a[0] for a in actions].count("lifecycle_node") == 2
    assert sorted(a[1][0] for a in actions if a[0] == "register") == ["on_exit", "on_exit", "on_io", "on_io"]
