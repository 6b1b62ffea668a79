"""One GPU node (``backend: cuda``) with cameras of both transports (issue 35, item 4): a JPEG camera decoded by the GPU
JPEG decoder, a bgr8 camera and a yuv422 camera, in one node, on the shared street frames with YOLOX-nano. Each
camera is answered from its own frames with the detections of the CPU reference run on that frame alone (a
detection scoring 0.1 above the threshold on one side is on the other, same class, box within 1 px: nvImageCodec's
pixels differ from OpenCV's by up to 1 LSB, test_gpu_node.py); the GPU decoder was started with the pipeline and
counted only on the JPEG camera's /diagnostics. The CPU-path node and batches: test_node_transport.py.

Skips with the reason where cuda-python/a GPU, rclpy/vision_msgs, onnxruntime or the shared data are absent.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_support import requires_gpu

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed (the CPU path is the reference)")


from test_node_transport import FRAMES, TRANSPORT, run_mixed, street  # noqa: E402,F401  (fixture)
from vrt_ros.inference.pipeline import make_pipeline  # noqa: E402
from vrt_ros.settings import config  # noqa: E402
from vrt_ros.types import ImageSpec  # noqa: E402

pytestmark = [*requires_gpu, pytest.mark.ros, pytest.mark.slow]

BOX_TOL_PX = 1.0
MARGIN = 0.1  # a detection this far above score_threshold on one side must be on the other


def _dets(msg) -> list[tuple[str, float, np.ndarray]]:
    out = []
    for d in msg.detections:
        c, w, h = d.bbox.center.position, d.bbox.size_x, d.bbox.size_y
        out.append((d.results[0].hypothesis.class_id, d.results[0].hypothesis.score,
                    np.array([c.x - w / 2, c.y - h / 2, c.x + w / 2, c.y + h / 2])))
    return out


def _reference(pipe, labels: list[str], msg) -> list[tuple[str, float, np.ndarray]]:
    import cv2

    if hasattr(msg, "format"):
        dets = pipe.process_bgr(cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR))
    else:
        dets = pipe.process(ImageSpec(msg.width, msg.height, msg.encoding, msg.step), bytes(msg.data))
    return [(labels[int(c)], float(s), np.asarray(b, np.float64))
            for c, s, b in zip(dets.class_ids, dets.scores, dets.boxes)]


def _covered(these, those, threshold: float) -> bool:
    """Every detection of ``these`` scoring >= threshold + MARGIN has one of ``those`` of its class within the box
    tolerance."""
    return all(any(n == m and np.abs(b - c).max() <= BOX_TOL_PX for m, _, c in those)
               for n, s, b in these if s >= threshold + MARGIN)


def test_gpu_node_answers_a_jpeg_a_bgr8_and_a_yuv422_camera(shared_dir, street):  # noqa: F811
    labels_file = shared_dir / "models" / "coco80.names"
    labels = labels_file.read_text().split("\n")
    params = dict(backend="cuda", model__path=str(shared_dir / "models" / "yolox_nano.onnx"),
                  model__labels=str(labels_file), input__qos="reliable", input__depth=10, cameras=list(TRANSPORT),
                  input__compressed_cameras=["front"])
    values = config.validate({k.replace("__", "."): v for k, v in params.items()})
    reference = make_pipeline({**values, "backend": "cpu"}, log=lambda m: None)
    threshold = float(values["score_threshold"])
    run = run_mixed(params, street, 60.0)  # the first frame includes the engine's warm-up
    counters, got, status = run.counters, run.got, run.status
    assert run.pipeline.startswith("cuda"), run.pipeline
    assert run.decoder_at_start
    for c in TRANSPORT:
        assert counters[c].processed == FRAMES and not +counters[c].dropped, (c, counters[c])
        assert [m.header for m in got[c]] == [f.header for f in street[c]]
        for m, frame in zip(got[c], street[c]):
            have, want = _dets(m), _reference(reference, labels, frame)
            assert _covered(want, have, threshold) and _covered(have, want, threshold), (c, have, want)
        assert status[c]["transport"] == TRANSPORT[c]
    assert int(status["front"].get("decode.gpu", "0")) == FRAMES, status["front"]
    assert not any(k.startswith("decode.") for c in ("rear", "arm") for k in status[c])
