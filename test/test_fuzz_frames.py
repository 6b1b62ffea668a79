"""Property-based fuzzing of raw and compressed frames through conversion and the CPU pipeline (issue 6).

Whatever a message claims, the only exception that may escape is :class:`vrt_ros.errors.FrameError` with one of
the documented reasons, and an accepted frame gives well-formed detections. Case counts: 1500 raw frames through
conversion, 500 compressed payloads, 300 raw frames through the whole CPU pipeline (2300 in all).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis drives the fuzz tests; installed by `make test`")
from hypothesis import HealthCheck, given, settings, strategies as st

from vrt_ros.errors import FrameError
from vrt_ros.intake import frames
from vrt_ros.intake.compressed import decode_compressed
from vrt_ros.intake.encodings import ENCODINGS
from vrt_ros.types import ImageSpec

REASONS = {"unknown_encoding", "bad_size", "bad_step", "short_data", "empty_data", "unsupported_format", "corrupt_compressed",
           "oversized_image"}
ENCODING_NAMES = sorted(ENCODINGS) + ["yuv999", "", "BGR8", "32FC1", "bgr8 "]


@st.composite
def raw_frames(draw):
    enc = draw(st.sampled_from(ENCODING_NAMES))
    w = draw(st.integers(-2, 70))
    h = draw(st.integers(-2, 50))
    bpp = ENCODINGS[enc].bytes_per_pixel if enc in ENCODINGS else 3
    step = draw(st.one_of(st.just(max(w, 0) * bpp), st.integers(-4, 300)))
    exact = max(h, 0) * max(step, 0)
    n = draw(st.one_of(st.just(exact), st.integers(0, 2 * exact + 8)))
    data = draw(st.binary(min_size=n, max_size=n)) if n < 4096 else bytes(n)
    return ImageSpec(w, h, enc, step), data


def _check_accepted(spec: ImageSpec, data: bytes, out: np.ndarray) -> None:
    enc = ENCODINGS[spec.encoding]
    assert spec.step >= spec.width * enc.bytes_per_pixel and len(data) >= spec.height * spec.step
    assert out.shape == (spec.height, spec.width, 3) and out.dtype == np.uint8


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_frames())
def test_fuzz_raw_frame_conversion(frame):
    spec, data = frame
    try:
        out = frames.to_bgr(spec, data)
    except FrameError as e:
        assert e.reason in REASONS
        return
    _check_accepted(spec, data, out)


@st.composite
def compressed_payloads(draw):
    kind = draw(st.sampled_from(["jpeg", "png", "garbage"]))
    if kind == "garbage":
        return draw(st.sampled_from(["jpeg", "png", "rgb8; jpeg compressed bgr8", "16UC1; compressedDepth"])), draw(st.binary(max_size=512))
    h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    ch = draw(st.sampled_from([1, 3, 4]))
    deep = kind == "png" and draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 65535 if deep else 255, (h, w, ch) if ch > 1 else (h, w), dtype=np.uint16 if deep else np.uint8)
    if kind == "jpeg" and ch == 4:
        img = img[..., :3]
    ok, buf = cv2.imencode(".jpg" if kind == "jpeg" else ".png", img)
    assert ok
    data = buf.tobytes()
    cut = draw(st.one_of(st.just(len(data)), st.integers(0, len(data))))
    flip = draw(st.integers(-1, len(data) - 1))
    data = bytearray(data[:cut])
    if 0 <= flip < len(data):
        data[flip] ^= 0xFF
    return kind, bytes(data)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(compressed_payloads())
def test_fuzz_compressed_decode(payload):
    fmt, data = payload
    try:
        out = decode_compressed(fmt, data)
    except FrameError as e:
        assert e.reason in REASONS
        return
    assert out.ndim == 3 and out.shape[2] == 3 and out.dtype == np.uint8


@pytest.fixture(scope="module")
def blob_pipeline(tmp_path_factory):
    pytest.importorskip("onnxruntime", reason="onnxruntime is the CPU engine; installed by `make test`")
    pytest.importorskip("onnx", reason="onnx builds the synthetic model; installed by `make test`")
    from synthetic_models import blob_end2end

    from vrt_ros.settings import config
    from vrt_ros.inference.pipeline import make_pipeline

    path = blob_end2end(tmp_path_factory.mktemp("fuzz") / "blob.onnx", 64, 64)
    return make_pipeline(config.validate({"backend": "cpu", "model.path": str(path)}), log=lambda m: None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(raw_frames())
def test_fuzz_raw_frames_through_cpu_pipeline(blob_pipeline, frame):
    spec, data = frame
    try:
        dets = blob_pipeline.process(spec, data)
    except FrameError as e:
        assert e.reason in REASONS
        return
    assert len(dets) <= 1
    assert np.isfinite(dets.boxes).all()
    assert (dets.boxes[:, 2] <= spec.width).all() and (dets.boxes[:, 3] <= spec.height).all()
