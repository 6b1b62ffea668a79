"""Parameter schema: the one place that knows every parameter, its type, range, default and meaning.

Used by the node (to declare ROS parameters with descriptors), by the YAML validation test over ``config/``, and
by the README's parameter table (``python -m vrt_ros.settings.config --markdown``). Parameter files use the ROS 2 layout
``/**: ros__parameters: {...}`` (or a node name instead of ``/**``); nested mappings are the dotted names below.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from vrt_ros.errors import ConfigError
from vrt_ros.heads import AUTO, HEADS
from vrt_ros.settings import param_files
from vrt_ros.types import PostprocessParams, TrackerParams

#: ``model.head`` values: ``auto`` and every registered head (``vrt_ros.heads.HEADS``, the one registry).
HEAD_NAMES = (AUTO, *HEADS)
QOS_NAMES = ("sensor_data", "default", "reliable", "best_effort")


@dataclass(frozen=True)
class ParamSpec:
    """One parameter.

    Attributes:
        name: dotted ROS parameter name.
        type: "bool", "int", "double", "string", "int_array", "double_array" or "string_array".
        default: default value (of ``type``).
        description: one line for users (shown by ``ros2 param describe`` and the README table).
        read_only: fixed after start-up (model, engine, input, backend).
        min, max: inclusive numeric range (ints and doubles; for arrays, of each element).
        choices: allowed strings, when the set is closed.
        length: allowed array lengths, when constrained.
    """

    name: str
    type: str
    default: Any
    description: str
    read_only: bool = False
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    length: tuple[int, ...] | None = None


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("backend", "string", "auto", "auto: GPU when cuda-python finds a device and a GPU engine exists, else CPU; cuda; cpu (ONNX Runtime)", True, choices=("auto", "cuda", "cpu")),
    ParamSpec("model.path", "string", "", "Model file: .onnx (all backends) or a serialized TensorRT engine (.engine/.plan)", True),
    ParamSpec("model.head", "string", "auto", "Output layout: auto picks from the output shapes and fails when unsure", True, choices=HEAD_NAMES),
    ParamSpec("model.labels", "string", "", "Class names file, one per line in index order; empty: class ids are published as decimal indices", True),
    ParamSpec("model.input_width", "int", 0, "Engine input width in pixels; 0: from the model (required for dynamic inputs)", True, 0, 8192),
    ParamSpec("model.input_height", "int", 0, "Engine input height in pixels; 0: from the model (required for dynamic inputs)", True, 0, 8192),
    ParamSpec("model.channel_order", "string", "", "Tensor channel order, bgr or rgb; empty: the head's default", True, choices=("", "bgr", "rgb")),
    ParamSpec("model.mean", "double_array", [], "Per-channel mean subtracted, pixel units 0..255; empty: the head's default", True, -255.0, 255.0, length=(0, 3)),
    ParamSpec("model.std", "double_array", [], "Per-channel divisor, pixel units; empty: the head's default", True, 1e-6, 1e6, length=(0, 3)),
    ParamSpec("model.pad_value", "double", -1.0, "Letterbox fill in pixel units 0..255; negative: the head's default", True, -1.0, 255.0),
    ParamSpec("model.align", "string", "", "Letterbox placement, top_left or center; empty: the head's default", True, choices=("", "top_left", "center")),
    ParamSpec("model.resize", "string", "", "Fit of the frame into the engine input: letterbox (keep aspect ratio, pad) or stretch (fill; DETR-family models); empty: the head's default (stretch for detr)", True, choices=("", "letterbox", "stretch")),
    ParamSpec("model.score_activation", "string", "", "What turns the model's class outputs into scores: sigmoid, softmax (last class = no object) or none (already probabilities); empty: the head's default (detr: sigmoid for logits [1,Q,C], none for Ultralytics [1,Q,4+C]; other heads accept only none)", True, choices=("", "sigmoid", "softmax", "none")),
    ParamSpec("score_threshold", "double", 0.35, "Minimum detection score; above 1 nothing is published", False, 0.0, 2.0),
    ParamSpec("nms_iou", "double", 0.45, "IoU above which NMS suppresses the lower-scored box", False, 0.0, 1.0),
    ParamSpec("class_agnostic_nms", "bool", False, "Suppress overlapping boxes across classes instead of per class"),
    ParamSpec("max_detections", "int", 100, "At most this many detections per frame, highest scores first", False, 1, 1000),
    ParamSpec("mask_threshold", "double", 0.5, "Segmentation heads: a mask pixel is on where sigmoid(logit) > this", False, 0.0, 1.0),
    ParamSpec("keypoint_threshold", "double", 0.5, "Keypoints below this confidence are not drawn on the debug image (all are published)", False, 0.0, 1.0),
    ParamSpec("cameras", "string_array", ["camera"], "Camera namespaces, relative: <cam>/image_raw in, <cam>/detections out", True),
    ParamSpec("input.qos", "string", "sensor_data", "Input QoS preset: sensor_data (best effort), default, reliable, best_effort", True, choices=QOS_NAMES),
    ParamSpec("input.depth", "int", 5, "Input queue depth (history keep-last; 5 as rclpy's sensor-data profile)", True, 1, 100),
    ParamSpec("input.compressed", "bool", False, "Every camera subscribes to <cam>/image_raw/compressed (sensor_msgs/CompressedImage) instead of raw images; for a mix, leave it false and list the compressed cameras in input.compressed_cameras", True),
    ParamSpec("input.compressed_cameras", "string_array", [], "Cameras (of 'cameras') subscribed to <cam>/image_raw/compressed (sensor_msgs/CompressedImage); the others take <cam>/image_raw (sensor_msgs/Image). Empty: as input.compressed says for every camera; a list with input.compressed true is an error", True),
    ParamSpec("input.mapped_memory", "bool", False, "GPU path on an integrated GPU (Jetson; the device reports integrated memory): frames go to mapped pinned memory the kernels read in place, no H2D copy; ignored on discrete GPUs", True),
    ParamSpec("input.raw_subscription", "bool", False, "Read frames from their serialized bytes (raw=True subscription, vrt_ros.ros.cdr_read) instead of rclpy's Python message: one copy of the pixels fewer", True),
    ParamSpec("input.max_age_ms", "double", 0.0, "Drop frames whose header stamp is older than this, ms; 0: never drop by age", False, 0.0, 600000.0),
    ParamSpec("input.batch_wait_ms", "double", 0.0, "Longest a waiting frame is held for other cameras' frames to join its batch, ms; 0: take the frames that are there", True, 0.0, 1000.0),
    ParamSpec("engine.max_batch", "int", 0, "Most frames (of the node's cameras) run through the engine in one call; 0: the model's fixed batch, or for a dynamic-batch model the number of cameras (GPU path) or 1 (CPU path); a model fixed at batch 1 runs frame by frame", True, 0, 64),
    ParamSpec("engine.threads", "int", 0, "ONNX Runtime intra-op threads on the CPU path; 0: its default", True, 0, 256),
    ParamSpec("engine.device", "int", 0, "CUDA device index on the GPU path", True, 0, 63),
    ParamSpec("engine.frame_buffers_mb", "int", 1024, "GPU path: most device + pinned memory, MiB, the buffers kept per frame size (staging of raw frames, label images of masks) hold together; the least recently used are freed beyond it, and a frame whose buffers do not fit beside its batch's is dropped (frame_too_large)", True, 16, 1048576),
    ParamSpec("engine.max_consecutive_failures", "int", 10, "Engine failures in a row after which the node logs an ERROR, reports ERROR on /diagnostics and exits non-zero (a CUDA error that poisons the context always does); 0: never for this count", True, 0, 1000000),
    ParamSpec("engine.cache_dir", "string", "", "Kernel and engine cache folder; empty: $XDG_CACHE_HOME/vrt_ros", True),
    ParamSpec("engine.fp16", "bool", False, "FP16 engine with FP32 inputs/outputs: TensorRT builds with FP16 (TensorRT for RTX and 11: the ONNX model converted to FP16 first, needs onnxconverter-common); the torch engine runs the model in half precision", True),
    ParamSpec("engine.tensorrt_flavour", "string", "auto", "TensorRT flavour: auto (tensorrt, else TensorRT for RTX where it runs on this GPU, else the torch engine); tensorrt; tensorrt_rtx. A forced flavour that cannot run here fails at start-up", True, choices=("auto", "tensorrt", "tensorrt_rtx")),
    ParamSpec("engine.workspace_mb", "int", 1024, "TensorRT builder workspace limit, MiB", True, 16, 1048576),
    ParamSpec("engine.profile_min", "int_array", [], "TensorRT optimisation profile minimum [width, height] for dynamic inputs, pixels; []: the input size", True, 1, 8192, length=(0, 2)),
    ParamSpec("engine.profile_max", "int_array", [], "TensorRT optimisation profile maximum [width, height] for dynamic inputs, pixels; []: the input size", True, 1, 8192, length=(0, 2)),
    ParamSpec("engine.int8_calibration_cache", "string", "", "TensorRT INT8 calibration cache file; empty: no INT8", True),
    ParamSpec("depth.enabled", "bool", False, "3D detections from a registered depth image: subscribe to <cam>/<depth.topic> and <cam>/<depth.camera_info_topic>, publish <cam>/detections_3d (vision_msgs/Detection3DArray)", True),
    ParamSpec("depth.cameras", "string_array", [], "Cameras (of 'cameras') with depth; empty: every camera", True),
    ParamSpec("depth.topic", "string", "depth/image_raw", "Depth image topic relative to the camera (16UC1 mm or 32FC1 m, registered to the colour image), e.g. aligned_depth_to_color/image_raw; no leading '/' (remap an absolute topic)", True),
    ParamSpec("depth.camera_info_topic", "string", "camera_info", "The colour camera's sensor_msgs/CameraInfo topic relative to the camera; no leading '/' (remap an absolute topic)", True),
    ParamSpec("depth.max_skew_ms", "double", 15.0, "Largest |depth stamp - colour stamp| that pairs, ms; 0: equal stamps only", True, 0.0, 1000.0),
    ParamSpec("depth.wait_ms", "double", 0.0, "How long a colour frame may wait for its depth frame, ms; 0: pair with what has arrived", True, 0.0, 1000.0),
    ParamSpec("depth.ring_size", "int", 8, "Recent depth frames kept per camera for pairing", True, 1, 100),
    ParamSpec("depth.range_m", "double_array", [0.1, 20.0], "[near, far] valid depth, metres; outside it (and 0, NaN) depth is ignored", True, 0.0, 1000.0, length=(2,)),
    ParamSpec("depth.percentile", "double", 50.0, "Nearest-rank percentile of the valid depth inside a box that places its centre; 50: the median", True, 1.0, 100.0),
    ParamSpec("depth.rectified", "bool", False, "The colour image (and the depth registered to it) is rectified: rays through camera_info P; false: raw, undistorted with K, D and distortion_model", True),
    ParamSpec("debug_image", "bool", False, "Publish <cam>/debug_image (drawn only while someone subscribes)", True),
    ParamSpec("diagnostics_period_s", "double", 1.0, "Period of /diagnostics, seconds", True, 0.1, 60.0),
    ParamSpec("tracking.enabled", "bool", False, "Track objects per camera (ByteTrack association over a Kalman filter): Detection2D.id becomes the track id, empty for a detection not (yet) on a confirmed track", True),
    ParamSpec("tracking.high_score", "double", 0.5, "Detections scoring at least this enter the first association and start new tracks", True, 0.0, 1.0),
    ParamSpec("tracking.low_score", "double", 0.1, "Detections from this up to tracking.high_score enter only the second association (they keep tracks alive); below score_threshold they are not published, and the pipeline keeps detections down to min(score_threshold, this)", True, 0.0, 1.0),
    ParamSpec("tracking.min_hits", "int", 2, "Matched frames in a row (the first included) after which a new track is confirmed and its id published", True, 1, 100),
    ParamSpec("tracking.max_lost_s", "double", 1.5, "Seconds a track survives without a match; a stamp gap larger than this (or any stamp going back) resets the camera's tracks", True, 0.01, 3600.0),
    ParamSpec("tracking.min_iou", "double", 0.2, "Minimum IoU of a track's predicted box and a high-score detection in the first association", True, 0.01, 1.0),
)

SCHEMA: dict[str, ParamSpec] = {p.name: p for p in PARAMS}


def defaults() -> dict[str, Any]:
    """All parameters at their defaults (fresh copies of list values)."""
    return {p.name: (list(p.default) if isinstance(p.default, list) else p.default) for p in PARAMS}


def _type_error(spec: ParamSpec, value: Any, source: str) -> ConfigError:
    return ConfigError(f"{source}: parameter '{spec.name}' must be {spec.type}, got {type(value).__name__} {value!r}")


def check_value(name: str, value: Any, source: str = "parameters") -> Any:
    """Validate one value against the schema and return it normalised (ints accepted for doubles).

    Raises:
        ConfigError: unknown name, wrong type, out-of-range or not-allowed value; the message names the parameter
            and ``source`` (a file path or "parameters").
    """
    spec = SCHEMA.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, SCHEMA, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(sorted(SCHEMA))}"
        raise ConfigError(f"{source}: unknown parameter '{name}' ({hint})")
    t = spec.type
    if t == "bool":
        if not isinstance(value, bool):
            raise _type_error(spec, value, source)
    elif t == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(spec, value, source)
    elif t == "double":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _type_error(spec, value, source)
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{source}: parameter '{name}' must be finite, got {value!r}")
    elif t == "string":
        if not isinstance(value, str):
            raise _type_error(spec, value, source)
    elif t in ("int_array", "double_array", "string_array"):
        if not isinstance(value, (list, tuple)):
            raise _type_error(spec, value, source)
        if t == "string_array":
            item_ok = lambda v: isinstance(v, str)  # noqa: E731
        elif t == "int_array":
            item_ok = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
        else:
            item_ok = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)  # noqa: E731
        bad = [v for v in value if not item_ok(v)]
        if bad:
            raise ConfigError(f"{source}: parameter '{name}' must be {t}, got element {bad[0]!r}")
        value = [float(v) for v in value] if t == "double_array" else list(value)
        if spec.length is not None and len(value) not in spec.length:
            raise ConfigError(f"{source}: parameter '{name}' must have {' or '.join(map(str, spec.length))} elements, got {len(value)}")
    else:  # pragma: no cover - schema bug
        raise AssertionError(t)
    numbers = value if t in ("int_array", "double_array") else [value] if t in ("int", "double") else []
    for v in numbers:
        if (spec.min is not None and v < spec.min) or (spec.max is not None and v > spec.max):
            raise ConfigError(f"{source}: parameter '{name}' = {v!r} is outside [{spec.min}, {spec.max}]")
    if spec.choices is not None and value not in spec.choices:
        raise ConfigError(f"{source}: parameter '{name}' = {value!r} is not one of {list(spec.choices)}")
    if name == "cameras" and (not value or any(not c or c.startswith("/") for c in value)):
        raise ConfigError(f"{source}: parameter 'cameras' must list relative namespaces (no leading '/'), got {value!r}")
    if name == "depth.range_m" and value[0] >= value[1]:
        raise ConfigError(f"{source}: parameter 'depth.range_m' must be [near, far] with near < far, got {value!r}")
    if name == "cameras" and len(set(value)) != len(value):
        raise ConfigError(f"{source}: parameter 'cameras' lists a camera twice: {value!r}")
    bad_names = [c for c in value if not _RELATIVE_NAME.match(c)] if name == "cameras" else []
    if bad_names:
        raise ConfigError(f"{source}: parameter 'cameras': {bad_names[0]!r} is not a valid relative ROS name (tokens of "
                          f"letters, digits and '_', not starting with a digit, separated by '/'), got {value!r}")
    return value


#: A relative ROS name, as rcl's topic-name validation accepts it (rcl/validate_topic_name.h: alphanumerics and '_'
#: in tokens separated by '/', no token starting with a digit, no empty token), without substitutions (``{node}``, ``~``).
_RELATIVE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:/[A-Za-z_][A-Za-z0-9_]*)*\Z")


DEPTH_TOPICS = ("depth.topic", "depth.camera_info_topic")  # read as <cam>/<value>: relative names only


def validate(values: Mapping[str, Any], source: str = "parameters") -> dict[str, Any]:
    """Validate a mapping of dotted names to values; return defaults updated with the normalised values.

    The one place where parameter values meet the schema, for the node (its rcl overrides) and for parameter files
    (:func:`load_params_file`). A value of ``None`` is "not set", which is what rcl makes of an empty list ``[]``
    in a parameter file (:data:`vrt_ros.settings.param_files.NOT_SET`): the parameter keeps its schema default.

    Across parameters: ``input.compressed_cameras`` (and, with ``depth.enabled``, ``depth.cameras``) must name
    cameras of ``cameras``, each once; ``input.compressed_cameras`` must be empty when ``input.compressed`` is true (true already means every camera; a list beside it is a contradiction, refused
    rather than one of the two silently ignored); with ``depth.enabled``, ``depth.topic`` and ``depth.camera_info_topic``
    must be relative (each camera's own); ``tracking.low_score`` must not exceed ``tracking.high_score``.

    Raises:
        ConfigError: as :func:`check_value`, or a cross-parameter rule above broken (naming the parameters); every
            bad entry is reported, one per line.
    """
    out = defaults()
    errors = []
    for name, value in values.items():
        if value is None and name in SCHEMA:
            continue
        try:
            out[name] = check_value(name, value, source)
        except ConfigError as e:
            errors.append(str(e))
    if not errors:
        errors += _transport_errors(out, source)
    if not errors and out["depth.enabled"]:  # the node builds its depth inputs (and this check) only then
        errors += _subset_errors(list(out["depth.cameras"]), "depth.cameras", list(out["cameras"]), source)
        errors += [f"{source}: parameter '{n}' = {out[n]!r} is absolute, but it is read relative to each camera "
                   f"(<cam>/{out[n].lstrip('/')}): drop the leading '/'" for n in DEPTH_TOPICS if out[n].startswith("/")]
    if not errors and out["tracking.low_score"] > out["tracking.high_score"]:
        errors.append(f"{source}: parameter 'tracking.low_score' = {out['tracking.low_score']!r} must not exceed "
                      f"'tracking.high_score' = {out['tracking.high_score']!r}")
    if errors:
        raise ConfigError("\n".join(errors))
    return out


def _transport_errors(values: Mapping[str, Any], source: str) -> list[str]:
    """What is wrong with ``input.compressed_cameras`` given ``cameras`` and ``input.compressed`` (one line each)."""
    listed = list(values["input.compressed_cameras"])
    if not listed:
        return []
    errors = _subset_errors(listed, "input.compressed_cameras", list(values["cameras"]), source)
    if values["input.compressed"]:
        errors.append(f"{source}: parameter 'input.compressed_cameras' = {listed!r} with 'input.compressed' true: true "
                      "already makes every camera compressed; for a mix set 'input.compressed' false and list the "
                      "compressed cameras, or leave the list empty")
    return errors


def _subset_errors(listed: list[str], name: str, cameras: list[str], source: str) -> list[str]:
    """What is wrong with the camera list ``name`` (cameras of ``cameras``, each once), one line each."""
    unknown = [c for c in listed if c not in cameras]
    errors = [f"{source}: parameter '{name}' names {unknown}, not in 'cameras' {cameras}"] if unknown else []
    if len(set(listed)) != len(listed):
        errors.append(f"{source}: parameter '{name}' lists a camera twice: {listed!r}")
    return errors


def camera_transports(values: Mapping[str, Any]) -> dict[str, str]:
    """Each camera's transport from validated parameter values, in ``cameras`` order.

    ``"compressed"`` (``<cam>/image_raw/compressed``, ``sensor_msgs/CompressedImage``) for every camera when
    ``input.compressed`` is true, else for those listed in ``input.compressed_cameras``; ``"raw"``
    (``<cam>/image_raw``, ``sensor_msgs/Image``) for the others. Missing keys read as their defaults (a partial
    mapping, e.g. a backend built by a test, names no compressed camera unless ``input.compressed`` says so).
    """
    cameras = list(values.get("cameras", SCHEMA["cameras"].default))
    every = bool(values.get("input.compressed", False))
    listed = set(values.get("input.compressed_cameras") or ())
    return {c: "compressed" if every or c in listed else "raw" for c in cameras}


def any_compressed(values: Mapping[str, Any]) -> bool:
    """True when at least one camera takes compressed frames (:func:`camera_transports`): the GPU path starts its
    JPEG decoder at start-up, the node reports decode counts on ``/diagnostics``."""
    return "compressed" in camera_transports(values).values()


def parse_params_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a ROS 2 parameter YAML into ``{node key: {dotted_name: value}}`` without validating values.

    Values are typed as rcl types them (:mod:`vrt_ros.settings.param_files`); keys are normalised as rclpy matches them
    (``/**``, ``/robot1/front_detector``).

    Raises:
        ConfigError: missing or unreadable file, bad YAML, or not the ``<node>: ros__parameters:`` layout.
    """
    return {s.key: s.values for s in param_files.read_all([path])}


#: The node name ``detector_node`` uses without ``--names`` (vrt_ros.ros.main.DEFAULT_NAME).
DEFAULT_NODE_NAME = "vrt_detector"


def load_params_file(path: str | Path, node: str | None = None) -> dict[str, Any]:
    """Read and validate a parameter YAML, as the node receives it.

    Args:
        path: the file.
        node: fully-qualified node name (``/robot1/front_detector``): only the sections rcl applies to that node,
            in rcl's order. None: every section of the file, merged in file order.

    Returns:
        Defaults updated with the file's values (dotted names).

    Raises:
        ConfigError: as :func:`parse_params_file` and :func:`check_value`, naming the file.
    """
    sections = param_files.read_all([path])
    if node is not None:
        return validate(param_files.values_for(sections, node), str(path))
    merged: dict[str, Any] = {}
    for section in sections:
        merged.update(section.values)
    return validate(merged, str(path))


def postprocess_params(values: Mapping[str, Any]) -> PostprocessParams:
    """The runtime thresholds from validated parameter values.

    With ``tracking.enabled`` the pipeline keeps detections down to ``min(score_threshold, tracking.low_score)``:
    the tracker's second association needs those below ``score_threshold``, which are then not published
    (:func:`vrt_ros.tracking.output.track_frame`). NMS and ``max_detections`` keep the highest scores first, so the
    detections at or above ``score_threshold`` are the same set as without tracking.
    """
    threshold = float(values["score_threshold"])
    if values["tracking.enabled"]:
        threshold = min(threshold, float(values["tracking.low_score"]))
    return PostprocessParams(
        score_threshold=threshold,
        nms_iou=float(values["nms_iou"]),
        class_agnostic=bool(values["class_agnostic_nms"]),
        max_detections=int(values["max_detections"]),
        keypoint_threshold=float(values["keypoint_threshold"]),
        mask_threshold=float(values["mask_threshold"]),
    )


def tracker_params(values: Mapping[str, Any]) -> TrackerParams | None:
    """The tracker settings from validated parameter values; None when ``tracking.enabled`` is false."""
    if not values["tracking.enabled"]:
        return None
    return TrackerParams(high_score=float(values["tracking.high_score"]), low_score=float(values["tracking.low_score"]),
                         min_hits=int(values["tracking.min_hits"]), max_lost_s=float(values["tracking.max_lost_s"]),
                         min_iou=float(values["tracking.min_iou"]))


def markdown_table() -> str:
    """The README's parameter table, generated from :data:`PARAMS` so that it cannot drift."""
    rows = ["| parameter | type | default | range / choices | read-only | description |", "| --- | --- | --- | --- | --- | --- |"]
    for p in PARAMS:
        if p.choices is not None:
            rng = ", ".join(repr(c) if c else "''" for c in p.choices)
        elif p.min is not None:
            rng = f"[{p.min:g}, {p.max:g}]"
        else:
            rng = ""
        rows.append(f"| `{p.name}` | {p.type} | `{p.default!r}` | {rng} | {'yes' if p.read_only else ''} | {p.description} |")
    return "\n".join(rows)


def start_up_errors(values: Mapping[str, Any]) -> list[str]:
    """The node's start-up checks that load no model, on validated ``values``, in the node's order
    (``DetectorNode._configure``): ``model.path`` (:func:`vrt_ros.model.model_file.check_model_file`: empty, missing, a
    directory, unreadable or an empty file) then ``model.labels`` (:func:`vrt_ros.model.labels.load_labels`: unreadable).

    Returns:
        One line per failed check, naming the parameter or file (empty: the node gets past them).
    """
    from vrt_ros.errors import ModelError
    from vrt_ros.model.labels import load_labels
    from vrt_ros.model.model_file import check_model_file

    errors = []
    for check, name in ((check_model_file, "model.path"), (load_labels, "model.labels")):
        try:
            check(values[name])
        except (ConfigError, ModelError) as e:
            errors.append(str(e))
    return errors


def main(argv: list[str] | None = None) -> int:
    """``python -m vrt_ros.settings.config``: check parameter files as the node checks them at start-up, or print the README's
    parameter table.

    Files are read exactly as the node receives them from rcl (:mod:`vrt_ros.settings.param_files`), ``-p NAME:=VALUE``
    overrides applied on top (as the node's), checked by the same :func:`validate` and then by the node's start-up
    checks that load no model (:func:`start_up_errors`: an empty or missing ``model.path``, an unreadable
    ``model.labels``); ``ok`` means the node gets past them. ``--schema-only`` checks the schema alone (a file
    layered under another, or a robot's file checked off the robot) and says so. With ``--node /ns/name`` only the
    sections rcl applies to that node count.

    Returns:
        0 when every file passes, 1 when one does not (each error printed), 2 for bad usage.
    """
    parser = argparse.ArgumentParser(
        prog="python -m vrt_ros.settings.config",
        description="Check vrt_ros parameter YAML files as the node checks them at start-up (or print the "
                    "parameter table).",
    )
    parser.add_argument("files", nargs="*", help="parameter files in the ROS 2 layout ('/**: ros__parameters: ...')")
    parser.add_argument("--node", metavar="/NS/NAME", help="check only the sections rcl applies to this node "
                        "(fully-qualified name, e.g. /robot1/front_detector)")
    parser.add_argument("-p", dest="overrides", action="append", default=[], metavar="NAME:=VALUE",
                        help="a parameter as the node's '-p NAME:=VALUE' sets it, over the file's (repeatable)")
    parser.add_argument("--schema-only", action="store_true", help="check only names, types and ranges, not that "
                        "model.path and model.labels name usable files here (a robot's file checked off the robot)")
    parser.add_argument("--check-files", action="store_true", help=argparse.SUPPRESS)  # the default since issue 37
    parser.add_argument("--markdown", action="store_true", help="print the parameter table (docs/parameters.md) and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown_table())
        return 0
    if not args.files:
        parser.error("give at least one parameter file (or --markdown)")
    node = args.node if args.node is None or args.node.startswith("/") else "/" + args.node
    status = 0
    for f in args.files:
        try:
            sections = param_files.read_all([f])
            values = param_files.values_for(sections, node) if node else {
                k: v for section in sections for k, v in section.values.items()}
            values.update(param_files.parse_override(o) for o in args.overrides)
            values = validate(values, str(f))
            errors = [] if args.schema_only else start_up_errors(values)
            if errors:
                raise ConfigError("\n".join(errors))
            what = "schema ok (model.path and model.labels not checked: --schema-only)" if args.schema_only else "ok"
            print(f"{f}: {what}" + (f" (for node {node})" if node else ""))
            default = f"/{DEFAULT_NODE_NAME}"
            unread = [s.key for s in sections if not param_files.key_matches(s.key, node or default)]
            if unread and len(unread) == len(sections):
                print(f"  note: sections {unread} do not apply to node {node or default}"
                      + ("" if node else f" (detector_node's default name '{DEFAULT_NODE_NAME}' in the root "
                         "namespace)") + "; key a node's own section '/**/<node name>:' (any namespace), see "
                      "the docs' Robot set-up page, 'Parameter files: one section per node'")
        except ConfigError as e:
            status = 1
            print(f"{f}: invalid" + ("" if args.schema_only else " (the node would refuse it at start-up)"),
                  file=sys.stderr)
            for line in str(e).splitlines():
                print(f"  {line}", file=sys.stderr)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
