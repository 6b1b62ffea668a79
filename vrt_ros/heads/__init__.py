"""Model heads: output layout + numpy reference decode, one module per model family.

``HEADS`` is the one registry (the values of the ``model.head`` parameter besides ``auto``);
:func:`select_head` builds the head for an engine's outputs.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence

from vrt_ros.errors import ModelError
from vrt_ros.heads.base import Candidates, Head, InputDefaults, shapes_text
from vrt_ros.heads.centerface import CenterFaceHead
from vrt_ros.heads.detr import DetrHead, per_anchor_pair
from vrt_ros.heads.detr_topk import DetrTopkHead
from vrt_ros.heads.end2end import End2EndHead
from vrt_ros.heads.end2end_obb import End2EndObbHead
from vrt_ros.heads.end2end_pose import End2EndPoseHead
from vrt_ros.heads.end2end_seg import End2EndSegHead
from vrt_ros.heads.yolov8 import Yolov8Head
from vrt_ros.heads.yolov8_obb import Yolov8ObbHead
from vrt_ros.heads.yolov8_pose import Yolov8PoseHead
from vrt_ros.heads.yolov8_seg import Yolov8SegHead
from vrt_ros.heads.yolox import YoloxHead
from vrt_ros.types import InputSpec, TensorInfo

__all__ = ["HEADS", "AUTO", "Candidates", "Head", "InputDefaults", "select_head", "head_class"]

#: Every head by its ``model.head`` name.
HEADS: dict[str, type[Head]] = {
    h.name: h for h in (YoloxHead, Yolov8Head, Yolov8PoseHead, Yolov8SegHead, Yolov8ObbHead, CenterFaceHead,
                        End2EndHead, End2EndSegHead, End2EndPoseHead, End2EndObbHead, DetrHead, DetrTopkHead)
}

AUTO = "auto"

#: Words in an output name that mark a pose model (Ultralytics names both outputs ``output0``).
_POSE_WORDS = ("pose", "kpt", "keypoint")

#: Ultralytics ONNX metadata ``task`` value -> its heads (one-to-many, end-to-end), used to split same-shape layouts
#: (detect / pose / obb) and to take layouts only that metadata names (a multi-class pose output).
_TASKS = {"detect": ("yolov8", "end2end"), "pose": ("yolov8_pose", "end2end_pose"),
          "obb": ("yolov8_obb", "end2end_obb"), "segment": ("yolov8_seg", "end2end_seg")}
#: Words of Ultralytics' metadata ``description`` ("Ultralytics rtdetr-l model ...") that mark RT-DETR.
_RTDETR_WORDS = ("rtdetr", "rt-detr")


def _class_count(metadata: Mapping[str, str]) -> int | None:
    """Entries of Ultralytics' ``names`` metadata (``"{0: 'person', ...}"``), None when absent or unreadable."""
    try:
        names = ast.literal_eval(str(metadata.get("names", "")))
    except (ValueError, SyntaxError):
        return None
    return len(names) if isinstance(names, (dict, list, tuple)) else None


def _fits(head: type[Head], outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
    """Whether ``head``'s start-up check accepts the outputs (wider than :meth:`Head.matches`, e.g. a multi-class
    pose output that is also a detect layout); used only where the model's metadata names the head's task."""
    try:
        head(outputs, input_spec)
    except ModelError:
        return False
    return True


def _resolve(candidates: list[type[Head]], outputs: Sequence[TensorInfo], metadata: Mapping[str, str],
             input_spec: InputSpec) -> list:
    """Narrow several matching heads using the model's metadata or output names (never a guess).

    The rule: Ultralytics' ``task`` metadata picks the one of its two heads (one-to-many ``yolov8*``, end-to-end
    ``end2end*``) whose start-up check takes the outputs, also where shapes alone matched neither (a multi-class pose
    ``[1, 4 + nc + 51, N]``); ``yolov8_obb`` (a detect layout with one channel more) is kept only with ``task: obb``; one ``[1, K, 6]`` output with an RT-DETR ``description`` is
    ``detr_topk`` (Ultralytics 8.4) unless ``names`` lists 2 classes; one ``[1, Q, 4 + C]`` output is ``detr`` only when
    the ``description`` names RT-DETR (else it is YOLOX / ``end2end`` or nothing); a 56-channel detect/pose clash without ``task`` is settled by
    the output name.
    """
    description = str(metadata.get("description", "")).lower()
    if any(w in description for w in _RTDETR_WORDS):
        if DetrTopkHead.matches_rows(outputs, input_spec) and _class_count(metadata) != 2:
            return [DetrTopkHead]
        if DetrHead.matches_single(outputs, input_spec):
            return [DetrHead]
    names = {c.name for c in candidates}
    task = str(metadata.get("task", "")).strip().strip("'\"").lower()
    if task in _TASKS:
        fits = [HEADS[n] for n in _TASKS[task] if n in names or _fits(HEADS[n], outputs, input_spec)]
        if len(fits) == 1:
            return fits
    if "yolov8_obb" in names and task != "obb":
        candidates = [c for c in candidates if c.name != "yolov8_obb"]
        names.discard("yolov8_obb")
    if names == {"yolov8", "yolov8_pose"} and any(w in o.name.lower() for o in outputs for w in _POSE_WORDS):
        return [Yolov8PoseHead]
    return candidates


def head_class(name: str, outputs: Sequence[TensorInfo], input_spec: InputSpec,
               metadata: Mapping[str, str] | None = None) -> type[Head]:
    """The head class for ``model.head`` = ``name``, without constructing it.

    Lets the caller read ``INPUT_DEFAULTS`` before deciding the final :class:`~vrt_ros.types.InputSpec`
    (only ``input_spec.width`` and ``height`` are used here). Arguments and errors as :func:`select_head`.
    """
    if name != AUTO:
        if name not in HEADS:
            raise ModelError(f"model.head {name!r} is not one of {[AUTO, *HEADS]}")
        return HEADS[name]
    found = [h for h in HEADS.values() if h.matches(outputs, input_spec)]
    found = _resolve(found, outputs, metadata or {}, input_spec)
    where = f"model outputs {shapes_text(outputs)} with engine input {input_spec.width}x{input_spec.height}"
    if not found and per_anchor_pair(outputs, input_spec):
        raise ModelError(
            f"model.head auto cannot tell {where} apart: [1, N, 4] + [1, N, C] with N the cell count of strides "
            f"8/16/32 is one box per anchor before NMS (YOLO-NAS, DAMO-YOLO style), not DETR's queries, and no head "
            f"here decodes it; export the model with a layout listed in docs/models.md, 'Model heads'"
        )
    if not found:
        raise ModelError(
            f"model.head auto: no known head matches {where}; known layouts: yolox [1,N,5+classes], "
            f"yolov8 [1,4+classes,N], yolov8_pose [1,56,N] (N = cells of strides 8/16/32), yolov8_seg "
            f"[1,4+classes+32,N] + [1,32,H/4,W/4], yolov8_obb [1,4+classes+1,N] (with task: obb metadata), "
            f"end2end [1,M,6], end2end_seg [1,M,6+32] + [1,32,H/4,W/4], end2end_pose [1,M,57], end2end_obb [1,M,7], "
            f"detr_topk [1,K,6] (with RT-DETR metadata), detr [1,Q,4] + [1,Q,classes] (or [1,Q,4+classes] with RT-DETR metadata), centerface 4 outputs at "
            f"stride 4. Set model.head to one of {list(HEADS)} or check the export"
        )
    if len(found) > 1:
        raise ModelError(
            f"model.head auto is ambiguous for {where}: it fits {[h.name for h in found]}. "
            f"Set model.head to the right one"
        )
    return found[0]


def select_head(name: str, outputs: Sequence[TensorInfo], input_spec: InputSpec,
                metadata: Mapping[str, str] | None = None) -> Head:
    """Build the head for an engine's outputs.

    Args:
        name: ``model.head``: a key of :data:`HEADS`, or ``"auto"`` to pick from the output shapes.
        outputs: the engine's outputs in engine order (names, shapes; -1 = dynamic dim).
        input_spec: the engine input; its ``width`` and ``height`` (pixels) fix the expected grid sizes.
        metadata: optional model metadata (ONNX ``metadata_props``); Ultralytics exports carry
            ``task`` = ``detect`` / ``pose``, which settles a 56-channel output that fits both yolov8 heads.

    Returns:
        The constructed head, its grids precomputed.

    Raises:
        ModelError: unknown name; ``auto`` matched no head or more than one (the message lists the shapes seen);
            the outputs do not fit the named head.
    """
    return head_class(name, outputs, input_spec, metadata)(outputs, input_spec)
