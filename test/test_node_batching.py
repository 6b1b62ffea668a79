"""The node with a batching pipeline (issue 21): several cameras' frames through one ``process_batch`` call, per
slot faults, one engine failure per failed batch, and handed case HC-18 (a fast camera is not held back by a slow
or silent one; batching never waits longer than ``input.batch_wait_ms``).

CPU path with real ONNX Runtime batches (``CpuPipeline.process_batch``) on a synthetic dynamic-batch model whose
score is the frame's brightness, so each camera's published score shows its detections came from its own frame.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import brightness_end2end  # noqa: E402
from test_node import Collector, image_msg, overrides, wait_matched, wait_until  # noqa: E402
from vrt_ros.errors import FrameError  # noqa: E402
from vrt_ros.inference.pipeline import make_pipeline  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.settings import config  # noqa: E402

pytestmark = pytest.mark.ros
W, H = 320, 240
BOX = (10.0, 20.0, 100.0, 120.0)  # the model's box, engine-input pixels (= source pixels: 320 wide, top-left)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = brightness_end2end(tmp_path_factory.mktemp("models") / "brightness.onnx", W, W, BOX)
    _ALONE.clear()
    _ALONE["model"] = path
    return path


def grey(level: int) -> np.ndarray:
    return np.full((H, W, 3), level, np.uint8)


_ALONE: dict = {}


def score_of(level: int) -> float:
    """The score of a frame of grey ``level`` processed alone (batch 1) by the CPU pipeline: the letterboxed
    input's mean, about ``level / 255 * H / W`` (pad 0 below the frame)."""
    if level not in _ALONE:
        values = config.validate({"backend": "cpu", "model.path": str(_ALONE["model"]), "model.pad_value": 0.0,
                                  "score_threshold": 0.05, "engine.max_batch": 1})
        _ALONE[level] = float(make_pipeline(values, log=lambda m: None).process_bgr(grey(level)).scores[0])
    return _ALONE[level]


def batch_node(ctx, ns, model, **params) -> DetectorNode:
    base = dict(backend="cpu", model__path=str(model), model__pad_value=0.0, score_threshold=0.05,
                input__qos="reliable", input__depth=1, cameras=["a", "b"], engine__max_batch=2,
                engine__threads=1)  # one ONNX Runtime thread: its spinning pool must not take both cores from the test
    base.update(params)
    return DetectorNode(context=ctx, namespace=ns, parameter_overrides=overrides(**base))


class Recorder:
    """Wraps the node's worker.publish: (camera, monotonic s, timings) of every published frame."""

    def __init__(self, node: DetectorNode) -> None:
        self.rows: list[tuple[str, float, dict]] = []
        self._lock = threading.Lock()
        worker = node._worker
        inner = worker.publish

        def publish(frame, dets, timings):
            with self._lock:
                self.rows.append((frame.cam.name, time.monotonic(), dict(timings)))
            inner(frame, dets, timings)

        worker.publish = publish

    def of(self, cam: str, since: float = float("-inf"), until: float = float("inf")) -> list[dict]:
        with self._lock:
            return [t for c, when, t in self.rows if c == cam and since <= when < until]


def record_planned_waits(node: DetectorNode) -> list[tuple[float, float, float, float]]:
    """Wraps the worker's BatchPlanner.wait_s: per wait it asks for, (when it asked, the oldest waiting frame's
    arrival, the wait's end after that arrival, the wait), monotonic s / s."""
    planner = node._worker.slots.planner
    inner = planner.wait_s
    rows: list[tuple[float, float, float, float]] = []

    def wait_s(ready, oldest_arrival, now):
        wait = inner(ready, oldest_arrival, now)
        if wait > 0:
            rows.append((now, oldest_arrival, now + wait - oldest_arrival, wait))
        return wait

    planner.wait_s = wait_s
    return rows


def warm_up(ctx, model) -> None:
    """One frame through a throwaway node of the same kind in this process: run first in a fresh process, the first
    frame's imports and type-support loading (message types, ONNX Runtime, OpenCV) stalled every thread for up to a
    second, inside the timed window; the timed test is about a node that is up, as on a robot."""
    ns = unique_namespace()
    node = batch_node(ctx, ns, model)
    client = Node("warm_up", context=ctx, namespace=ns)
    pub = client.create_publisher(Image, "a/image_raw", make_qos("reliable", 10))
    got = Collector(client, Detection2DArray, "a/detections")
    with spinning(ctx, node, client):
        wait_matched(pub)
        pub.publish(image_msg(grey(200), 0, frame_id="a_optical"))
        assert len(got.wait(1, 20.0)) == 1
        node.diagnostics()
    client.destroy_node()
    node.destroy_node()


def test_HC_18_fast_camera_not_held_back_by_slow_or_silent_one(model):
    """Camera A at 30 Hz; camera B at 5 Hz for 1.6 s, then silent (6 s here instead of the case's 10 s: the node
    reports a camera after NO_INPUT_WARN_S = 5 s without frames, the behaviour is the same for 10 s).
    ``input.batch_wait_ms`` 15: A's frames wait for B only when B's next frame is due within 15 ms of A's; never
    longer than 15 ms after the oldest waiting frame arrived (the waits the worker asks for; waking the thread is
    the OS's); with B silent A's frames never wait. Every frame of both cameras is processed, each with its own score and header."""
    wait_ms = 15.0
    ns = unique_namespace()
    # The publishers and subscribers of this test share the node's process and its GIL (on a robot they are other
    # processes): with the default 5 ms switch interval each of the worker's many OpenCV / numpy calls that release
    # the GIL could wait up to 5 ms to get it back from this test's threads, a convoy that stretched one CPU
    # preprocess to 0.2-0.8 s on the 2-core machine. A shorter interval hands the GIL back sooner.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        _run_hc18(model, wait_ms, ns)
    finally:
        sys.setswitchinterval(interval)


def _run_hc18(model, wait_ms: float, ns: str) -> None:
    with private_context() as ctx:
        warm_up(ctx, model)
        node = batch_node(ctx, ns, model, input__batch_wait_ms=wait_ms, input__depth=10)  # DDS keeps every frame
        rec = Recorder(node)
        planned = record_planned_waits(node)
        client = Node("client", context=ctx, namespace=ns)
        pubs = {c: client.create_publisher(Image, f"{c}/image_raw", make_qos("reliable", 10)) for c in "ab"}
        got = {c: Collector(client, Detection2DArray, f"{c}/detections") for c in "ab"}
        frames = {"a": image_msg(grey(200), 0, frame_id="a_optical"), "b": image_msg(grey(100), 0, frame_id="b_optical")}
        sent = {"a": 0, "b": 0}
        a_while_b = 0  # A's frames sent before b_stop
        with spinning(ctx, node, client):
            for p in pubs.values():
                wait_matched(p)
            start = time.monotonic()
            b_stop = start + 1.6
            end = b_stop + 6.0
            next_at = {"a": start, "b": start + 0.013}  # staggered; a late publisher does not catch up in a burst
            period = {"a": 1 / 30, "b": 1 / 5}
            while (now := time.monotonic()) < end:
                for c in "ab":
                    if now >= next_at[c] and (c == "a" or now < b_stop):
                        msg = frames[c]
                        msg.header.stamp.sec, msg.header.stamp.nanosec = sent[c] + 1, 0  # a frame counter
                        pubs[c].publish(msg)
                        sent[c] += 1
                        a_while_b += c == "a" and now < b_stop
                        next_at[c] = max(next_at[c] + period[c], now + period[c] / 2)
                # sleep until the next frame is due, not in 1 ms polls: a thread waking 1000 times a second takes
                # the GIL from the node's worker at each of its OpenCV / numpy calls (a convoy: its CPU preprocess
                # took up to 0.8 s, and B's next frame then superseded one still waiting)
                due = min(next_at["a"], next_at["b"] if time.monotonic() < b_stop else end)
                time.sleep(max(0.0, min(due, end) - time.monotonic()))
            def settled():
                c = node.counters()
                return all(c[k].processed + sum(c[k].dropped.values()) >= sent[k] for k in "ab")

            assert wait_until(settled, 10.0)
            assert wait_until(lambda: all(len(got[k].wait(0, 0)) >= node.counters()[k].processed for k in "ab"), 5.0)
            status = {st.name.rsplit(": ", 1)[1]: st for st in node.diagnostics().status}
            counters = node.counters()
        client.destroy_node()
        node.destroy_node()
    # every frame of B processed when it came; A's too, except a frame replaced by A's next one when this shared
    # 2-core machine stalls the worker longer than A's period (counted as superseded, the node's newest-frame rule,
    # nothing to do with B); each camera's own results and header
    # the test's own publishing loop runs in this process beside the node's threads and may fall behind its
    # schedule (B: 8 due in 1.6 s, A: ~230 in 7.6 s; 7 and 125 seen on the 2-core machine): what follows holds
    # for every frame it did send
    assert sent["b"] >= 5 and sent["a"] >= 60
    assert counters["b"].processed == sent["b"] and sum(counters["b"].dropped.values()) == 0
    a = counters["a"]
    # how many of A's frames a stalled worker lets its next one supersede is the machine's load (31 of 181 during a
    # full `make test` on 2 cores, seen failing a 90 % bound), not batching: every wait the planner asks for ends
    # within wait_ms of the oldest frame's arrival (asserted below), shorter than A's period, so a wait for B alone
    # can never let A's next frame arrive first
    assert a.processed + a.dropped["superseded"] == sent["a"] and a.processed > 0, a
    assert wait_ms / 1e3 < 1 / 30
    for c, level in (("a", 200), ("b", 100)):
        msgs = got[c].wait(0, 0)
        stamps = [m.header.stamp.sec for m in msgs]
        assert len(stamps) == counters[c].processed and stamps == sorted(set(stamps))
        assert stamps == list(range(1, sent[c] + 1)) if c == "b" else stamps[-1] <= sent[c]
        assert {m.header.frame_id for m in msgs} == {f"{c}_optical"}
        scores = [m.detections[0].results[0].hypothesis.score for m in msgs]
        assert np.allclose(scores, score_of(level), rtol=0, atol=1e-6), c  # = the frame processed alone
    # batching never waits longer than its parameter: every wait the worker asked for ends within wait_ms of the
    # oldest waiting frame's arrival. These are the node's decisions; the measured batch_wait adds the OS's wake-up
    # of the worker thread, unbounded on a loaded machine (23 ms seen at load 7 on 2 cores, and 1.7 ms for a frame
    # that was asked no wait at all), so no measured time is asserted
    assert planned and max(end for _, _, end, _ in planned) <= wait_ms / 1e3 + 1e-9
    assert all(0 < w <= wait_ms / 1e3 for *_, w in planned)
    # B at 5 Hz: A's frame waits only when B is due within 15 ms: a small share of A's frames (1 in ~6 at most);
    # a frame that waits may be asked again after a wake-up, so frames are counted by their arrival, and against
    # the A frames sent while B ran (how many of those were processed rather than superseded is the machine's load)
    waited = {arrival for asked, arrival, _, _ in planned if asked < b_stop}
    assert len(waited) <= a_while_b / 4, (len(waited), a_while_b)
    # B silent (from 0.5 s after its last frame, > 2 of its periods): A's frames are never asked to wait. Each
    # processed frame consulted the planner, so the claim needs a sample, not a throughput: how many of A's ~165
    # frames in those 5.5 s the worker processed is the machine's load (about 160 idle, 100 during a full
    # `make test` in CI, which failed a bound of 120); 10 is a third of a second of them
    silent = rec.of("a", since=b_stop + 0.5)
    assert len(silent) >= 10 and not [row for row in planned if row[0] >= b_stop + 0.5], len(silent)
    # batches of 2 happened (B's frames rode with A's when both were there) and both sizes are reported
    sizes = {k: v for k, v in ((kv.key, kv.value) for kv in status["a"].values) if k.startswith("batch.")}
    assert int(sizes.get("batch.size.1", 0)) > 0 and "batch.frames_per_batch" in sizes
    # B's silence is reported; A is fine
    assert status["b"].level == DiagnosticStatus.WARN and "no frames received for" in status["b"].message
    # A is fine: OK, unless the machine's load let more than 10 % of a period's A frames be superseded (asserted
    # above to be A's only drops; 7 seen at load 7 on 2 cores): then WARN on those drops, never on its input
    assert status["a"].level == DiagnosticStatus.OK or (
        status["a"].level == DiagnosticStatus.WARN and "frames dropped" in status["a"].message
        and set(k for k, v in a.dropped.items() if v) == {"superseded"}), status["a"].message


class _GatedBatches:
    """A real CPU pipeline whose ``process_batch`` calls each wait for one :meth:`release` (so the cameras' next
    frames queue up meanwhile and go as one batch); records every batch's size; ``fail``: the next batches of two
    frames raise an engine error."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.gate = threading.Semaphore(0)
        self.sizes: list[int] = []
        self.entered = 0  # process_batch calls begun: the worker has taken their frames out of the cameras' slots
        self.fail = 0
        self.fail_at: set[int] = set()  # indices (0-based, in order) of the batches of two frames that raise
        self.pairs = 0
        self.name, self.input_spec, self.head, self.max_batch = inner.name, inner.input_spec, inner.head, inner.max_batch

    @property
    def last_timings(self):
        return self.inner.last_timings

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self.gate.release()

    def process_batch(self, frames):
        self.entered += 1
        self.gate.acquire(timeout=10.0)
        self.sizes.append(len(frames))
        if len(frames) == 2:
            self.pairs += 1
            if self.pairs - 1 in self.fail_at:
                raise RuntimeError("engine exploded")
        if self.fail and len(frames) == 2:
            self.fail -= 1
            raise RuntimeError("engine exploded")
        return self.inner.process_batch(frames)

    def set_postprocess(self, params):
        self.inner.set_postprocess(params)

    def close(self):
        self.inner.close()


def _gated(model):
    values = config.validate({"backend": "cpu", "model.path": str(model), "model.pad_value": 0.0,
                              "score_threshold": 0.05, "engine.max_batch": 2, "cameras": ["a", "b"]})
    return _GatedBatches(make_pipeline(values, log=lambda m: None))


def _run_pairs(model, pipe, pairs, **params):
    """Publish ``pairs`` of (a frame, b frame) into a node on ``pipe``, so that each pair goes as one batch: a first
    frame of a (stamp 0) holds the worker in the pipeline; each pair is published while the worker is held, then
    one batch is released. Returns (counters, detections per camera, diagnostics)."""
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, pipeline=pipe, parameter_overrides=overrides(
            model__path=str(model), score_threshold=0.05, input__qos="reliable", input__depth=1, cameras=["a", "b"],
            **params))
        client = Node("client", context=ctx, namespace=ns)
        pubs = {c: client.create_publisher(Image, f"{c}/image_raw", make_qos("reliable", 1)) for c in "ab"}
        got = {c: Collector(client, Detection2DArray, f"{c}/detections") for c in "ab"}
        with spinning(ctx, node, client):
            for p in pubs.values():
                wait_matched(p)
            pubs["a"].publish(image_msg(grey(10), 0))
            # the worker holds a's first frame in the pipeline: only then can the pairs queue up behind it (a pair
            # published before the worker took that frame would supersede it in a's slot)
            assert wait_until(lambda: pipe.entered == 1 and len(pipe.sizes) == 0, 5.0)
            for k, (fa, fb) in enumerate(pairs, start=1):
                pubs["a"].publish(fa)
                pubs["b"].publish(fb)
                assert wait_until(lambda: node.counters()["a"].received == k + 1 and node.counters()["b"].received == k,
                                  5.0)
                pipe.release()  # the held batch completes; the worker takes this pair as the next batch
                # and has taken this pair out of the slots (the next pair must not supersede it there)
                assert wait_until(lambda: len(pipe.sizes) == k and pipe.entered == k + 1, 5.0)
            pipe.release()

            def settled():
                c = node.counters()
                return all(c[k].processed + sum(c[k].dropped.values()) >= c[k].received for k in "ab")

            assert wait_until(settled, 5.0)
            counters = node.counters()
            array = node.diagnostics()
        client.destroy_node()
        node.destroy_node()
    return counters, {c: got[c].wait(0, 0) for c in "ab"}, array


def test_input_fault_in_one_slot_drops_that_slot_only(model):
    pipe = _gated(model)
    bad = image_msg(grey(50), 7, frame_id="a_optical")
    bad.step = 10  # shorter than a row: an input fault of camera a only
    pairs = [(image_msg(grey(200), 1), image_msg(grey(100), 1)), (bad, image_msg(grey(100), 7, frame_id="b_optical"))]
    counters, got, _ = _run_pairs(model, pipe, pairs)
    assert pipe.sizes == [1, 2, 2]  # a's first frame, then each pair as one batch
    assert counters["a"].dropped["bad_step"] == 1 and counters["a"].dropped["engine_error"] == 0
    assert counters["b"].processed == 2 and sum(counters["b"].dropped.values()) == 0
    assert [m.header.stamp.sec for m in got["b"]] == [1, 7]
    assert got["b"][-1].detections[0].results[0].hypothesis.score == pytest.approx(score_of(100), abs=1e-6)


def test_engine_failure_drops_the_batch_and_counts_once(model):
    """Two failed batches of two frames: four frames dropped as engine_error, but two failures toward
    engine.max_consecutive_failures = 3, so the node keeps running (counted per frame, 4 >= 3 would stop it)."""
    pipe = _gated(model)
    pipe.fail = 2
    pairs = [(image_msg(grey(200), k), image_msg(grey(100), k)) for k in (1, 2, 3)]
    counters, got, array = _run_pairs(model, pipe, pairs, engine__max_consecutive_failures=3)
    failed = sum(counters[c].dropped["engine_error"] for c in "ab")
    assert pipe.sizes == [1, 2, 2, 2] and failed == 4
    assert counters["a"].processed == 2 and counters["b"].processed == 1  # the last pair went through: not fatal
    assert all(st.level != DiagnosticStatus.ERROR or "fatal" not in st.message for st in array.status)


def test_a_good_batch_ends_the_run_of_engine_failures(model):
    """Issue 33: batches fail, fail, pass, fail, fail, pass with engine.max_consecutive_failures = 3. The good batch
    in the middle ends the run of failures (the batch path's ``faults.success()``), so no run reaches 3 and the node
    processes the last pair; counted without the reset, the fourth failure would be fatal."""
    pipe = _gated(model)
    pipe.fail_at = {0, 1, 3, 4}
    pairs = [(image_msg(grey(200), k), image_msg(grey(100), k)) for k in range(1, 7)]
    counters, got, array = _run_pairs(model, pipe, pairs, engine__max_consecutive_failures=3)
    assert pipe.sizes == [1, 2, 2, 2, 2, 2, 2]
    assert counters["a"].dropped["engine_error"] == 4 and counters["b"].dropped["engine_error"] == 4
    assert counters["a"].processed == 3 and counters["b"].processed == 2  # a's first frame, pairs 3 and 6
    assert [m.header.stamp.sec for m in got["b"]] == [3, 6]
    assert all(st.level != DiagnosticStatus.ERROR or "fatal" not in st.message for st in array.status)
