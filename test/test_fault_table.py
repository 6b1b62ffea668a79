"""The fault table (vrt_ros.faults.FAULT_TABLE, issue 26 item 1), each row injected into a running node on real DDS:
input faults are dropped and counted under their reason and never reach the engine failure count (a node with
``engine.max_consecutive_failures`` 2 stays up through a dozen bad frames), engine faults are counted and fatal only
K in a row, a sticky CUDA error anywhere in the exception's chain is fatal at once. The pure table first."""

from __future__ import annotations

import struct

import cv2
import pytest

from vrt_ros.errors import FrameError
from vrt_ros.faults import DECODE, ENGINE, FAULT_TABLE, FATAL, INPUT, PIPELINE, READ, classify

from cuda_faults import cuda_core_error, gpu_error, torch_error

STICKY = "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"  # text only: no code, not fatal


def raised_while_handling(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` raised in an ``except`` block handling ``inner`` (chained implicitly, ``__context__`` only)."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer
    except BaseException as exc:
        assert exc.__cause__ is None and exc.__context__ is inner
        return exc


# ------------------------------------------------------------------------------------------- the table (pure)
@pytest.mark.parametrize("exc, stage, kind, reason", [
    (gpu_error(), PIPELINE, FATAL, "engine_error"),
    (torch_error(), DECODE, FATAL, "engine_error"),
    (raised_while_handling(RuntimeError("enqueueV3 failed"), cuda_core_error()), PIPELINE, FATAL, "engine_error"),
    (raised_while_handling(FrameError("bad frame"), gpu_error()), PIPELINE, INPUT, "bad_frame"),  # FrameError wins
    (raised_while_handling(gpu_error(), FrameError("bad frame")), PIPELINE, INPUT, "bad_frame"),
    (RuntimeError(STICKY), PIPELINE, ENGINE, "engine_error"),  # the wording alone is no code
    (FrameError(f"unsupported encoding {STICKY!r}", reason="unsupported_encoding"), PIPELINE, INPUT,
     "unsupported_encoding"),
    (FrameError("data holds 3 bytes", reason="short_data"), PIPELINE, INPUT, "short_data"),
    (FrameError("too big", reason="oversized_image"), DECODE, INPUT, "oversized_image"),
    (raised_while_handling(ValueError("wrapper"), FrameError("cut", reason="corrupt_compressed")), PIPELINE, INPUT,
     "corrupt_compressed"),
    (cv2.error("OpenCV(5.0.0) error: (-215:Assertion failed)"), DECODE, INPUT, "corrupt_compressed"),
    (MemoryError(), DECODE, INPUT, "corrupt_compressed"),
    (IndexError("index out of range"), READ, INPUT, "bad_cdr"),
    (FrameError("encapsulation 0x0003", reason="unsupported_cdr"), READ, INPUT, "unsupported_cdr"),
    (ValueError("engine output has NaN shape"), PIPELINE, ENGINE, "engine_error"),
    (RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory"), PIPELINE, ENGINE, "engine_error"),
])
def test_fault_table_rows(exc, stage, kind, reason):
    fault = classify(exc, stage)
    assert (fault.kind, fault.reason) == (kind, reason)
    assert {row.kind for row in FAULT_TABLE} == {INPUT, ENGINE, FATAL}


def test_the_readme_quotes_every_row():
    """docs/faults.md, "Diagnostics and behaviour under load": the table's rows in order, with their stage and kind
    (plus one row for the GPU decoder's refusals, which are no fault: the CPU decode gives the verdict)."""
    from pathlib import Path

    lines = (Path(__file__).resolve().parents[1] / "docs" / "faults.md").read_text().splitlines()
    first = lines.index("| exception or condition | stage | kind | counted as |") + 2
    table = [line.split(" | ") for line in lines[first:lines.index("", first)]]
    rows = [(cells[1], cells[2].split()[0]) for cells in table if cells[1] != "GPU decode"]
    assert rows == [(row.stage, row.kind) for row in FAULT_TABLE], rows


def test_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="stage"):
        classify(ValueError("x"), "inference")


# ------------------------------------------------------------------------------------------- the running node
rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import ramp_rectangle  # noqa: E402
from test_node import (BOX, Collector, blob_model, image_msg, overrides, settled, wait_matched,  # noqa: E402,F401
                       wait_until)
from test_node_faults import ScriptedPipeline, _cpu  # noqa: E402
from test_node_gpu_decode import StandinGpuDecodePipeline  # noqa: E402
from vrt_ros.intake import compressed  # noqa: E402
from vrt_ros.ros import batch_input as batch_input_module, node as node_module  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402

pytestmark = pytest.mark.ros

GOOD = ramp_rectangle(320, 240, BOX)
JPEG = cv2.imencode(".jpg", GOOD, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
PNG = cv2.imencode(".png", GOOD)[1].tobytes()


def _sof_size(jpeg: bytes, width: int, height: int) -> bytes:
    i = jpeg.index(b"\xff\xc0")
    return jpeg[:i + 5] + struct.pack(">HH", height, width) + jpeg[i + 9:]


def _ihdr_size(png: bytes, width: int, height: int, bits: int = 8) -> bytes:
    import zlib
    body = struct.pack(">IIBBBBB", width, height, bits, 2, 0, 0, 0)
    return png[:8] + struct.pack(">I", 13) + b"IHDR" + body + struct.pack(">I", zlib.crc32(b"IHDR" + body)) + png[33:]


#: Every way a compressed frame can be bad, with the reason it is counted under.
BAD_COMPRESSED = [
    ("jpeg", _sof_size(JPEG, 30000, 30000), "oversized_image"),  # under OpenCV's limit: 2.5 GiB decoded
    ("jpeg", _sof_size(JPEG, 65000, 65000), "oversized_image"),  # over it: cv2.error before issue 26
    ("png", _ihdr_size(PNG, 100000, 100000), "oversized_image"),
    ("jpeg", _sof_size(JPEG, 0, 240), "corrupt_compressed"),
    ("jpeg", JPEG[: len(JPEG) // 2], "corrupt_compressed"),  # truncated
    ("png", PNG[: len(PNG) // 2], "corrupt_compressed"),
    ("jpeg", b"\xff\xd8" + bytes(range(7, 200)) + b"\xff\xd9", "corrupt_compressed"),  # no frame header
    ("png", _ihdr_size(PNG, 320, 240, bits=16), "unsupported_format"),
    ("jpeg", b"GIF89a" + bytes(64), "unsupported_format"),
    ("16UC1; compressedDepth png", PNG, "unsupported_format"),
    ("jpeg", b"", "empty_data"),
]


def _compressed(fmt: str, data: bytes, frame_id: str) -> CompressedImage:
    msg = CompressedImage(format=fmt, data=data)
    msg.header.frame_id = frame_id
    return msg


def _run(node: DetectorNode, ctx, msgs, compressed_input: bool) -> tuple[list, object]:
    """Publish ``msgs`` one at a time (each settled before the next); returns (detections received, counters)."""
    client = Node("client", context=ctx, namespace=node.get_namespace())
    dets = Collector(client, Detection2DArray, "camera/detections")
    msg_type, topic = (CompressedImage, "camera/image_raw/compressed") if compressed_input else (Image, "camera/image_raw")
    pub = client.create_publisher(msg_type, topic, make_qos("reliable", 10))
    with spinning(ctx, node, client):
        wait_matched(pub)
        for i, msg in enumerate(msgs):
            pub.publish(msg)
            assert settled(node, i + 1), f"frame {i} not settled: {node.counters()['camera']}"
        got = dets.wait(sum(1 for m in msgs if m.header.frame_id.startswith("good")), timeout_s=5.0)
    client.destroy_node()
    return got, node.counters()["camera"]


def _run_cpu_compressed(blob_model, msgs) -> tuple[list, object, str | None]:
    """``msgs`` through a CPU node taking compressed frames whose limit is 2 engine failures in a row; returns
    (detections received, counters, fatal_error)."""
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=unique_namespace(), parameter_overrides=overrides(
            backend="cpu", model__path=str(blob_model), model__pad_value=0.0, input__compressed=True,
            input__qos="reliable", input__depth=10, engine__max_consecutive_failures=2))
        got, counters = _run(node, ctx, msgs, compressed_input=True)
        fatal = node.fatal_error
        node.destroy_node()
    return got, counters, fatal


def _expected(rows) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, _, reason in rows:
        out[reason] = out.get(reason, 0) + 1
    return out


def test_bad_compressed_frames_are_input_faults_on_the_cpu_decode(blob_model):
    """The issue's crash loop: 11 bad payloads (three declaring huge images) on a node whose limit is 2 engine
    failures in a row: all dropped under their reasons, none an engine failure, the node keeps detecting."""
    msgs = [_compressed(fmt, data, f"bad{i}") for i, (fmt, data, _) in enumerate(BAD_COMPRESSED)]
    msgs.append(_compressed("jpeg", JPEG, "good"))
    got, counters, fatal = _run_cpu_compressed(blob_model, msgs)
    assert fatal is None
    assert dict(counters.dropped) == _expected(BAD_COMPRESSED)
    assert counters.processed == 1 and [m.header.frame_id for m in got] == ["good"]


def test_bad_compressed_frames_are_input_faults_on_the_gpu_decode_path(blob_model, monkeypatch):
    """The GPU path's own decode (stand-in GPU decoder over the CPU pipeline): nvImageCodec raising, the header
    checks, and OpenCV's own errors in the CPU fallback are input faults too."""
    pipeline = StandinGpuDecodePipeline(_cpu(blob_model))
    pipeline.decoder.fail = True  # every GPU decode raises (nvImageCodec's error): the CPU decode gives the verdict
    real = compressed.cv2.imdecode
    raises_on = cv2.imencode(".jpg", GOOD, [cv2.IMWRITE_JPEG_QUALITY, 50])[1].tobytes()

    def imdecode(buf, flags):  # OpenCV's own error on one payload
        if buf.size == len(raises_on):
            raise cv2.error("OpenCV(5.0.0) error: (-215:Assertion failed) pixels <= CV_IO_MAX_IMAGE_PIXELS")
        return real(buf, flags)

    monkeypatch.setattr(compressed.cv2, "imdecode", imdecode)
    msgs = [_compressed(fmt, data, f"bad{i}") for i, (fmt, data, _) in enumerate(BAD_COMPRESSED)]
    msgs += [_compressed("jpeg", JPEG, "good1"), _compressed("jpeg", raises_on, "bad_cv2"),
             _compressed("png", PNG, "good2")]
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=unique_namespace(), pipeline=pipeline, parameter_overrides=overrides(
            model__path=str(blob_model), input__compressed=True, input__qos="reliable", input__depth=10,
            engine__max_consecutive_failures=2))
        got, counters = _run(node, ctx, msgs, compressed_input=True)
        fatal = node.fatal_error
        node.destroy_node()
    expected = _expected(BAD_COMPRESSED)
    expected["corrupt_compressed"] += 1  # the frame OpenCV raised on
    assert fatal is None and counters.dropped["engine_error"] == 0
    assert dict(counters.dropped) == expected
    assert counters.processed == 2 and [m.header.frame_id for m in got] == ["good1", "good2"]


@pytest.mark.parametrize("error", [cv2.error("OpenCV(5.0.0) error: (-2:Unspecified error) in imdecode_"),
                                   MemoryError("decode buffer")])
def test_any_exception_of_the_nodes_cpu_decode_is_an_input_fault(blob_model, monkeypatch, error):
    """The decode stage's row: whatever the CPU decode raises (not only FrameError) drops the frame as
    ``corrupt_compressed``; 4 in a row on a node with a limit of 2 engine failures leave it running."""
    real = batch_input_module.compressed_to_bgr
    n = {"calls": 0}

    def decode(msg):
        n["calls"] += 1
        if n["calls"] <= 4:
            raise error
        return real(msg)

    monkeypatch.setattr(batch_input_module, "compressed_to_bgr", decode)
    msgs = [_compressed("jpeg", JPEG, f"bad{i}") for i in range(4)] + [_compressed("jpeg", JPEG, "good")]
    got, counters, fatal = _run_cpu_compressed(blob_model, msgs)
    assert fatal is None and dict(counters.dropped) == {"corrupt_compressed": 4}
    assert [m.header.frame_id for m in got] == ["good"]


def _scripted_node(ctx, blob_model, errors, k: int) -> tuple[DetectorNode, ScriptedPipeline]:
    pipe = ScriptedPipeline(_cpu(blob_model), errors)
    node = DetectorNode(context=ctx, namespace=unique_namespace(), pipeline=pipe, parameter_overrides=overrides(
        input__qos="reliable", input__depth=10, engine__max_consecutive_failures=k))
    return node, pipe


def test_a_frame_error_chained_inside_another_exception_is_an_input_fault(blob_model):
    """A FrameError the pipeline's error was raised while handling (``__context__``, no explicit cause)."""
    errors = [raised_while_handling(RuntimeError("stage wrapper"), FrameError("cut", reason="short_data"))] * 3
    with private_context() as ctx:
        node, _ = _scripted_node(ctx, blob_model, errors + [None], k=2)
        msgs = [image_msg(GOOD, i + 1, f"bad{i}") for i in range(3)] + [image_msg(GOOD, 9, "good")]
        got, counters = _run(node, ctx, msgs, compressed_input=False)
        fatal = node.fatal_error
        node.destroy_node()
    assert fatal is None and dict(counters.dropped) == {"short_data": 3} and len(got) == 1


def test_a_good_frame_ends_the_run_of_engine_failures(blob_model):
    """Engine faults: counted as engine_error; 2 in a row, then a good frame, three times over, with a limit of 3:
    not fatal (6 failures in all, never 3 in a row)."""
    fail = ValueError("engine output has NaN shape")
    errors = [fail, fail, None] * 3
    with private_context() as ctx:
        node, pipe = _scripted_node(ctx, blob_model, errors, k=3)
        msgs = [image_msg(GOOD, i + 1, "good" if e is None else f"bad{i}") for i, e in enumerate(errors)]
        got, counters = _run(node, ctx, msgs, compressed_input=False)
        fatal = node.fatal_error
        node.destroy_node()
    assert fatal is None, fatal
    assert dict(counters.dropped) == {"engine_error": 6} and counters.processed == 3 and len(got) == 3


def test_a_sticky_cuda_error_behind_another_error_is_fatal_at_once(blob_model):
    """The fatal row through the implicit chain: TensorRT's error raised while handling the CUDA error (no
    ``raise ... from``). The count is off (limit 0): only the chain makes it fatal. A frame that arrived while the
    failing one ran is never taken, and the node unsubscribes."""
    errors = [None, raised_while_handling(RuntimeError("IExecutionContext::enqueueV3 failed"), gpu_error())]
    with private_context() as ctx:
        node, pipe = _scripted_node(ctx, blob_model, errors, k=0)
        inner = pipe.process

        def process(spec, data):  # the failing frame returns only once the next frame waits in the slot
            if pipe.frames == 1:
                wait_until(lambda: node.counters()["camera"].received == 3)
            return inner(spec, data)

        pipe.process = process
        client = Node("client", context=ctx, namespace=node.get_namespace())
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            pub.publish(image_msg(GOOD, 1))
            assert settled(node, 1)
            pub.publish(image_msg(GOOD, 2))
            pub.publish(image_msg(GOOD, 3))
            assert wait_until(lambda: node.fatal_error is not None)
            assert wait_until(lambda: pub.get_subscription_count() == 0)  # unsubscribed: takes no further frame
            fatal, counters = node.fatal_error, node.counters()["camera"]
        client.destroy_node()
        node.destroy_node()
    assert fatal and "CUDA context poisoned (CUDA_ERROR_ILLEGAL_ADDRESS)" in fatal
    assert counters.processed == 1 and counters.dropped["engine_error"] == 1 and counters.received == 3
    assert pipe.frames == 2  # the frame waiting when the fault struck was never taken


def test_any_exception_of_the_raw_bytes_reader_is_an_input_fault(blob_model, monkeypatch):
    """The read stage (input.raw_subscription, in the subscription callback): a reader error that is no FrameError
    (a bug, an IndexError on odd bytes) drops the frame as bad_cdr instead of raising into the executor."""
    real = node_module.read_image
    n = {"calls": 0}

    def read(raw):
        n["calls"] += 1
        if n["calls"] <= 3:
            raise IndexError("index 1228800 is out of bounds")
        return real(raw)

    monkeypatch.setattr(node_module, "read_image", read)
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=unique_namespace(), parameter_overrides=overrides(
            backend="cpu", model__path=str(blob_model), model__pad_value=0.0, input__raw_subscription=True,
            input__qos="reliable", input__depth=10, engine__max_consecutive_failures=2))
        msgs = [image_msg(GOOD, i + 1, f"bad{i}") for i in range(3)] + [image_msg(GOOD, 9, "good")]
        got, counters = _run(node, ctx, msgs, compressed_input=False)
        fatal = node.fatal_error
        node.destroy_node()
    assert fatal is None and dict(counters.dropped) == {"bad_cdr": 3} and counters.processed == 1
    assert [m.header.frame_id for m in got] == ["good"]
