"""GPU kernels that read mono16 and 8-bit Bayer frames directly, against the CPU reference on real photos.

The reference is :func:`vrt_ros.intake.frames.to_bgr` (mono16: ``sample >> 8``; Bayer: OpenCV's bilinear demosaic)
followed by the float64 bilinear letterbox of test_gpu_preprocess and by the CPU preprocess
(:class:`vrt_ros.intake.preprocess.CpuPreprocessor`). The frames go through the production path (Uploader -> table row
-> kernel). Real photos from the shared data are mosaicked into each Bayer pattern or widened to 16 bits
(``grey * 257`` plus noise), at their own sizes and at 641x481, packed and with padded rows (padding 0xFF, odd
steps), both byte orders. Max abs error after normalisation <= 1e-3, i.e. every demosaiced value is exact.
"""

from __future__ import annotations

import dataclasses
import zlib

import cv2
import numpy as np
import pytest

from gpu_support import requires_gpu
from test_gpu_preprocess import IMAGENET, TOL, ULTRA, YOLOX, gpu, photos, reference, run_gpu  # noqa: F401 (fixture)
from vrt_ros.intake.encodings import ENCODINGS
from vrt_ros.intake.frames import to_bgr
from vrt_ros.types import ImageSpec, InputSpec

pytestmark = requires_gpu

BAYER = sorted(e for e, row in ENCODINGS.items() if row.order.startswith("bayer_"))
# Colour (0 = B, 1 = G, 2 = R) of the 2x2 block at (0, 0), row-major, read from the ROS encoding name.
_LETTER = {"b": 0, "g": 1, "r": 2}
ULTRA16 = InputSpec(**{**ULTRA.__dict__, "dtype": "float16"})
SPECS = (YOLOX, IMAGENET, ULTRA16)


def mosaic(bgr: np.ndarray, encoding: str) -> np.ndarray:
    """The Bayer mosaic a sensor with ``encoding``'s pattern would record of ``bgr``: (H, W) uint8."""
    block = ENCODINGS[encoding].order.removeprefix("bayer_")
    h, w = bgr.shape[:2]
    channel = np.empty((h, w), np.intp)
    for i, letter in enumerate(block):
        channel[i // 2 :: 2, i % 2 :: 2] = _LETTER[letter]
    return np.take_along_axis(bgr, channel[..., None], axis=2)[..., 0]


def raw(pixels: np.ndarray, step: int) -> bytes:
    """Rows of ``pixels`` (H, row bytes) uint8 padded to ``step`` bytes with 0xFF."""
    h, row = pixels.shape
    buf = np.full((h, step), 0xFF, np.uint8)
    buf[:, :row] = pixels
    return buf.tobytes()


def max_error(gpu, spec: InputSpec, image: ImageSpec, data: bytes) -> tuple[float, float]:
    """(max abs error vs the float64 reference, vs the CPU preprocess) of the GPU tensor for one frame."""
    from vrt_ros.intake.preprocess import CpuPreprocessor

    got = run_gpu(gpu, spec, image, data)
    assert np.isfinite(got).all()
    bgr = to_bgr(image, data)
    cpu, _ = CpuPreprocessor(spec)(bgr)
    return float(np.abs(got - reference(bgr, spec)).max()), float(np.abs(got - cpu[0]).max())


def summary(worst: dict[str, list[float]]) -> str:
    """'float32: max abs err vs float64 .., vs CPU preprocess ..; float16: ...' (float16 includes half rounding)."""
    return "; ".join(f"{d}: max abs err vs float64 {r:.2e}, vs CPU preprocess {c:.2e}" for d, (r, c) in worst.items())


def assert_pattern_orientation(bgr: np.ndarray, m: np.ndarray, encoding: str) -> None:
    """The table's OpenCV code recovers the photo from its mosaic far better than the other three patterns do
    (mean abs error below half of theirs): mosaic() and the table agree on the pattern's orientation."""
    codes = {ENCODINGS[e].cv_code for e in BAYER}
    err = {c: np.abs(cv2.cvtColor(m, getattr(cv2, c)).astype(np.int16) - bgr).mean() for c in codes}
    own = err.pop(ENCODINGS[encoding].cv_code)
    assert own < 0.5 * min(err.values()), (encoding, own, err)


def real_frames(shared_dir) -> list[tuple[str, np.ndarray]]:
    """Real photos at their own sizes plus one resized to the odd size 641x481."""
    frames = photos(shared_dir)[:3]
    name, bgr = frames[0]
    frames.append((f"{name}@641x481", cv2.resize(bgr, (641, 481), interpolation=cv2.INTER_AREA)))
    return frames


@pytest.mark.parametrize("encoding", BAYER)
def test_bayer_kernel_matches_opencv_demosaic_on_real_photos(gpu, shared_dir, encoding):
    assert ENCODINGS[encoding].kernel == "letterbox_bayer8"
    worst: dict[str, list[float]] = {}
    runs = 0
    for name, bgr in real_frames(shared_dir):
        m = mosaic(bgr, encoding)
        h, w = m.shape
        assert_pattern_orientation(bgr, m, encoding)
        for step in (w, w + 1, w + 64 + 3):
            image = ImageSpec(width=w, height=h, encoding=encoding, step=step)
            data = raw(m, step)
            for spec in SPECS:
                err_ref, err_cpu = max_error(gpu, spec, image, data)
                assert err_ref <= TOL and err_cpu <= TOL, (name, step, spec.width, spec.dtype, err_ref, err_cpu)
                w_ref, w_cpu = worst.setdefault(spec.dtype, [0.0, 0.0])
                worst[spec.dtype] = [max(w_ref, err_ref), max(w_cpu, err_cpu)]
                runs += 1
    print(f"{encoding}: GPU kernel letterbox_bayer8, {runs} frames/specs on real photos; {summary(worst)}")


@pytest.mark.parametrize("size", [(1, 1), (2, 2), (2, 5), (5, 2), (3, 3), (4, 3), (3, 4), (7, 5), (4097, 3)])
def test_bayer_tiny_and_thin_sizes(gpu, size):
    """OpenCV accepts any size: below 3 pixels wide or high its demosaic is black (no interior). The GPU kernel
    gives the same tensor; from 3x3 on it demosaics with OpenCV's border copy."""
    w, h = size
    rng = np.random.default_rng(w * 7919 + h)
    for encoding in BAYER:
        m = rng.integers(1, 256, (h, w), dtype=np.uint8)
        image = ImageSpec(width=w, height=h, encoding=encoding, step=w + 1)
        data = raw(m, w + 1)
        if w < 3 or h < 3:
            assert not to_bgr(image, data).any(), "OpenCV's demosaic of a frame without interior is black"
        for spec in SPECS:
            err_ref, err_cpu = max_error(gpu, spec, image, data)
            assert err_ref <= TOL and err_cpu <= TOL, (encoding, size, spec.width, err_ref, err_cpu)
    print(f"bayer {w}x{h}: all patterns match the CPU reference")


@pytest.mark.parametrize("bigendian", [False, True])
def test_mono16_kernel_reads_high_byte_on_real_photos(gpu, shared_dir, bigendian):
    assert ENCODINGS["mono16"].kernel == "letterbox_u8"
    worst: dict[str, list[float]] = {}
    runs = 0
    rng = np.random.default_rng(zlib.crc32(b"mono16") + bigendian)
    frames = real_frames(shared_dir) + [("random 1x1", rng.integers(0, 256, (1, 1, 3), dtype=np.uint8))]
    for name, bgr in frames:
        grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY).astype(np.int64)
        # a 16-bit camera's view of the photo: full-range scaling plus sensor noise (which also fills the low byte)
        samples = np.clip(grey * 257 + rng.integers(-300, 301, grey.shape), 0, 65535).astype(np.uint16)
        h, w = samples.shape
        pixels = samples.astype(">u2" if bigendian else "<u2").view(np.uint8).reshape(h, 2 * w)
        for step in (2 * w, 2 * w + 1, 2 * w + 6):  # an odd step puts 16-bit samples at odd addresses
            image = ImageSpec(width=w, height=h, encoding="mono16", step=step, is_bigendian=bigendian)
            data = raw(pixels, step)
            assert (to_bgr(image, data)[..., 0] == samples >> 8).all()
            for spec in SPECS:
                err_ref, err_cpu = max_error(gpu, spec, image, data)
                assert err_ref <= TOL and err_cpu <= TOL, (name, step, spec.width, spec.dtype, err_ref, err_cpu)
                w_ref, w_cpu = worst.setdefault(spec.dtype, [0.0, 0.0])
                worst[spec.dtype] = [max(w_ref, err_ref), max(w_cpu, err_cpu)]
                runs += 1
    order = "big" if bigendian else "little"
    print(f"mono16 ({order}-endian): GPU kernel letterbox_u8 (high byte), {runs} frames/specs; {summary(worst)}")


def test_row_without_kernel_still_converts_on_cpu(gpu, shared_dir, monkeypatch):
    """The CPU -> bgr8 fallback for a table row whose kernel is "" gives the same tensor as the Bayer kernel."""
    from vrt_ros.gpu.upload import Uploader

    rt, _, stream = gpu
    name, bgr = photos(shared_dir)[0]
    encoding = BAYER[0]
    m = mosaic(bgr, encoding)
    h, w = m.shape
    image = ImageSpec(width=w, height=h, encoding=encoding, step=w)
    direct = run_gpu(gpu, YOLOX, image, m.tobytes())
    monkeypatch.setitem(ENCODINGS, encoding, dataclasses.replace(ENCODINGS[encoding], kernel=""))
    up = Uploader(rt, "test")
    _, enc, uploaded = up.upload(image, m.tobytes(), stream)
    rt.sync(stream)
    up.close(stream)
    # converted to bgr8 on the CPU; a large one is then staged by the channel swap as rgb8 (vrt_ros.gpu.host_copy)
    assert enc.name in ("bgr8", "rgb8") and uploaded.step == 3 * w
    fallback = run_gpu(gpu, YOLOX, image, m.tobytes())
    err = np.abs(fallback - direct).max()
    print(f"{name} {encoding}: CPU fallback vs GPU kernel max abs err {err:.2e}")
    assert err <= TOL
