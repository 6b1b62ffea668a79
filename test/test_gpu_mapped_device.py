"""Mapped pinned memory on a real GPU (issue 28, item 4): ``input.mapped_memory`` gives the same detections as the
copied path. A Jetson (integrated memory) was never available here, so the H200 stands in: it can map host memory
too (``CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY``, unified addressing), only slower (kernels read the frame across
PCIe), so the runtime's ``integrated`` flag is set by the test to take the path the product takes on Orin and Thor.
Equality: the same boxes, scores and classes, bit for bit (the same bytes reach the same kernels)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_support import REASON, requires_gpu, torch_reason


@requires_gpu[0]
@requires_gpu[1]
def test_mapped_memory_gives_the_copied_paths_detections_on_a_real_gpu(shared_dir, tmp_path, monkeypatch):
    cv2 = pytest.importorskip("cv2")
    if torch_reason() is not None:
        pytest.skip(f"torch engine: {torch_reason()}")
    from vrt_ros.inference.backends.cuda import CudaPipeline
    from vrt_ros.settings.config import defaults
    from vrt_ros.gpu.runtime import GpuRuntime
    from vrt_ros.types import ImageSpec

    assert REASON is None
    v = defaults()
    v.update({"model.path": str(shared_dir / "models" / "yolox_nano.onnx"), "backend": "cuda",
              "engine.cache_dir": str(tmp_path / "cache")})
    copied = CudaPipeline(v, log=print)
    rt = GpuRuntime.get(0)
    monkeypatch.setattr(rt, "integrated", True)  # what an Orin / Thor reports (see the module docstring)
    lines: list[str] = []
    mapped = CudaPipeline({**v, "input.mapped_memory": True}, log=lines.append)
    assert any("frames go to mapped pinned memory" in line for line in lines), lines
    photos = sorted((shared_dir / "data" / "images").glob("*.jpg"))[:6]
    assert photos
    total = 0
    for path in photos * 2:  # twice: the second pass reuses each geometry's mapped buffer
        bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
        h, w = bgr.shape[:2]
        spec = ImageSpec(width=w, height=h, encoding="bgr8", step=w * 3)
        a, b = copied.process(spec, bgr.tobytes()), mapped.process(spec, bgr.tobytes())
        np.testing.assert_array_equal(a.boxes, b.boxes, err_msg=path.name)
        np.testing.assert_array_equal(a.scores, b.scores, err_msg=path.name)
        np.testing.assert_array_equal(a.class_ids, b.class_ids, err_msg=path.name)
        total += len(a)
    print(f"mapped vs copied: {len(photos)} photos x 2, {total} detections, identical")
    assert total > 0
    copied.close()
    mapped.close()
