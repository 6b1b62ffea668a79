"""Helpers for ROS tests: a private rclpy Context per test and an executor spinning in a thread.

Import only from tests marked ``ros`` after ``pytest.importorskip("rclpy")``.
"""

from __future__ import annotations

import os
import threading
import uuid
from contextlib import contextmanager
from typing import Iterator

import rclpy
from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, ShutdownException


def unique_namespace() -> str:
    """A fresh namespace, so concurrent test runs on the same ROS domain never see each other's topics."""
    return f"/t{uuid.uuid4().hex[:10]}"


@contextmanager
def private_context() -> Iterator[Context]:
    """``rclpy.init`` on a new Context; always shut down on exit."""
    ctx = Context()
    rclpy.init(context=ctx)
    try:
        yield ctx
    finally:
        ctx.try_shutdown()


def _test_executor(ctx: Context) -> Executor:
    """The tests' default executor: ``VRT_TEST_EXECUTOR`` = ``multi`` (default, 4 threads), ``single`` or ``events``
    (rclpy's EventsExecutor), so the node suites can run under each executor ``detector_node --executor`` offers."""
    kind = os.environ.get("VRT_TEST_EXECUTOR", "multi")
    if kind == "multi":
        return MultiThreadedExecutor(num_threads=4, context=ctx)
    from vrt_ros.ros.main import make_executor

    return make_executor(1, ctx, kind=kind)


@contextmanager
def spinning(ctx: Context, *nodes, executor: Executor | None = None) -> Iterator[Executor]:
    """Spin ``nodes`` in a background thread (MultiThreadedExecutor by default) until the block ends.

    On exit the spin thread is stopped and joined before the nodes are removed and the executor shut down, so the
    caller may destroy the nodes afterwards. An entity destroyed, or the context shut down, while the thread is
    stopping ends the thread quietly; the same during the block is raised in the thread (pytest reports it).
    """
    executor = executor or _test_executor(ctx)
    for node in nodes:
        executor.add_node(node)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set() and ctx.ok():
            try:
                executor.spin_once(timeout_sec=0.05)
            except (InvalidHandle, ShutdownException, ExternalShutdownException):
                if stop.is_set() or not ctx.ok():
                    return  # torn down while waiting: nothing was lost
                raise

    thread = threading.Thread(target=run, name="ros_testing_spin", daemon=True)
    thread.start()
    try:
        yield executor
    finally:
        stop.set()
        thread.join(timeout=30)  # a loaded 2-core machine can hold a callback for seconds
        for node in nodes:
            executor.remove_node(node)
        executor.shutdown(timeout_sec=1)
