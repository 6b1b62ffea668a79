"""One node, cameras of both transports (issue 35, item 4): ``input.compressed_cameras`` puts the listed cameras on
``<cam>/image_raw/compressed`` and leaves the others on ``<cam>/image_raw``; each camera is answered from its own
frames, counted on its own, and a batch may hold a JPEG slot and a raw slot.

Real frames: the shared street bags (the JPEG bag and the bgr8 bag carry the same scene with the same stamps) and
their yuv422 (UYVY) encoding; real YOLOX-nano on the CPU path for the answers, and the synthetic dynamic-batch
brightness model for the batches (CPU ONNX Runtime batches, as test_node_batching.py). The GPU path with the real
decoder: test_gpu_node.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from robot_replay import BAGS, bag_frames  # noqa: E402
from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from synthetic_models import brightness_end2end  # noqa: E402
from test_node import Collector, overrides, wait_matched, wait_until  # noqa: E402
from test_node_batching import _GatedBatches  # noqa: E402
from vrt_ros.bench.frames import bgr_to_uyvy  # noqa: E402
from vrt_ros.inference.pipeline import make_pipeline  # noqa: E402
from vrt_ros.ros.node import DetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.settings import config  # noqa: E402
from vrt_ros.types import ImageSpec  # noqa: E402

pytestmark = pytest.mark.ros
FRAMES = 4  # per camera
#: the node's cameras and what each is sent: front JPEG, rear bgr8, arm yuv422 (UYVY) of the same frames
TRANSPORT = {"front": "compressed", "rear": "raw", "arm": "raw"}
SUFFIX = {"compressed": "image_raw/compressed", "raw": "image_raw"}  # a camera's input topic by its transport


def _yuv422(msg: Image) -> Image:
    """The bgr8 frame ``msg`` as a yuv422 (UYVY, BT.601 video range) ``sensor_msgs/Image``, same header."""
    bgr = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)[:, : msg.width * 3]
    out = Image()
    out.header = msg.header
    out.height, out.width, out.encoding, out.step = msg.height, msg.width, "yuv422", msg.width * 2
    out.data = bgr_to_uyvy(bgr.reshape(msg.height, msg.width, 3)).tobytes()
    return out


@pytest.fixture(scope="module")
def street(shared_dir) -> dict[str, list]:
    """``FRAMES`` frames per camera of :data:`TRANSPORT`, from the shared bags."""
    jpeg = bag_frames(shared_dir / "data" / "bags" / BAGS["compressed"])[2][:FRAMES]
    raw = bag_frames(shared_dir / "data" / "bags" / BAGS["raw"])[2][:FRAMES]
    assert [f.header.stamp for f in jpeg] == [f.header.stamp for f in raw]
    return {"front": jpeg, "rear": raw, "arm": [_yuv422(m) for m in raw]}


def _expected(pipe, msg) -> list[tuple]:
    """The detections of ``msg`` processed alone by ``pipe``: (class, x1, y1, x2, y2) per detection."""
    if isinstance(msg, CompressedImage):
        dets = pipe.process_bgr(cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR))
    else:
        dets = pipe.process(ImageSpec(msg.width, msg.height, msg.encoding, msg.step), bytes(msg.data))
    return [(int(c), *map(float, b)) for c, b in zip(dets.class_ids, dets.boxes)]


def _got(msg: Detection2DArray, labels: list[str]) -> list[tuple]:
    out = []
    for d in msg.detections:
        c, sx, sy = d.bbox.center.position, d.bbox.size_x, d.bbox.size_y
        out.append((labels.index(d.results[0].hypothesis.class_id),
                    c.x - sx / 2, c.y - sy / 2, c.x + sx / 2, c.y + sy / 2))
    return out


def statuses(node: DetectorNode) -> dict[str, dict[str, str]]:
    """The node's /diagnostics values by camera."""
    return {st.name.rsplit(": ", 1)[1]: {v.key: v.value for v in st.values} for st in node.diagnostics().status}


@dataclass
class MixedRun:
    """What :func:`run_mixed` saw: per camera the counters, the answers (in order) and the /diagnostics values; the
    pipeline's name; whether the GPU decoder (``_router``) existed right after the node's start; whether nothing
    subscribed on each camera's other transport's topic."""

    counters: dict
    got: dict[str, list]
    status: dict[str, dict[str, str]]
    pipeline: str
    decoder_at_start: bool
    others_unheard: bool


def run_mixed(params: dict, street: dict[str, list], answer_s: float) -> MixedRun:
    """A node with the :data:`TRANSPORT` cameras (``params`` as overrides), fed ``street`` in lock step: each frame
    of each camera published after the camera's previous answer came (at most ``answer_s`` each)."""
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, parameter_overrides=overrides(**params))
        decoder_at_start = getattr(node.pipeline, "_router", None) is not None
        client = Node("client", context=ctx, namespace=ns)
        topic = {c: f"{c}/{SUFFIX[t]}" for c, t in TRANSPORT.items()}
        pubs = {c: client.create_publisher(type(street[c][0]), topic[c], make_qos("reliable", 10)) for c in TRANSPORT}
        other = {c: client.create_publisher(Image if t == "compressed" else CompressedImage,
                                            f"{c}/{SUFFIX['raw' if t == 'compressed' else 'compressed']}",
                                            make_qos("reliable", 10)) for c, t in TRANSPORT.items()}
        got = {c: Collector(client, Detection2DArray, f"{c}/detections") for c in TRANSPORT}
        with spinning(ctx, node, client):
            for p in pubs.values():
                wait_matched(p)
            for k in range(len(street[next(iter(TRANSPORT))])):
                for c, pub in pubs.items():
                    pub.publish(street[c][k])
                    assert len(got[c].wait(k + 1, answer_s)) == k + 1, f"{c}: frame {k} not answered"
            unheard = all(p.get_subscription_count() == 0 for p in other.values())
            counters = node.counters()
            status = statuses(node)
            name = str(getattr(node.pipeline, "name", type(node.pipeline).__name__))
        client.destroy_node()
        node.destroy_node()
    return MixedRun(counters, {c: got[c].wait(0, 0) for c in TRANSPORT}, status, name, decoder_at_start, unheard)


@pytest.mark.parametrize("raw_subscription", [False, True], ids=["typed", "raw_subscription"])
def test_one_node_answers_a_jpeg_a_bgr8_and_a_yuv422_camera(shared_dir, street, capfd, raw_subscription):
    """front on image_raw/compressed, rear and arm on image_raw, in one node: every frame of each camera answered
    with its own header and the detections of that frame alone (same pipeline, 1e-3 px); nothing subscribed on
    the other transport's topic; per-camera counters, /diagnostics ``transport`` and the start-up line right.
    ``raw_subscription``: each camera's serialized messages read by its transport's reader."""
    model = shared_dir / "models" / "yolox_nano.onnx"
    labels_file = shared_dir / "models" / "coco80.names"
    labels = labels_file.read_text().split("\n")
    params = dict(backend="cpu", model__path=str(model), model__labels=str(labels_file), input__qos="reliable",
                  input__depth=10, cameras=list(TRANSPORT), input__compressed_cameras=["front"],
                  input__raw_subscription=raw_subscription, engine__threads=1)
    reference = make_pipeline(config.validate({k.replace("__", "."): v for k, v in params.items()}), log=lambda m: None)
    run = run_mixed(params, street, 30.0)
    counters, got, status = run.counters, run.got, run.status
    assert run.others_unheard  # nothing subscribed on the other transport's topics
    for c in TRANSPORT:
        assert (counters[c].received, counters[c].processed, +counters[c].dropped) == (FRAMES, FRAMES, {}), c
        assert [m.header for m in got[c]] == [f.header for f in street[c]]
        for m, frame in zip(got[c], street[c]):
            want = _expected(reference, frame)
            have = _got(m, labels)
            assert sum(d[0] == labels.index("person") for d in have) >= 3, (c, have)  # the street's pedestrians
            assert len(have) == len(want) and np.allclose(np.array(have), np.array(want), atol=1e-3), (c, have, want)
        assert status[c]["transport"] == TRANSPORT[c]
    err = capfd.readouterr().err
    assert "cameras front (image_raw/compressed), rear (image_raw), arm (image_raw)" in err, err


# ----------------------------------------------------------------------------------------------- batches
W = 320
BOX = (10.0, 20.0, 100.0, 120.0)


@pytest.fixture(scope="module")
def brightness(tmp_path_factory):
    return brightness_end2end(tmp_path_factory.mktemp("models") / "brightness.onnx", W, W, BOX)


class _Recorded(_GatedBatches):
    """:class:`test_node_batching._GatedBatches` recording each batch's slot kinds (``CompressedFrame``, ``RawFrame``,
    ``BgrFrame``); ``gpu_decode``: the pipeline decodes compressed frames itself (the GPU path's
    ``decodes_compressed``), so a JPEG reaches ``process_batch`` as its payload."""

    def __init__(self, inner, gpu_decode: bool) -> None:
        super().__init__(inner)
        self.kinds: list[list[str]] = []
        if gpu_decode:
            self.decodes_compressed = True  # the GPU path: a batch's JPEGs reach process_batch as their payloads
            self.process_compressed = self._not_alone
            self.decode_stats = {"gpu": 1}  # the GPU path's decode counts (pipeline totals)

    def _not_alone(self, fmt, data):
        raise AssertionError("with batching, a JPEG goes to process_batch with the batch's other frames")

    def process_batch(self, frames, masks=None):
        self.kinds.append([type(f).__name__ for f in frames])
        return super().process_batch(frames)


@pytest.mark.parametrize("gpu_decode", [True, False], ids=["pipeline_decodes", "cpu_decode"])
def test_a_batch_holds_a_jpeg_slot_and_a_raw_slot(brightness, street, shared_dir, gpu_decode):
    """engine.max_batch 2, camera a compressed, b raw: their frames published together go as ONE batch holding a
    JPEG slot (its payload, where the pipeline decodes: the GPU path; else the node's CPU decode, BGR) and a raw slot;
    each camera's answer is its own frame's, equal to the frame run alone (1e-6)."""
    values = config.validate({"backend": "cpu", "model.path": str(brightness), "model.pad_value": 0.0,
                              "score_threshold": 0.01, "engine.max_batch": 2, "engine.threads": 1,
                              "cameras": ["a", "b"], "input.compressed_cameras": ["a"]})
    pipe = _Recorded(make_pipeline(values, log=lambda m: None), gpu_decode)
    # a photo's JPEG (darker than the street: each camera's score shows the answer came from its own frame)
    jpeg = CompressedImage(header=street["front"][1].header, format="jpeg",
                           data=(shared_dir / "data" / "images" / "darknet_dog.jpg").read_bytes())
    raw = street["rear"][2]
    alone = {c: float(make_pipeline(values, log=lambda m: None).process_batch([f])[0].scores[0])
             for c, f in (("a", _as_batch_frame(jpeg)), ("b", _as_batch_frame(raw)))}
    assert abs(alone["a"] - alone["b"]) > 1e-3
    ns = unique_namespace()
    with private_context() as ctx:
        node = DetectorNode(context=ctx, namespace=ns, pipeline=pipe, parameter_overrides=overrides(
            model__path=str(brightness), score_threshold=0.01, input__qos="reliable", input__depth=1,
            cameras=["a", "b"], input__compressed_cameras=["a"]))
        client = Node("client", context=ctx, namespace=ns)
        pub_a = client.create_publisher(CompressedImage, "a/image_raw/compressed", make_qos("reliable", 1))
        pub_b = client.create_publisher(Image, "b/image_raw", make_qos("reliable", 1))
        got = {c: Collector(client, Detection2DArray, f"{c}/detections") for c in "ab"}
        with spinning(ctx, node, client):
            wait_matched(pub_a)
            wait_matched(pub_b)
            pub_b.publish(street["rear"][0])  # held in the pipeline: the pair queues up behind it
            assert wait_until(lambda: pipe.entered == 1 and not pipe.sizes, 5.0)
            pub_a.publish(jpeg)
            pub_b.publish(raw)
            assert wait_until(lambda: node.counters()["a"].received == 1 and node.counters()["b"].received == 2, 5.0)
            pipe.release()
            assert wait_until(lambda: pipe.entered == 2, 5.0)
            pipe.release()
            assert len(got["a"].wait(1, 10.0)) == 1 and len(got["b"].wait(2, 10.0)) == 2
            counters = node.counters()
            status = statuses(node)
        client.destroy_node()
        node.destroy_node()
    jpeg_kind = "CompressedFrame" if gpu_decode else "BgrFrame"
    assert len(pipe.kinds) == 2 and pipe.kinds[0] == ["RawFrame"], pipe.kinds  # the held frame, then the pair
    assert sorted(pipe.kinds[1]) == sorted([jpeg_kind, "RawFrame"]), pipe.kinds
    assert counters["a"].processed == 1 and counters["b"].processed == 2
    # decode counts on the compressed camera's status only (a raw camera decodes nothing)
    decode = (status["a"].get("decode.gpu"), status["b"].get("decode.gpu"))
    assert decode == (("1", None) if gpu_decode else (None, None))
    assert (status["a"]["transport"], status["b"]["transport"]) == ("compressed", "raw")
    assert counters["a"].batch_sizes[2] == 1 and counters["b"].batch_sizes[2] == 1
    (a,), (_, b) = got["a"].wait(0, 0), got["b"].wait(0, 0)
    assert a.header == jpeg.header and b.header == raw.header
    assert a.detections[0].results[0].hypothesis.score == pytest.approx(alone["a"], abs=1e-6)
    assert b.detections[0].results[0].hypothesis.score == pytest.approx(alone["b"], abs=1e-6)


def _as_batch_frame(msg):
    from vrt_ros.types import CompressedFrame, RawFrame

    if isinstance(msg, CompressedImage):
        return CompressedFrame(str(msg.format), bytes(msg.data))
    return RawFrame(ImageSpec(msg.width, msg.height, msg.encoding, msg.step), bytes(msg.data))
