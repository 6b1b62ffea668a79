"""GPU preprocess kernel vs a float64 numpy bilinear letterbox and vs the CPU reference (vrt_ros/preprocess.py).

Real photos from the shared data and odd sizes (641x481, 1x1, 4097x3), every 8-bit encoding of the table,
row padding, both alignments, float32 and float16 engine inputs. Max abs error <= 1e-3 after normalisation.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from gpu_support import from_device, requires_gpu
from vrt_ros.encodings import BGR_INDEX, ENCODINGS
from vrt_ros.geometry import letterbox
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
    src, enc = up.upload(image, data, stream)
    pre.enqueue(stream, src, image, enc, dst.ptr)
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
    from vrt_ros.preprocess import CpuPreprocessor

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
    """HC-01/HC-03: padded rows (filled 0xFF) and every sample order give the packed-bgr8 tensor."""
    rng = np.random.default_rng(3)
    bgr = rng.integers(0, 256, (481, 641, 3), dtype=np.uint8)
    if encoding == "mono8":  # mono: the grey image replicated to three channels
        grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        expected_src = np.repeat(grey[..., None], 3, axis=2)
    else:
        expected_src = bgr
    enc = ENCODINGS[encoding]
    for spec in (YOLOX, IMAGENET):
        want = reference(expected_src, spec)
        for step in (641 * enc.bytes_per_pixel, 641 * enc.bytes_per_pixel + 1, 2048 * enc.bytes_per_pixel):
            image, data = encode(bgr, encoding, step)
            err = np.abs(run_gpu(gpu, spec, image, data) - want).max()
            assert err <= TOL, (encoding, step, err)


def test_float16_input(gpu, shared_dir):
    """HC-10: an FP16 engine input holds the FP32 tensor rounded to half."""
    name, bgr = photos(shared_dir)[0]
    spec = InputSpec(**{**ULTRA.__dict__, "dtype": "float16"})
    image, data = encode(bgr, "bgr8")
    got = run_gpu(gpu, spec, image, data)
    err = np.abs(got - reference(bgr, spec)).max()
    print(f"{name} float16: max abs err {err:.2e}")
    assert err <= TOL


def test_resolution_change_reallocates_once(gpu):
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
    assert up.reallocations == 3
    assert after["pinned_allocs"] - before["pinned_allocs"] == 3
    assert after["device_allocs"] - before["device_allocs"] == 3
    up.close(stream)
