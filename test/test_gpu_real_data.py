"""GPU path on real data: the two real street bags (YOLOX-nano) and CenterFace (faces + 5 landmarks) on real
photos, against the CPU path. Same detections: classes equal, boxes and landmarks within 0.5 px, scores within 1e-3.

The CenterFace model and crowd photo come from the asset cache (``make demo`` fills it; ``$VRT_ASSETS_DIR``);
the bags are read with rosbags. Each test skips with the reason when its input or library is absent.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from gpu_support import requires_gpu, to_device, torch_reason
from vrt_ros.types import ImageSpec, PostprocessParams

pytestmark = requires_gpu

needs_torch = pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")


def assert_same(g, c, what: str) -> tuple[float, float, float]:
    assert len(g) == len(c), f"{what}: {len(g)} GPU vs {len(c)} CPU detections"
    np.testing.assert_array_equal(g.class_ids, c.class_ids, err_msg=what)
    if not len(c):
        return 0.0, 0.0, 0.0
    be, se = float(np.abs(g.boxes - c.boxes).max()), float(np.abs(g.scores - c.scores).max())
    ke = float(np.abs(g.keypoints - c.keypoints).max()) if c.keypoints.size else 0.0
    assert be <= 0.5 and se <= 1e-3 and ke <= 0.5, f"{what}: box {be}, score {se}, keypoint {ke}"
    return be, se, ke


@pytest.fixture(scope="module")
def centerface_files():
    from vrt_ros.tools import assets

    cache = assets.assets_dir()
    names = (assets.CENTERFACE_MODEL, "crowd.jpg")
    if not all(assets.is_cached(assets.ASSETS[n], cache) for n in names):
        pytest.skip(f"CenterFace model/crowd photo not in the asset cache {cache} (run `make demo` once)")
    return cache / names[0], cache / names[1]


def test_centerface_real_outputs_gpu_postprocess_equals_cpu(centerface_files, shared_dir):
    """Engine step on the CPU (ONNX Runtime); its outputs go through the GPU and the numpy postprocess."""
    from vrt_ros.engines.onnxruntime import OnnxRuntimeEngine
    from vrt_ros.gpu.library import KernelLibrary
    from vrt_ros.gpu.postprocess import GpuPostprocessor
    from vrt_ros.gpu.runtime import GpuRuntime
    from vrt_ros.heads import select_head
    from vrt_ros.heads.centerface import CenterFaceHead
    from vrt_ros.boxes.postprocess import finish
    from vrt_ros.intake.preprocess import CpuPreprocessor

    model, crowd = centerface_files
    engine = OnnxRuntimeEngine(model)
    _, _, h, w = engine.inputs[0].shape
    spec = CenterFaceHead.INPUT_DEFAULTS.input_spec(w, h)
    head = select_head("auto", engine.outputs, spec)
    assert head.name == "centerface"
    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    post = GpuPostprocessor(rt, KernelLibrary.shared(rt.arch), head, stream)
    pre = CpuPreprocessor(spec)
    params = PostprocessParams(score_threshold=0.5, nms_iou=0.3, max_detections=1000)
    counts = {}
    for path in (crowd, shared_dir / "data" / "images" / "grace_hopper.jpg"):
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        tensor, lb = pre(bgr)
        outs = engine.run(tensor)
        bufs = [to_device(rt, stream, np.ascontiguousarray(out, np.float32)) for out in outs]
        post.enqueue(stream, [b.ptr for b in bufs], lb, params)
        rt.sync(stream)
        got = post.read()
        want = finish(head.decode(outs, params.score_threshold), lb, params, head.applies_nms)
        errs = assert_same(got, want, path.name)
        counts[path.name] = len(got)
        print(f"centerface {path.name}: {len(got)} faces; max box err {errs[0]:.2e} px, score {errs[1]:.2e}, "
              f"landmarks {errs[2]:.2e} px")
        for b in bufs:
            b.close(stream)
    assert counts["crowd.jpg"] >= 80 and counts["grace_hopper.jpg"] == 1
    post.close(stream)


@needs_torch
def test_centerface_pipeline_torch_equals_cpu_pipeline(centerface_files, shared_dir, tmp_path):
    from vrt_ros.inference.backends.cpu import CpuPipeline
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.settings.config import defaults

    model, crowd = centerface_files
    values = defaults()
    values.update({"model.path": str(model), "score_threshold": 0.5, "nms_iou": 0.3, "max_detections": 1000,
                   "engine.cache_dir": str(tmp_path)})
    gpu, cpu = CudaPipeline(values, log=print), CpuPipeline(values, log=print)
    assert gpu.head.name == "centerface" and gpu.head.num_keypoints == 5
    for path in (crowd, shared_dir / "data" / "images" / "grace_hopper.jpg"):
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        g, c = gpu.process_bgr(bgr), cpu.process_bgr(bgr)
        errs = assert_same(g, c, path.name)
        print(f"centerface pipeline {path.name}: {len(g)} faces (GPU {gpu.engine.name}); max box err {errs[0]:.3f} px, "
              f"score {errs[1]:.2e}, landmarks {errs[2]:.3f} px; GPU stages {gpu.last_timings}")
    gpu.close()


def bag_messages(bag: Path):
    highlevel = pytest.importorskip("rosbags.highlevel", reason="rosbags is not installed")
    from rosbags.typesys import Stores, get_typestore

    with highlevel.AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        for conn, _, raw in reader.messages():
            yield reader.deserialize(raw, conn.msgtype)


@needs_torch
@pytest.mark.parametrize("bag", ["vtest_raw_sqlite3", "vtest_compressed_mcap"])
def test_street_bag_gpu_equals_cpu(shared_dir, bag, tmp_path):
    """Every frame of the real bags: the CUDA pipeline (torch engine) gives the CPU pipeline's detections."""
    from vrt_ros.inference.backends.cpu import CpuPipeline
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.intake.compressed import decode_compressed
    from vrt_ros.settings.config import defaults

    values = defaults()
    values.update({"model.path": str(shared_dir / "models" / "yolox_nano.onnx"), "engine.cache_dir": str(tmp_path)})
    gpu, cpu = CudaPipeline(values, log=print), CpuPipeline(values, log=print)
    frames, persons, worst = 0, [], [0.0, 0.0]
    for msg in bag_messages(shared_dir / "data" / "bags" / bag):
        if hasattr(msg, "format"):
            bgr = decode_compressed(msg.format, msg.data)
            g, c = gpu.process_bgr(bgr), cpu.process_bgr(bgr)
        else:
            spec = ImageSpec(msg.width, msg.height, msg.encoding, msg.step, bool(msg.is_bigendian))
            g, c = gpu.process(spec, msg.data), cpu.process(spec, msg.data)
        be, se, _ = assert_same(g, c, f"{bag} frame {frames}")
        worst = [max(worst[0], be), max(worst[1], se)]
        persons.append(int((g.class_ids == 0).sum()))
        frames += 1
    print(f"{bag}: {frames} frames, persons per frame {min(persons)}..{max(persons)}, max box err {worst[0]:.3f} px, "
          f"max score err {worst[1]:.2e}")
    assert frames > 0 and min(persons) >= 3
    gpu.close()
