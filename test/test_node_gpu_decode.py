"""The node hands compressed frames as they came to a pipeline that decodes them itself (``decodes_compressed``: the
GPU path) and reports the decode counts in /diagnostics; here with a stand-in GPU JPEG decoder over the CPU pipeline
(test/jpeg_standin.py), so it runs without a GPU. The real decoder: test_gpu_jpeg.py, test_gpu_node.py."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import CompressedImage  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from jpeg_standin import HostJpegDecoder  # noqa: E402
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import ramp_rectangle  # noqa: E402
from test_node import BOX, Collector, blob_model, overrides, settled, wait_matched, wait_until  # noqa: E402,F401
from vrt_ros.inference.batch_serial import process_serially  # noqa: E402
from vrt_ros.intake.compressed_route import CompressedRouter  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.types import ImageSpec  # noqa: E402

pytestmark = pytest.mark.ros


class StandinGpuDecodePipeline:
    """The CPU pipeline behind a :class:`CompressedRouter` with the host stand-in decoder: JPEGs take the "device"
    route (RGB with a padded pitch, read by ``process`` as the preprocess kernel reads it), the rest the CPU decode."""

    decodes_compressed = True

    def __init__(self, inner) -> None:
        self._inner = inner
        self.name, self.input_spec, self.head = "cuda (stand-in decoder)", inner.input_spec, inner.head
        self.last_timings: dict[str, float] = {}
        self.decoder = HostJpegDecoder()
        self._router = CompressedRouter(self.decoder, log=lambda m: None)

    def process_compressed(self, fmt, data):
        image, _ = self._router.decode(fmt, data, stream=None)
        if isinstance(image, np.ndarray):
            dets = self._inner.process_bgr(image)
        else:
            spec = ImageSpec(width=image.width, height=image.height, encoding=image.encoding, step=image.pitch)
            dets = self._inner.process(spec, self.decoder.pixels(image))
        self.last_timings = dict(self._inner.last_timings)
        return dets

    @property
    def decode_stats(self):
        return self._router.stats()

    def process(self, spec, data):
        raise AssertionError("compressed frames must go to process_compressed")

    process_bgr = process

    def process_batch(self, frames, masks=None):  # the worker's one route: each frame through process_compressed
        return process_serially(self, frames)

    def set_postprocess(self, params):
        self._inner.set_postprocess(params)

    def close(self):
        self._inner.close()


def test_compressed_frames_go_to_the_pipelines_own_decoder(blob_model):  # noqa: F811
    from vrt_ros.settings import config
    from vrt_ros.inference.pipeline import make_pipeline

    inner = make_pipeline(config.validate({"backend": "cpu", "model.path": str(blob_model), "model.pad_value": 0.0}),
                          log=lambda m: None)
    pipeline = StandinGpuDecodePipeline(inner)
    image = ramp_rectangle(320, 240, BOX)
    payloads = [("jpeg", cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes(), "jpg"),
                ("png", cv2.imencode(".png", image)[1].tobytes(), "png")]
    payloads.append(("jpeg", payloads[0][1][: len(payloads[0][1]) // 2], "cut"))
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, pipeline=pipeline, parameter_overrides=overrides(
            model__path=str(blob_model), input__compressed=True, input__qos="reliable", input__depth=10))
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(CompressedImage, "camera/image_raw/compressed", make_qos("reliable", 10))
        with spinning(ctx, node, client):
            wait_matched(pub)
            for i, (fmt, data, frame_id) in enumerate(payloads):
                msg = CompressedImage(format=fmt, data=data)
                msg.header.frame_id = frame_id
                pub.publish(msg)
                assert settled(node, i + 1)
            got = dets.wait(2)
            assert wait_until(lambda: node.counters()["camera"].received == 3)
            counters = node.counters()["camera"]
            [status] = node.diagnostics().status
        client.destroy_node()
        node.destroy_node()
    assert [m.header.frame_id for m in got] == ["jpg", "png"]
    for m in got:  # the box where it was drawn, from the pitched RGB image and from the CPU-decoded PNG
        [d] = m.detections
        assert d.bbox.size_x == pytest.approx(BOX[2] - BOX[0], abs=2.0)
        assert d.bbox.center.position.x == pytest.approx((BOX[0] + BOX[2]) / 2, abs=1.0)
    assert counters.dropped["corrupt_compressed"] == 1 and counters.processed == 2
    values = {kv.key: kv.value for kv in status.values}
    assert values["decode.gpu"] == "1" and values["decode.cpu.png"] == "1"
    assert pipeline.decoder.decoded == 1
