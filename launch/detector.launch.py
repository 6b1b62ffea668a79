"""Launch the vrt_ros detector: ``ros2 launch vrt_ros detector.launch.py robot:=<name> [params_file:=...]``.

Parameter values come only from YAML files: ``share/vrt_ros/config/<robot>.yaml``, then ``params_file`` (later
values win). This file declares no detector parameter of its own.

Arguments:
    robot: name of a YAML in the package's config/ (default ``default``); e.g. ``mixed_rig``: one node taking three
        JPEG cameras (``input.compressed_cameras``) and three raw ones, each on its own transport's topic.
    params_file: an extra parameter YAML applied after the robot's (default: none).
    namespace: namespace of the node(s); camera topics are relative to it (default: none).
    use_sim_time: ``true`` to follow /clock (default ``false``).
    log_level: debug, info, warn, error or fatal (default ``info``).
    node_names: node names, as a list ``[a,b]``, ``a,b`` or ``a b``; several run in one process under one executor,
        each reading the YAML sections ``/**`` and ``/**/<its name>`` (any namespace; a bare ``<name>:`` key applies
        only in the root namespace, and the node warns about sections matching none of the launch's nodes; two nodes
        that would publish the same topic get a warning naming it) (default ``vrt_detector``).

A missing robot YAML, a bad parameter file or bad ``node_names`` ends the launch with one line and exit code 2
(vrt_ros.settings.param_files), before any process starts.

A node process that fails at start-up (exit status 2: a missing or unusable model, a bad parameter value) is never
respawned: the launch ends and ``ros2 launch`` exits with status 1, the only non-zero status launch has, after one
line ``Caught exception in launch ...: node <name> failed at start-up (exit status 2: <reason>) ...``. So does any
other non-zero exit of a process that is not respawned (exit status 3, a fatal fault, with ``respawn:=false``). Node
processes exit when ``ros2 launch`` does, also after SIGTERM (``--exit-with-parent``; launch itself leaves its
processes running on SIGTERM, upstream ros2/launch#666).
    dds_profile: the node process's Fast DDS profile: ``auto`` (vrt_ros's large-frames profile unless the
        environment already configures Fast DDS), ``none``, or an XML file (default ``auto``; see vrt_ros.ros.dds).
        The camera driver's process, which publishes the frames, needs it most: see docs/robot-setup.md.
    executor: the node process's rclpy executor: ``events`` (default; rclpy's experimental EventsExecutor, less CPU
        and lower latency with many cameras on the H200, see docs/performance.md), ``single`` or ``multi``.
    respawn: ``true`` to restart the node process whenever it exits, e.g. after a fatal GPU fault (exit status 3:
        a poisoned CUDA context or ``engine.max_consecutive_failures`` engine failures in a row) (default ``false``;
        a start-up error, exit status 2, would repeat on every restart).
    respawn_delay: seconds between the process's exit and its restart (default :data:`DEFAULT_RESPAWN_DELAY_S`; at
        least :data:`MIN_RESPAWN_DELAY_S`, the time launch needs to end the launch on a start-up failure before a
        restart; with ``warm_standby:=true`` the value itself is the supervisor's restart delay, 0 allowed).
    warm_standby: ``true`` to run ``detector_node --warm-standby --restart-delay <respawn_delay>``: the process
        keeps a standby process (imports done, DDS participant up, no node, no GPU memory) that takes over after a
        fatal fault or a crash, instead of a new process's start (vrt_ros.ros.standby; about 1 GiB more host memory
        with the torch engine). ``respawn`` then restarts the process only when the standby's supervisor itself
        ends. Not with ``lifecycle:=true`` (default ``false``).
    lifecycle: ``true`` to run managed (lifecycle) nodes: one process per name in ``node_names`` (launch_ros
        drives one lifecycle node per process), each ``detector_node --lifecycle``; default ``false``.
    autostart: with ``lifecycle:=true``, ``true`` (default) configures each node when its process starts and
        activates it after that configure (not after a later, manual one), through launch_ros lifecycle events;
        ``false`` leaves them unconfigured for ``ros2 lifecycle set`` or a lifecycle manager.
"""

import os
import sys

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit, OnProcessIO, OnProcessStart
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from vrt_ros.errors import ConfigError
from vrt_ros.settings.launch_args import exit_verdict, parse_node_names, start_up_reason
from vrt_ros.settings.param_files import read_all

PACKAGE = "vrt_ros"
EXECUTABLE = "detector_node"
#: Smallest respawn delay, s: launch checks for a restart right after the exit, before the exit's handlers run.
MIN_RESPAWN_DELAY_S = 0.5
#: Default respawn delay, s: the node needs no more than launch does (issue 27): it exits within 0.3 s of a fatal
#: fault with the ERROR on /diagnostics already delivered and holds nothing a restart would have to wait for (no GPU
#: lock, no port); python -m vrt_ros.bench.restart.recovery recovered from three faults in a row with it
#: (results/bench/recovery.md). Was 2.0.
DEFAULT_RESPAWN_DELAY_S = MIN_RESPAWN_DELAY_S


def _fail(message: str) -> None:
    """End ``ros2 launch`` with one line and exit code 2 (launch would report an exception with exit code 1)."""
    print(f"[ERROR] [detector.launch.py]: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def _detector(context, *args, **kwargs):
    """Resolve the YAML files and build the one process running the detector node(s)."""
    robot = LaunchConfiguration("robot").perform(context)
    params_file = LaunchConfiguration("params_file").perform(context)
    share = FindPackageShare(PACKAGE).perform(context)
    robot_yaml = os.path.join(share, "config", f"{robot}.yaml")
    if not os.path.isfile(robot_yaml):
        available = sorted(f[:-5] for f in os.listdir(os.path.join(share, "config")) if f.endswith(".yaml"))
        _fail(f"robot:={robot}: no {robot_yaml}; available robots: {', '.join(available)}")
    parameters = [robot_yaml]
    if params_file:
        parameters.append(params_file)
    try:  # the reader rcl's own parse agrees with (vrt_ros.settings.param_files): a bad file is one line here, not in the node
        read_all(parameters)
    except ConfigError as exc:
        _fail(f"params_file:={params_file}: {exc}" if params_file and params_file in str(exc) else str(exc))
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() in ("true", "1")
    parameters.append({"use_sim_time": use_sim_time})
    try:
        names = parse_node_names(LaunchConfiguration("node_names").perform(context))
    except ConfigError as exc:
        _fail(str(exc))
    respawn, respawn_delay = _respawn(context)
    standby = LaunchConfiguration("warm_standby").perform(context).strip().lower()
    if standby not in ("true", "false", "1", "0"):
        _fail(f"warm_standby:={standby}: expected true or false")
    if _true(LaunchConfiguration("lifecycle").perform(context)):
        if _true(standby):
            _fail("warm_standby:=true is not for lifecycle:=true (a managed node's restart is its lifecycle "
                  "manager's: it must configure and activate the new process)")
        return _managed(context, names, parameters, respawn, max(respawn_delay, MIN_RESPAWN_DELAY_S))
    # the supervisor's own restart delay is not launch's: launch's minimum does not apply to it (0: a take-over at
    # once after a healthy run; the supervisor's back-off spaces out a node that fails again)
    standby_args = ["--warm-standby", "--restart-delay", f"{respawn_delay:g}"] if _true(standby) else []
    respawn_delay = max(respawn_delay, MIN_RESPAWN_DELAY_S)
    node = Node(
        package=PACKAGE,
        executable=EXECUTABLE,
        namespace=LaunchConfiguration("namespace").perform(context),
        arguments=["--names", *names, *_process_args(context), *standby_args],
        parameters=parameters,
        ros_arguments=["--log-level", LaunchConfiguration("log_level").perform(context)],
        output="screen",
        emulate_tty=True,
        respawn=respawn,
        respawn_delay=respawn_delay,
    )
    return [*_watch_exit(node, " ".join(names), respawn), node]


def _process_args(context) -> list[str]:
    """``detector_node`` options every process of this launch gets."""
    return ["--dds-profile", LaunchConfiguration("dds_profile").perform(context), "--exit-with-parent",
            "--executor", LaunchConfiguration("executor").perform(context)]


def _watch_exit(node, label: str, respawn: bool) -> list:
    """Event handlers that keep the process's last lines and, on an exit :func:`vrt_ros.settings.launch_args.exit_verdict`
    says ends the launch, end it with its one line (launch logs an exception raised by a handler as one ERROR
    line, shuts everything down and exits with status 1)."""
    lines: list[str] = []

    def keep(event) -> None:
        lines.extend(event.text.decode(errors="replace").replace("\r", "").splitlines())
        del lines[:-50]

    def on_exit(event, context) -> None:
        verdict = None if context.is_shutdown else exit_verdict(label, event.returncode, respawn, start_up_reason(lines))
        lines.clear()
        if verdict is not None:
            raise RuntimeError(verdict)

    return [RegisterEventHandler(OnProcessIO(target_action=node, on_stdout=keep, on_stderr=keep)),
            RegisterEventHandler(OnProcessExit(target_action=node, on_exit=on_exit))]


def _respawn(context) -> tuple[bool, float]:
    """``respawn`` and ``respawn_delay`` (seconds, as given: the node action takes at least
    :data:`MIN_RESPAWN_DELAY_S`, a warm standby's supervisor the value itself) from the launch arguments."""
    respawn = LaunchConfiguration("respawn").perform(context).strip().lower()
    if respawn not in ("true", "false", "1", "0"):
        raise RuntimeError(f"respawn:={respawn}: expected true or false")
    delay_text = LaunchConfiguration("respawn_delay").perform(context)
    try:
        delay = float(delay_text)
    except ValueError:
        delay = -1.0
    if not delay >= 0.0:
        raise RuntimeError(f"respawn_delay:={delay_text}: expected seconds >= 0")
    return respawn in ("true", "1"), delay


def _true(value: str) -> bool:
    return value.lower() in ("true", "1")


def _managed(context, names, parameters, respawn, respawn_delay):
    """``lifecycle:=true``: one launch_ros LifecycleNode per name; with ``autostart``, configure on process start
    (again after a respawn) and activate after that configure only (not after a later, manual one)."""
    from launch.actions import EmitEvent
    from launch.events import matches_action
    from launch_ros.actions import LifecycleNode
    from launch_ros.event_handlers import OnStateTransition
    from launch_ros.events.lifecycle import ChangeState
    from lifecycle_msgs.msg import Transition

    autostart = _true(LaunchConfiguration("autostart").perform(context))
    pending: set[str] = set()  # nodes whose autostart configure was requested and has not ended yet
    actions = []
    for name in names:
        node = LifecycleNode(
            package=PACKAGE,
            executable=EXECUTABLE,
            name=name,
            namespace=LaunchConfiguration("namespace").perform(context),
            arguments=["--lifecycle", "--names", name, "--peer-names", *[n for n in names if n != name],
                       *_process_args(context)],
            parameters=parameters,
            ros_arguments=["--log-level", LaunchConfiguration("log_level").perform(context)],
            respawn=respawn,
            respawn_delay=respawn_delay,
            output="screen",
            emulate_tty=True,
        )
        if autostart:
            def request(transition_id, node=node):
                return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node), transition_id=transition_id))

            def configure(event, context, name=name, request=request):
                pending.add(name)
                return [request(Transition.TRANSITION_CONFIGURE)]

            def activate(context, name=name, request=request):  # after any configure ends: only autostart's activates
                ours = name in pending
                pending.discard(name)
                return [request(Transition.TRANSITION_ACTIVATE)] if ours and context.locals.event.goal_state == "inactive" else []

            actions.append(RegisterEventHandler(OnProcessStart(target_action=node, on_start=configure)))
            actions.append(RegisterEventHandler(OnStateTransition(
                target_lifecycle_node=node, start_state="configuring", entities=[OpaqueFunction(function=activate)])))
        actions += [*_watch_exit(node, name, respawn), node]
    return actions


def generate_launch_description():
    """The launch description: the arguments above and the detector process."""
    return LaunchDescription(
        [
            DeclareLaunchArgument("robot", default_value="default", description="YAML in share/vrt_ros/config"),
            DeclareLaunchArgument("params_file", default_value="", description="extra parameter YAML (wins)"),
            DeclareLaunchArgument("namespace", default_value="", description="namespace of the node(s)"),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock"),
            DeclareLaunchArgument("log_level", default_value="info", description="debug|info|warn|error|fatal"),
            DeclareLaunchArgument(
                "node_names", default_value="vrt_detector", description="node names: [a,b], a,b or a b; one process"
            ),
            DeclareLaunchArgument(
                "dds_profile", default_value="auto", description="auto|none|FILE: Fast DDS profile of the node process"
            ),
            DeclareLaunchArgument(
                "executor", default_value="events", description="events|single|multi: the node process's rclpy executor"
            ),
            DeclareLaunchArgument(
                "respawn", default_value="false", description="true: restart the process when it exits (fatal GPU fault)"
            ),
            DeclareLaunchArgument("respawn_delay", default_value=str(DEFAULT_RESPAWN_DELAY_S),
                                  description=f"seconds before a respawn (at least {MIN_RESPAWN_DELAY_S})"),
            DeclareLaunchArgument(
                "warm_standby", default_value="false",
                description="true: a standby process takes over after a fatal fault (detector_node --warm-standby)"
            ),
            DeclareLaunchArgument("lifecycle", default_value="false", description="true: managed nodes, one process each"),
            DeclareLaunchArgument(
                "autostart", default_value="true", description="with lifecycle:=true, configure and activate at start"
            ),
            OpaqueFunction(function=_detector),
        ]
    )
