"""Handed case HC-22 (issue 33, item 1): frames whose text fields look like CUDA error messages.

``Image``s and ``CompressedImage``s whose ``encoding``, ``format`` and ``frame_id`` carry every sticky CUDA error's
driver name, runtime name and text (vrt_ros.faults.STICKY_ERRORS), and a 10 kB ``frame_id``, each between good
frames, through a running node: each bad frame is dropped and counted under its reason, every good frame is
answered, ``engine_error`` stays 0, the node never goes fatal. Before issue 33 the first of them ended a
``backend: cpu`` node with exit status 3: the fault table matched the error text that the FrameError's message
quotes. On the CPU path and on the GPU path (CudaPipeline on the CUDA stand-in) in CI; the real GPU in the
gpu-marked variant.
"""

from __future__ import annotations

from collections import Counter

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

import cv2  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402

from fake_cuda import FakeEngine, fake_cuda  # noqa: E402,F401  (fixture)
from gpu_support import requires_gpu, torch_reason  # noqa: E402
from ros_testing import private_context, unique_namespace  # noqa: E402
from synthetic_models import ramp_rectangle  # noqa: E402
from test_fault_table import _run  # noqa: E402
from test_node import BOX, blob_model, image_msg, overrides  # noqa: E402,F401
from vrt_ros.faults import STICKY_ERRORS  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402

pytestmark = pytest.mark.ros

#: Every sticky error's driver name, runtime name and text, and the issue's two examples.
TEXTS = [t for e in STICKY_ERRORS for t in (e.name, e.runtime_name, e.text)] + [
    "CUDA error: an illegal memory access was encountered", "cuStreamSynchronize failed: CUDA_ERROR_LAUNCH_FAILED"]
LONG_ID = "an illegal memory access was encountered " * 250  # 10 000 characters
GOOD = ramp_rectangle(320, 240, BOX)
JPEG = cv2.imencode(".jpg", GOOD, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
GIF = b"GIF89a" + bytes(64)  # neither JPEG nor PNG: refused, the message quotes the format


def _image(encoding: str = "bgr8", frame_id: str = "cam", short: bool = False) -> Image:
    msg = image_msg(GOOD, 1, frame_id=frame_id, encoding=encoding)
    if short:
        msg.data = bytes(msg.data[:100])
    return msg


def _compressed(fmt: str, data: bytes, frame_id: str = "cam") -> CompressedImage:
    msg = CompressedImage(format=fmt, data=data)
    msg.header.frame_id = frame_id
    return msg


def raw_cases() -> list[tuple[Image, str | None]]:
    """(message, reason it is dropped under; None: a good frame, answered), bad and good alternating."""
    bad = [(_image(encoding=t), "unknown_encoding") for t in TEXTS]
    bad += [(_image(frame_id=t, short=True), "short_data") for t in TEXTS]
    bad += [(_image(frame_id=LONG_ID, short=True), "short_data"), (_image(encoding=LONG_ID), "unknown_encoding")]
    out = []
    for i, case in enumerate(bad):
        out += [case, (_image(frame_id=f"good{i}"), None)]
    return out + [(_image(frame_id="good" + LONG_ID), None)]


def compressed_cases() -> list[tuple[CompressedImage, str | None]]:
    bad = [(_compressed(t, GIF), "unsupported_format") for t in TEXTS]
    bad += [(_compressed(f"jpeg; {t}", GIF), "unsupported_format") for t in TEXTS]
    bad += [(_compressed("jpeg", b"", frame_id=t), "empty_data") for t in TEXTS]
    bad += [(_compressed("jpeg; misaligned address", GIF, frame_id=LONG_ID), "unsupported_format")]
    out = []
    for i, case in enumerate(bad):
        out += [case, (_compressed("jpeg", JPEG, f"good{i}"), None)]
    return out + [(_compressed("jpeg", JPEG, "good" + LONG_ID), None)]


def _check(node: DetectorNode, ctx, cases, compressed_input: bool) -> None:
    msgs = [m for m, _ in cases]
    got, counters = _run(node, ctx, msgs, compressed_input)
    expected = Counter(r for _, r in cases if r is not None)
    good = [m.header.frame_id for m, r in cases if r is None]
    assert node.fatal_error is None, node.fatal_error
    assert counters.dropped["engine_error"] == 0
    assert dict(counters.dropped) == dict(expected)
    assert counters.processed == len(good) and [m.header.frame_id for m in got] == good


@pytest.mark.parametrize("compressed_input", [False, True], ids=["raw", "compressed"])
def test_HC_22_sticky_error_text_in_frame_fields_is_an_input_fault_on_the_cpu_path(blob_model, compressed_input):
    cases = compressed_cases() if compressed_input else raw_cases()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=unique_namespace(), parameter_overrides=overrides(
            backend="cpu", model__path=str(blob_model), model__pad_value=0.0, input__compressed=compressed_input,
            input__qos="reliable", input__depth=10, engine__max_consecutive_failures=1))
        _check(node, ctx, cases, compressed_input)
        node.destroy_node()


@pytest.mark.parametrize("compressed_input", [False, True], ids=["raw", "compressed"])
def test_HC_22_sticky_error_text_in_frame_fields_is_an_input_fault_on_the_gpu_path(
        fake_cuda, blob_model, compressed_input):  # noqa: F811
    """The GPU path's own validation and decode (CudaPipeline on the CUDA stand-in, its engine a stand-in too)."""
    from test_gpu_glue import pipeline

    cases = compressed_cases() if compressed_input else raw_cases()
    pipe = pipeline("yolox")
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=unique_namespace(), pipeline=pipe, parameter_overrides=overrides(
            model__path=str(blob_model), input__compressed=compressed_input, input__qos="reliable", input__depth=10,
            engine__max_consecutive_failures=1))
        _check(node, ctx, cases, compressed_input)
        node.destroy_node()
    assert fake_cuda.hazards == [] and fake_cuda.poisoned is None


@pytest.mark.slow
@pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")
@pytest.mark.parametrize("compressed_input", [False, True], ids=["raw", "compressed"])
@requires_gpu[0]
@requires_gpu[1]
def test_HC_22_sticky_error_text_in_frame_fields_is_an_input_fault_on_the_real_gpu(shared_dir, compressed_input):
    """The real GPU path (torch engine on the H200): its upload, kernels and decode refuse the same frames."""
    cases = compressed_cases() if compressed_input else raw_cases()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=unique_namespace(), parameter_overrides=overrides(
            backend="cuda", model__path=str(shared_dir / "models" / "yolox_nano.onnx"),
            input__compressed=compressed_input, input__qos="reliable", input__depth=10,
            engine__max_consecutive_failures=1))
        _check(node, ctx, cases, compressed_input)
        node.destroy_node()
