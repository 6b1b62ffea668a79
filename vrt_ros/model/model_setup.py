"""The model set-up every backend shares: engine input size, head selection and the preprocessing spec.

It sits below the backends (:mod:`vrt_ros.inference.backends.cpu`, :mod:`vrt_ros.inference.backends.cuda`), which call it once at
start-up with their engine's tensor descriptions; it imports only the core (heads, types, errors).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from vrt_ros.errors import ConfigError, ModelError
from vrt_ros.heads import select_head
from vrt_ros.heads.base import Head
from vrt_ros.types import InputSpec, TensorInfo

#: Where start-up messages go (``print``, or a ROS logger's ``info``).
Log = Callable[[str], None]
#: Engine input dtypes the preprocessing writes.
FLOAT_INPUTS = ("float32", "float16")


def engine_input_size(engine_input: TensorInfo, values: Mapping[str, Any]) -> tuple[int, int]:
    """Engine input (width, height) in pixels from the model's NCHW input and ``model.input_width/height``.

    Raises:
        ConfigError: dynamic dims without ``model.input_width/height``, or parameters contradicting fixed dims.
    """
    _, _, h, w = engine_input.shape
    pw, ph = int(values["model.input_width"]), int(values["model.input_height"])
    size = []
    for dim, param, pname in ((w, pw, "model.input_width"), (h, ph, "model.input_height")):
        if dim < 0 and param == 0:
            raise ConfigError(f"{pname}: the model's input {engine_input.name!r} has a dynamic size {engine_input.shape}; set {pname}")
        if dim >= 0 and param not in (0, dim):
            raise ConfigError(f"{pname} = {param} contradicts the model's fixed input {engine_input.name!r} {engine_input.shape}")
        size.append(param or dim)
    return size[0], size[1]


def check_single_input(where: str, inputs: Sequence[TensorInfo]) -> None:
    """Refuse a model with more than one input, naming the extra ones.

    vrt_ros feeds one NCHW image. DETR-family deploy exports (RT-DETR's ``export_onnx.py`` with its
    postprocessor, D-FINE, DEIM) add ``orig_target_sizes`` [1, 2] to scale boxes to the source inside the model;
    that is refused rather than fed a constant, because the source size changes per camera and this node maps the
    normalised boxes itself (:mod:`vrt_ros.heads.detr`).

    Raises:
        ModelError: more than one input (the message names each extra input and its shape).
    """
    if len(inputs) <= 1:
        return
    extra = ", ".join(f"{i.name!r} {list(i.shape)}" for i in inputs[1:])
    raise ModelError(
        f"{where} has a second input {extra} besides the image {inputs[0].name!r}: vrt_ros feeds one image input. "
        "Export the model without it (DETR-family: without the postprocessor that takes orig_target_sizes, so the "
        "outputs are the normalised boxes and class logits, model.head: detr)"
    )


def model_setup(values: Mapping[str, Any], engine_input: TensorInfo, outputs: Sequence[TensorInfo],
                metadata: Mapping[str, str] | None = None) -> tuple[Head, InputSpec]:
    """Select the head and build the preprocessing spec (parameters override the head's defaults).

    ``metadata`` (the model's custom metadata, e.g. Ultralytics' ``task``) helps ``model.head: auto`` tell
    layouts apart that have the same shapes.

    Raises:
        ConfigError: input size parameters (see :func:`engine_input_size`).
        ConfigError: ``model.resize`` or ``model.score_activation`` not accepted by the head.
        ModelError: an input that is not float32/float16 (the preprocessing writes normalised floats; a uint8
            or int32 input would be fed float data), or outputs that fit no head, or several (``model.head: auto``).
    """
    width, height = engine_input_size(engine_input, values)
    dtype = engine_input.dtype
    if dtype not in FLOAT_INPUTS:
        raise ModelError(
            f"model input {engine_input.name!r} is {dtype}; vrt_ros feeds normalised {' or '.join(FLOAT_INPUTS)} "
            "images (export the model with a float input, e.g. without a built-in uint8 preprocessing stage)"
        )
    probe = InputSpec(width=width, height=height, dtype=dtype)
    head = select_head(str(values["model.head"]), [slot_tensor(o) for o in outputs], probe, metadata)
    head.set_score_activation(str(values.get("model.score_activation", "")))
    d = type(head).INPUT_DEFAULTS
    resize = values.get("model.resize", "") or d.resize
    if resize not in type(head).RESIZES:
        raise ConfigError(f"model.resize {resize!r} does not apply to head {head.name!r} (allowed: "
                          f"{list(type(head).RESIZES)}): a stretched input turns its oriented boxes into parallelograms")
    spec = InputSpec(
        width=width,
        height=height,
        channel_order=values["model.channel_order"] or d.channel_order,
        mean=tuple(values["model.mean"]) or d.mean,
        std=tuple(values["model.std"]) or d.std,
        pad_value=values["model.pad_value"] if values["model.pad_value"] >= 0 else d.pad_value,
        align=values["model.align"] or d.align,
        dtype=dtype,
        resize=resize,
    )
    return head, spec


def slot_tensor(t: TensorInfo) -> TensorInfo:
    """One batch slot of a tensor: its shape with the batch dim (dim 0) set to 1 (a dynamic dim -1 stays).

    The heads describe one frame's outputs (``[1, ...]``); a batch-N model's ``[N, ...]`` outputs are N such slots,
    each ``prod(shape[1:])`` elements apart.
    """
    if not t.shape or t.shape[0] < 0:
        return t
    return TensorInfo(t.name, (1, *t.shape[1:]), t.dtype)


def dynamic_batch_size(values: Mapping[str, Any]) -> int:
    """The batch a dynamic-batch model is prepared for: ``engine.max_batch``, or (0) the number of cameras."""
    return int(values.get("engine.max_batch", 0) or 0) or max(1, len(values.get("cameras") or ()))


def resolve_max_batch(values: Mapping[str, Any], engine_input: TensorInfo, log: Log = print,
                      dynamic_default: int | None = None) -> int:
    """Frames one engine call takes (``engine.max_batch``), from the parameter and the model's batch dim.

    - ``engine.max_batch`` 0: the model's fixed batch N; for a dynamic batch, the number of cameras (``cameras``).
    - a model fixed at batch 1 runs frame by frame (returns 1, one start-up line saying so when more was asked or
      the parameter is left at 0 with several cameras);
    - a fixed batch N > 1 takes up to N (smaller batches are padded to N by the backend);
    - a dynamic batch takes the parameter (0: ``dynamic_default`` when given, e.g. 1 on the CPU path, where ONNX
      Runtime gains nothing from batches, else the number of cameras).

    Raises:
        ConfigError: ``engine.max_batch`` above a model's fixed batch N > 1.
    """
    dim = int(engine_input.shape[0]) if engine_input.shape else 1
    asked = int(values.get("engine.max_batch", 0) or 0)
    cameras = max(1, len(values.get("cameras") or ()))
    if dim == 1:
        if asked > 1 or (asked == 0 and cameras > 1):
            log(f"engine.max_batch: model input {engine_input.name!r} is fixed at batch 1 {tuple(engine_input.shape)}: "
                "frames run one at a time (make a batch-N model: python -m vrt_ros.tools.batch_model)")
        return 1
    if dim > 1:
        if asked > dim:
            raise ConfigError(f"engine.max_batch = {asked} exceeds the model's fixed batch {dim} "
                              f"(input {engine_input.name!r} {tuple(engine_input.shape)}); set it to {dim} or less")
        return asked or dim
    if asked == 0 and dynamic_default is not None:
        return max(1, int(dynamic_default))
    return dynamic_batch_size(values)
