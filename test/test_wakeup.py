"""The worker's wake-up of the executor (vrt_ros.ros.wakeup) under every executor main() offers, rclpy's
EventsExecutor included (issue 22 item 3): Jazzy's EventsExecutor refuses guard conditions, so the node asks its
executor's thread through a one-shot timer."""

from __future__ import annotations

import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy", reason="the node tests need rclpy (ROS 2 Jazzy from PyPI, make venv)")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from cuda_faults import gpu_error  # noqa: E402
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end, ramp_rectangle  # noqa: E402
from test_node_faults import FaultyPipeline, _cpu, image_msg, wait_until  # noqa: E402
from vrt_ros.ros import main as node_main  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.ros.wakeup import Wakeup  # noqa: E402

EXECUTORS = ["single", "multi", "events"]


@pytest.mark.parametrize("kind", EXECUTORS)
def test_wakeup_runs_the_request_once_in_the_executor_thread(kind):
    """Triggered twice from another thread: the request runs once, in the spinning thread, and its timer is gone;
    with ``use_sim_time`` and no /clock at all (the steady clock drives it)."""
    ran: list[str] = []
    with private_context() as ctx:
        node = Node("wake_probe", context=ctx, namespace=unique_namespace(),
                    parameter_overrides=[Parameter("use_sim_time", value=True)])
        w = Wakeup(node, lambda: ran.append(threading.current_thread().name))
        timers_before = len(list(node.timers))
        with spinning(ctx, node, executor=node_main.make_executor(1, ctx, kind=kind)):
            asker = threading.Thread(target=lambda: (w.trigger(), w.trigger()), name="worker")
            asker.start()
            asker.join()
            assert wait_until(lambda: ran, 5.0), f"{kind}: the request never ran"
            time.sleep(0.2)  # a second run would come now
            w.trigger()  # a new request after the first ran is a new run
            assert wait_until(lambda: len(ran) == 2, 5.0)
        assert len(list(node.timers)) == timers_before
        node.destroy_node()
    assert "worker" not in ran and len(ran) == 2, ran


def test_guard_conditions_are_refused_by_the_events_executor():
    """Why the wake-up is a timer: Jazzy's EventsExecutor raises on a node's guard condition at the first spin."""
    with private_context() as ctx:
        node = Node("guard_probe", context=ctx, namespace=unique_namespace())
        node.create_guard_condition(lambda: None)
        ex = node_main.make_executor(1, ctx, kind="events")
        try:
            ex.add_node(node)
            with pytest.raises(RuntimeError, match="Guard conditions not supported"):
                ex.spin_once(timeout_sec=0.05)
        finally:
            ex.shutdown()
            node.destroy_node()


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory):
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", 320, 320)


@pytest.mark.parametrize("kind", EXECUTORS)
def test_node_publishes_then_unsubscribes_after_a_fatal_fault(blob_model, kind):
    """Frames in, detections out under each executor; a poisoned CUDA context (injected) sets fatal_error and the
    worker's wake-up makes the executor's thread remove the camera subscription."""
    ns = unique_namespace()
    got: list = []
    with private_context() as ctx, private_context() as other:
        pipe = FaultyPipeline(_cpu(blob_model), gpu_error(), from_frame=2)
        node = DetectorNode(context=ctx, namespace=ns, pipeline=pipe,
                            parameter_overrides=[Parameter("input.qos", value="reliable"),
                                                 Parameter("input.depth", value=10),
                                                 Parameter("engine.max_consecutive_failures", value=0)])
        probe = Node("probe", context=other, namespace=ns)
        pub = probe.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        probe.create_subscription(Detection2DArray, "camera/detections", got.append, make_qos("reliable", 10))
        with spinning(other, probe), spinning(ctx, node, executor=node_main.make_executor(1, ctx, kind=kind)):
            assert wait_until(lambda: pub.get_subscription_count() > 0, 20.0), "node did not subscribe"
            # and its detections writer has matched the probe (volatile: a message published before that is lost)
            out = node._cameras["camera"].pub_detections
            assert wait_until(lambda: out.get_subscription_count() > 0, 20.0), "probe not matched"
            img = ramp_rectangle(320, 240, (50, 60, 200, 180))
            for i in range(6):
                if node.fatal_error:
                    break
                pub.publish(image_msg(img, i + 1))
                time.sleep(0.2)
            assert wait_until(lambda: node.fatal_error is not None, 10.0)
            assert wait_until(lambda: pub.get_subscription_count() == 0, 10.0), "still subscribed after fatal"
            assert wait_until(lambda: len(got) == 2, 5.0)
        node.destroy_node()
        probe.destroy_node()
    assert "CUDA context poisoned" in node.fatal_error
    assert [m.header.stamp.sec for m in got] == [1, 2]  # the two good frames, then nothing
