"""The CUDA pipeline end to end with the torch engine (YOLOX-nano converted by onnx2torch) vs the CPU pipeline,
one synchronisation per frame and no allocation after warm-up."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from gpu_support import requires_gpu, torch_reason
from vrt_ros.types import ImageSpec

pytestmark = [*requires_gpu, pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")]


@pytest.fixture(scope="module")
def values(shared_dir, tmp_path_factory):
    from vrt_ros.settings.config import defaults

    v = defaults()
    v.update({
        "model.path": str(shared_dir / "models" / "yolox_nano.onnx"),
        "backend": "cuda",
        "engine.cache_dir": str(tmp_path_factory.mktemp("cache")),
    })
    return v


@pytest.fixture(scope="module")
def pipelines(values):
    from vrt_ros.inference.backends.cpu import CpuPipeline
    from vrt_ros.inference.backends.cuda import CudaPipeline

    gpu = CudaPipeline(values, log=print)
    cpu = CpuPipeline(values, log=print)
    yield gpu, cpu
    gpu.close()


def test_same_detections_as_cpu_pipeline(pipelines, shared_dir):
    gpu, cpu = pipelines
    assert gpu.head.name == "yolox" and gpu.input_spec == cpu.input_spec
    print(f"engine: {gpu.engine.name}")
    images = sorted((shared_dir / "data" / "images").glob("*.jpg"))
    assert images
    for path in images:
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        g, c = gpu.process_bgr(bgr), cpu.process_bgr(bgr)
        assert len(g) == len(c), path.name
        np.testing.assert_array_equal(g.class_ids, c.class_ids)
        if len(c):
            be, se = np.abs(g.boxes - c.boxes).max(), np.abs(g.scores - c.scores).max()
            print(f"{path.name}: {len(c)} detections, classes {sorted(set(c.class_ids.tolist()))}, "
                  f"max box err {be:.3f} px, max score err {se:.2e}; GPU stages {gpu.last_timings}")
            assert be <= 0.5 and se <= 1e-3, path.name
    dog = cv2.imread(str(shared_dir / "data" / "images" / "darknet_dog.jpg"), cv2.IMREAD_COLOR)
    assert {16, 1, 2} <= set(gpu.process_bgr(dog).class_ids.tolist())  # dog, bicycle, car (COCO indices)
    assert gpu.engine.graph_error is None, gpu.engine.graph_error


def test_two_cameras_on_four_threads_equal_single_threaded(values, pipelines, shared_dir):
    """HC-12 (without ROS): two pipelines sharing one context, driven from 4 threads, give the single-threaded results."""
    from concurrent.futures import ThreadPoolExecutor

    from vrt_ros.inference.backends.cuda import CudaPipeline

    first, _ = pipelines
    second = CudaPipeline(values, log=print, camera="second")
    assert second.runtime is first.runtime and second.library is first.library
    paths = sorted((shared_dir / "data" / "images").glob("*.jpg"))
    images = [cv2.imread(str(p), cv2.IMREAD_COLOR) for p in paths]
    want = [first.process_bgr(img) for img in images]
    for img in images:
        second.process_bgr(img)  # warm-up (graph capture) before the threads start
    jobs = [(pipe, i) for _ in range(10) for pipe in (first, second) for i in range(len(images))]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda job: (job[1], job[0].process_bgr(images[job[1]])), jobs))
    for i, got in results:
        np.testing.assert_array_equal(got.class_ids, want[i].class_ids)
        np.testing.assert_allclose(got.boxes, want[i].boxes, atol=1e-4)
    print(f"{len(jobs)} frames on 4 threads over 2 pipelines: all equal to the single-threaded results")
    second.close()


def test_one_sync_per_frame_and_no_allocation_after_warmup(pipelines, shared_dir):
    import torch

    gpu, _ = pipelines
    bgr = cv2.imread(str(shared_dir / "data" / "images" / "darknet_horses.jpg"), cv2.IMREAD_COLOR)
    h, w = bgr.shape[:2]
    spec = ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3)
    data = bgr.tobytes()
    for _ in range(10):
        gpu.process(spec, data)
    before = gpu.runtime.counters.snapshot()
    torch_before = torch.cuda.memory_stats(gpu.engine.device).get("num_device_alloc", 0)
    builds_before = (gpu._pre._launches.builds, gpu._post._launches.builds)
    frames = 1000
    counts = set()
    for _ in range(frames):
        counts.add(len(gpu.process(spec, data)))
    after = gpu.runtime.counters.snapshot()
    torch_after = torch.cuda.memory_stats(gpu.engine.device).get("num_device_alloc", 0)
    print(f"{frames} frames: syncs {after['syncs'] - before['syncs']}, device allocs "
          f"{after['device_allocs'] - before['device_allocs']}, pinned allocs {after['pinned_allocs'] - before['pinned_allocs']}, "
          f"torch cudaMalloc {torch_after - torch_before}; last timings {gpu.last_timings}")
    assert after["syncs"] - before["syncs"] == frames
    assert after["device_allocs"] == before["device_allocs"] and after["pinned_allocs"] == before["pinned_allocs"]
    assert torch_after == torch_before
    # the kernels' argument tuples were built during warm-up and reused: no numpy scalars made per frame
    assert (gpu._pre._launches.builds, gpu._post._launches.builds) == builds_before
    assert len(counts) == 1 and counts.pop() >= 3  # the same 3+ horses every frame


def test_stage_timings_are_measured(pipelines, shared_dir):
    gpu, _ = pipelines
    bgr = cv2.imread(str(shared_dir / "data" / "images" / "darknet_dog.jpg"), cv2.IMREAD_COLOR)
    gpu.process_bgr(bgr)
    t = gpu.last_timings
    assert set(t) >= {"upload", "preprocess", "inference", "postprocess", "total"}
    assert all(np.isfinite(v) and v > 0 for v in t.values()), t


def test_bad_frame_enqueues_nothing(pipelines):
    from vrt_ros.errors import FrameError

    gpu, _ = pipelines
    syncs = gpu.runtime.counters.syncs
    with pytest.raises(FrameError):
        gpu.process(ImageSpec(width=640, height=480, encoding="bgr8", step=1920), b"")
    assert gpu.runtime.counters.syncs == syncs
