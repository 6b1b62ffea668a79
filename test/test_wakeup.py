"""The worker's wake-up of the executor (vrt_ros.ros.wakeup) and the node under rclpy's EventsExecutor (issue 22
item 3): Jazzy's EventsExecutor refuses guard conditions, so a node made for it (``guard_conditions=False``) gets
polled flags that the spin loop serves."""

from __future__ import annotations

import threading
import time

import pytest

from vrt_ros.ros.wakeup import PolledWakeup

rclpy = pytest.importorskip("rclpy", reason="the node tests need rclpy (ROS 2 Jazzy from PyPI, make venv)")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end, ramp_rectangle  # noqa: E402
from test_node_faults import FaultyPipeline, _cpu, image_msg, wait_until  # noqa: E402
from vrt_ros.ros import main as node_main  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.ros.wakeup import run_pending  # noqa: E402


def test_polled_wakeup_runs_once_per_trigger_burst_in_the_caller_thread():
    ran: list[str] = []
    w = PolledWakeup(lambda: ran.append(threading.current_thread().name))
    assert w.run_pending() is False and ran == []
    t = threading.Thread(target=lambda: (w.trigger(), w.trigger()), name="worker")
    t.start()
    t.join()
    assert w.run_pending() is True and w.run_pending() is False
    assert ran == [threading.current_thread().name]  # the serving thread ran it, not the worker


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory):
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", 320, 320)


def _node(ctx, ns, pipeline, guard_conditions):
    return DetectorNode(context=ctx, namespace=ns, pipeline=pipeline, guard_conditions=guard_conditions,
                        parameter_overrides=[Parameter("input.qos", value="reliable"),
                                             Parameter("input.depth", value=10),
                                             Parameter("engine.max_consecutive_failures", value=0)])


def test_a_node_with_guard_conditions_is_refused_by_the_events_executor(blob_model):
    """Why the flag exists: Jazzy's EventsExecutor raises on the node's guard condition at the first spin."""
    with private_context() as ctx:
        node = _node(ctx, unique_namespace(), _cpu(blob_model), guard_conditions=True)
        ex = node_main.make_executor(1, ctx, kind="events")
        try:
            ex.add_node(node)
            with pytest.raises(RuntimeError, match="Guard conditions not supported"):
                ex.spin_once(timeout_sec=0.05)
        finally:
            ex.shutdown()
            node.destroy_node()


def test_events_executor_node_publishes_then_unsubscribes_after_a_fatal_fault(blob_model):
    """Frames in, detections out under the EventsExecutor; a poisoned CUDA context (injected) sets fatal_error
    and the polled wake-up, served by the spin loop as main() serves it, removes the camera subscription."""
    ns = unique_namespace()
    got: list = []
    with private_context() as ctx, private_context() as other:
        pipe = FaultyPipeline(_cpu(blob_model), RuntimeError(
            "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"), from_frame=2)
        node = _node(ctx, ns, pipe, guard_conditions=False)
        probe = Node("probe", context=other, namespace=ns)
        pub = probe.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        probe.create_subscription(Detection2DArray, "camera/detections", got.append, make_qos("reliable", 10))
        probe_ex = node_main.make_executor(1, other)
        probe_ex.add_node(probe)
        ex = node_main.make_executor(1, ctx, kind="events")
        ex.add_node(node)
        stop = threading.Event()

        def spin() -> None:  # main()'s loop: spin_once, then serve the polled wake-ups
            while not stop.is_set():
                ex.spin_once(timeout_sec=0.05)
                run_pending([node])

        threads = [threading.Thread(target=spin, daemon=True),
                   threading.Thread(target=lambda: [probe_ex.spin_once(0.05) for _ in iter(stop.is_set, True)],
                                    daemon=True)]
        for t in threads:
            t.start()
        try:
            assert wait_until(lambda: pub.get_subscription_count() > 0, 20.0), "node did not subscribe"
            img = ramp_rectangle(320, 240, (50, 60, 200, 180))
            for i in range(6):
                if node.fatal_error:
                    break
                pub.publish(image_msg(img, i + 1))
                time.sleep(0.2)
            assert wait_until(lambda: node.fatal_error is not None, 10.0)
            assert wait_until(lambda: pub.get_subscription_count() == 0, 10.0), "still subscribed after fatal"
            assert wait_until(lambda: len(got) == 2, 5.0)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=10)
            ex.shutdown()
            probe_ex.shutdown()
            node.destroy_node()
            probe.destroy_node()
    assert "CUDA context poisoned" in node.fatal_error
    assert [m.header.stamp.sec for m in got] == [1, 2]  # the two good frames, then nothing
