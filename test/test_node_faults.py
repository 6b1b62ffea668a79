"""Fatal faults on a robot (issue 12, item 2): a context-poisoning CUDA error, or K consecutive engine failures,
make the node log an ERROR, publish ERROR on /diagnostics and the process exit non-zero (3), so the launch file's
respawn restarts it. Also: the fault classification (pure), the logging bridge (item 7) and two nodes sharing one
pipeline (item 6), with injected faults on the real CPU pipeline and real DDS."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cuda_faults import gpu_error
from vrt_ros.faults import EXIT_FATAL, FaultPolicy
from vrt_ros.inference.batch_serial import process_serially

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------- pure policy
# The classification of CUDA errors by their code: test/test_fault_codes.py.


def test_fault_policy_counts_consecutive_failures():
    p = FaultPolicy(max_consecutive_failures=3)
    assert p.failure(ValueError("x")) is None and p.failure(ValueError("x")) is None
    p.success()  # a good frame ends the run
    assert p.failure(ValueError("x")) is None and p.failure(ValueError("x")) is None
    reason = p.failure(ValueError("bad output"))
    assert reason and "3 consecutive engine failures" in reason and "bad output" in reason
    never = FaultPolicy(max_consecutive_failures=0)
    assert all(never.failure(ValueError("x")) is None for _ in range(100))
    assert "CUDA context poisoned (CUDA_ERROR_ILLEGAL_ADDRESS)" in never.failure(gpu_error())


# ------------------------------------------------------------------------------------------- logging bridge
class _RecordingRosLogger:
    def __init__(self, debug: bool = False) -> None:
        self.lines: list[tuple[str, str]] = []
        self._debug = debug

    def is_enabled_for(self, severity) -> bool:
        return self._debug

    def __getattr__(self, severity):
        if severity in ("debug", "info", "warning", "error", "fatal"):
            return lambda text: self.lines.append((severity, text))
        raise AttributeError(severity)


def test_python_logging_reaches_the_ros_logger_at_its_severity():
    pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`)")
    from vrt_ros.ros import log_bridge

    ros = _RecordingRosLogger()
    log_bridge.attach(ros)
    try:
        logging.getLogger("vrt_ros.engines.torch").warning("torch engine: CUDA graph capture failed, running eagerly (%s)", "x")
        logging.getLogger("vrt_ros.engines.tensorrt").error("TensorRT: engine plan incompatible")
        logging.getLogger("vrt_ros.gpu.library").info("kernel module decode: compiled")
        logging.getLogger("vrt_ros.gpu.library").debug("not shown at info")
        logging.getLogger("vrt_ros.x").critical("gone")
        logging.getLogger("other_package").warning("not ours")
    finally:
        log_bridge.detach(ros)
    assert ros.lines == [
        ("warning", "[vrt_ros.engines.torch] torch engine: CUDA graph capture failed, running eagerly (x)"),
        ("error", "[vrt_ros.engines.tensorrt] TensorRT: engine plan incompatible"),
        ("info", "[vrt_ros.gpu.library] kernel module decode: compiled"),
        ("fatal", "[vrt_ros.x] gone"),
    ]
    logging.getLogger("vrt_ros.x").warning("after detach")
    assert len(ros.lines) == 4
    assert not any(type(h).__name__ == "RosLogHandler" for h in logging.getLogger("vrt_ros").handlers)


# ------------------------------------------------------------------------------------------- the node
rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end, ramp_rectangle  # noqa: E402
from vrt_ros.inference.backends.cpu import CpuPipeline  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.settings.config import defaults  # noqa: E402

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", 320, 320)


class FaultyPipeline:
    """The real CPU pipeline, raising ``error`` on every frame from frame ``from_frame`` on (0-based)."""

    def __init__(self, inner, error: BaseException, from_frame: int = 0) -> None:
        self._inner, self._error, self._from = inner, error, from_frame
        self.frames = 0
        self.name, self.head, self.input_spec = inner.name, inner.head, inner.input_spec
        self.last_timings: dict = {}

    def set_postprocess(self, params) -> None:
        self._inner.set_postprocess(params)

    def process(self, spec, data):
        self.frames += 1
        if self.frames > self._from:
            raise self._error
        return self._inner.process(spec, data)

    def process_bgr(self, image):
        raise NotImplementedError

    def process_batch(self, frames, masks=None):  # the worker's one route: each frame through process()
        return process_serially(self, frames)

    def close(self) -> None:
        self._inner.close()


def _cpu(model: Path) -> CpuPipeline:
    v = defaults()
    v.update({"model.path": str(model), "backend": "cpu", "model.pad_value": 0.0})
    return CpuPipeline(v, log=lambda m: None)


def image_msg(bgr: np.ndarray, sec: int) -> Image:
    msg = Image()
    msg.header.stamp.sec = sec
    msg.header.frame_id = "cam"
    msg.height, msg.width = bgr.shape[:2]
    msg.encoding, msg.step, msg.data = "bgr8", bgr.shape[1] * 3, bgr.tobytes()
    return msg


def wait_until(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _run_until_fatal(ctx, ns, pipeline, params, frames: int = 8):
    """Run the node in ``ctx``; a camera and a /diagnostics listener in another context (another process's view)."""
    node = DetectorNode(context=ctx, namespace=ns, pipeline=pipeline,
                        parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    name = node.get_fully_qualified_name()
    diags: list = []
    with private_context() as other:
        probe = Node("probe", context=other, namespace=ns)
        probe.create_subscription(DiagnosticArray, "/diagnostics", diags.append, make_qos("reliable", 50))
        pub = probe.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        img = ramp_rectangle(320, 240, (50, 60, 200, 180))
        with spinning(other, probe), spinning(ctx, node):
            assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
            for i in range(frames):
                if node.fatal_error:
                    break
                pub.publish(image_msg(img, i + 1))
                time.sleep(0.15)
            wait_until(lambda: node.fatal_error is not None, 10.0)
            wait_until(lambda: any(s.level == DiagnosticStatus.ERROR for a in diags for s in a.status), 5.0)
        probe.destroy_node()
    mine = [s for a in diags for s in a.status if s.name.startswith(name)]
    fatal, counters = node.fatal_error, node.counters()["camera"]
    node.destroy_node()
    return fatal, counters, mine


def test_k_consecutive_engine_failures_are_fatal(blob_model):
    ns = unique_namespace()
    with private_context() as ctx:
        pipe = FaultyPipeline(_cpu(blob_model), ValueError("engine output has NaN shape"), from_frame=1)
        fatal, counters, statuses = _run_until_fatal(
            ctx, ns, pipe, {"engine.max_consecutive_failures": 3, "input.qos": "reliable", "input.depth": 10})
        assert ctx.ok(), "the node shut down a context it does not own"
    assert fatal and "3 consecutive engine failures" in fatal
    assert counters.processed == 1 and counters.dropped["engine_error"] == 3
    assert pipe.frames == 4  # no frame taken after the fatal one
    errors = [s for s in statuses if s.level == DiagnosticStatus.ERROR and "fatal" in s.message]
    assert errors, f"no ERROR status on /diagnostics: {[(s.level, s.message) for s in statuses]}"


def test_poisoned_cuda_context_is_fatal_at_once(blob_model):
    ns = unique_namespace()
    with private_context() as ctx:
        pipe = FaultyPipeline(_cpu(blob_model), gpu_error(), from_frame=2)
        fatal, counters, statuses = _run_until_fatal(
            ctx, ns, pipe, {"engine.max_consecutive_failures": 0, "input.qos": "reliable", "input.depth": 10})
    assert fatal and "CUDA context poisoned (CUDA_ERROR_ILLEGAL_ADDRESS)" in fatal
    assert counters.processed == 2 and counters.dropped["engine_error"] == 1
    assert any(s.level == DiagnosticStatus.ERROR for s in statuses)


def test_parameter_changes_do_not_reset_the_consecutive_failure_count(blob_model):
    """A runtime parameter change (a tuning tool setting score_threshold between frames) is no good frame: the
    run of engine failures goes on counting and the K-th failure in a row is still fatal."""
    ns = unique_namespace()
    with private_context() as ctx:
        pipe = FaultyPipeline(_cpu(blob_model), ValueError("engine output has NaN shape"), from_frame=1)
        node = DetectorNode(context=ctx, namespace=ns, pipeline=pipe, parameter_overrides=[
            Parameter("engine.max_consecutive_failures", value=3), Parameter("input.qos", value="reliable"),
            Parameter("input.depth", value=10)])
        probe = Node("probe", context=ctx, namespace=ns)
        pub = probe.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        img = ramp_rectangle(320, 240, (50, 60, 200, 180))
        with spinning(ctx, node, probe):
            assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
            for i in range(5):
                if node.fatal_error:
                    break
                if i > 0:
                    node.set_parameters([Parameter("score_threshold", value=0.3 + 0.01 * i)])
                pub.publish(image_msg(img, i + 1))
                assert wait_until(lambda: pipe.frames > i, 10.0)
                wait_until(lambda: sum(node.counters()["camera"].dropped.values()) + node.counters()["camera"].processed
                           > i, 5.0)
        fatal, counters = node.fatal_error, node.counters()["camera"]
        probe.destroy_node()
        node.destroy_node()
    assert counters.processed == 1
    assert fatal and "3 consecutive engine failures" in fatal, (fatal, counters.dropped)
    assert pipe.frames == 4


class ScriptedPipeline(FaultyPipeline):
    """The real CPU pipeline; frame i (0-based) raises ``errors[i]`` when there is one (None: processed)."""

    def __init__(self, inner, errors) -> None:
        super().__init__(inner, RuntimeError("unused"))
        self._errors = list(errors)

    def process(self, spec, data):
        self.frames += 1
        i = self.frames - 1
        if i < len(self._errors) and self._errors[i] is not None:
            raise self._errors[i]
        return self._inner.process(spec, data)


def test_bad_frame_then_engine_failure_keeps_the_worker_alive(blob_model):
    """A dropped bad frame (logged as a warning) and then an engine failure (logged as an error) from the same
    drop path: rclpy refuses a second severity from one call site (ValueError), which killed the worker thread, so
    the node stayed up processing nothing and the fault policy never saw the failure."""
    from vrt_ros.errors import FrameError

    ns = unique_namespace()
    errors = [FrameError("data holds 3 bytes", reason="short_data"), RuntimeError("engine hiccup"), None, None]
    with private_context() as ctx:
        pipe = ScriptedPipeline(_cpu(blob_model), errors)
        node = DetectorNode(context=ctx, namespace=ns, pipeline=pipe, parameter_overrides=[
            Parameter("input.qos", value="reliable"), Parameter("input.depth", value=10)])
        probe = Node("probe", context=ctx, namespace=ns)
        pub = probe.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        img = ramp_rectangle(320, 240, (50, 60, 200, 180))
        with spinning(ctx, node, probe):
            assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
            for i in range(len(errors)):
                pub.publish(image_msg(img, i + 1))
                wait_until(lambda: pipe.frames > i, 5.0)
            wait_until(lambda: node.counters()["camera"].processed >= 2, 5.0)
        counters = node.counters()["camera"]
        probe.destroy_node()
        node.destroy_node()
    assert dict(counters.dropped) == {"short_data": 1, "engine_error": 1}
    assert counters.processed == 2


_FAULTY_MAIN = """
import sys
sys.path.insert(0, {test_dir!r})
from test_node_faults import FaultyPipeline
from vrt_ros.bench.restart.recovery_probe import raised_fault
from vrt_ros.ros import node as node_module
from vrt_ros.ros.main import main
real = node_module.make_pipeline
node_module.make_pipeline = lambda values, log: FaultyPipeline(
    real(values, log), raised_fault(), from_frame=1)
sys.exit(main(sys.argv))
"""


def _run_faulty_main(script: str, model: Path, tmp_path: Path, extra_yaml: str = "",
                     node_args: tuple[str, ...] = (), on_up=None, record: dict | None = None) -> tuple[int, str, list]:
    """Run ``script`` (a main() wrapper) as a process with the CPU pipeline; send frames until it exits.

    Args:
        on_up: called with the probe node (spinning) before waiting for the node's subscription (e.g. to drive a
            managed node's transitions).
        record: filled with ``exited_at`` (``time.time()`` when the process ended, seen by a waiting thread),
            ``namespace`` (the node's) and ``diagnostics`` (every ``DiagnosticArray`` the probe received, in this
            other process); given, the frames wait until the node's /diagnostics reached the probe.

    Returns:
        ``(exit status, its output, the detection messages received)``.
    """
    ns = unique_namespace()
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text(f"/**:\n  ros__parameters:\n    backend: cpu\n{extra_yaml}    model:\n      path: {model}\n"
                         "    input:\n      qos: reliable\n      depth: 10\n")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-c", script.format(test_dir=str(Path(__file__).parent)), *node_args, "--ros-args",
         "--params-file", str(yaml_file), "-r", f"__ns:={ns}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    got: list = []
    wait_for_diagnostics = record is not None
    record = {} if record is None else record
    record.update(diagnostics=[], namespace=ns)
    waiter = threading.Thread(target=lambda: (proc.wait(), record.setdefault("exited_at", time.time())), daemon=True)
    waiter.start()
    try:
        with private_context() as ctx:
            probe = Node("probe", context=ctx, namespace=ns)
            pub = probe.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
            probe.create_subscription(Detection2DArray, "camera/detections", got.append, make_qos("reliable", 10))
            probe.create_subscription(DiagnosticArray, "/diagnostics", record["diagnostics"].append,
                                      make_qos("reliable", 50))
            img = ramp_rectangle(320, 240, (50, 60, 200, 180))
            with spinning(ctx, probe):
                if on_up is not None:
                    on_up(probe)
                assert wait_until(lambda: pub.get_subscription_count() > 0, 60.0), "node did not come up"
                # and its detections reach the probe (volatile: a message published before the match is lost)
                assert wait_until(lambda: probe.count_publishers(f"{ns}/camera/detections") > 0, 30.0)
                if wait_for_diagnostics:  # the node's /diagnostics writer has matched this reader (as a running
                    # diagnostics aggregator's has): a fault before the match has no subscriber to deliver to
                    assert wait_until(lambda: any(s.name.startswith(f"{ns}/") for a in record["diagnostics"]
                                                  for s in a.status), 30.0), "no /diagnostics from the node"
                for i in range(20):
                    if proc.poll() is not None:
                        break
                    pub.publish(image_msg(img, i + 1))
                    time.sleep(0.2)
            probe.destroy_node()
        out, _ = proc.communicate(timeout=30)
        waiter.join(5.0)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, got


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["single", "events"])
def test_main_exits_3_on_a_fatal_fault(blob_model, tmp_path, executor):
    """The real process: main() returns EXIT_FATAL (3) after the node stopped on a poisoned context; also under
    rclpy's EventsExecutor, which has no guard conditions (the worker's wake-up is a flag main() serves)."""
    returncode, out, got = _run_faulty_main(_FAULTY_MAIN, blob_model, tmp_path, node_args=("--executor", executor))
    assert returncode == EXIT_FATAL, out
    assert "CUDA context poisoned (CUDA_ERROR_ILLEGAL_ADDRESS)" in out and "[ERROR]" in out
    assert len(got) == 1  # the first frame was published, then the process stopped


_RACING_MAIN = """
import sys, threading, time
sys.path.insert(0, {test_dir!r})
from test_node_faults import FaultyPipeline
from vrt_ros.bench.restart.recovery_probe import raised_fault
from vrt_ros.ros import node as node_module
from vrt_ros.ros.main import main
failing = threading.Event()

class Slow(FaultyPipeline):  # the failing frame takes 0.5 s, so a diagnostics tick falls inside it
    def process(self, spec, data):
        try:
            return super().process(spec, data)
        except Exception:
            failing.set()
            time.sleep(0.5)
            raise

real = node_module.make_pipeline
node_module.make_pipeline = lambda values, log: Slow(
    real(values, log), raised_fault(), from_frame=1)
publish = node_module.DetectorNode.publish_diagnostics

def racing_publish(self):  # the executor's timer tick is mid-publish while the worker handles the fatal fault
    if threading.current_thread() is threading.main_thread() and failing.is_set():
        end = time.monotonic() + 5.0
        while self.fatal_error is None and time.monotonic() < end:
            time.sleep(0.01)
    publish(self)

node_module.DetectorNode.publish_diagnostics = racing_publish
sys.exit(main(sys.argv))
"""


@pytest.mark.slow
def test_main_exits_3_when_the_executor_races_the_fatal_shutdown(blob_model, tmp_path):
    """A callback the executor runs while the worker handles a fatal fault (here the /diagnostics timer, publishing
    as the fatal fault is recorded) must not turn exit status 3 into a traceback; main(), not the worker, shuts the
    context down."""
    returncode, out, _ = _run_faulty_main(_RACING_MAIN, blob_model, tmp_path, "    diagnostics_period_s: 0.1\n")
    assert returncode == EXIT_FATAL, out
    assert "Traceback" not in out and "detector_node: fatal: CUDA context poisoned" in out


#: A main() wrapper whose pipeline fails as a poisoned CUDA context does, printing the fault's wall time, and whose
#: teardown takes as long as a poisoned context's failing CUDA destructors may (close() sleeps SLOW_TEARDOWN_S).
SLOW_TEARDOWN_S = 10.0
_SLOW_TEARDOWN_MAIN = """
import sys, time
sys.path.insert(0, {test_dir!r})
from test_node_faults import FaultyPipeline
from vrt_ros.bench.restart.recovery_probe import raised_fault
from vrt_ros.ros import node as node_module
from vrt_ros.ros.main import main

class PoisonedSlowTeardown(FaultyPipeline):
    def process(self, spec, data):
        try:
            return super().process(spec, data)
        except Exception:
            print(f"FAULT_AT {{time.time():.6f}}", flush=True)
            raise

    def close(self):
        time.sleep(%r)
        super().close()

real = node_module.make_pipeline
node_module.make_pipeline = lambda values, log: PoisonedSlowTeardown(
    real(values, log), raised_fault(), from_frame=1)
sys.exit(main(sys.argv))
""" % SLOW_TEARDOWN_S


def fault_to_exit(out: str, record: dict) -> float:
    """Seconds from the fault (the wrapper's ``FAULT_AT`` line) to the process's end (seen by the test)."""
    fault_at = re.search(r"FAULT_AT (\d+\.\d+)", out)
    assert fault_at and "exited_at" in record, out
    return record["exited_at"] - float(fault_at.group(1))


def fatal_statuses(record: dict) -> list:
    """The ERROR statuses naming a fatal fault among the /diagnostics messages another process received."""
    return [s for a in record["diagnostics"] for s in a.status if s.name.startswith(f"{record['namespace']}/")
            and s.level == DiagnosticStatus.ERROR and "CUDA context poisoned" in s.message]


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["single", "events"])
def test_fatal_exit_is_fast_and_the_error_reaches_diagnostics_in_another_process(blob_model, tmp_path, executor):
    """Issue 27 item 1: after a poisoned context the process ends with status 3 without its teardown (here a pipeline
    close() of 10 s, as failing CUDA destructors), well within a second of the fault, and the ERROR has reached a
    /diagnostics subscriber of another process first (the node's bounded wait for its acknowledgement)."""
    record: dict = {}
    returncode, out, got = _run_faulty_main(_SLOW_TEARDOWN_MAIN, blob_model, tmp_path,
                                            node_args=("--executor", executor), record=record)
    assert returncode == EXIT_FATAL, out
    elapsed = fault_to_exit(out, record)
    print(f"fault -> exit {elapsed:.3f} s ({executor})")
    # 0.5 s is the target (on an idle machine it is ~0.1 s); the bound leaves room for a loaded CI machine and is
    # far below the teardown that main() must skip
    assert elapsed < SLOW_TEARDOWN_S / 4, (elapsed, out)
    assert fatal_statuses(record), [(s.level, s.message) for a in record["diagnostics"] for s in a.status]
    assert "[ERROR]" in out and "detector_node: fatal: CUDA context poisoned" in out  # flushed before the exit
    assert len(got) == 1


def test_logging_bridge_with_the_real_rclpy_logger(capfd):
    """rclpy keys each log call site to one severity and raises ValueError when it changes: every severity must
    still reach a real node's logger (the recording logger above cannot show this)."""
    from vrt_ros.ros import log_bridge

    with private_context() as ctx:
        node = Node("bridge_probe", context=ctx, namespace=unique_namespace())
        log_bridge.attach(node.get_logger())
        try:
            log = logging.getLogger("vrt_ros.engines.tensorrt")
            for level in (logging.WARNING, logging.ERROR, logging.INFO, logging.CRITICAL, logging.WARNING):
                log.log(level, "TensorRT says %s", logging.getLevelName(level))
        finally:
            log_bridge.detach(node.get_logger())
            node.destroy_node()
    err = capfd.readouterr()
    text = err.out + err.err
    assert "Logging error" not in text and "severity cannot be changed" not in text, text
    for sev, name in (("WARN", "WARNING"), ("ERROR", "ERROR"), ("INFO", "INFO"), ("FATAL", "CRITICAL")):
        assert re.search(rf"\[{sev}\] .*\[vrt_ros.engines.tensorrt\] TensorRT says {name}", text), (sev, text)
    assert text.count("TensorRT says WARNING") == 2


# ------------------------------------------------------------------------------------------- item 6: shared pipeline
def test_two_nodes_share_one_pipeline_and_keep_their_own_detections(blob_model):
    """Two nodes (two worker threads) on one CPU pipeline: each frame's detection is that frame's own object."""
    pipe = _cpu(blob_model)
    boxes = {"a": (40.0, 30.0, 150.0, 120.0), "b": (170.0, 100.0, 300.0, 220.0)}
    images = {k: ramp_rectangle(320, 240, b) for k, b in boxes.items()}
    ns = unique_namespace()
    n = 15
    with private_context() as ctx:
        nodes = {k: DetectorNode(f"det_{k}", context=ctx, namespace=f"{ns}/{k}", pipeline=pipe, parameter_overrides=[
            Parameter("input.qos", value="reliable"), Parameter("input.depth", value=10)]) for k in boxes}
        probe = Node("probe", context=ctx)
        got = {k: [] for k in boxes}
        pubs = {}
        for k in boxes:
            probe.create_subscription(Detection2DArray, f"{ns}/{k}/camera/detections", got[k].append,
                                      make_qos("reliable", 50))
            pubs[k] = probe.create_publisher(Image, f"{ns}/{k}/camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, *nodes.values(), probe):
            assert wait_until(lambda: all(p.get_subscription_count() > 0 for p in pubs.values()), 10.0)

            def send(k):
                for i in range(n):
                    pubs[k].publish(image_msg(images[k], i + 1))
                    time.sleep(0.03)

            threads = [threading.Thread(target=send, args=(k,)) for k in boxes]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

            def settled(k: str) -> bool:
                """Every frame sent was received and is processed or dropped (none in flight), and every processed
                frame's detections arrived (waiting for this condition, not for a time: issue 26)."""
                c = nodes[k].counters()["camera"]
                return c.received == n and c.processed + sum(c.dropped.values()) == n and len(got[k]) == c.processed

            assert wait_until(lambda: all(settled(k) for k in boxes), 30.0), {
                k: (nodes[k].counters()["camera"], len(got[k])) for k in boxes}
        for k, node in nodes.items():
            c = node.counters()["camera"]
            assert c.processed >= 3 and c.processed == len(got[k])
            for msg in got[k]:
                (d,) = msg.detections
                x1 = d.bbox.center.position.x - d.bbox.size_x / 2
                y1 = d.bbox.center.position.y - d.bbox.size_y / 2
                assert abs(x1 - boxes[k][0]) < 2.0 and abs(y1 - boxes[k][1]) < 2.0, (k, x1, y1)
            node.destroy_node()
        probe.destroy_node()


# ------------------------------------------------------------------------------------------- issue 26 item 2: context
def test_a_fatal_node_leaves_the_host_context_and_its_other_nodes_alone(blob_model):
    """Two nodes composed in one host application's context: one goes fatal (a poisoned CUDA context); it reports
    ERROR on /diagnostics and takes no further frame, while the context stays up and the other node keeps
    detecting. The host decides what to do; here it destroys the fatal node from its own thread."""
    ns = unique_namespace()
    with private_context() as ctx:
        bad_pipe = FaultyPipeline(_cpu(blob_model), gpu_error(), from_frame=1)
        bad = DetectorNode("bad", context=ctx, namespace=f"{ns}/bad", pipeline=bad_pipe, parameter_overrides=[
            Parameter("input.qos", value="reliable"), Parameter("input.depth", value=10)])
        good = DetectorNode("good", context=ctx, namespace=f"{ns}/good", pipeline=_cpu(blob_model), parameter_overrides=[
            Parameter("input.qos", value="reliable"), Parameter("input.depth", value=10)])
        probe = Node("probe", context=ctx)
        got: list = []
        diags: list = []
        probe.create_subscription(Detection2DArray, f"{ns}/good/camera/detections", got.append, make_qos("reliable", 50))
        probe.create_subscription(DiagnosticArray, "/diagnostics", diags.append, make_qos("reliable", 50))
        pubs = {k: probe.create_publisher(Image, f"{ns}/{k}/camera/image_raw", make_qos("reliable", 10))
                for k in ("bad", "good")}
        img = ramp_rectangle(320, 240, (50, 60, 200, 180))
        with spinning(ctx, bad, good, probe):
            assert wait_until(lambda: all(p.get_subscription_count() > 0 for p in pubs.values()), 10.0)
            for i in range(3):
                pubs["bad"].publish(image_msg(img, i + 1))
                time.sleep(0.1)
            assert wait_until(lambda: bad.fatal_error is not None, 10.0)
            for i in range(3):  # the fatal node's context is the good node's: still up, still detecting
                pubs["good"].publish(image_msg(img, i + 1))
                pubs["bad"].publish(image_msg(img, i + 10))
                time.sleep(0.1)
            assert wait_until(lambda: len(got) == 3, 10.0)
            bad_name = bad.get_fully_qualified_name()
            assert wait_until(lambda: any(s.level == DiagnosticStatus.ERROR and s.name.startswith(bad_name)
                                          for a in diags for s in a.status), 5.0)
            assert ctx.ok()
            assert wait_until(lambda: pubs["bad"].get_subscription_count() == 0, 10.0)  # no more frames delivered
        bad.destroy_node()  # from the host's thread, after the fatal fault: no join of a thread by itself
        assert ctx.ok()
        good_counters = good.counters()["camera"]
        good.destroy_node()
        probe.destroy_node()
    assert "CUDA context poisoned" in bad.fatal_error and bad_pipe.frames == 2
    assert good_counters.processed == 3 and not good_counters.dropped
