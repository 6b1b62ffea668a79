"""The managed (lifecycle) detector node on the CPU path, over real DDS with private contexts (issue 16).

Transitions are requested the way ``ros2 lifecycle set`` and lifecycle managers do: through the node's
``change_state`` service, from a client node. Models: the synthetic blob detector (its box is where the test drew
the object) and, for the bag test, the real YOLOX-nano on the real raw bag from ../shared (skipped without it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("rclpy.lifecycle", reason="rclpy has no lifecycle module (ROS 2 older than Humble)")
pytest.importorskip("lifecycle_msgs.srv", reason="lifecycle_msgs not installed (requirements/runtime.txt)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from lifecycle_msgs.msg import State, Transition, TransitionEvent  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray, LabelInfo  # noqa: E402

from cuda_faults import gpu_error  # noqa: E402
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end, ramp_rectangle  # noqa: E402
from test_node import BOX, Collector, _bag_frames, _FailingPipeline, _lock_step, image_msg, overrides, wait_until  # noqa: E402
from vrt_ros.ros.lifecycle_node import LifecycleDetectorNode  # noqa: E402
from vrt_ros.ros.qos import latched_qos, make_qos  # noqa: E402
from vrt_ros.tools.replay import BagPlayer  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[1]
SERVICE_TIMEOUT_S = 60.0  # a configure builds the pipeline; generous on the loaded 2-core machines


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", 320, 320)


def managed_node(ctx, ns: str, model: Path | str, name: str = "vrt_detector", **params) -> LifecycleDetectorNode:
    base = dict(backend="cpu", model__path=str(model), model__pad_value=0.0, input__qos="reliable", input__depth=10)
    base.update(params)
    return LifecycleDetectorNode(name, context=ctx, namespace=ns, parameter_overrides=overrides(**base))


class Lifecycle:
    """Client side of one managed node's lifecycle services (what ``ros2 lifecycle set/get`` call)."""

    def __init__(self, client: Node, node_fqn: str) -> None:
        self._change = client.create_client(ChangeState, f"{node_fqn}/change_state")
        self._get = client.create_client(GetState, f"{node_fqn}/get_state")

    def _call(self, srv, request):
        assert srv.wait_for_service(timeout_sec=20.0), f"service {srv.srv_name} not available"
        done = threading.Event()
        future = srv.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(SERVICE_TIMEOUT_S), f"no answer from {srv.srv_name}"
        return future.result()

    def set(self, transition_id: int) -> bool:
        """Request a transition; True when it succeeded."""
        return bool(self._call(self._change, ChangeState.Request(transition=Transition(id=transition_id))).success)

    def get(self) -> str:
        return self._call(self._get, GetState.Request()).current_state.label


def topics_of(client: Node, node_name: str, ns: str) -> tuple[set[str], set[str]]:
    """(published, subscribed) topic names of a node, as the ROS graph shows them."""
    pubs = {t for t, _ in client.get_publisher_names_and_types_by_node(node_name, ns)}
    subs = {t for t, _ in client.get_subscriber_names_and_types_by_node(node_name, ns)}
    return pubs, subs


def graph_settles(pred, timeout_s: float = 10.0) -> bool:
    def safe() -> bool:
        try:
            return pred()
        except Exception:  # node not discovered yet
            return False

    return wait_until(safe, timeout_s)


def latest_status(diags: Collector, name: str, pred=lambda st: True):
    """The newest /diagnostics status called ``name`` that satisfies ``pred`` (None if none yet)."""
    for msg in reversed(diags.wait(0, 0)):
        for st in msg.status:
            if st.name == name and pred(st):
                return st
    return None


def _values(status) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


# ------------------------------------------------------------------------------------------- every transition
def test_every_transition_on_the_cpu_path(blob_model, tmp_path):
    """configure fails on a missing model and succeeds after model.path is fixed; nothing is subscribed until
    activate; frames are answered only while active; deactivate/activate/cleanup/configure cycle; shutdown."""
    ns = unique_namespace()
    missing = tmp_path / "missing.onnx"
    frame = ramp_rectangle(320, 240, BOX)
    with private_context() as ctx:
        node = managed_node(ctx, ns, missing, diagnostics_period_s=0.2)
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        labels = Collector(client, LabelInfo, "camera/label_info", latched_qos())
        events = Collector(client, TransitionEvent, "vrt_detector/transition_event")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        lc = Lifecycle(client, f"{ns}/vrt_detector")
        with spinning(ctx, node, client):
            # unconfigured: nothing loaded, nothing subscribed, no outputs
            assert lc.get() == "unconfigured" and node.pipeline is None
            assert graph_settles(lambda: "/rosout" in topics_of(client, "vrt_detector", ns)[0])
            pubs, subs = topics_of(client, "vrt_detector", ns)
            assert f"{ns}/camera/detections" not in pubs and f"{ns}/camera/image_raw" not in subs

            # configure fails on the missing model: FAILURE, still unconfigured, reason on the status
            assert not lc.set(Transition.TRANSITION_CONFIGURE)
            assert lc.get() == "unconfigured" and node.pipeline is None
            status = node.diagnostics().status[0]
            assert status.level == DiagnosticStatus.ERROR and "missing.onnx" in status.message

            # the read-only model.path can be fixed while unconfigured; then configure succeeds
            result = node.set_parameters([Parameter("model.path", value=str(blob_model))])[0]
            assert result.successful, result.reason
            assert lc.set(Transition.TRANSITION_CONFIGURE)
            assert lc.get() == "inactive" and node.pipeline is not None
            assert node.diagnostics().status[0].level == DiagnosticStatus.OK
            # ... and is refused while configured, naming the parameter and the state
            refused = node.set_parameters([Parameter("model.path", value=str(missing))])[0]
            assert not refused.successful and "model.path" in refused.reason and "inactive" in refused.reason

            # inactive: outputs exist, no subscription; a frame sent now is not taken
            assert graph_settles(lambda: f"{ns}/camera/detections" in topics_of(client, "vrt_detector", ns)[0])
            assert f"{ns}/camera/image_raw" not in topics_of(client, "vrt_detector", ns)[1]
            pub.publish(image_msg(frame, 1))

            # active: subscribed, label info published, every frame answered
            assert lc.set(Transition.TRANSITION_ACTIVATE) and lc.get() == "active"
            assert wait_until(lambda: pub.get_subscription_count() >= 1, 20.0)
            assert labels.wait(1, 10.0), "no label_info after activate"
            for sec in (2, 3):
                pub.publish(image_msg(frame, sec))
                assert wait_until(lambda: len(dets.wait(0, 0)) >= sec - 1, 20.0)
            assert [m.header.stamp.sec for m in dets.wait(0, 0)] == [2, 3]
            (d,) = dets.msgs[0].detections
            assert d.bbox.center.position.x == pytest.approx((BOX[0] + BOX[2]) / 2, abs=0.5)

            # deactivate: unsubscribed, nothing answered, pipeline kept
            pipeline = node.pipeline
            assert lc.set(Transition.TRANSITION_DEACTIVATE) and lc.get() == "inactive"
            assert node.pipeline is pipeline
            assert wait_until(lambda: pub.get_subscription_count() == 0, 20.0)
            pub.publish(image_msg(frame, 4))
            assert not wait_until(lambda: len(dets.wait(0, 0)) > 2, 1.0)

            # activate again: answered again, by the same pipeline
            assert lc.set(Transition.TRANSITION_ACTIVATE)
            assert wait_until(lambda: pub.get_subscription_count() >= 1, 20.0)
            pub.publish(image_msg(frame, 5))
            assert wait_until(lambda: len(dets.wait(0, 0)) >= 3, 20.0)
            assert dets.msgs[-1].header.stamp.sec == 5 and node.pipeline is pipeline

            # deactivate + cleanup: the pipeline is released, the outputs are gone
            assert lc.set(Transition.TRANSITION_DEACTIVATE) and lc.set(Transition.TRANSITION_CLEANUP)
            assert lc.get() == "unconfigured" and node.pipeline is None
            assert graph_settles(lambda: f"{ns}/camera/detections" not in topics_of(client, "vrt_detector", ns)[0])

            # configure again builds a new pipeline; shutdown from active finalizes and releases it
            assert lc.set(Transition.TRANSITION_CONFIGURE) and lc.set(Transition.TRANSITION_ACTIVATE)
            assert node.pipeline is not None and node.pipeline is not pipeline
            pub.publish(image_msg(frame, 6))
            assert wait_until(lambda: len(dets.wait(0, 0)) >= 4, 20.0)
            assert lc.set(Transition.TRANSITION_ACTIVE_SHUTDOWN) and lc.get() == "finalized"
            assert node.pipeline is None
            counters = node.counters()
            assert wait_until(lambda: len(events.wait(0, 0)) >= 20, 10.0)
        client.destroy_node()
        node.destroy_node()
    assert counters == {}  # cleaned up: no cameras
    # the frames sent while unsubscribed never reached the node: 4 answered of the 6 sent
    assert [m.header.stamp.sec for m in dets.msgs] == [2, 3, 5, 6]
    goals = [e.goal_state.label for e in events.msgs]
    assert goals[:4] == ["configuring", "unconfigured", "configuring", "inactive"]
    assert goals[-2:] == ["shuttingdown", "finalized"]


@pytest.mark.parametrize("start", ["unconfigured", "inactive"])
def test_shutdown_from_unconfigured_and_inactive(blob_model, start):
    ns = unique_namespace()
    with private_context() as ctx:
        node = managed_node(ctx, ns, blob_model)
        client = Node("client", context=ctx, namespace=ns)
        lc = Lifecycle(client, f"{ns}/vrt_detector")
        with spinning(ctx, node, client):
            if start == "inactive":
                assert lc.set(Transition.TRANSITION_CONFIGURE) and node.pipeline is not None
            shutdown = {"unconfigured": Transition.TRANSITION_UNCONFIGURED_SHUTDOWN,
                        "inactive": Transition.TRANSITION_INACTIVE_SHUTDOWN}[start]
            assert lc.set(shutdown)
            assert lc.get() == "finalized" and node.pipeline is None
            assert node.diagnostics().status[0].message.startswith("finalized")
        client.destroy_node()
        node.destroy_node()


def test_construction_loads_nothing_and_bad_values_still_fail(tmp_path):
    """A managed node constructed with a missing model file comes up unconfigured (configure reports it); a bad
    parameter value still fails construction, naming the parameter, like the plain node."""
    from vrt_ros.errors import ConfigError

    with private_context() as ctx:
        node = managed_node(ctx, unique_namespace(), tmp_path / "nope.onnx")
        assert node.lifecycle_state == "unconfigured" and node.pipeline is None and node.cameras == ()
        node.destroy_node()
        with pytest.raises(ConfigError, match="score_threshold"):
            managed_node(ctx, unique_namespace(), tmp_path / "nope.onnx", score_threshold=5.0)


# ------------------------------------------------------------------------------------------- errorprocessing
def _failing_node(ctx, ns: str, model: Path, pipeline, **params) -> LifecycleDetectorNode:
    base = dict(model__path=str(model), input__qos="reliable", input__depth=10)
    base.update(params)
    return LifecycleDetectorNode(context=ctx, namespace=ns, pipeline=pipeline, parameter_overrides=overrides(**base))


def _cpu_pipeline(model: Path):
    from vrt_ros.settings import config
    from vrt_ros.inference.pipeline import make_pipeline

    return make_pipeline(config.validate({"backend": "cpu", "model.path": str(model), "model.pad_value": 0.0}),
                         log=lambda m: None)


def _activate_and_send_first_frame(lc, pub) -> None:
    """Configure and activate the managed node, wait until it subscribes, publish frame 1 to it."""
    assert lc.set(Transition.TRANSITION_CONFIGURE) and lc.set(Transition.TRANSITION_ACTIVATE)
    assert wait_until(lambda: pub.get_subscription_count() >= 1, 20.0)
    pub.publish(image_msg(ramp_rectangle(320, 240, BOX), 1))


def test_consecutive_engine_failures_go_to_errorprocessing(blob_model):
    """engine.max_consecutive_failures (2) engine failures in a row while active: each frame is dropped as
    engine_error; the second is fatal, and where the plain node would exit, the managed node goes through
    errorprocessing to unconfigured (pipeline released) with ERROR and the reason on /diagnostics; configure works
    again afterwards, and the process is not asked to exit."""
    ns = unique_namespace()
    with private_context() as ctx:
        node = _failing_node(ctx, ns, blob_model, _FailingPipeline(_cpu_pipeline(blob_model), 0.0),
                             engine__max_consecutive_failures=2)
        client = Node("client", context=ctx, namespace=ns)
        events = Collector(client, TransitionEvent, "vrt_detector/transition_event")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        lc = Lifecycle(client, f"{ns}/vrt_detector")
        with spinning(ctx, node, client):
            _activate_and_send_first_frame(lc, pub)
            assert wait_until(lambda: node.counters()["camera"].dropped["engine_error"] == 1, 20.0)
            assert lc.get() == "active"  # one failure is not fatal
            pub.publish(image_msg(ramp_rectangle(320, 240, BOX), 2))
            assert wait_until(lambda: node.lifecycle_state == "unconfigured", 20.0), node.lifecycle_state
            status = node.diagnostics().status[0]
            assert wait_until(lambda: any(e.goal_state.label == "unconfigured" and e.start_state.label ==
                                          "errorprocessing" for e in events.wait(0, 0)), 10.0)
            path = [(e.start_state.label, e.goal_state.label) for e in events.msgs]
            assert node.pipeline is None
            assert lc.set(Transition.TRANSITION_CONFIGURE) and lc.get() == "inactive"
            recovered = node.diagnostics().status[0]
        client.destroy_node()
        node.destroy_node()
    assert ("active", "deactivating") in path and ("deactivating", "errorprocessing") in path
    assert ("errorprocessing", "unconfigured") in path
    assert status.level == DiagnosticStatus.ERROR and "2 consecutive engine failures" in status.message
    assert "engine exploded" in status.message and _values(status)["lifecycle_state"] == "unconfigured"
    assert recovered.level == DiagnosticStatus.OK and _values(recovered)["lifecycle_state"] == "inactive"
    assert node.fatal_error is None


class _PoisonedPipeline(_FailingPipeline):
    def process(self, spec, data):
        raise gpu_error()


def test_poisoned_cuda_context_finalizes_and_asks_the_process_to_exit(blob_model):
    """A sticky CUDA error (the text cuda.core raises): no configure could succeed in this process, so
    errorprocessing ends in finalized, fatal_error is set, and detector_node --lifecycle exits with EXIT_FATAL."""
    from rclpy.executors import SingleThreadedExecutor

    from vrt_ros.faults import EXIT_FATAL
    from vrt_ros.ros import main as node_main
    from vrt_ros.ros.lifecycle_node import spin_until_finalized

    ns = unique_namespace()
    with private_context() as ctx:
        node = _failing_node(ctx, ns, blob_model, _PoisonedPipeline(_cpu_pipeline(blob_model), 0.0))
        client = Node("client", context=ctx, namespace=ns)
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        lc = Lifecycle(client, f"{ns}/vrt_detector")
        with spinning(ctx, node, client):
            _activate_and_send_first_frame(lc, pub)
            assert wait_until(lambda: node.lifecycle_state == "finalized", 20.0), node.lifecycle_state
            status = node.diagnostics().status[0]
        executor = SingleThreadedExecutor(context=ctx)
        spin_until_finalized(executor, [node], poll_s=0.01)  # returns at once
        executor.shutdown()
        exit_status = node_main._exit_status([node])
        client.destroy_node()
        node.destroy_node()
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in node.fatal_error and node.pipeline is None
    assert status.level == DiagnosticStatus.ERROR and "CUDA context poisoned" in status.message
    assert exit_status == EXIT_FATAL


# ------------------------------------------------------------------------------------------- diagnostics
def test_diagnostics_reflect_the_state(blob_model):
    ns = unique_namespace()
    with private_context() as ctx:
        node = managed_node(ctx, ns, blob_model, cameras=["front", "rear"], diagnostics_period_s=0.2)
        client = Node("client", context=ctx, namespace=ns)
        diags = Collector(client, DiagnosticArray, "/diagnostics")
        pub = client.create_publisher(Image, "front/image_raw", make_qos("reliable", 10))
        lc = Lifecycle(client, f"{ns}/vrt_detector")
        front = f"{ns}/vrt_detector: front"

        def seen(state: str, pred=lambda st: True):
            def ok(st):
                return _values(st).get("lifecycle_state") == state and pred(st)

            assert wait_until(lambda: latest_status(diags, front, ok) is not None, 10.0), state
            return latest_status(diags, front, ok)

        with spinning(ctx, node, client):
            unconfigured = seen("unconfigured")
            assert lc.set(Transition.TRANSITION_CONFIGURE)
            inactive = seen("inactive")
            assert lc.set(Transition.TRANSITION_ACTIVATE)
            assert wait_until(lambda: pub.get_subscription_count() >= 1, 20.0)
            pub.publish(image_msg(ramp_rectangle(320, 240, BOX), 1))
            active = seen("active", lambda st: _values(st).get("processed") == "1")
            assert lc.set(Transition.TRANSITION_DEACTIVATE)
            after = seen("inactive", lambda st: _values(st).get("processed") == "1")
            names = {st.name for msg in diags.wait(0, 0) for st in msg.status}
        client.destroy_node()
        node.destroy_node()
    assert f"{ns}/vrt_detector: rear" in names
    assert unconfigured.level == DiagnosticStatus.OK and unconfigured.message.startswith("unconfigured")
    assert inactive.level == DiagnosticStatus.OK and inactive.message.startswith("inactive")
    assert active.level == DiagnosticStatus.OK and _values(active)["backend"].startswith("cpu")
    assert float(_values(active)["inference_ms_p50"]) >= 0.0
    assert after.message.startswith("inactive") and _values(after)["received"] == "1"


# ------------------------------------------------------------------------------------------- real bag
@pytest.mark.slow
def test_replayed_bag_answered_only_while_active(shared_dir):
    """YOLOX-nano on the real raw bag: replayed while inactive → no detections (nothing subscribed); while active →
    one Detection2DArray per frame with its header; after deactivate → nothing more."""
    path = shared_dir / "data" / "bags" / "vtest_raw_sqlite3"
    topic, _, frames_in = _bag_frames(path)
    ns = unique_namespace()
    with private_context() as ctx:
        node = managed_node(ctx, ns, shared_dir / "models" / "yolox_nano.onnx",
                            model__labels=str(shared_dir / "models" / "coco80.names"))
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        lc = Lifecycle(client, f"{ns}/vrt_detector")
        with spinning(ctx, node, client):
            assert lc.set(Transition.TRANSITION_CONFIGURE)
            with BagPlayer(client, path, remap={topic: f"{ns}{topic}"}) as player:
                assert not player.wait_for_subscribers(1, 1.0), "subscribed while inactive"
                player.play(rate=0.0)
                inactive_got = len(dets.wait(0, 1.0))
                assert lc.set(Transition.TRANSITION_ACTIVATE)
                assert player.wait_for_subscribers(1, 20.0)
                player.play(rate=1.0, on_message=_lock_step(dets))
                active_got = dets.wait(len(frames_in), 30.0)
                assert lc.set(Transition.TRANSITION_DEACTIVATE)
                assert wait_until(lambda: player.wait_for_subscribers(1, 0.0) is False, 20.0)
                player.play(rate=0.0)
                final = dets.wait(len(frames_in) + 1, 2.0)
            counters = node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    assert inactive_got == 0
    assert [m.header for m in active_got] == [f.header for f in frames_in]
    assert all(sum(d.results[0].hypothesis.class_id == "person" for d in m.detections) >= 3 for m in active_got)
    assert len(final) == len(frames_in)
    assert counters.received == len(frames_in) and counters.processed == len(frames_in)


# ------------------------------------------------------------------------------------------- detector_node --lifecycle
@pytest.mark.slow
@pytest.mark.parametrize("executor", ["single", "events"])
def test_main_lifecycle_two_names_driven_by_services_and_exits_when_finalized(blob_model, tmp_path, executor):
    """``detector_node --lifecycle --names a b``: both come up unconfigured; each is driven on its own; the process
    exits 0 once both are finalized. Also under ``--executor events`` (rclpy's EventsExecutor, issue 22)."""
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text(f"/**:\n  ros__parameters:\n    backend: cpu\n    model:\n      path: {blob_model}\n"
                         "    cameras: [front]\nright_det:\n  ros__parameters:\n    cameras: [rear]\n")
    ns = unique_namespace()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrt_ros.ros.main", "--lifecycle", "--names", "left_det", "right_det",
         "--executor", executor, "--ros-args", "--params-file", str(yaml_file), "-r", f"__ns:={ns}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        with private_context() as ctx:
            client = Node("client", context=ctx, namespace=ns)
            left, right = Lifecycle(client, f"{ns}/left_det"), Lifecycle(client, f"{ns}/right_det")
            with spinning(ctx, client):
                assert left.get() == "unconfigured" and right.get() == "unconfigured"
                assert left.set(Transition.TRANSITION_CONFIGURE) and left.set(Transition.TRANSITION_ACTIVATE)
                assert right.get() == "unconfigured"
                assert graph_settles(lambda: f"{ns}/front/image_raw" in topics_of(client, "left_det", ns)[1], 20.0)
                assert f"{ns}/rear/detections" not in topics_of(client, "right_det", ns)[0]
                assert left.set(Transition.TRANSITION_ACTIVE_SHUTDOWN)
                assert proc.poll() is None, "exited with one node still unconfigured"
                assert right.set(Transition.TRANSITION_UNCONFIGURED_SHUTDOWN)
            client.destroy_node()
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "left_det" in out and "finalized" in out


@pytest.mark.slow
def test_main_lifecycle_exits_fast_on_a_poisoned_context_with_the_error_on_diagnostics(blob_model, tmp_path):
    """Issue 27 item 1, managed: ``detector_node --lifecycle`` after a poisoned CUDA context (configured and activated
    through its services) ends with status 3 without closing the pipeline (whose close() here takes 10 s, as failing
    CUDA destructors), and the ERROR has reached a /diagnostics subscriber of another process first."""
    from test_node_faults import SLOW_TEARDOWN_S, _SLOW_TEARDOWN_MAIN, _run_faulty_main, fatal_statuses, fault_to_exit
    from vrt_ros.faults import EXIT_FATAL

    def configure_and_activate(probe: Node) -> None:
        lc = Lifecycle(probe, f"{probe.get_namespace()}/vrt_detector")
        assert lc.set(Transition.TRANSITION_CONFIGURE) and lc.set(Transition.TRANSITION_ACTIVATE)

    record: dict = {}
    returncode, out, got = _run_faulty_main(_SLOW_TEARDOWN_MAIN, blob_model, tmp_path, node_args=("--lifecycle",),
                                            on_up=configure_and_activate, record=record)
    assert returncode == EXIT_FATAL, out
    elapsed = fault_to_exit(out, record)
    print(f"fault -> exit {elapsed:.3f} s (lifecycle)")
    assert elapsed < SLOW_TEARDOWN_S / 4, (elapsed, out)  # target 0.5 s; see test_node_faults
    assert fatal_statuses(record), [(s.level, s.message) for a in record["diagnostics"] for s in a.status]
    assert "finalized" in out and "detector_node: fatal: CUDA context poisoned" in out
    assert len(got) == 1
