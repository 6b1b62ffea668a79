"""GPU preprocess kernel vs a float64 numpy bilinear letterbox and vs the CPU reference (vrt_ros/intake/preprocess.py).

Real photos from the shared data and odd sizes (641x481, 1x1, 4097x3), every 8-bit encoding of the table,
row padding, both alignments, float32 and float16 engine inputs. Max abs error <= 1e-3 after normalisation.
"""

from __future__ import annotations

import zlib

import cv2
import numpy as np
import pytest

from gpu_support import from_device, requires_gpu
from vrt_ros.boxes.geometry import letterbox
from vrt_ros.intake.encodings import BGR_INDEX, ENCODINGS
from vrt_ros.types import ImageSpec, InputSpec

pytestmark = requires_gpu

TOL = 1e-3
YOLOX = InputSpec(width=416, height=416, channel_order="bgr", pad_value=114.0, align="top_left")
ULTRA = InputSpec(
    width=640, height=384, channel_order="rgb", mean=(0.0, 0.0, 0.0), std=(255.0, 255.0, 255.0), pad_value=114.0,
    align="center",
)
IMAGENET = InputSpec(
    width=320, height=320, channel_order="rgb", mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375),
    pad_value=0.0, align="center",
)


@pytest.fixture(scope="module")
def gpu():
    from vrt_ros.gpu.library import KernelLibrary
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    return rt, KernelLibrary.shared(rt.arch), rt.create_stream()


def reference(bgr: np.ndarray, spec: InputSpec) -> np.ndarray:
    """Float64 bilinear letterbox (half-pixel centres, clamped edges) of a BGR image, normalised, (3, H, W)."""
    h, w = bgr.shape[:2]
    lb = letterbox(w, h, spec.width, spec.height, spec.align)

    def taps(n_out: int, n_src: int):
        s = (np.arange(n_out) + 0.5) * (n_src / n_out) - 0.5
        s = np.maximum(s, 0.0)
        i0 = np.minimum(np.floor(s).astype(np.int64), n_src - 1)
        i1 = np.minimum(i0 + 1, n_src - 1)
        f = np.where(i1 == i0, 0.0, s - i0)
        return i0, i1, f

    x0, x1, fx = taps(lb.resized_width, w)
    y0, y1, fy = taps(lb.resized_height, h)
    img = bgr.astype(np.float64)
    top = img[y0][:, x0] * (1 - fx)[None, :, None] + img[y0][:, x1] * fx[None, :, None]
    bot = img[y1][:, x0] * (1 - fx)[None, :, None] + img[y1][:, x1] * fx[None, :, None]
    res = top * (1 - fy)[:, None, None] + bot * fy[:, None, None]
    out = np.full((3, spec.height, spec.width), spec.pad_value, np.float64)
    planes = {"bgr": (0, 1, 2), "rgb": (2, 1, 0)}[spec.channel_order]
    for c, p in enumerate(planes):
        out[c, lb.pad_y : lb.pad_y + lb.resized_height, lb.pad_x : lb.pad_x + lb.resized_width] = res[..., p]
    mean = np.asarray(spec.mean, np.float64)[:, None, None]
    std = np.asarray(spec.std, np.float64)[:, None, None]
    return (out - mean) / std


def encode(bgr: np.ndarray, encoding: str, step: int | None = None, fill: int = 0xFF) -> tuple[ImageSpec, bytes]:
    """The BGR image as a raw buffer of ``encoding`` with row ``step`` (padding bytes set to ``fill``)."""
    enc = ENCODINGS[encoding]
    h, w = bgr.shape[:2]
    if enc.order == "mono":
        px = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)[..., None]
    else:
        px = np.zeros((h, w, enc.channels), np.uint8)
        b, g, r = BGR_INDEX[enc.order]
        px[..., b], px[..., g], px[..., r] = bgr[..., 0], bgr[..., 1], bgr[..., 2]
        if enc.channels == 4:
            px[..., 3] = 0  # alpha 0 must be ignored (HC-03)
    row = w * enc.bytes_per_pixel
    step = step or row
    buf = np.full((h, step), fill, np.uint8)
    buf[:, :row] = px.reshape(h, row)
    return ImageSpec(width=w, height=h, encoding=encoding, step=step), buf.tobytes()


def run_gpu(gpu, spec: InputSpec, image: ImageSpec, data: bytes) -> np.ndarray:
    from vrt_ros.gpu.preprocess import GpuPreprocessor
    from vrt_ros.gpu.upload import Uploader

    rt, lib, stream = gpu
    pre = GpuPreprocessor(lib, spec)
    up = Uploader(rt, "test")
    dst = rt.alloc_device(pre.output_nbytes, stream)
    rt.memset32(dst.ptr, 0x7FC00000, pre.output_nbytes // 4, stream)  # poison with NaN: every element must be written
    src, enc, uploaded = up.upload(image, data, stream)
    pre.enqueue(stream, src, uploaded, enc, dst.ptr)
    dtype = np.float16 if spec.dtype == "float16" else np.float32
    out = from_device(rt, stream, dst.ptr, (3, spec.height, spec.width), dtype).astype(np.float64)
    up.close(stream)
    dst.close(stream)
    return out


def photos(shared_dir):
    names = sorted(p for p in (shared_dir / "data" / "images").iterdir() if p.suffix in (".jpg", ".png"))
    assert names, "no photos in shared data"
    return [(p.name, cv2.imread(str(p), cv2.IMREAD_COLOR)) for p in names[:4]]


def test_real_photos_match_float64_reference_and_cpu_preprocess(gpu, shared_dir):
    from vrt_ros.intake.preprocess import CpuPreprocessor

    for name, bgr in photos(shared_dir):
        for spec in (YOLOX, ULTRA):
            image, data = encode(bgr, "bgr8")
            got = run_gpu(gpu, spec, image, data)
            assert np.isfinite(got).all(), name
            err_ref = np.abs(got - reference(bgr, spec)).max()
            cpu, _ = CpuPreprocessor(spec)(bgr)
            err_cpu = np.abs(got - cpu[0]).max()
            print(f"{name} -> {spec.width}x{spec.height}: max abs err vs float64 {err_ref:.2e}, vs CPU {err_cpu:.2e}")
            assert err_ref <= TOL and err_cpu <= TOL, name


@pytest.mark.parametrize("size", [(641, 481), (1, 1), (4097, 3), (3, 4097), (2, 7)])
def test_odd_sizes(gpu, size):
    w, h = size
    rng = np.random.default_rng(w * 7919 + h)
    bgr = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    for spec in (YOLOX, ULTRA, IMAGENET):
        image, data = encode(bgr, "bgr8")
        err = np.abs(run_gpu(gpu, spec, image, data) - reference(bgr, spec)).max()
        print(f"{w}x{h} -> {spec.width}x{spec.height} ({spec.align}): max abs err {err:.2e}")
        assert err <= TOL


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_every_encoding_with_row_padding(gpu, encoding):
    """HC-01/HC-03/HC-04: every encoding of the table, packed and with padded rows (padding 0xFF), gives the
    tensor of its CPU reference conversion (vrt_ros.intake.frames.to_bgr). Encodings with a kernel are read on the GPU;
    the others are converted on the CPU and uploaded as bgr8."""
    from vrt_ros.intake.frames import to_bgr

    enc = ENCODINGS[encoding]
    w, h = (642 if enc.even_width else 641), 481
    rng = np.random.default_rng(zlib.crc32(encoding.encode()))
    row = w * enc.bytes_per_pixel
    for step in (row, row + 1 + (row % 2), row + 2048):  # (even extra padding keeps 16-bit rows aligned)
        raw = np.full((h, step), 0xFF, np.uint8)
        raw[:, :row] = rng.integers(0, 256, (h, row), dtype=np.uint8)
        image = ImageSpec(width=w, height=h, encoding=encoding, step=step)
        data = raw.tobytes()
        bgr = to_bgr(image, data)
        for spec in (YOLOX, IMAGENET):
            err = np.abs(run_gpu(gpu, spec, image, data) - reference(bgr, spec)).max()
            assert err <= TOL, (encoding, step, spec.width, err)
    print(f"{encoding}: {'GPU kernel ' + enc.kernel if enc.kernel else 'CPU conversion to bgr8, then GPU'}; ok")


@pytest.mark.parametrize("encoding", [e for e, row in sorted(ENCODINGS.items()) if row.order in ("uyvy", "yuyv")])
def test_yuv422_kernel_matches_opencv_conversion(gpu, encoding):
    """The 4:2:2 kernel (BT.601 video range, OpenCV's fixed point) read on the GPU gives the tensor of the CPU
    reference conversion, whatever the table's ``kernel`` column says today (the row is given the entry here)."""
    import dataclasses

    from gpu_support import to_device
    from vrt_ros.intake.frames import to_bgr
    from vrt_ros.gpu.preprocess import YUV422_ENTRY, GpuPreprocessor

    rt, lib, stream = gpu
    enc = dataclasses.replace(ENCODINGS[encoding], kernel=YUV422_ENTRY)
    rng = np.random.default_rng(zlib.crc32(encoding.encode()))
    for w, h, pad in ((642, 481, 0), (642, 481, 6), (2, 1, 0), (4098, 3, 2)):
        row = w * 2
        raw = np.full((h, row + pad), 0xFF, np.uint8)
        raw[:, :row] = rng.integers(0, 256, (h, row), dtype=np.uint8)
        image = ImageSpec(width=w, height=h, encoding=encoding, step=row + pad)
        bgr = to_bgr(image, raw.tobytes())
        src = to_device(rt, stream, raw)
        for spec in (YOLOX, IMAGENET, InputSpec(**{**ULTRA.__dict__, "dtype": "float16"})):
            pre = GpuPreprocessor(lib, spec)
            dst = rt.alloc_device(pre.output_nbytes, stream)
            pre.enqueue(stream, src.ptr, image, enc, dst.ptr)
            dtype = np.float16 if spec.dtype == "float16" else np.float32
            got = from_device(rt, stream, dst.ptr, (3, spec.height, spec.width), dtype).astype(np.float64)
            err = np.abs(got - reference(bgr, spec)).max()
            assert err <= TOL, (encoding, w, h, spec.width, err)
            dst.close(stream)
        src.close(stream)
    print(f"{encoding}: GPU 4:2:2 kernel matches cv2 conversion + bilinear within {TOL}")


def test_unresized_frame_gives_ultralytics_tensor_bit_for_bit(gpu):
    """As the CPU (test_preprocess.py): a 640x640 bgr8 frame gives exactly ``rgb / float32(255)``, std divided."""
    spec = InputSpec(width=640, height=640, channel_order="rgb", mean=(0.0, 0.0, 0.0), std=(255.0, 255.0, 255.0),
                     pad_value=114.0, align="center")
    bgr = np.arange(640 * 640 * 3, dtype=np.uint32).reshape(640, 640, 3).astype(np.uint8)
    got = run_gpu(gpu, spec, ImageSpec(width=640, height=640, encoding="bgr8", step=640 * 3), bgr.tobytes())
    want = np.ascontiguousarray(bgr[..., ::-1].transpose(2, 0, 1)).astype(np.float32) / np.float32(255)
    assert np.array_equal(np.asarray(got, np.float32), want)


def test_alpha_ignored_and_channel_order_exact(gpu):
    """HC-03: a 4x4 image with every pixel B=10 G=20 R=30 in bgra8 and rgba8 (alpha 0) gives the bgr8 tensor."""
    spec = InputSpec(width=4, height=4, channel_order="bgr", pad_value=0.0)
    want = np.stack([np.full((4, 4), v, np.float64) for v in (10, 20, 30)])
    for encoding, px in (("bgr8", (10, 20, 30)), ("bgra8", (10, 20, 30, 0)), ("rgba8", (30, 20, 10, 0)), ("rgb8", (30, 20, 10))):
        data = np.tile(np.asarray(px, np.uint8), 16).tobytes()
        image = ImageSpec(width=4, height=4, encoding=encoding, step=4 * len(px))
        np.testing.assert_allclose(run_gpu(gpu, spec, image, data), want, atol=1e-6, err_msg=encoding)


def test_float16_input(gpu, shared_dir):
    """HC-10: an FP16 engine input holds the FP32 tensor rounded to half."""
    name, bgr = photos(shared_dir)[0]
    spec = InputSpec(**{**ULTRA.__dict__, "dtype": "float16"})
    image, data = encode(bgr, "bgr8")
    got = run_gpu(gpu, spec, image, data)
    err = np.abs(got - reference(bgr, spec)).max()
    print(f"{name} float16: max abs err {err:.2e}")
    assert err <= TOL


def test_each_frame_geometry_allocates_once(gpu):
    """A resolution change allocates staging once; going back to an earlier geometry reuses its buffers."""
    from vrt_ros.gpu.upload import Uploader

    rt, _, stream = gpu
    up = Uploader(rt, "test")
    a = encode(np.zeros((48, 64, 3), np.uint8), "bgr8")
    b = encode(np.zeros((96, 128, 3), np.uint8), "bgr8")
    before = rt.counters.snapshot()
    for image, data in (a, a, a, b, b, a):
        up.upload(image, data, stream)
        rt.sync(stream)
    after = rt.counters.snapshot()
    assert up.reallocations == 2
    assert after["pinned_allocs"] - before["pinned_allocs"] == 2
    assert after["device_allocs"] - before["device_allocs"] == 2
    up.close(stream)
