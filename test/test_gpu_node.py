"""The DetectorNode on the GPU path (``backend: cuda``) against the CPU path (``backend: cpu``), over real DDS.

Issue 3 acceptance: the node replays the real street bags from ../shared (vtest_compressed_mcap and
vtest_raw_sqlite3) with YOLOX-nano and publishes the same detections on both paths: per frame the same header,
the same classes, boxes within 0.5 px and scores within 1e-3. Both replays run in this process on the same machine,
each node in its own private rclpy context and namespace, fed in lock step (one result per frame before the next
frame is published), so the comparison does not depend on machine load.

Skips with the reason where cuda-python/a GPU, rclpy/vision_msgs, onnxruntime or the shared data are absent.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from gpu_support import requires_gpu, torch_reason

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed (the CPU path is the reference)")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.settings.config import SCHEMA  # noqa: E402
from vrt_ros.tools.replay import BagPlayer  # noqa: E402

pytestmark = [*requires_gpu, pytest.mark.ros, pytest.mark.slow]

needs_torch = pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")

BOX_TOL_PX = 0.5  # issue 3: boxes within 0.5 px
SCORE_TOL = 1e-3  # issue 3: scores within 1e-3
# Compressed bag with the GPU JPEG decode (issue 14): nvImageCodec's pixels differ from OpenCV's by up to 1 LSB
# (test_gpu_jpeg.py), which moves boxes and scores a little more than the raw frames' arithmetic alone.
JPEG_BOX_TOL_PX = 1.0
JPEG_SCORE_TOL = 5e-3
RESULT_TIMEOUT_S = 60.0  # per frame; the GPU node's first frame includes engine warm-up


@dataclass
class Frame:
    """One published ``Detection2DArray`` as arrays: boxes (N, 4) xyxy float64 source pixels, scores (N,), names."""

    stamp: tuple[int, int]
    frame_id: str
    boxes: np.ndarray
    scores: np.ndarray
    names: list[str]


def _to_frame(msg: Detection2DArray) -> Frame:
    boxes, scores, names = [], [], []
    for d in msg.detections:
        c, w, h = d.bbox.center.position, d.bbox.size_x, d.bbox.size_y
        boxes.append((c.x - w / 2, c.y - h / 2, c.x + w / 2, c.y + h / 2))
        scores.append(d.results[0].hypothesis.score)
        names.append(d.results[0].hypothesis.class_id)
    return Frame(
        (msg.header.stamp.sec, msg.header.stamp.nanosec),
        msg.header.frame_id,
        np.asarray(boxes, np.float64).reshape(-1, 4),
        np.asarray(scores, np.float64),
        names,
    )


class _Results:
    """Collects the node's ``detections`` (reliable, deep queue) and lets the player wait for the n-th one."""

    def __init__(self, client: Node, topic: str) -> None:
        self.frames: list[Frame] = []
        self._cond = threading.Condition()
        client.create_subscription(Detection2DArray, topic, self._on, make_qos("reliable", 100))

    def _on(self, msg: Detection2DArray) -> None:
        with self._cond:
            self.frames.append(_to_frame(msg))
            self._cond.notify_all()

    def wait(self, n: int, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.frames) >= n, timeout_s)


def replay_detections(shared_dir: Path, bag: str, backend: str) -> tuple[list[Frame], str, dict]:
    """Replay ``bag`` into a fresh DetectorNode with ``backend`` and return what it published, frame by frame.

    Returns:
        ``(frames, pipeline_name, counters)``: one :class:`Frame` per published message in order, the pipeline's
        name (e.g. "cuda/torch"), and the node's counters for the camera (received/processed/dropped).
    """
    path = shared_dir / "data" / "bags" / bag
    ns = unique_namespace()
    with private_context() as ctx:
        client = Node("client", context=ctx, namespace=ns)
        with Reader(path) as reader:
            conn = reader.connections[0]
            topic, compressed = conn.topic, conn.msgtype.endswith("CompressedImage")
        params = {
            "backend": backend,
            "model.path": str(shared_dir / "models" / "yolox_nano.onnx"),
            "model.labels": str(shared_dir / "models" / "coco80.names"),
            "input.qos": "reliable",
            "input.depth": 10,
            "input.compressed": compressed,
        }
        node = DetectorNode(
            context=ctx, namespace=ns, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
        )
        results = _Results(client, "camera/detections")
        sent = [0]

        def lock_step(_topic, _stamp_ns, _raw) -> None:
            sent[0] += 1
            assert results.wait(sent[0], RESULT_TIMEOUT_S), f"{backend}: no result for frame {sent[0]}"

        with spinning(ctx, node, client):
            with BagPlayer(client, path, remap={topic: f"{ns}{topic}"}) as player:
                assert player.wait_for_subscribers(1, 10.0), "the node did not subscribe to the replayed topic"
                player.play(rate=0.0, on_message=lock_step)
                n_in = player.message_count
            results.wait(n_in, RESULT_TIMEOUT_S)
            counters = node.counters()["camera"]
            name = str(getattr(node.pipeline, "name", type(node.pipeline).__name__))
            decode = dict(getattr(node.pipeline, "decode_stats", {}))
        client.destroy_node()
        node.destroy_node()
    assert counters.received == n_in and counters.processed == n_in and not counters.dropped, (backend, counters)
    assert len(results.frames) == n_in, f"{backend}: {len(results.frames)} results for {n_in} frames"
    return list(results.frames), name, {"received": counters.received, "processed": counters.processed,
                                        "decode": decode}


def _match(gpu: Frame, cpu: Frame, threshold: float, box_tol: float = BOX_TOL_PX,
           score_tol: float = SCORE_TOL) -> tuple[float, float, int, list[str]]:
    """Pair detections by class and box (greedy, smallest max-abs corner difference); compare boxes and scores.

    A detection without a partner is allowed only when its score is within :data:`SCORE_TOL` of the threshold
    (the two paths may legitimately disagree on a box sitting exactly on it); anything else is a failure.

    Returns:
        ``(max box error px, max score error, matched pairs, problems)``.
    """
    problems: list[str] = []
    free = set(range(len(gpu.names)))
    box_err = score_err = 0.0
    pairs = 0
    for i in np.argsort(-cpu.scores, kind="stable"):
        best, best_err = None, np.inf
        for j in free:
            if gpu.names[j] != cpu.names[i]:
                continue
            err = float(np.abs(gpu.boxes[j] - cpu.boxes[i]).max())
            if err < best_err:
                best, best_err = j, err
        if best is None or best_err > box_tol * 4:
            if abs(cpu.scores[i] - threshold) > score_tol:
                problems.append(f"CPU {cpu.names[i]} {cpu.scores[i]:.4f} {np.round(cpu.boxes[i], 1)} not on the GPU")
            continue
        free.discard(best)
        pairs += 1
        box_err = max(box_err, best_err)
        score_err = max(score_err, float(abs(gpu.scores[best] - cpu.scores[i])))
    for j in sorted(free):
        if abs(gpu.scores[j] - threshold) > score_tol:
            problems.append(f"GPU {gpu.names[j]} {gpu.scores[j]:.4f} {np.round(gpu.boxes[j], 1)} not on the CPU")
    if box_err > box_tol:
        problems.append(f"box error {box_err:.3g} px > {box_tol}")
    if score_err > score_tol:
        problems.append(f"score error {score_err:.3g} > {score_tol}")
    return box_err, score_err, pairs, problems


@needs_torch
@pytest.mark.parametrize("bag", ["vtest_compressed_mcap", "vtest_raw_sqlite3"])
def test_gpu_node_replays_bag_with_cpu_detections(shared_dir, bag):
    """Same headers, classes, boxes (<= 0.5 px) and scores (<= 1e-3) from ``backend: cuda`` as from ``backend: cpu``;
    the compressed bag decoded on the GPU (nvImageCodec, every frame): boxes <= 1 px, scores <= 5e-3."""
    threshold = float(SCHEMA["score_threshold"].default)  # the node runs with its default threshold
    cpu, cpu_name, cpu_counts = replay_detections(shared_dir, bag, "cpu")
    gpu, gpu_name, gpu_counts = replay_detections(shared_dir, bag, "cuda")
    print(f"\n{bag}: {len(cpu)} frames; CPU pipeline {cpu_name} {cpu_counts}; GPU pipeline {gpu_name} {gpu_counts}")
    assert gpu_name.startswith("cuda"), f"backend cuda built pipeline {gpu_name!r}"
    box_tol, score_tol = BOX_TOL_PX, SCORE_TOL
    if bag == "vtest_compressed_mcap" and gpu_counts["decode"].get("gpu"):  # decoded by nvImageCodec on the GPU
        assert gpu_counts["decode"] == {"gpu": len(gpu)}, gpu_counts  # every frame, no CPU fallback
        box_tol, score_tol = JPEG_BOX_TOL_PX, JPEG_SCORE_TOL
    elif bag == "vtest_compressed_mcap":
        from vrt_ros.gpu.jpeg import nvimgcodec_unavailable_reason

        assert nvimgcodec_unavailable_reason() is not None, f"nvImageCodec importable, yet no GPU decode: {gpu_counts}"
    assert [(f.stamp, f.frame_id) for f in gpu] == [(f.stamp, f.frame_id) for f in cpu]
    failures, worst_box, worst_score, total = [], 0.0, 0.0, 0
    for k, (g, c) in enumerate(zip(gpu, cpu)):
        box_err, score_err, pairs, problems = _match(g, c, threshold, box_tol, score_tol)
        worst_box, worst_score, total = max(worst_box, box_err), max(worst_score, score_err), total + len(c.names)
        classes = ",".join(f"{n}x{c.names.count(n)}" for n in sorted(set(c.names)))
        print(f"  frame {k:2d}: cpu {len(c.names):2d} gpu {len(g.names):2d} matched {pairs:2d}  "
              f"max box err {box_err:.2e} px  score err {score_err:.2e}  [{classes}]"
              + ("  " + "; ".join(problems) if problems else ""))
        if problems:
            failures.append(f"frame {k}: " + "; ".join(problems))
    print(f"{bag}: {total} CPU detections over {len(cpu)} frames; worst box error {worst_box:.2e} px, "
          f"worst score error {worst_score:.2e}; {len(failures)} frames differ")
    assert total > 0, "the CPU path found nothing: the comparison would be empty"
    assert not failures, "\n".join(failures)

