"""The managed node on the GPU path gives the device memory back on cleanup (issue 16), over real DDS.

Each cycle: device memory used (``cuMemGetInfo``, whole device) is measured before ``configure``, while active after
answering real frames (the raw street bag, YOLOX-nano, ``backend: cuda`` with the torch engine) and after
``deactivate`` + ``cleanup``. From the second cycle on, what cleanup leaves must equal what was in use before
configure within :data:`TOLERANCE_MIB`, and no cycle may leave more than the one before. The first cycle's
remainder is printed, not bounded: it is the process's own library state that stays for the life of the process
(torch's CUDA state and cuDNN handles, the kernel library's loaded modules), not the node's.

Run on the GPU machine with ``scripts/gpu_node_check.sh`` (ROS bundle, see that script). Skips with the reason
where cuda-python/a GPU, torch, rclpy/vision_msgs or the shared data are absent.
"""

from __future__ import annotations

import pytest

from gpu_support import requires_gpu, torch_reason

rclpy = pytest.importorskip("rclpy", reason="rclpy not installed (on the GPU machine: scripts/gpu_node_check.sh)")
pytest.importorskip("rclpy.lifecycle", reason="rclpy has no lifecycle module")
pytest.importorskip("vision_msgs.msg", reason="vision_msgs not importable (`make venv` builds it into .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")

from lifecycle_msgs.msg import Transition  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from ros_testing import private_context, spinning, unique_namespace  # noqa: E402
from test_lifecycle import Lifecycle  # noqa: E402
from test_node import Collector, _bag_frames, overrides, wait_until  # noqa: E402
from vrt_ros.ros.lifecycle_node import LifecycleDetectorNode  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402

pytestmark = [*requires_gpu, pytest.mark.ros, pytest.mark.slow]

needs_torch = pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")

CYCLES = 3
FRAMES = 5  # real frames answered per cycle (the first includes engine warm-up / graph capture)
TOLERANCE_MIB = 16.0  # after cleanup vs before configure, cycles 2..: allocator page granularity, not the pipeline
RESULT_TIMEOUT_S = 120.0
MIB = 2**20


@needs_torch
def test_gpu_memory_returned_after_cleanup(shared_dir):
    from vrt_ros.gpu.runtime import GpuRuntime

    runtime = GpuRuntime.get(0)  # the process's CUDA context, which the node's pipeline shares
    topic, _, frames = _bag_frames(shared_dir / "data" / "bags" / "vtest_raw_sqlite3")
    frames = frames[:FRAMES]
    ns = unique_namespace()
    rows = []
    with private_context() as ctx:
        node = LifecycleDetectorNode(context=ctx, namespace=ns, parameter_overrides=overrides(
            backend="cuda", model__path=str(shared_dir / "models" / "yolox_nano.onnx"),
            model__labels=str(shared_dir / "models" / "coco80.names"), input__qos="reliable", input__depth=10))
        client = Node("client", context=ctx, namespace=ns)
        dets = Collector(client, Detection2DArray, "camera/detections")
        pub = client.create_publisher(Image, "camera/image_raw", make_qos("reliable", 10))
        lc = Lifecycle(client, f"{ns}/vrt_detector")
        with spinning(ctx, node, client):
            for cycle in range(CYCLES):
                before = runtime.device_memory_used()
                assert lc.set(Transition.TRANSITION_CONFIGURE), f"cycle {cycle}: configure failed"
                assert str(node.pipeline.name).startswith("cuda"), node.pipeline.name
                configured = runtime.device_memory_used()
                assert lc.set(Transition.TRANSITION_ACTIVATE)
                assert wait_until(lambda: pub.get_subscription_count() >= 1, 20.0)
                start = len(dets.wait(0, 0))
                for k, frame in enumerate(frames, 1):
                    pub.publish(frame)
                    assert len(dets.wait(start + k, RESULT_TIMEOUT_S)) >= start + k, f"cycle {cycle}: no result {k}"
                active = runtime.device_memory_used()
                assert lc.set(Transition.TRANSITION_DEACTIVATE) and lc.set(Transition.TRANSITION_CLEANUP)
                assert node.pipeline is None
                after = runtime.device_memory_used()
                rows.append((cycle, before, configured, active, after))
        client.destroy_node()
        node.destroy_node()
    print(f"\ndevice memory used (MiB, cuMemGetInfo), {FRAMES} real frames per cycle, YOLOX-nano, backend cuda/torch")
    print("cycle  before-configure  configured  active  after-cleanup  after-before")
    for cycle, before, configured, active, after in rows:
        print(f"{cycle:5d}  {before / MIB:16.1f}  {configured / MIB:10.1f}  {active / MIB:6.1f}  {after / MIB:13.1f}"
              f"  {(after - before) / MIB:+12.1f}")
    for cycle, before, _, active, after in rows:
        assert active > before, f"cycle {cycle}: the active pipeline held no device memory: the measurement is blind"
        assert after < active, f"cycle {cycle}: cleanup gave nothing back"
    for (cycle, before, _, _, after), (_, _, _, _, previous_after) in zip(rows[1:], rows):
        assert (after - before) / MIB <= TOLERANCE_MIB, f"cycle {cycle}: {(after - before) / MIB:.1f} MiB not returned"
        assert (after - previous_after) / MIB <= TOLERANCE_MIB, f"cycle {cycle}: memory grows from cycle to cycle"
    assert all(len(m.detections) > 0 for m in dets.msgs), "a frame of the street bag gave no detection"
