"""One path on a real GPU (issue 35; marked gpu, skipped without one): the assertions of test_onepath.py (the CUDA
stand-in) with real kernels, the torch engine on YOLOX-nano made dynamic-batch (vrt_ros.model.onnx_batch.rebatch), the
real GPU JPEG decoder (nvImageCodec; without it the router's CPU decode, counted) and the photos of
``shared/data/images``.

Tolerances: a batch of one against the frame alone: exact (the same call). Slot j of a batch of 4 against its frame
alone (a batch of one): same classes, boxes within 0.5 px, scores within 1e-3 (a batch-N convolution may pick other
kernels than batch 1, whose float sums round differently; as test_gpu_batch_device.py). Depth statistic: bitwise the
CPU reference of the slot's own detections and depth (0 mm; the kernel's radix select is exact).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from gpu_support import copies_at_a_barrier, dynamic_yolox_pipeline, from_device, requires_gpu, torch_reason
from vrt_ros.depth.image import DepthImage
from vrt_ros.depth.stats import DepthJob, box_stats
from vrt_ros.errors import FrameError
from vrt_ros.types import BgrFrame, CompressedFrame, ImageSpec, RawFrame

pytestmark = [*requires_gpu, pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")]
MAX_BATCH = 4
RANGE = (0.1, 20.0)


@pytest.fixture(scope="module")
def pipe(shared_dir, tmp_path_factory):
    p = dynamic_yolox_pipeline(shared_dir, tmp_path_factory.mktemp("onepath"), MAX_BATCH, **{"input.compressed": True})
    yield p
    p.close()


@pytest.fixture(scope="module")
def photos(shared_dir):
    return [cv2.imread(str(p), cv2.IMREAD_COLOR) for p in sorted((shared_dir / "data" / "images").glob("*.jpg"))]


def raw_of(img: np.ndarray) -> RawFrame:
    h, w = img.shape[:2]
    return RawFrame(ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), img)


def jpeg_of(img: np.ndarray) -> CompressedFrame:
    return CompressedFrame("jpeg", cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())


def close_to(got, want) -> None:
    assert len(got) == len(want)
    np.testing.assert_array_equal(got.class_ids, want.class_ids)
    if len(want):
        assert np.abs(got.boxes - want.boxes).max() <= 0.5 and np.abs(got.scores - want.scores).max() <= 1e-3


def spy_decode_batch(pipe, monkeypatch) -> list:
    calls: list = []
    router = pipe._router_now()
    inner = router.decode_batch

    def decode_batch(items, stream, slots):
        calls.append(list(slots))
        return inner(items, stream, slots)

    monkeypatch.setattr(router, "decode_batch", decode_batch)
    return calls


def test_a_batch_of_one_equals_the_frame_alone(pipe, photos):
    for img in photos[:3]:
        a = pipe.process_bgr(img)
        (b,) = pipe.process_batch([BgrFrame(img)])
        (c,) = pipe.process_batch([raw_of(img)])
        for other in (b, c):
            np.testing.assert_array_equal(a.boxes, other.boxes)
            np.testing.assert_array_equal(a.scores, other.scores)
            np.testing.assert_array_equal(a.class_ids, other.class_ids)


def test_mixed_raw_and_jpeg_batch_each_slot_equals_its_frame_alone_one_sync(pipe, photos, monkeypatch):
    imgs = [photos[k % len(photos)] for k in range(MAX_BATCH)]
    frames = [raw_of(imgs[0]), jpeg_of(imgs[1]), raw_of(imgs[2]), jpeg_of(imgs[3])]
    alone = [pipe.process_batch([f])[0] for f in frames]
    calls = spy_decode_batch(pipe, monkeypatch)
    gpu_before = pipe.decode_stats["gpu"]
    syncs = pipe.runtime.counters.syncs
    results = pipe.process_batch(frames)
    assert pipe.runtime.counters.syncs - syncs == 1 and calls == [[1, 3]]
    assert pipe.last_timings["batch_size"] == MAX_BATCH
    for got, want in zip(results, alone):
        close_to(got, want)
    print(f"mixed batch of {MAX_BATCH}: stages {pipe.last_timings}; JPEGs decoded on the GPU in it: "
          f"{pipe.decode_stats['gpu'] - gpu_before} (decode_stats {pipe.decode_stats})")


def test_a_corrupt_jpeg_in_a_batch_drops_only_its_slot(pipe, photos):
    good = [jpeg_of(photos[0]), raw_of(photos[1 % len(photos)]), jpeg_of(photos[2 % len(photos)])]
    alone = [pipe.process_batch([f])[0] for f in good]
    data = good[0].data
    cut = CompressedFrame("jpeg", data[: len(data) // 3])
    syncs = pipe.runtime.counters.syncs
    results = pipe.process_batch([good[0], cut, good[1], good[2]])
    assert pipe.runtime.counters.syncs - syncs == 1
    assert isinstance(results[1], FrameError) and results[1].reason == "corrupt_compressed"
    for got, want in zip((results[0], results[2], results[3]), alone):
        close_to(got, want)
    assert pipe.last_timings["batch_size"] == 3


def test_depth_statistic_per_slot_of_a_batch_equals_the_cpu_reference(pipe, photos):
    imgs = [photos[k % len(photos)] for k in range(MAX_BATCH)]
    jobs = []
    for k, img in enumerate(imgs):
        h, w = img.shape[:2]
        z = (1.0 + k + np.linspace(0.0, 2.0, w, dtype=np.float32)[None, :] * np.ones((h, 1), np.float32))
        mm = (z * 1000).astype(np.uint16)
        jobs.append(None if k == 2 else DepthJob(DepthImage(w, h, "16UC1", w * 2, mm.tobytes()), 1.0, RANGE, 50.0))
    syncs = pipe.runtime.counters.syncs
    results = pipe.process_batch([BgrFrame(i) for i in imgs], depth=jobs)
    assert pipe.runtime.counters.syncs - syncs == 1
    for dets, job in zip(results, jobs):
        if job is None:
            assert dets.depth_stats is None
            continue
        assert len(dets) > 0
        ref = box_stats(job.image.array(), job.image.units_per_m, dets.boxes, 1.0, RANGE, 50.0)
        np.testing.assert_array_equal(dets.depth_stats, ref)


def test_raw_copies_of_a_batch_run_at_the_same_time_and_stage_the_frames(monkeypatch, photos):
    """``parallel=True`` (an option since fe3d2c9 made serial copies the default, measured faster on the H200)."""
    from vrt_ros.gpu import upload as upload_module
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    up = upload_module.Uploader(rt, "cams", max_batch=MAX_BATCH, parallel=True)
    threads = copies_at_a_barrier(monkeypatch, MAX_BATCH)
    frames = [raw_of(cv2.resize(photos[k % len(photos)], (1920, 1080))) for k in range(MAX_BATCH)]
    out = up.upload_batch([(f.spec, f.data, k) for k, f in enumerate(frames)], stream)
    rt.sync(stream)
    assert len(threads) == MAX_BATCH
    for (ptr, enc, spec), f in zip(out, frames):
        staged = from_device(rt, stream, ptr, (spec.height, spec.width, 3), np.uint8)
        np.testing.assert_array_equal(staged, f.data if enc.name == "bgr8" else f.data[..., ::-1])
    up.close(stream)
