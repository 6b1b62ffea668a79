"""Batched GPU JPEG decode with nvImageCodec (issue 35): a batch of N 1920x1080 JPEGs decoded in ONE decoder call,
each slot equal to the frame decoded alone, a corrupt JPEG in the batch failing its own slot only, the slots' images
reused (no allocation after the first batch).

Tolerance: a slot of a batch is compared with the same JPEG decoded alone by another decoder (same backends): equal
within 1 LSB per sample, and the test prints how many samples differ (0 expected: the same nvJPEG decode; nvImageCodec
may give part of a list to another backend, CUDA instead of the NVJPG engine, whose IDCT rounds differently); within
1 LSB of OpenCV as every GPU decode (test_gpu_jpeg.py). Frames: the shared photos resized to 1920x1080 and encoded
by OpenCV at quality 90. Skips with the reason without a GPU, nvImageCodec or the shared data.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from gpu_support import from_device, requires_gpu
from jpeg_standin import undefined_quant_table

pytestmark = [*requires_gpu]


def _nvimgcodec_reason():
    from vrt_ros.gpu.jpeg import nvimgcodec_unavailable_reason

    return nvimgcodec_unavailable_reason()


pytestmark.append(pytest.mark.skipif(_nvimgcodec_reason() is not None, reason=f"GPU decode: {_nvimgcodec_reason()}"))

SIZES = (1, 2, 4, 8)


@pytest.fixture(scope="module")
def jpegs(shared_dir) -> list[bytes]:
    """Eight distinct 1920x1080 q90 JPEGs of the shared photos."""
    photos = sorted(p for p in (shared_dir / "data" / "images").iterdir() if p.suffix in (".jpg", ".png"))
    out = []
    for p in photos[:8]:
        img = cv2.resize(cv2.imread(str(p), cv2.IMREAD_COLOR), (1920, 1080), interpolation=cv2.INTER_LINEAR)
        out.append(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())
    assert len(out) == 8, photos
    return out


@pytest.fixture(scope="module")
def gpu():
    from vrt_ros.gpu.runtime import GpuRuntime

    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    yield rt, stream
    stream.close()


def read_rgb(rt, stream, image) -> np.ndarray:
    rows = from_device(rt, stream, image.ptr, (image.height, image.pitch), np.uint8)
    return rows[:, : image.width * 3].reshape(image.height, image.width, 3)


def decoded_alone(rt, stream, jpegs: list[bytes]) -> list[np.ndarray]:
    """Each JPEG decoded alone (one decode call, one sync each) by a decoder of its own."""
    from vrt_ros.gpu.jpeg import NvImageCodecDecoder

    dec = NvImageCodecDecoder(0)
    out = []
    for data in jpegs:
        image = dec.decode(dec.parse(np.frombuffer(data, np.uint8)), stream, slot=0)
        assert image is not None
        out.append(read_rgb(rt, stream, image))
    dec.close()
    return out


def compare(got: np.ndarray, want: np.ndarray, what: str) -> int:
    """Max |difference| (asserted <= 1 LSB); prints how many samples differ."""
    assert got.shape == want.shape, what
    diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
    print(f"{what}: max |diff| {diff.max()}, {np.count_nonzero(diff)} of {diff.size} samples differ")
    assert diff.max() <= 1, what
    return int(diff.max())


def test_a_batch_of_n_1080p_jpegs_is_one_call_each_slot_equal_to_the_frame_alone(gpu, jpegs):
    from vrt_ros.gpu.jpeg import NvImageCodecDecoder

    rt, stream = gpu
    alone = decoded_alone(rt, stream, jpegs)
    dec = NvImageCodecDecoder(0, max_sizes=64)
    bufs = [np.frombuffer(d, np.uint8) for d in jpegs]
    for n in SIZES:
        for round_ in ("first batch (images allocated)", "steady (images reused)"):
            infos = [dec.parse(b) for b in bufs[:n]]
            calls = dec.batch_calls
            images = dec.decode_batch(infos, stream, list(range(n)))
            rt.sync(stream)  # the batch's one sync
            if round_.startswith("steady"):  # one list call (a single frame: nvImageCodec's single form)
                assert dec.batch_calls - calls == (1 if n > 1 else 0), round_
            assert all(i is not None for i in images) and len({i.ptr for i in images}) == n
            for k, image in enumerate(images):
                got = read_rgb(rt, stream, image)
                compare(got, alone[k], f"batch of {n}, {round_}, slot {k} vs alone")
                want = cv2.cvtColor(cv2.imdecode(bufs[k], cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
                compare(got, want, f"batch of {n}, slot {k} vs OpenCV")
    dec.close()


def test_a_corrupt_jpeg_in_a_batch_of_8_fails_its_own_slot_only(gpu, jpegs):
    from vrt_ros.intake.compressed_route import CompressedRouter, DeviceImage
    from vrt_ros.errors import FrameError
    from vrt_ros.gpu.jpeg import NvImageCodecDecoder

    rt, stream = gpu
    alone = decoded_alone(rt, stream, jpegs)
    logs: list[str] = []
    dec = NvImageCodecDecoder(0, max_sizes=64)
    router = CompressedRouter(dec, log=logs.append)
    items = [("jpeg", d) for d in jpegs]
    for bad in (5, 0):  # the second time the list call decodes into the kept images (images=[...])
        batch = list(items)
        batch[bad] = ("jpeg", undefined_quant_table(jpegs[bad]))
        calls = dec.batch_calls
        out = router.decode_batch(batch, stream, list(range(8)))
        rt.sync(stream)
        print(f"corrupt slot {bad}: {type(out[bad]).__name__}: {out[bad]}; list calls {dec.batch_calls - calls}; "
              f"stats {router.stats()}; log {logs}")
        assert isinstance(out[bad], FrameError) and out[bad].reason == "corrupt_compressed"
        for k in set(range(8)) - {bad}:
            assert isinstance(out[k][0], DeviceImage), (k, out[k])
            compare(read_rgb(rt, stream, out[k][0]), alone[k], f"corrupt in slot {bad}: slot {k} vs alone")
    stats = router.stats()
    assert stats["gpu"] == 14 and stats.get("cpu.gpu_refused", 0) == 2, stats
    # nvImageCodec 0.9 answers None at a failed position (one list call per batch), or raises for the whole list
    # (then the router retries stream by stream: gpu.batch_retried): which one it did is printed above.
    dec.close()


def test_slot_images_are_reused_no_device_memory_after_the_first_batch(gpu, jpegs):
    from vrt_ros.gpu.jpeg import NvImageCodecDecoder

    rt, stream = gpu
    dec = NvImageCodecDecoder(0, max_sizes=64)
    bufs = [np.frombuffer(d, np.uint8) for d in jpegs]
    for _ in range(3):  # warm-up: the slots' images, nvJPEG's own buffers
        dec.decode_batch([dec.parse(b) for b in bufs], stream, list(range(8)))
        rt.sync(stream)
    allocs, used = dec.allocations, rt.device_memory_used()
    ptrs = None
    for r in range(40):
        order = bufs[r % 8:] + bufs[: r % 8]  # the slots see different frames of the same size
        images = dec.decode_batch([dec.parse(b) for b in order], stream, list(range(8)))
        rt.sync(stream)
        assert ptrs is None or [i.ptr for i in images] == ptrs
        ptrs = [i.ptr for i in images]
    print(f"decoded images {dec.allocations}; device memory used {used} -> {rt.device_memory_used()} bytes")
    assert dec.allocations == allocs == 8
    assert rt.device_memory_used() - used <= 8 * 2**20  # one-off steps of the decoder library at most (test_gpu_jpeg)
    dec.close()
