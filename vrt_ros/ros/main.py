"""``main()``: the process around one or more :class:`~vrt_ros.ros.node.DetectorNode` instances.

It owns what a composable node must not do itself: ``rclpy.init``, the executor and shutdown.

The executor is rclpy's ``EventsExecutor`` (``rclpy.experimental``: its event queue and dispatch in C++) by
default: on the H200 with 8 cameras it used less CPU and gave lower p99 latency than the ``SingleThreadedExecutor``
in every pair measured (issue 22, README "The executor"). The node's callbacks only store the newest frame (each
node's worker thread does the processing, so cameras and nodes are processed in parallel anyway), so one thread
loses nothing, while rclpy's ``MultiThreadedExecutor`` stalled the whole process on the 16-core GPU machine for
0.25–4 s at a time and lost most frames before the node's callback: stack dumps taken during the stalls showed that
executor's own Python loop running while every other thread waited for the GIL (results/bench/ros_e2e_dds.md,
issue 5). ``--executor single`` selects the ``SingleThreadedExecutor``; ``--threads N`` (N > 1) still selects a
``MultiThreadedExecutor`` unless ``--executor`` says otherwise. Several nodes in one process share one
executor and one CUDA context (rclpy has no component container)::

    ros2 run vrt_ros detector_node --ros-args --params-file config/default.yaml
    ros2 run vrt_ros detector_node --names front_detector rear_detector --ros-args --params-file two.yaml

With ``--names``, each node reads the parameters of its own name from the YAML (and those under ``/**``).
``--lifecycle`` makes every node a managed node (:mod:`vrt_ros.ros.lifecycle_node`): they start unconfigured, are
driven by ``ros2 lifecycle set`` or a lifecycle manager, and the process exits when all of them are finalized.
``--dds-profile auto|none|FILE`` picks the process's Fast DDS profile before ``rclpy.init`` (see
:mod:`vrt_ros.ros.dds`; ``auto`` keeps any Fast DDS configuration the environment already gives).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

from vrt_ros.ros import stop

if stop.process_entry(__name__, sys.argv[0], "detector_node"):
    stop.install("detector_node")  # before rclpy's and the engine's imports: a signal during them is a stop too

import rclpy  # noqa: E402 - after the stop handling
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor  # noqa: E402

from vrt_ros.errors import BackendUnavailable, ConfigError, ModelError  # noqa: E402
from vrt_ros.faults import EXIT_FATAL  # noqa: E402
from vrt_ros.ros import dds, standby, startup, supervisor  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.wakeup import Wakeup  # noqa: E402
from vrt_ros.settings.config import DEFAULT_NODE_NAME  # noqa: E402

DEFAULT_NAME = DEFAULT_NODE_NAME
EXECUTORS = ("single", "multi", "events")  # --executor


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (ROS arguments go after ``--ros-args``)."""
    p = argparse.ArgumentParser(
        prog="detector_node", description="vrt_ros detector node(s) in one process",
        epilog="ROS arguments go after --ros-args: --params-file FILE.yaml, -p NAME:=VALUE, -r __ns:=/robot, "
               "--log-level debug. Parameters: docs/parameters.md, or python -m vrt_ros.settings.config --markdown.",
    )
    p.add_argument(
        "--names", nargs="+", default=[DEFAULT_NAME], metavar="NAME",
        help=f"node names, one DetectorNode each, all in one executor (default {DEFAULT_NAME})",
    )
    p.add_argument(
        "--lifecycle", action="store_true",
        help="managed (lifecycle) nodes: nothing is loaded until configure, nothing subscribed until activate",
    )
    p.add_argument(
        "--peer-names", nargs="*", default=[], metavar="NAME",
        help="nodes other processes of the same launch run (their parameter-file sections are not warned about)",
    )
    p.add_argument(
        "--exit-with-parent", action="store_true",
        help="shut down (as on Ctrl-C) when the parent process dies, e.g. ros2 launch after SIGTERM (Linux)",
    )
    p.add_argument(
        "--threads", type=int, default=1,
        help="executor threads: N > 1 a MultiThreadedExecutor of N threads (unless --executor says otherwise)",
    )
    p.add_argument(
        "--executor", choices=EXECUTORS, default=None,
        help="events (default; multi when --threads > 1): rclpy.experimental.EventsExecutor, rclpy's C++ event "
             "queue (issue 22; --threads is ignored); single; or multi",
    )
    supervisor.add_arguments(p)  # --warm-standby and its options
    dds.add_argument(p)
    return p


def make_executor(threads: int, context=None, kind: str | None = None):
    """The process's executor (see the module docstring).

    Args:
        threads: the ``--threads`` option (> 1 turns ``single`` into ``multi``; ignored by ``events``).
        context: the rclpy context (None: the default one, initialised by ``rclpy.init``).
        kind: the ``--executor`` option, one of :data:`EXECUTORS`; None: ``multi`` for ``threads`` > 1, else
            ``events``.
    Returns:
        a ``SingleThreadedExecutor``, ``MultiThreadedExecutor`` or ``rclpy.experimental.EventsExecutor``.
    Raises:
        ValueError: ``kind`` is not one of :data:`EXECUTORS`.
    """
    if kind is None:
        kind = "multi" if threads > 1 else "events"
    if kind not in EXECUTORS:
        raise ValueError(f"--executor must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    if kind == "single" and threads <= 1:
        return SingleThreadedExecutor(context=context)
    return MultiThreadedExecutor(num_threads=max(threads, 2) if kind == "multi" else threads, context=context)


def main(argv: Sequence[str] | None = None, child_command: Sequence[str] | None = None) -> int:
    """:func:`run`; then, in a process whose signals are :mod:`vrt_ros.ros.stop`'s, the end of the process with
    run's status (:func:`~vrt_ros.ros.stop.end_process`: a signal during the interpreter's finalization must not
    turn a clean stop into status -2). Exit statuses: :func:`run`; 0 for a stop (SIGINT or SIGTERM) at any moment."""
    status = run(argv, child_command)
    stop.end_process(status)
    return status


def run(argv: Sequence[str] | None = None, child_command: Sequence[str] | None = None) -> int:
    """Run the node(s) until shutdown (Ctrl-C or the context is shut down) or a node's fatal fault; then destroy the
    nodes and shut down the context this function initialised (the nodes never do).

    Returns:
        0 on a normal shutdown, 2 when start-up fails on configuration, model or backend (the message, which
        names the parameter or file, goes to the log and stderr). When a node stopped on a fatal fault (a poisoned
        CUDA context, or too many engine failures in a row) it does not return: the reason goes to stderr and the
        process ends at once with status 3 (:data:`~vrt_ros.faults.EXIT_FATAL`; :func:`~vrt_ros.ros.startup.exit_now`:
        no node, pipeline or CUDA teardown), so that ``respawn`` restarts it without waiting (issue 27). With
        ``--warm-standby`` this process supervises child processes (:mod:`vrt_ros.ros.standby`) and returns the
        status of the last one.

    Args:
        argv: the command line (default ``sys.argv``).
        child_command: ``--warm-standby``: the command line of each child (default: this interpreter's command
            line, ``sys.orig_argv``, when ``argv`` is None; else :func:`~vrt_ros.ros.supervisor.node_command`: this copy
            of ``vrt_ros.ros.main`` with ``argv[1:]``).
    """
    own_command = argv is None
    argv = list(sys.argv if argv is None else argv)
    try:
        own_args = startup.non_ros_args(argv)  # parameter files checked first: one line naming a bad one
    except ConfigError as exc:
        print(f"detector_node: {exc}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(own_args[1:])
    if len(set(args.names)) != len(args.names):
        print(f"detector_node: --names lists a name twice: {args.names}", file=sys.stderr)
        return 2
    if args.threads < 1:
        print(f"detector_node: --threads must be >= 1 (1: single-threaded executor), got {args.threads}", file=sys.stderr)
        return 2
    if own_command or stop.installed():  # the process's own command line (not a main(argv) inside a test runner)
        stop.install("detector_node")
    if stop.requested():
        return 0  # stopped during the imports
    link = standby.child_link()
    # before any other start-up error (a warm standby's children leave it to their supervisor)
    reported = startup.files_for_no_node(argv, args.names, args.peer_names) if link is None else {}
    for line in reported.values():
        print(f"detector_node: {line}", file=sys.stderr, flush=True)
    if args.warm_standby and link is None:
        if (why := supervisor.refused(args)) is not None:
            print(f"detector_node: {why}", file=sys.stderr)
            return 2
        if args.exit_with_parent:
            startup.exit_with_parent()
        if child_command is None:
            child_command = ([sys.executable, *sys.orig_argv[1:]] if own_command else
                             supervisor.node_command(argv))  # this copy of vrt_ros, not one sys.path finds
        return supervisor.from_args(args, child_command).run()
    if link is None and args.exit_with_parent:  # a supervised child: PDEATHSIG was set before exec (supervisor.py)
        startup.exit_with_parent()
    try:
        dds_choice = dds.apply(args.dds_profile)  # before rclpy.init: Fast DDS reads it with the first participant
        stop.started_ros()  # a stop from here on is an orderly one
        startup.init(argv)  # rclpy.init without rclpy's signal handlers
    except ConfigError as exc:
        print(f"detector_node: {exc}", file=sys.stderr)
        return 2
    nodes: list[DetectorNode] = []
    executor = waker = None
    try:
        # a standby waits here: its imports done and its DDS participant up (discovered by the cameras' processes
        # meanwhile, so the new node's subscriptions match at once), no detector node and no GPU yet
        if link is not None and link.standby:
            link.placeholder = standby.participant_node()  # kept: the participant goes with the context's last node
            if not link.wait_for_go():
                return 0  # the supervisor ended first: never started
        if args.lifecycle:
            from vrt_ros.ros.lifecycle_node import LifecycleDetectorNode, spin_until_finalized
        for name in args.names:
            if stop.requested():
                return 0
            nodes.append(LifecycleDetectorNode(name) if args.lifecycle else DetectorNode(name))
        if link is not None:
            link.report()  # the node's imports (engine included), for the next standby
        startup.warn_unmatched_sections(argv, nodes, args.peer_names, reported)
        startup.warn_shared_outputs(nodes)
        executor = make_executor(args.threads, kind=args.executor)
        stop.reinstall()  # the EventsExecutor set asio's handlers for SIGINT and SIGTERM
        waker = Wakeup(nodes[0], lambda: None).trigger  # EventsExecutor.wake() from a thread does not end spin_once
        stop.on_request(waker)  # the spin loop returns at once and sees the request
        threads = f" ({args.threads} threads)" if isinstance(executor, MultiThreadedExecutor) else ""
        nodes[0].get_logger().info(f"{dds_choice.reason}; executor {type(executor).__name__}{threads}")
        for node in nodes:
            executor.add_node(node)
        if args.lifecycle:
            spin_until_finalized(executor, nodes)
        else:
            spin_until_fatal(executor, nodes)
        status = _exit_status(nodes)
        if status == EXIT_FATAL:  # once the ERROR is on /diagnostics: no teardown, no CUDA destructors
            _wait_reported(nodes)
            if link is not None:
                link.report()  # what the frames imported too
            startup.exit_now(status)
        return status
    except (ConfigError, ModelError, BackendUnavailable) as exc:
        print(f"detector_node: start-up failed: {exc}", file=sys.stderr)
        files = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--params-file"]
        if isinstance(exc, ConfigError) and files:
            print(f"detector_node: parameters came from {', '.join(files)} and any -p overrides", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        return _exit_status(nodes)
    finally:
        _teardown(executor, waker, nodes)
        executor = waker = None  # the EventsExecutor's destructor resets SIGINT and SIGTERM to the default action
        stop.reinstall()


#: The longest wait for the executor to stop spinning at teardown (s); the spin loop has returned by then.
EXECUTOR_SHUTDOWN_S = 0.5


def _teardown(executor, waker, nodes: Sequence[DetectorNode]) -> None:
    """The teardown order (issue 33): the executor first (it unregisters its callbacks and lets go of the
    subscriptions and event handlers it holds in use, while the nodes and the context are still valid), then the
    nodes, then the context. Left to the garbage collector (before issue 33), the EventsExecutor was destroyed after
    the nodes and the context's shutdown, and only then let go of the event handlers it held in use: their deferred
    destruction (``EventHandler.__exit__``) ran on a shut-down context, from wherever the collector ran it."""
    if executor is not None:
        stop.forget(waker)
        executor.shutdown(EXECUTOR_SHUTDOWN_S)
        for node in nodes:
            executor.remove_node(node)
    for node in nodes:
        node.destroy_node()
    rclpy.try_shutdown()


def spin_until_fatal(executor, nodes: Sequence[DetectorNode], poll_s: float = 1.0) -> None:
    """Spin ``executor`` until a stop request (:mod:`vrt_ros.ros.stop`), the context shuts down or a node stopped on a
    fatal fault (the stop's waker and the node's worker wake the executor at once through a one-shot timer,
    :mod:`vrt_ros.ros.wakeup`; ``poll_s`` only bounds the wait otherwise)."""
    while executor.context.ok() and not stop.requested() and not any(n.fatal_error for n in nodes):
        executor.spin_once(timeout_sec=poll_s)


#: The longest wait for a fatal node's worker to have published its ERROR (s): its publish and bounded wait for the
#: acknowledgements (FATAL_DELIVERY_S) run on the worker thread, which may still be at it when the spin loop sees
#: fatal_error; a worker stuck in a failing CUDA call must not hold the exit.
FATAL_REPORT_WAIT_S = 0.4


def _wait_reported(nodes: Sequence[DetectorNode]) -> None:
    """Wait (at most :data:`FATAL_REPORT_WAIT_S` in all) until each fatal node has published its ERROR."""
    end = time.monotonic() + FATAL_REPORT_WAIT_S
    for node in nodes:
        if node.fatal_error:
            node.fatal_reported.wait(max(0.0, end - time.monotonic()))


def _exit_status(nodes: Sequence[DetectorNode]) -> int:
    """EXIT_FATAL when a node stopped on a fatal fault (its reason goes to stderr too), else 0."""
    fatal = [n.fatal_error for n in nodes if n.fatal_error]
    for reason in fatal:
        print(f"detector_node: fatal: {reason}", file=sys.stderr)
    return EXIT_FATAL if fatal else 0


if __name__ == "__main__":
    sys.exit(main())
