"""One path for one frame or a batch (issue 35 items 1 and 3, and ``depth.wait_ms``), on the recording CUDA stand-in
(test/fake_cuda.py) and the CPU reference; no GPU needed. The same assertions on a real GPU: test_gpu_onepath.py.

- A frame alone is a batch of one: ``process`` / ``process_bgr`` / ``process_compressed`` give what
  ``process_batch([frame])`` gives, and slot ``j`` of a batch gets every launch argument of that frame alone but
  its slot's own addresses, and the same detections. Tolerance on the stand-in: exact (its kernels compute nothing;
  a finalize emulator writes a detection made of the slot's letterbox, so equal detections mean equal geometry); on
  the CPU reference (ONNX Runtime, a dynamic-batch model): exact to 1e-5, as test_cpu_batch.py.
- A batch may hold raw and JPEG slots: its JPEGs go to ``CompressedRouter.decode_batch`` in ONE call with their
  slots; a corrupt JPEG drops its own slot (``corrupt_compressed``: counted, logged), the others are answered.
- Depth statistics of a batch are computed on the GPU route per slot, inside the batch's one sync; the node pairs a
  batch's frames under ONE ``depth.wait_ms`` deadline.
- A batch's raw frames are copied into pinned staging at the same time (copy threads), not one after another.
"""

from __future__ import annotations

import ctypes
import json
import threading
import time

import cv2
import numpy as np
import pytest

import depth_scenes as ds
from fake_cuda import FakeEngine, fake_cuda  # noqa: F401  (fixture)
from gpu_support import copies_at_a_barrier
from jpeg_standin import HostJpegDecoder
from test_gpu_batch import DYN_IN, DYN_OUT, finalize_emulator
from test_gpu_batch import values as batch_values
from test_gpu_depth import emulate_depth_box_stats, finalize_with
from vrt_ros.depth.image import DepthImage
from vrt_ros.depth.stats import DepthJob, box_stats
from vrt_ros.errors import FrameError
from vrt_ros.intake.compressed_route import CompressedRouter, DeviceImage
from vrt_ros.types import BgrFrame, CompressedFrame, ImageSpec, RawFrame

RANGE = (0.1, 10.0)


def raw(w: int, h: int, seed: int) -> RawFrame:
    img = np.random.default_rng(seed).integers(0, 256, (h, w, 3), np.uint8)
    return RawFrame(ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), img)


def jpeg(w: int, h: int, level: int) -> CompressedFrame:
    img = np.full((h, w, 3), level, np.uint8)
    img[h // 4: h // 2, w // 4: w // 2] = 255 - level
    return CompressedFrame("jpeg", cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())


def corrupt_jpeg() -> CompressedFrame:
    data = jpeg(64, 48, 100).data
    return CompressedFrame("jpeg", data[: len(data) // 3])  # cut: its header parses, its scan does not decode


class DeviceJpegStandin(HostJpegDecoder):
    """The host stand-in decoder (test/jpeg_standin.py) writing each decoded image into a DEVICE buffer of the
    CUDA stand-in, one per (slot, size) as nvImageCodec's images, so the preprocess launch reads device memory."""

    def __init__(self, rt) -> None:
        super().__init__()
        self._rt = rt
        self.images: dict = {}

    def decode(self, info, stream, slot: int = 0):
        self._stream = stream
        return super().decode(info, stream, slot)

    def decode_batch(self, infos, stream, slots):
        self._stream = stream
        return super().decode_batch(infos, stream, slots)

    def _into(self, info, slot: int):  # under both decode and decode_batch (one list call per batch)
        host = super()._into(info, slot)
        if host is None:
            return None
        key = (slot, host.width, host.height)
        if key not in self.images:
            self.images[key] = self._rt.alloc_device(host.pitch * host.height, self._stream)
        dev = self.images[key]
        ctypes.memmove(dev.ptr, host.ptr, host.pitch * host.height)
        return DeviceImage(dev.ptr, host.width, host.height, host.pitch, host.channels)

    def close(self, stream=None) -> None:
        for buf in self.images.values():
            buf.close(stream)
        self.images.clear()


def cuda_pipe(fake, **params):
    """A CudaPipeline on the stand-in (dynamic batch, yolov8 head) whose router's GPU decoder is the stand-in, and
    the list of every ``decode_batch`` call's slots."""
    from vrt_ros.inference.backends.cuda import CudaPipeline

    fake.emulators["finalize"] = finalize_emulator
    pipe = CudaPipeline(batch_values(**params), log=lambda m: None, engine=FakeEngine([DYN_IN], DYN_OUT))
    decoder = DeviceJpegStandin(pipe.runtime)
    router = CompressedRouter(decoder, log=lambda m: None)
    calls: list[list[int]] = []
    inner = router.decode_batch

    def decode_batch(items, stream, slots):
        calls.append(list(slots))
        return inner(items, stream, slots)

    router.decode_batch = decode_batch
    pipe._router = router
    return pipe, decoder, calls


def close(pipe, decoder) -> None:
    decoder.close(pipe.stream)
    pipe.close()


def test_a_batch_of_one_equals_the_frame_alone_in_both_backends(fake_cuda, shared_dir):  # noqa: F811
    """``process``, ``process_bgr`` and ``process_compressed`` are a batch of one: the same launches (every
    argument) and the same detections as ``process_batch([frame])``; CPU reference likewise (exact)."""
    pipe, decoder, calls = cuda_pipe(fake_cuda, **{"engine.max_batch": 4})
    frames = [raw(1280, 720, 1), jpeg(640, 480, 40), BgrFrame(raw(320, 240, 2).data)]
    alone = [lambda f=frames[0]: pipe.process(f.spec, f.data),
             lambda f=frames[1]: pipe.process_compressed(f.format, f.data),
             lambda f=frames[2]: pipe.process_bgr(f.image)]
    for frame, single in zip(frames, alone):
        mark = len(fake_cuda.launches)
        a = single()
        launches_a = [(x.entry, x.args) for x in fake_cuda.launches[mark:]]
        mark, syncs = len(fake_cuda.launches), pipe.runtime.counters.syncs
        (b,) = pipe.process_batch([frame])
        assert pipe.runtime.counters.syncs - syncs == 1
        assert [(x.entry, x.args) for x in fake_cuda.launches[mark:]] == launches_a
        assert np.array_equal(a.boxes, b.boxes) and np.array_equal(a.scores, b.scores) and len(b) == 1
    assert calls == [[0], [0]]  # the JPEG alone and in its batch of one: one decode_batch call each, slot 0
    assert fake_cuda.hazards == [] and fake_cuda.pending() == 0
    close(pipe, decoder)

    from vrt_ros.settings import config
    from vrt_ros.inference.backends.cpu import CpuPipeline

    cpu = CpuPipeline(config.validate({"backend": "cpu", "model.path": str(shared_dir / "models" / "yolox_nano.onnx")}),
                      log=lambda m: None)
    photo = cv2.imread(str(sorted((shared_dir / "data" / "images").glob("*.jpg"))[0]), cv2.IMREAD_COLOR)
    a, (b,) = cpu.process_bgr(photo), cpu.process_batch([BgrFrame(photo)])
    assert len(a) > 0 and np.array_equal(a.boxes, b.boxes) and np.array_equal(a.scores, b.scores)
    h, w = photo.shape[:2]
    c = cpu.process(ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3), photo)
    assert np.array_equal(a.boxes, c.boxes) and np.array_equal(a.class_ids, c.class_ids)


def test_each_slot_of_a_mixed_raw_and_jpeg_batch_equals_its_frame_alone(fake_cuda):  # noqa: F811
    """Raw, JPEG and BGR slots in ONE batch: one engine call, one sync, one D2H, one ``decode_batch`` call with the
    JPEGs' slots; slot j's letterbox, decode and finalize arguments are its frame's alone but for slot j's own
    input, output and result addresses; its detections equal the frame's alone (exact)."""
    pipe, decoder, calls = cuda_pipe(fake_cuda, **{"engine.max_batch": 4})
    frames = [raw(1920, 1080, 0), jpeg(640, 480, 60), raw(800, 600, 3), jpeg(1280, 720, 200)]
    alone = []
    for f in frames:
        mark = len(fake_cuda.launches)
        (d,) = pipe.process_batch([f])
        alone.append((d, fake_cuda.launches[mark:]))
    calls.clear()
    rt, engine = pipe.runtime, pipe.engine
    syncs, d2h, enq = rt.counters.syncs, fake_cuda.copies["d2h"], engine.calls
    mark = len(fake_cuda.launches)
    results = pipe.process_batch(frames)
    assert rt.counters.syncs - syncs == 1 and fake_cuda.copies["d2h"] - d2h == 1 and engine.calls - enq == 1
    assert calls == [[1, 3]]  # the batch's JPEGs in one call, each with its own slot
    assert pipe.last_timings["batch_size"] == 4 and "decode" in pipe.last_timings
    launches = fake_cuda.launches[mark:]
    letterboxes = [x for x in launches if x.entry.startswith("letterbox")]
    finals = [x for x in launches if x.entry == "finalize"]
    for j, (d, single) in enumerate(alone):
        lb = letterboxes[j].args
        assert lb[1:8] == single[0].args[1:8] and lb[9:] == single[0].args[9:]  # same geometry and constants
        assert finals[j].args[:-1] == [x for x in single if x.entry == "finalize"][0].args[:-1]
        assert np.array_equal(results[j].boxes, d.boxes) and np.array_equal(results[j].scores, d.scores)
    assert len({tuple(r.boxes[0]) for r in results}) == 4  # four frames' own letterboxes, in slot order
    assert fake_cuda.hazards == [] and fake_cuda.pending() == 0
    close(pipe, decoder)


def test_a_corrupt_jpeg_in_a_batch_drops_its_slot_only(fake_cuda):  # noqa: F811
    pipe, decoder, calls = cuda_pipe(fake_cuda, **{"engine.max_batch": 4})
    good = [raw(640, 480, 0), jpeg(320, 240, 90), jpeg(640, 480, 30)]
    alone = [pipe.process_batch([f])[0] for f in good]
    engine = pipe.engine
    results = pipe.process_batch([good[0], good[1], corrupt_jpeg(), good[2]])
    assert isinstance(results[2], FrameError) and results[2].reason == "corrupt_compressed"
    for got, want in zip((results[0], results[1], results[3]), alone):
        assert np.array_equal(got.boxes, want.boxes) and np.array_equal(got.scores, want.scores)
    assert engine.enqueued[-1][2] == 4 and pipe.last_timings["batch_size"] == 3  # three slots ran
    assert fake_cuda.hazards == [] and fake_cuda.pending() == 0
    close(pipe, decoder)


def test_a_batch_whose_every_frame_is_refused_queues_nothing_and_does_not_sync(fake_cuda):  # noqa: F811
    """A frame refused before any of its work is queued (empty pixels) is a batch with nothing to run: no launch,
    no engine call, no sync (the frame alone raises its FrameError, as before the one path)."""
    pipe, decoder, _ = cuda_pipe(fake_cuda, **{"engine.max_batch": 4})
    pipe.process_batch([raw(64, 48, 1)])  # warm: its buffers exist
    marks, syncs = len(fake_cuda.launches), pipe.runtime.counters.syncs
    with pytest.raises(FrameError):
        pipe.process(ImageSpec(width=640, height=480, encoding="bgr8", step=1920), b"")
    out = pipe.process_batch([RawFrame(ImageSpec(width=640, height=480, encoding="bgr8", step=1920), b""),
                              corrupt_jpeg()])
    assert all(isinstance(r, FrameError) for r in out), out
    assert len(fake_cuda.launches) == marks and pipe.runtime.counters.syncs == syncs
    close(pipe, decoder)


def test_depth_statistics_of_a_batch_are_computed_per_slot_inside_its_one_sync(fake_cuda):  # noqa: F811
    """Each slot's statistic by the GPU route (the kernel over that slot's result rows, its own depth staging and
    rows), bitwise the CPU reference of its own depth image; one sync for the batch; a slot without a job gets
    none; no allocation after the first batch."""
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from test_gpu_glue import bgr

    boxes, depth_m = ds.scene("plumb_bob")
    fake_cuda.emulators.update({"finalize": finalize_with(boxes), "depth_box_stats": emulate_depth_box_stats})
    pipe = CudaPipeline(batch_values(**{"engine.max_batch": 4}), log=lambda m: None,
                        engine=FakeEngine([DYN_IN], DYN_OUT))
    spec, img = bgr(ds.W, ds.H)
    planes = [depth_m, depth_m + 0.5, None, depth_m * 0.5]  # a different depth per slot; slot 2 without depth
    jobs = [None if d is None else DepthJob(DepthImage(ds.W, ds.H, "32FC1", ds.W * 4, d.astype(np.float32).tobytes()),
                                            1.0, RANGE, 50.0) for d in planes]
    frames = [RawFrame(spec, img)] * 4
    pipe.process_batch(frames, depth=jobs)  # warm-up: each slot's depth staging
    before, mark = pipe.runtime.counters.snapshot(), len(fake_cuda.launches)
    results = pipe.process_batch(frames, depth=jobs)
    after = pipe.runtime.counters.snapshot()
    assert after["syncs"] - before["syncs"] == 1
    assert (after["device_allocs"], after["pinned_allocs"]) == (before["device_allocs"], before["pinned_allocs"])
    runs = [x for x in fake_cuda.launches[mark:] if x.entry == "depth_box_stats"]
    finals = [x for x in fake_cuda.launches[mark:] if x.entry == "finalize"]
    assert len(runs) == 3
    assert [int(r.args[9]) for r in runs] == [int(finals[j].args[-1]) for j in (0, 1, 3)]  # its slot's result rows
    assert len({int(r.args[-1]) for r in runs}) == 3 and len({int(r.args[0]) for r in runs}) == 3  # own rows, staging
    for j, (dets, job) in enumerate(zip(results, jobs)):
        if job is None:
            assert dets.depth_stats is None
            continue
        ref = box_stats(job.image.array(), job.image.units_per_m, dets.boxes, 1.0, RANGE, 50.0)
        np.testing.assert_array_equal(dets.depth_stats, ref)  # bitwise, its own depth
    assert not np.array_equal(results[0].depth_stats, results[1].depth_stats)
    assert fake_cuda.hazards == []
    pipe.close()
    assert fake_cuda.hazards == []


def test_raw_copies_of_a_batch_run_at_the_same_time(fake_cuda, monkeypatch):  # noqa: F811
    """With ``parallel`` (not the default: serial copies measured faster on the H200), every raw slot's host copy
    runs on its own copy thread at the same time: each copy waits at a barrier for all
    the others (so copies one after another could not finish), and the staged bytes are the frames'."""
    from vrt_ros.gpu import upload as upload_module
    from vrt_ros.gpu.runtime import GpuRuntime

    n = 4
    rt = GpuRuntime.get(0)
    stream = rt.create_stream()
    up = upload_module.Uploader(rt, "cams", max_batch=n, parallel=True)
    threads = copies_at_a_barrier(monkeypatch, n)
    frames = [raw(1920, 1080, k) for k in range(n)]
    out = up.upload_batch([(f.spec, f.data, k) for k, f in enumerate(frames)], stream)
    rt.sync(stream)
    assert len(threads) == n and threading.get_ident() not in threads
    for (ptr, enc, spec), f in zip(out, frames):
        staged = np.ctypeslib.as_array((ctypes.c_uint8 * (spec.height * spec.step)).from_address(ptr))
        staged = staged.reshape(spec.height, spec.width, 3)
        np.testing.assert_array_equal(staged, f.data if enc.name == "bgr8" else f.data[..., ::-1])
    up.parallel = False  # the benchmark's serial mode: every copy on the caller's thread
    monkeypatch.undo()
    threads = copies_at_a_barrier(monkeypatch, 1)
    up.upload_batch([(f.spec, f.data, k) for k, f in enumerate(frames)], stream)
    rt.sync(stream)
    assert threads == {threading.get_ident()}
    up.close(stream)
    assert fake_cuda.hazards == []


def test_batch_staging_benchmark_runs_on_the_stand_in(fake_cuda, tmp_path, capsys):  # noqa: F811
    from vrt_ros.bench.stages import batch_staging

    out = tmp_path / "staging.json"
    assert batch_staging.main(["--sizes", "2", "--width", "320", "--height", "240", "--repeats", "3",
                               "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    modes = {(r["batch"], r["mode"]) for r in result["rows"]}
    assert modes == {(2, "serial"), (2, "parallel"), (2, "raw_subscription")}
    assert all(r["p50_ms"] > 0 for r in result["rows"]) and "stand-in" in result["device"]
    assert "serial" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------- the node's side
rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")


class _Pub:
    def __init__(self) -> None:
        self.sent: list = []

    def publish(self, msg) -> None:
        self.sent.append(msg)

    def get_subscription_count(self) -> int:
        return 0


class _Logger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, text: str) -> None:
        self.lines.append(text)

    error = info = warning


class _Clock:
    def now(self):
        return type("T", (), {"nanoseconds": time.time_ns()})()


def _worker(cameras, pipeline, **kw):
    from vrt_ros.faults import FaultPolicy
    from vrt_ros.ros.worker import Worker

    for cam in cameras:
        cam.pub_detections = _Pub()
    return Worker("w", cameras, pipeline, labels=[], keypoint_names=[], faults=FaultPolicy(3), logger=_Logger(),
                  clock=_Clock(), on_fatal=lambda reason: None, **kw)


def _msgs(frame, sec: int):
    from sensor_msgs.msg import CompressedImage, Image

    if isinstance(frame, CompressedFrame):
        msg = CompressedImage(format=frame.format, data=bytes(frame.data))
    else:
        spec = frame.spec
        msg = Image(width=spec.width, height=spec.height, encoding=spec.encoding, step=spec.step,
                    data=np.ascontiguousarray(frame.data).tobytes())
    msg.header.stamp.sec = sec
    return msg


def _spy_kinds(pipe) -> list:
    seen: list = []
    inner = pipe.process_batch

    def spy(frames, *args, **kwargs):
        seen.append([type(f).__name__ for f in frames])
        return inner(frames, *args, **kwargs)

    pipe.process_batch = spy
    return seen


def test_the_worker_runs_a_mixed_batch_in_one_call_and_a_corrupt_jpeg_drops_only_its_frame(fake_cuda):  # noqa: F811
    """Cameras of both transports in ONE ``process_batch`` (kind per frame from ``cam.transport``): the GPU path gets
    the JPEGs as they came; the corrupt one is dropped (``corrupt_compressed``, counted and logged), the others
    published with the batch's stage times; one engine call."""
    from vrt_ros.ros.camera import Camera
    from vrt_ros.ros.frame_taking import Frame

    pipe, decoder, calls = cuda_pipe(fake_cuda, **{"engine.max_batch": 4})
    cams = [Camera("a", transport="raw"), Camera("b", transport="compressed"), Camera("c", transport="compressed"),
            Camera("d", transport="raw")]
    worker = _worker(cams, pipe)
    seen = _spy_kinds(pipe)
    payloads = [raw(640, 480, 1), jpeg(320, 240, 70), corrupt_jpeg(), raw(320, 240, 2)]
    frames = [Frame(cam, _msgs(p, 5), time.monotonic(), 5_000_000_000) for cam, p in zip(cams, payloads)]
    worker.process(frames)
    assert seen == [["RawFrame", "CompressedFrame", "CompressedFrame", "RawFrame"]] and calls == [[1, 2]]
    assert [len(c.pub_detections.sent) for c in cams] == [1, 1, 0, 1]
    assert cams[2].counters.dropped == {"corrupt_compressed": 1} and cams[2].counters.processed == 0
    assert [c.counters.processed for c in (cams[0], cams[1], cams[3])] == [1, 1, 1]
    assert any("camera 'c'" in line and "corrupt_compressed" in line for line in worker._logger.lines)
    assert worker.batch_sizes == {3: 1} and worker.faults.consecutive == 0
    close(pipe, decoder)


@pytest.fixture(scope="module")
def cpu_dynamic(shared_dir, tmp_path_factory):
    """The CPU pipeline on YOLOX-nano made dynamic-batch, ``engine.max_batch`` 2, and a photo."""
    import onnx

    from vrt_ros.settings import config
    from vrt_ros.model.onnx_batch import rebatch
    from vrt_ros.inference.pipeline import make_pipeline

    folder = tmp_path_factory.mktemp("onepath_cpu")
    model, _ = rebatch(onnx.load(str(shared_dir / "models" / "yolox_nano.onnx")), None)
    onnx.save(model, str(folder / "dyn.onnx"))
    pipe = make_pipeline(config.validate({"backend": "cpu", "model.path": str(folder / "dyn.onnx"),
                                          "engine.max_batch": 2}), log=lambda m: None)
    photo = cv2.imread(str(sorted((shared_dir / "data" / "images").glob("*.jpg"))[0]), cv2.IMREAD_COLOR)
    return pipe, photo


def test_the_worker_cpu_decodes_the_jpegs_of_a_mixed_batch_for_a_cpu_pipeline(cpu_dynamic, monkeypatch):
    """A pipeline that does not decode compressed frames itself (the CPU path): a mixed batch's JPEG frames are
    decoded by the worker and go as BGR beside the raw ones, in one call."""
    from vrt_ros.ros.camera import Camera
    from vrt_ros.ros.frame_taking import Frame

    pipe, photo = cpu_dynamic
    monkeypatch.setattr(pipe, "process_batch", pipe.process_batch)
    cams = [Camera("a", transport="raw"), Camera("b", transport="compressed")]
    worker = _worker(cams, pipe)
    seen = _spy_kinds(pipe)
    h, w = photo.shape[:2]
    payloads = [RawFrame(ImageSpec(w, h, "bgr8", w * 3), photo),
                CompressedFrame("jpeg", cv2.imencode(".jpg", photo, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes())]
    worker.process([Frame(c, _msgs(p, 1), time.monotonic(), 0) for c, p in zip(cams, payloads)])
    assert seen == [["RawFrame", "BgrFrame"]] and [c.counters.processed for c in cams] == [1, 1]


def test_raw_subscription_frames_run_in_batches_as_typed_ones(cpu_dynamic, monkeypatch):
    """``input.raw_subscription``: frames read from their serialized bytes (a view into them) run in one batch and
    publish what the typed messages publish (the same bytes on the detections topic)."""
    from rclpy.serialization import serialize_message

    from vrt_ros.ros.camera import Camera
    from vrt_ros.ros.cdr_read import read_image
    from vrt_ros.ros.frame_taking import Frame

    pipe, photo = cpu_dynamic
    monkeypatch.setattr(pipe, "process_batch", pipe.process_batch)
    seen = _spy_kinds(pipe)
    msgs = [_msgs(RawFrame(ImageSpec(photo.shape[1], photo.shape[0], "bgr8", photo.shape[1] * 3), img), k + 1)
            for k, img in enumerate((photo, cv2.flip(photo, 1)))]
    sent = {}
    for route in ("typed", "raw"):
        cams = [Camera("a"), Camera("b")]
        worker = _worker(cams, pipe)
        got = msgs if route == "typed" else [read_image(serialize_message(m)) for m in msgs]
        worker.process([Frame(c, m, time.monotonic(), 0) for c, m in zip(cams, got)])
        assert worker.batch_sizes == {2: 1}
        sent[route] = [bytes(c.pub_detections.sent[0]) for c in cams]
    assert seen == [["RawFrame", "RawFrame"]] * 2
    assert sent["raw"] == sent["typed"] and sent["typed"][0] != sent["typed"][1]


def test_depth_of_a_batch_is_paired_under_one_deadline():
    """``depth.wait_ms`` is one deadline for the batch: every frame's wait for its depth ends by the same instant
    (with a deadline per frame in turn, the second frame's wait would end a whole ``wait_ms`` after the first's)."""
    from vrt_ros.ros.camera import Camera
    from vrt_ros.ros.depth_input import DepthInputs
    from vrt_ros.ros.frame_taking import Frame
    from sensor_msgs.msg import Image
    from vrt_ros.settings.config import defaults

    wait_ms = 150.0
    cams = {n: Camera(n) for n in "abc"}
    values = {**defaults(), "depth.enabled": True, "depth.cameras": [], "depth.wait_ms": wait_ms}
    node = type("N", (), {"get_logger": lambda self: _Logger()})()
    depth = DepthInputs(node, cams, values, [], lambda *a: _Pub(), None)
    ends: list[float] = []
    for cd in depth.cameras.values():
        inner = cd.ring.wait_match

        def wait_match(stamp_ns, skew_ns, timeout_s, inner=inner):
            ends.append(time.monotonic() + timeout_s)  # when this wait would end at the latest
            return inner(stamp_ns, skew_ns, timeout_s)

        cd.ring.wait_match = wait_match
    frames = [Frame(c, Image(), time.monotonic(), 1_000_000_000) for c in cams.values()]
    start = time.monotonic()
    depth.pair_batch(frames)
    assert all(isinstance(f.depth, FrameError) and f.depth.reason == "depth_unpaired" for f in frames)
    assert ends and max(ends) <= start + wait_ms / 1e3 + 1e-3, [e - start for e in ends]


def test_the_batchs_depth_goes_to_the_gpu_route_per_slot(fake_cuda):  # noqa: F811
    """With batching, every paired frame of a batch gets the GPU statistic of its own slot (kept for the 3D
    output), not the CPU loop; a frame whose pairing was refused gets no job."""
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.ros.camera import Camera
    from vrt_ros.ros.depth_input import DepthInputs, DepthPair
    from vrt_ros.ros.frame_taking import Frame
    from vrt_ros.settings.config import defaults
    from test_gpu_glue import bgr

    boxes, depth_m = ds.scene("plumb_bob")
    fake_cuda.emulators.update({"finalize": finalize_with(boxes), "depth_box_stats": emulate_depth_box_stats})
    pipe = CudaPipeline(batch_values(**{"engine.max_batch": 2}), log=lambda m: None,
                        engine=FakeEngine([DYN_IN], DYN_OUT))
    cams = {n: Camera(n) for n in "ab"}
    node = type("N", (), {"get_logger": lambda self: _Logger()})()
    inputs = DepthInputs(node, cams, {**defaults(), "depth.enabled": True, "depth.cameras": []}, [],
                         lambda *a: _Pub(), None)
    spec, img = bgr(ds.W, ds.H)
    frames, images = [], []
    for k, cam in enumerate(cams.values()):
        image = DepthImage(ds.W, ds.H, "32FC1", ds.W * 4, (depth_m + k).astype(np.float32).tobytes())
        f = Frame(cam, None, 0.0)
        f.depth = DepthPair(image, 1.0, None)
        frames.append(f)
        images.append(image)
    results = inputs.process_batch(pipe, frames, [RawFrame(spec, img)] * 2, None)
    for f, dets, image in zip(frames, results, images):
        ref = box_stats(image.array(), image.units_per_m, dets.boxes, 1.0, inputs.range_m, inputs.percentile)
        np.testing.assert_array_equal(f.depth.stats, ref)
    assert pipe.last_timings["batch_size"] == 2
    pipe.close()
    assert fake_cuda.hazards == []
