"""README "Adding a model head", followed step by step with a tiny synthetic head.

The head (``tiny``): one output ``[1, 5, N]``, channels first, rows ``cx, cy, w, h, score`` in engine-input
pixels, one class, N = the cells of strides 8/16/32. Its layout is YOLOv8's with one class, so its GPU decode reuses
``decode_yolov8`` (``kernels/decode.cu``) with ``num_classes = 1``; a layout no kernel reads would add its own
``extern "C"`` section to kernels/decode.cu, ending with the shared candidate sink.

Both paths decode the same raw outputs:
- CPU: the head's numpy reference decode + the shared NMS and un-letterbox (:func:`vrt_ros.boxes.postprocess.finish`);
- GPU on CI: the whole CUDA pipeline against the recording stand-in of the CUDA runtime (test/fake_cuda.py): it
  starts with the head, and its decode launch is the head's kernel with the head's arguments, checked by name
  against the kernel's signature;
- GPU on the device (marked ``gpu``, scripts/gpu_check.sh): the real kernels, same detections as the CPU path
  (classes equal, boxes within 0.5 px, scores within 1e-3).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from gpu_support import requires_gpu
from vrt_ros.boxes.geometry import letterbox
from vrt_ros.boxes.postprocess import finish
from vrt_ros.heads import HEADS, select_head
from vrt_ros.heads.base import Candidates, GpuDecode, Head, InputDefaults, dim_is, grid_cells
from vrt_ros.settings.config import defaults
from vrt_ros.types import InputSpec, PostprocessParams, TensorInfo

W = H = 320
STRIDES = (8, 16, 32)
CELLS = grid_cells(W, H, STRIDES)
IMAGES = TensorInfo("images", (1, 3, H, W), "float32")
OUTPUTS = [TensorInfo("boxes_scores", (1, 5, CELLS), "float32")]


# ---------------------------------------------------------------- step 1: the head module (layout, reference, kernel)
class TinyHead(Head):
    """One output [1, 5, N]: cx, cy, w, h, score per anchor (channels first), one class."""

    name = "tiny"
    num_classes = 1
    INPUT_DEFAULTS = InputDefaults(channel_order="rgb", mean=(0.0, 0.0, 0.0), std=(255.0, 255.0, 255.0),
                                   pad_value=114.0, align="center")

    @classmethod
    def matches(cls, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> bool:
        return False  # picked by name only: its shapes also fit yolov8, and auto never guesses

    def _check(self, outputs: Sequence[TensorInfo], input_spec: InputSpec) -> None:
        if len(outputs) != 1 or len(outputs[0].shape) != 3 or outputs[0].shape[1] != 5 or not dim_is(outputs[0].shape[0], 1):
            raise self._error("one output [1, 5, N] (cx, cy, w, h, score)")

    def decode(self, outputs: Sequence[np.ndarray], score_threshold: float) -> Candidates:
        self._check_runtime(outputs)
        out = np.asarray(outputs[0], np.float32)[0]
        idx = np.flatnonzero(out[4] >= score_threshold)
        cx, cy, w, h, score = out[:, idx]
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1).astype(np.float32)
        return Candidates(boxes=boxes, scores=score.astype(np.float32), class_ids=np.zeros(len(idx), np.int32),
                          keypoints=np.zeros((len(idx), 0, 3), np.float32))

    def gpu_decode(self) -> GpuDecode:
        cells = int(self.outputs[0].shape[2])
        return GpuDecode("decode_yolov8", (cells,), args=lambda out, tables: dict(out=out[0], cells=cells, num_classes=1))


@pytest.fixture
def tiny(monkeypatch):
    """Step 2: register the head in the one table (the product would add it to ``HEADS`` in vrt_ros/heads/__init__.py)."""
    monkeypatch.setitem(HEADS, TinyHead.name, TinyHead)
    return select_head("tiny", OUTPUTS, InputSpec(width=W, height=H))


def raw_outputs(seed: int = 0) -> list[np.ndarray]:
    """Synthetic engine outputs: a few strong, overlapping boxes among low-score noise."""
    rng = np.random.default_rng(seed)
    out = np.zeros((1, 5, CELLS), np.float32)
    out[0, 0] = rng.uniform(0, W, CELLS)
    out[0, 1] = rng.uniform(0, H, CELLS)
    out[0, 2:4] = rng.uniform(8, 80, (2, CELLS))
    out[0, 4] = rng.uniform(0, 0.2, CELLS)
    hot = rng.choice(CELLS, 40, replace=False)
    out[0, 4, hot] = rng.uniform(0.5, 0.99, hot.size)
    out[0, :2, hot[:10]] = out[0, :2, hot[10:20]] + 3  # near-duplicates for NMS to remove
    return [out]


# ---------------------------------------------------------------- step 3: the test on both paths
def test_tiny_head_registered_and_decoded_by_the_numpy_reference(tiny):
    assert isinstance(tiny, TinyHead) and tiny.num_keypoints == 0
    lb = letterbox(640, 480, W, H)
    params = PostprocessParams(score_threshold=0.4)
    dets = finish(tiny.decode(raw_outputs(), params.score_threshold), lb, params, tiny.applies_nms)
    assert 0 < len(dets) < 40  # NMS removed some of the 40 strong boxes
    assert (dets.scores >= 0.4).all() and (dets.class_ids == 0).all()
    assert (dets.boxes[:, [0, 2]] <= 640).all() and (dets.boxes[:, [1, 3]] <= 480).all()  # source pixels, clipped


def test_tiny_head_runs_the_gpu_pipeline_on_the_stand_in(tiny, fake_cuda):  # noqa: F811
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.types import ImageSpec

    values = defaults()
    values.update({"model.path": "model.onnx", "backend": "cuda", "model.head": "tiny"})
    engine = FakeEngine([IMAGES], OUTPUTS, outputs_data=raw_outputs())
    pipe = CudaPipeline(values, log=lambda m: None, engine=engine)
    assert pipe.head.name == "tiny" and pipe._post.capacity == CELLS
    img = np.zeros((480, 640, 3), np.uint8)
    pipe.process(ImageSpec(width=640, height=480, encoding="bgr8", step=640 * 3), img)
    decode = [launch for launch in fake_cuda.launches if launch.entry == "decode_yolov8"][-1]  # the frame's
    outputs = engine.enqueued[-1][1]  # the engine's output buffers of the frame (start-up ran it once too)
    assert decode.args[:3] == (outputs[0], CELLS, 1)  # out, cells, num_classes: the head's arguments, by name
    assert fake_cuda.hazards == []
    pipe.close()


@requires_gpu[0]  # the real kernels: only on a machine with a GPU (scripts/gpu_check.sh runs the gpu mark)
@requires_gpu[1]
@pytest.mark.parametrize("threshold", [0.3, 0.6])
@pytest.mark.usefixtures("tiny")
def test_tiny_head_gpu_decode_matches_the_reference(threshold):
    from test_gpu_postprocess import assert_same, gpu_finish  # the GPU-vs-reference comparison of the other heads
    from vrt_ros.gpu.library import KernelLibrary
    from vrt_ros.gpu.runtime import GpuRuntime

    head = select_head("tiny", OUTPUTS, InputSpec(width=W, height=H))
    rt = GpuRuntime.get(0)
    outputs, lb = raw_outputs(1), letterbox(640, 480, W, H)
    params = PostprocessParams(score_threshold=threshold)
    got = gpu_finish((rt, KernelLibrary.shared(rt.arch), rt.create_stream()), head, outputs, lb, params)
    want = finish(head.decode(outputs, threshold), lb, params, head.applies_nms)
    assert len(want) > 0
    assert_same(got, want, f"tiny head, threshold {threshold}")
