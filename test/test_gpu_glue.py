"""The GPU glue in CI: uploader, preprocessor, postprocessor, kernel library and CudaPipeline run on a CPU against
the recording stand-in of the CUDA runtime (test/fake_cuda.py), and every launch is checked against the kernel's
``extern "C"`` signature parsed from kernels/*.cu (issue 12, item 8; items 3-5 and 7 where they need no GPU)."""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import numpy as np
import pytest

from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from vrt_ros.faults import fatal_cuda_error
from vrt_ros.gpu.signatures import KernelArgumentError, load_signatures, parse_source
from vrt_ros.settings.config import defaults
from vrt_ros.types import ImageSpec, TensorInfo

REPO = Path(__file__).resolve().parents[1]
W = H = 640
IMAGES = TensorInfo("images", (1, 3, H, W), "float32")
#: (head, outputs) at a 640x640 input: one of each GPU decode.
HEAD_OUTPUTS = {
    "yolov8": [TensorInfo("output0", (1, 84, 8400), "float32")],
    "yolox": [TensorInfo("output", (1, 8400, 85), "float32")],
    "yolov8_pose": [TensorInfo("output0", (1, 56, 8400), "float32")],
    "end2end": [TensorInfo("output", (1, 100, 6), "float32")],
    "centerface": [TensorInfo(n, (1, c, H // 4, W // 4), "float32") for n, c in
                   (("537", 1), ("538", 2), ("539", 2), ("540", 10))],
}


def values(head: str = "auto", **extra):
    v = defaults()
    v.update({"model.path": "model.onnx", "backend": "cuda", "model.head": head, **extra})
    return v


def pipeline(head: str, **kw):
    from vrt_ros.inference.backends.cuda import CudaPipeline

    engine = kw.pop("engine", None) or FakeEngine([IMAGES], HEAD_OUTPUTS[head])
    return CudaPipeline(values(head), log=lambda m: None, engine=engine, **kw)


def bgr(w: int, h: int, seed: int = 0) -> tuple[ImageSpec, np.ndarray]:
    img = np.random.default_rng(seed).integers(0, 256, (h, w, 3), np.uint8)
    return ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), img


# ----------------------------------------------------------------------------------------- signatures
def test_every_kernel_entry_has_a_parsed_signature():
    sigs = load_signatures(REPO / "kernels")
    entries = {e for (_, e) in sigs}
    from vrt_ros.intake.encodings import ENCODINGS

    wanted = {e.kernel + s for e in ENCODINGS.values() if e.kernel for s in ("", "_f16")}
    wanted |= {"decode_yolox", "decode_yolov8", "decode_yolov8_pose", "decode_end2end", "decode_centerface",
               "rank_by_score", "nms_mask", "nms_reduce", "finalize", "decode_yolov8_seg", "decode_yolov8_obb",
               "decode_detr", "nms_mask_rotated", "finalize_extras", "mask_logits", "mask_labels"}
    assert wanted <= entries
    fin = sigs[("postprocess", "finalize")]
    assert [p.ctype for p in fin.params][:3] == ["float*", "int", "int*"] and len(fin.params) == 15
    assert sigs[("preprocess", "letterbox_u8")].params[15].ctype == "double"


def test_signature_check_names_kernel_and_parameter():
    (sig,) = parse_source('extern "C" __global__ void k(const float* __restrict__ a, int n, double s) {}', "m").values()
    sig.check((np.uint64(1), np.int32(2), np.float64(3)))
    with pytest.raises(KernelArgumentError, match=r"m\.k takes 3 arguments .* passes 2"):
        sig.check((np.uint64(1), np.int32(2)))
    with pytest.raises(KernelArgumentError, match=r"argument 1 'int n' needs numpy.int32, the launch passes numpy.float32"):
        sig.check((np.uint64(1), np.float32(2), np.float64(3)))
    with pytest.raises(KernelArgumentError, match="argument 0 'float\\* a' needs numpy.uint64"):
        sig.check((1, np.int32(2), np.float64(3)))  # a Python int is not a device address of the right width


def test_signature_parser_reads_real_cuda_declarations():
    """Forms real .cu files use: ``__launch_bounds__`` (after or before ``void``), an ``extern "C" { }`` block,
    and <cstdint>/size_t/bool parameters; C++-linkage kernels and templates are no entries (no C name to load)."""
    src = """
    #define BLOCK 256
    extern "C" __global__ void __launch_bounds__(BLOCK, 2) bounded(const float* __restrict__ x, size_t n) {}
    extern "C" __global__ __launch_bounds__(128) void bounded_first(int32_t k, uint8_t* __restrict__ y) {}
    extern "C" {
    __device__ int helper(int v) { if (v) { return v; } return 0; }
    __global__ void in_block(const unsigned char* src, uint64_t bytes, bool flag, int64_t off, uint16_t h) {}
    }
    __global__ void mangled(int x) {}
    template <typename T> __global__ void templated(T* p) {}
    """
    sigs = parse_source(src, "m")
    assert sorted(sigs) == ["bounded", "bounded_first", "in_block"]
    assert [(p.ctype, p.name) for p in sigs["bounded"].params] == [("float*", "x"), ("size_t", "n")]
    sigs["bounded"].check((np.uint64(1), np.uint64(2)))
    sigs["bounded_first"].check((np.int32(1), np.uint64(2)))
    sigs["in_block"].check((np.uint64(1), np.uint64(2), np.bool_(True), np.int64(3), np.uint16(4)))
    with pytest.raises(KernelArgumentError, match="argument 1 'size_t n' needs numpy.uint64"):
        sigs["bounded"].check((np.uint64(1), np.int32(2)))


# ----------------------------------------------------------------------------------------- end to end on the stand-in
@pytest.mark.parametrize("head", sorted(HEAD_OUTPUTS))
def test_pipeline_end_to_end_on_stand_in(fake_cuda, head):  # noqa: F811
    pipe = pipeline(head)
    rt = pipe.runtime
    syncs0 = rt.counters.syncs
    frames = [bgr(640, 480, 0), bgr(1280, 720, 1)] + [bgr(640, 480, i) for i in range(4)]
    for spec, img in frames:
        dets = pipe.process(spec, img)
        assert len(dets) == 0  # kernels compute nothing here; the result header read back says 0
        assert set(pipe.last_timings) == {"upload", "preprocess", "inference", "postprocess", "total", "batch_size"}
    assert fake_cuda.hazards == []
    assert fake_cuda.pending() == 0
    # one sync per frame; per frame: letterbox, decode, rank, [NMS mask], reduce, finalize
    assert rt.counters.syncs - syncs0 == len(frames)
    n = 6 if pipe.head.applies_nms else 5
    per_frame = [e.entry for e in fake_cuda.launches[-n:]]
    assert per_frame[0] == "letterbox_u8" and per_frame[1].startswith("decode_") and per_frame[-1] == "finalize"
    assert len(fake_cuda.launches) == n * len(frames)
    assert fake_cuda.copies == {"h2d": len(frames) + (1 if head == "yolox" else 0), "d2h": len(frames)}
    pipe.close()
    assert fake_cuda.live() == [] and fake_cuda.hazards == []


@pytest.mark.parametrize("encoding", ["rgb8", "mono16", "yuv422", "bayer_grbg8", "bgra8"])
def test_every_encoding_launches_with_checked_arguments(fake_cuda, encoding):  # noqa: F811
    from vrt_ros.intake.encodings import ENCODINGS

    enc = ENCODINGS[encoding]
    pipe = pipeline("yolov8")
    w, h = 64, 48
    spec = ImageSpec(width=w, height=h, encoding=encoding, step=w * enc.bytes_per_pixel)
    pipe.process(spec, bytes(h * spec.step))
    assert fake_cuda.launches[-6].entry == enc.kernel and fake_cuda.hazards == []
    pipe.close()


def test_wrong_argument_name_or_count_fails_at_start_up(fake_cuda, monkeypatch):  # noqa: F811
    """Launch arguments are built by parameter name from the kernels' signatures: a misspelt or missing name fails
    at start-up, naming the kernel and the parameter."""
    from vrt_ros.gpu import preprocess
    from vrt_ros.heads.base import GpuDecode
    from vrt_ros.heads.yolov8 import Yolov8Head

    good = Yolov8Head.gpu_decode

    def misnamed(self):
        spec = good(self)
        return GpuDecode(spec.entry, spec.grid, lambda out, tables: {
            ("num_class" if k == "num_classes" else k): v for k, v in spec.args(out, tables).items()})

    monkeypatch.setattr(Yolov8Head, "gpu_decode", misnamed)
    with pytest.raises(KernelArgumentError, match=r"decode_yolov8\(.*no value for \['num_classes'\].*no parameter named \['num_class'\]"):
        pipeline("yolov8")
    monkeypatch.setattr(Yolov8Head, "gpu_decode", good)
    for order in ("rgb", "bgr"):  # two planes instead of three: one argument short
        monkeypatch.setitem(preprocess._PLANES, order, preprocess._PLANES[order][:2])
    with pytest.raises(KernelArgumentError, match=r"letterbox_u8\(.*no value for \['plane2'\]"):
        pipeline("yolov8")
    assert fake_cuda.live() == []  # the failed start-ups freed what they had allocated


def test_launch_arguments_by_name_follow_the_signature_order_and_types():
    """Signature.args puts named values in the kernel's parameter order with the C types' numpy types."""
    from vrt_ros.gpu.signatures import parse_source

    sig = parse_source('extern "C" __global__ void k(const float* __restrict__ a, int n, float t, double s) {}', "m")["k"]
    args = sig.args(t=0.5, s=2.0, n=3, a=4096)
    assert args == (4096, 3, 0.5, 2.0)
    assert [type(a) for a in args] == [np.uint64, np.int32, np.float32, np.float64]
    sig.check(args)
    assert sig.args(a=0, n=True, t=1, s=1)[1] == 1  # bool -> 0/1, int -> float
    with pytest.raises(KernelArgumentError, match="'int n' needs an integer"):
        sig.args(a=0, n=1.5, t=1.0, s=1.0)


def test_stand_in_checks_launches_independently(fake_cuda):  # noqa: F811
    """A launch the product forgot to check still fails on the stand-in."""
    from cuda.core import LaunchConfig, launch

    from vrt_ros.gpu.library import KernelLibrary

    pipe = pipeline("yolov8")
    k = KernelLibrary.shared("90").kernel("postprocess", "rank_by_score")
    with pytest.raises(KernelArgumentError):
        launch(pipe.stream, LaunchConfig(grid=1, block=1), k, np.uint64(0), np.int32(1))
    pipe.close()


# ----------------------------------------------------------------------------------------- item 4: cameras
def test_alternating_cameras_allocate_nothing_after_warm_up(fake_cuda):  # noqa: F811
    pipe = pipeline("yolov8")
    rt = pipe.runtime
    big, small = bgr(1920, 1080, 0), bgr(640, 480, 1)
    for spec, img in (big, small):
        pipe.process(spec, img)
    before = rt.counters.snapshot()
    builds = (pipe._pre._launches.builds, pipe._post._launches.builds)
    n = 200
    for i in range(n):
        spec, img = (big, small)[i % 2]
        pipe.process(spec, img)
    after = rt.counters.snapshot()
    assert after["device_allocs"] == before["device_allocs"] and after["pinned_allocs"] == before["pinned_allocs"]
    assert after["syncs"] - before["syncs"] == n
    assert (pipe._pre._launches.builds, pipe._post._launches.builds) == builds  # argument tuples reused
    assert fake_cuda.hazards == []
    pipe.close()


# ----------------------------------------------------------------------------------------- item 5: failed frames
def test_failed_frame_leaves_nothing_in_flight(fake_cuda):  # noqa: F811
    engine = FakeEngine([IMAGES], HEAD_OUTPUTS["yolov8"])
    pipe = pipeline("yolov8", engine=engine)
    spec, img = bgr(640, 480)
    pipe.process(spec, img)
    engine.fail_with = RuntimeError("engine exploded")
    with pytest.raises(RuntimeError, match="exploded"):
        pipe.process(spec, img)  # the H2D and the letterbox were queued before the engine failed
    assert fake_cuda.pending() == 0
    engine.fail_with = None
    fake_cuda.fail_next("d2h", "CUDA_ERROR_INVALID_VALUE")
    with pytest.raises(Exception, match="cuMemcpyDtoHAsync"):
        pipe.process(spec, img)
    assert fake_cuda.pending() == 0
    # a resolution change after the failures frees nothing in flight, and frames go on
    pipe.process(*bgr(1280, 720))
    pipe.process(spec, img)
    assert fake_cuda.hazards == []
    pipe.close()


def test_poisoned_context_error_is_fatal(fake_cuda):  # noqa: F811
    pipe = pipeline("yolov8")
    spec, img = bgr(640, 480)
    fake_cuda.poison("CUDA_ERROR_ILLEGAL_ADDRESS")
    with pytest.raises(Exception) as info:
        pipe.process(spec, img)
    assert fatal_cuda_error(info.value) == "CUDA_ERROR_ILLEGAL_ADDRESS"
    pipe.close()  # must not raise on a poisoned context


# ----------------------------------------------------------------------------------------- item 3: overflow counted
def test_candidate_overflow_is_counted(fake_cuda):  # noqa: F811
    """With a capacity below the head's cells, a frame with more candidates is counted (stats, for /diagnostics);
    with the default capacity (all cells) it cannot happen."""
    def decode(args):  # the decode kernel found 5000 candidates
        ctypes.c_int32.from_address(int(args[-1])).value = 5000

    def finalize(args):  # header: detections, candidates found
        found = ctypes.c_int32.from_address(int(args[5])).value
        (ctypes.c_int32 * 2).from_address(int(args[-1]))[:] = [0, found]

    fake_cuda.emulators.update({"decode_yolov8": decode, "finalize": finalize})
    default = pipeline("yolov8")
    assert default._post.capacity == 8400
    small = pipeline("yolov8", candidate_capacity=4096)
    spec, img = bgr(640, 480)
    default.process(spec, img)
    small.process(spec, img)
    small.process(spec, img)
    assert default.stats == {"candidate_overflows": 0}
    assert small.stats == {"candidate_overflows": 2}
    default.close()
    small.close()


def test_default_capacity_keeps_every_cell_unless_the_nms_mask_exceeds_its_budget(fake_cuda, caplog):  # noqa: F811
    """Every cell fits for the usual heads (exact CPU set); a head whose mask would pass 256 MiB (CenterFace at
    1920x1088: 130560 cells, 2 GiB) is capped at the largest capacity whose mask fits, with one warning."""
    from vrt_ros.gpu.postprocess import NMS_MASK_BUDGET_BYTES, default_capacity, mask_nbytes

    for cells in (3549, 8400, 33600, 45056):
        assert default_capacity(cells) == cells
    cap = default_capacity(130560)
    assert mask_nbytes(cap) <= NMS_MASK_BUDGET_BYTES < mask_nbytes(cap + 1) and cap < 130560
    big = [TensorInfo(n, (1, c, 1088 // 4, 1920 // 4), "float32") for n, c in
           (("537", 1), ("538", 2), ("539", 2), ("540", 10))]
    images = TensorInfo("images", (1, 3, 1088, 1920), "float32")
    with caplog.at_level(logging.WARNING, logger="vrt_ros.gpu.postprocess"):
        pipe = pipeline("centerface", engine=FakeEngine([images], big))
    assert pipe._post.capacity == cap
    assert any("capacity capped" in r.getMessage() and "130560" in r.getMessage() for r in caplog.records)
    pipe.close()


# ----------------------------------------------------------------------------------------- item 7: cubin cache
def test_corrupt_cached_cubin_is_rebuilt(fake_cuda, tmp_path, caplog):  # noqa: F811
    from vrt_ros.gpu.library import KernelLibrary

    cache = tmp_path / "kernels"
    first = KernelLibrary("90", cache)
    first.kernel("postprocess", "finalize")
    (path,) = cache.glob("postprocess-*.cubin")
    second = KernelLibrary("90", cache)
    second.kernel("postprocess", "finalize")
    assert (second.stats.compiled, second.stats.disk_hits) == (0, 1)
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))
    with caplog.at_level(logging.WARNING, logger="vrt_ros"):
        third = KernelLibrary("90", cache)
        third.kernel("postprocess", "finalize")
    assert (third.stats.compiled, third.stats.disk_hits) == (1, 0)
    assert "is corrupt" in caplog.text
    path.write_bytes(path.read_bytes()[:100])  # truncated
    fourth = KernelLibrary("90", cache)
    fourth.kernel("postprocess", "finalize")
    assert fourth.stats.compiled == 1
    fifth = KernelLibrary("90", cache)  # the rebuilt file is whole again
    fifth.kernel("postprocess", "finalize")
    assert (fifth.stats.compiled, fifth.stats.disk_hits) == (0, 1)


def test_fp16_engine_outputs_refused_by_gpu_decode(fake_cuda):  # noqa: F811
    from vrt_ros.errors import ModelError

    engine = FakeEngine([IMAGES], [TensorInfo("output0", (1, 84, 8400), "float16")])
    with pytest.raises(ModelError, match="float32 engine outputs"):
        pipeline("yolov8", engine=engine)
    assert fake_cuda.live() == []


# ----------------------------------------------------------------------------------------- issue 26: start-up inference
def test_start_up_inference_reads_a_zeroed_input_not_memory_nothing_wrote(fake_cuda):  # noqa: F811
    """Fresh device memory holds whatever was there (the stand-in fills it with 0xCD): the start-up inference, which
    runs before any frame was uploaded, must see an input the pipeline wrote (zeros)."""
    fake_cuda.fill = 0xCD
    engine = FakeEngine([IMAGES], HEAD_OUTPUTS["yolov8"])
    pipe = pipeline("yolov8", engine=engine)
    assert engine.calls == 1 and engine.input_nonzero == [0] and fake_cuda.hazards == []
    pipe.close()
