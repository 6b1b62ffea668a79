"""The GPU depth statistic (issue 25): ``depth_box_stats`` (kernels/depth.cu) through ``vrt_ros.gpu.depth`` and
``CudaPipeline.process(..., depth=job)``.

In CI (no GPU), on the recording CUDA stand-in (test/fake_cuda.py): the glue (the depth upload, the launch over the
postprocess result's rows, checked against the kernel's ``extern "C"`` signature, the D2H and the read after the
frame's one sync, no allocation per frame) with an emulator of the kernel that follows its radix select step by
step in numpy. On a GPU (``-m gpu``): the kernel itself against the CPU reference ``vrt_ros.depth.stats.box_stats``.
Tolerance GPU vs CPU: 0 mm, the same float32 (the radix select returns the exact nearest-rank value and the kernel
converts millimetres with the same correctly rounded division); asserted as equal arrays.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

import depth_scenes as ds
from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from gpu_support import requires_gpu, to_device
from test_gpu_glue import HEAD_OUTPUTS, IMAGES, bgr, values
from vrt_ros.depth.image import DepthImage
from vrt_ros.depth.stats import DepthJob, box_stats, pixel_span, rotated_cover

RANGE = (0.1, 10.0)


def _array(ptr: int, nbytes: int) -> np.ndarray:
    return np.frombuffer((ctypes.c_uint8 * nbytes).from_address(int(ptr)), np.uint8)


def emulate_depth_box_stats(args) -> None:
    """kernels/depth.cu's depth_box_stats, step by step: per row, the box's pixel span, the valid bits, four 8-bit
    histogram passes selecting each percentile's bit prefix."""
    (depth, pitch, w, h, is_u16, units, near, far, scale, result, header, stride, theta_col, max_rows, p_lo, p_mid,
     p_hi, out) = args
    n_rows = min(int(ctypes.c_int32.from_address(int(result)).value), int(max_rows))
    rows = _array(int(result) + 4 * int(header), 4 * n_rows * int(stride)).view(np.float32).reshape(n_rows, -1)
    bpp = 2 if is_u16 else 4
    buf = _array(depth, int(pitch) * (int(h) - 1) + int(w) * bpp)
    o = _array(out, 16 * n_rows).view(np.float32).reshape(n_rows, 4)
    for r in range(n_rows):
        inside = None
        if int(theta_col) >= 0:  # oriented: the pixels inside the rotated rectangle (its float steps: rotated_cover)
            x0, x1, y0, y1, inside = rotated_cover(rows[r, :4], float(rows[r, int(theta_col)]), scale, int(w), int(h))
        else:
            x0, x1 = pixel_span(rows[r, 0], rows[r, 2], scale, int(w))
            y0, y1 = pixel_span(rows[r, 1], rows[r, 3], scale, int(h))
        img = np.lib.stride_tricks.as_strided(buf, (int(h), int(w) * bpp), (int(pitch), 1))
        v = img[y0:y1, x0 * bpp:x1 * bpp].copy().view(np.uint16 if is_u16 else np.float32).astype(np.float32)
        v = v if inside is None else v[inside]
        with np.errstate(invalid="ignore"):
            z = v / np.float32(units)
            bits = z[np.isfinite(z) & (z > 0) & (z >= near) & (z <= far)].view(np.uint32)
        n = bits.size
        o[r, 0] = n
        if n == 0:
            o[r, 1:] = np.nan
            continue
        for j, p in enumerate((p_lo, p_mid, p_hi)):
            rank, prefix, mask = max(1, math.ceil(float(p) * n / 100.0)), 0, 0
            for shift in (24, 16, 8, 0):
                sel = bits[((bits ^ prefix) & mask) == 0]
                hist = np.bincount((sel >> shift) & 0xFF, minlength=256)
                below, b = 0, 0
                while b < 255 and below + hist[b] < rank:
                    below += hist[b]
                    b += 1
                rank -= below
                prefix |= b << shift
                mask |= 0xFF << shift
            o[r, 1 + j] = np.uint32(prefix).view(np.float32)


def finalize_with(boxes: np.ndarray):
    """A finalize emulator writing ``boxes`` as the frame's detections (result layout of kernels/postprocess.cu)."""
    def run(args) -> None:
        result = int(args[-1])
        n = boxes.shape[0]
        (ctypes.c_int32 * 2).from_address(result)[:] = [n, n]
        stride = 6  # yolov8: no keypoints
        rows = _array(result + 16, 4 * n * stride).view(np.float32).reshape(n, stride)
        rows[:, :4], rows[:, 4], rows[:, 5] = boxes, 0.9, 0
    return run


def scenes():
    """(colour spec, image, boxes, depth image) for 16UC1 and 32FC1, same size and twice the size (HC-20)."""
    boxes, depth_m = ds.scene("plumb_bob")
    _, depth2 = ds.scene("plumb_bob", scale=2)
    spec, img = bgr(ds.W, ds.H)
    out = []
    for d, s in ((depth_m, 1), (depth2, 2)):
        mm = ds.to_mm(d)
        out.append((DepthImage(ds.W * s, ds.H * s, "16UC1", ds.W * s * 2 + 6,
                               np.pad(mm, ((0, 0), (0, 3))).tobytes()), float(s)))  # a padded step
        out.append((DepthImage(ds.W * s, ds.H * s, "32FC1", ds.W * s * 4, d.tobytes()), float(s)))
    return spec, img, boxes, out


def test_depth_statistic_inside_the_frames_one_sync_on_the_stand_in(fake_cuda):  # noqa: F811
    from vrt_ros.inference.backends.cuda import CudaPipeline

    spec, img, boxes, depths = scenes()
    fake_cuda.emulators.update({"finalize": finalize_with(boxes), "depth_box_stats": emulate_depth_box_stats})
    pipe = CudaPipeline(values("yolov8"), log=lambda m: None, engine=FakeEngine([IMAGES], HEAD_OUTPUTS["yolov8"]))
    rt = pipe.runtime
    for image, scale in depths:  # warm-up: the staging grows to the largest depth frame
        pipe.process(spec, img, depth=DepthJob(image, scale, RANGE, 50.0))
    before, launches = rt.counters.snapshot(), len(fake_cuda.launches)
    for k in range(3):
        for image, scale in depths:
            dets = pipe.process(spec, img, depth=DepthJob(image, scale, RANGE, 50.0))
            ref = box_stats(image.array(), image.units_per_m, dets.boxes, scale, RANGE, 50.0)
            np.testing.assert_array_equal(dets.depth_stats, ref)  # bitwise
            assert ref[:, 0].min() > 0 and np.all(ref[:, 2] == np.float32([o.z for o in ds.OBJECTS]))
    after = rt.counters.snapshot()
    assert after["syncs"] - before["syncs"] == 3 * len(depths)  # still one sync per frame
    assert after["device_allocs"] == before["device_allocs"] and after["pinned_allocs"] == before["pinned_allocs"]
    runs = [ln for ln in fake_cuda.launches[launches:] if ln.entry == "depth_box_stats"]
    assert len(runs) == 3 * len(depths)
    assert runs[0].grid == values("yolov8")["max_detections"]  # one block per result row
    entries = [ln.entry for ln in fake_cuda.launches[launches:]]
    assert entries.index("depth_box_stats") > entries.index("finalize")  # after the result is written
    assert pipe.process(spec, img).depth_stats is None  # without depth: no statistic
    assert fake_cuda.hazards == []
    pipe.close()
    assert fake_cuda.hazards == []


def test_a_changed_kernel_signature_fails_at_start_up(fake_cuda, monkeypatch):  # noqa: F811
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.gpu import depth as gpu_depth
    from vrt_ros.gpu.signatures import KernelArgumentError

    real = gpu_depth.GpuDepthStats.args

    def misnamed(self, *a, **kw):  # a launch site that lost the kernel's 'scale' argument
        args = real(self, *a, **kw)
        return args[:8] + args[9:]

    monkeypatch.setattr(gpu_depth.GpuDepthStats, "args", misnamed)
    with pytest.raises(KernelArgumentError, match="depth_box_stats"):
        CudaPipeline(values("yolov8"), log=lambda m: None, engine=FakeEngine([IMAGES], HEAD_OUTPUTS["yolov8"]))


@pytest.mark.parametrize("index", range(4))
@pytest.mark.gpu
@pytest.mark.skipif(requires_gpu[1].args[0], reason=requires_gpu[1].kwargs["reason"])
def test_kernel_matches_the_cpu_reference_on_a_gpu(index):
    """The real kernel: 0 mm GPU vs CPU (the same float32), 16UC1 and 32FC1, depth at 1x and 2x."""
    from vrt_ros.gpu.depth import GpuDepthStats
    from vrt_ros.gpu.library import KernelLibrary
    from vrt_ros.gpu.runtime import GpuRuntime

    _, _, boxes, depths = scenes()
    image, scale = depths[index]
    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    rng = np.random.default_rng(index)
    extra = np.sort(rng.uniform(0, [ds.W, ds.H, ds.W, ds.H], (40, 4)).astype(np.float32).reshape(40, 2, 2), axis=1)
    boxes = np.concatenate([boxes, extra.transpose(0, 2, 1).reshape(40, 4)[:, [0, 1, 2, 3]]])
    result = np.zeros(4 + boxes.shape[0] * 6, np.float32)
    result[:4].view(np.int32)[:2] = boxes.shape[0]
    result[4:].reshape(-1, 6)[:, :4] = boxes
    dev = to_device(rt, stream, result)
    stats = GpuDepthStats(rt, KernelLibrary.shared(rt.arch), stream, 1000)
    stats.enqueue(stream, DepthJob(image, scale, RANGE, 50.0), dev.ptr, 4, 6, 100)
    rt.sync(stream)
    got = stats.read(boxes.shape[0])
    ref = box_stats(image.array(), image.units_per_m, boxes, scale, RANGE, 50.0)
    np.testing.assert_array_equal(got, ref)
    stats.close(stream)
    dev.close(stream)
    rt.sync(stream)


@pytest.mark.gpu
@pytest.mark.skipif(requires_gpu[1].args[0], reason=requires_gpu[1].kwargs["reason"])
def test_pipeline_with_depth_on_a_gpu(shared_dir, tmp_path):
    """CudaPipeline (torch engine, YOLOX-nano) on a real photo with a synthetic registered depth: the statistic of
    every detected box equals the CPU reference's over the same boxes (0 mm), one sync per frame, no allocation
    after warm-up, with 16UC1 and 32FC1 depth alternating."""
    import cv2

    from gpu_support import torch_reason

    if torch_reason() is not None:
        pytest.skip(f"torch engine: {torch_reason()}")
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.settings.config import defaults
    from vrt_ros.types import ImageSpec

    v = defaults()
    v.update({"model.path": str(shared_dir / "models" / "yolox_nano.onnx"), "backend": "cuda",
              "engine.cache_dir": str(tmp_path / "cache")})
    pipe = CudaPipeline(v, log=print)
    bgr = cv2.imread(str(shared_dir / "data" / "images" / "darknet_horses.jpg"), cv2.IMREAD_COLOR)
    h, w = bgr.shape[:2]
    spec = ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3)
    rng = np.random.default_rng(7)
    depth_m = (rng.uniform(0.3, 12.0, (h, w)) * 1000).round().astype(np.float32) / 1000
    depth_m[rng.random((h, w)) < 0.15] = np.nan
    jobs = [DepthJob(DepthImage(w, h, "32FC1", w * 4, depth_m.tobytes()), 1.0, RANGE, 50.0),
            DepthJob(DepthImage(w, h, "16UC1", w * 2, ds.to_mm(depth_m).tobytes()), 1.0, RANGE, 30.0)]
    for job in jobs * 3:
        pipe.process(spec, bgr.tobytes(), depth=job)
    before = pipe.runtime.counters.snapshot()
    for k in range(200):
        job = jobs[k % 2]
        dets = pipe.process(spec, bgr.tobytes(), depth=job)
        ref = box_stats(job.image.array(), job.image.units_per_m, dets.boxes, 1.0, RANGE, job.percentile)
        assert len(dets) >= 3
        np.testing.assert_array_equal(dets.depth_stats, ref)
    after = pipe.runtime.counters.snapshot()
    print(f"last timings {pipe.last_timings}")
    assert after["syncs"] - before["syncs"] == 200
    assert after["device_allocs"] == before["device_allocs"] and after["pinned_allocs"] == before["pinned_allocs"]
    pipe.close()


@pytest.mark.gpu
@pytest.mark.skipif(requires_gpu[1].args[0], reason=requires_gpu[1].kwargs["reason"])
@pytest.mark.parametrize("encoding", ["32FC1", "16UC1"])
def test_HC_24_kernel_matches_the_cpu_reference_for_rotated_boxes_on_a_gpu(encoding):
    """The real kernel on oriented boxes: bitwise the CPU reference (0 mm), HC-24's stick placed at 1 m."""
    from vrt_ros.gpu.depth import GpuDepthStats
    from vrt_ros.gpu.library import KernelLibrary
    from vrt_ros.gpu.postprocess import THETA_COLUMN
    from vrt_ros.gpu.runtime import GpuRuntime

    boxes, theta = ds.oriented_boxes()  # HC-24's stick and 30 random oriented boxes
    depth = ds.stick_scene()
    image = (DepthImage(ds.W, ds.H, "32FC1", ds.W * 4, depth.tobytes()) if encoding == "32FC1"
             else DepthImage(ds.W, ds.H, "16UC1", ds.W * 2, ds.to_mm(depth).tobytes()))
    rows = ds.obb_rows(boxes, theta)
    result = np.zeros(4 + rows.size, np.float32)
    result[:4].view(np.int32)[:2] = len(rows)
    result[4:] = rows.ravel()
    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    dev = to_device(rt, stream, result)
    stats = GpuDepthStats(rt, KernelLibrary.shared(rt.arch), stream, 1000, THETA_COLUMN)
    stats.enqueue(stream, DepthJob(image, 1.0, RANGE, 50.0), dev.ptr, 4, rows.shape[1], 100)
    rt.sync(stream)
    got = stats.read(len(rows))
    ref = box_stats(image.array(), image.units_per_m, boxes, 1.0, RANGE, 50.0, theta=theta)
    np.testing.assert_array_equal(got, ref)
    assert got[0, 2] == np.float32(ds.HC24_STICK.z)
    stats.close(stream)
    dev.close(stream)
    rt.sync(stream)
