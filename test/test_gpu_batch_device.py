"""The batched GPU path on a real GPU (issue 21; marked gpu, skipped without one; NOT run in the session that wrote
it: no GPU was available). YOLOX-nano made dynamic-batch by vrt_ros.tools.batch_model, through whichever GPU
engine the pipeline picks (TensorRT where installed, else torch with one CUDA graph per prepared batch size):

- one engine ``enqueue`` with an [N, ...] input and one host sync per N-frame batch;
- every slot's detections equal to the same frame processed alone (batch 1) on the GPU: same classes, boxes within
  0.5 px and scores within 1e-3 (a batch-N convolution may pick other cuDNN/TensorRT kernels than batch 1, whose
  float sums round differently; the GPU-vs-CPU test, test_gpu_pipeline.py, allows the same);
- zero device/pinned allocations after warm-up for every batch size 1..max_batch.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from gpu_support import dynamic_yolox_pipeline, requires_gpu, torch_reason
from vrt_ros.types import BgrFrame

pytestmark = [*requires_gpu, pytest.mark.skipif(torch_reason() is not None, reason=f"torch engine: {torch_reason()}")]
MAX_BATCH = 4


@pytest.fixture(scope="module")
def pipe(shared_dir, tmp_path_factory):
    p = dynamic_yolox_pipeline(shared_dir, tmp_path_factory.mktemp("batch"), MAX_BATCH)
    yield p
    p.close()


@pytest.fixture(scope="module")
def photos(shared_dir):
    return [cv2.imread(str(p), cv2.IMREAD_COLOR) for p in sorted((shared_dir / "data" / "images").glob("*.jpg"))]


def test_one_enqueue_one_sync_per_batch_and_slots_equal_the_frame_alone(pipe, photos):
    assert pipe.max_batch == MAX_BATCH and pipe.batch_sizes == (1, MAX_BATCH)
    alone = [pipe.process_bgr(p) for p in photos]
    calls = []
    inner = pipe.engine.enqueue

    def counting(stream, input_ptr, output_ptrs, batch=None):
        calls.append(batch)
        inner(stream, input_ptr, output_ptrs, batch=batch)

    pipe.engine.enqueue = counting
    try:
        rt = pipe.runtime
        for start in range(0, len(photos), MAX_BATCH):
            idx = [i % len(photos) for i in range(start, start + MAX_BATCH)]
            syncs, n = rt.counters.syncs, len(calls)
            results = pipe.process_batch([BgrFrame(photos[i]) for i in idx])
            assert rt.counters.syncs - syncs == 1 and calls[n:] == [MAX_BATCH]
            for r, i in zip(results, idx):
                a = alone[i]
                assert len(r) == len(a)
                np.testing.assert_array_equal(r.class_ids, a.class_ids)
                if len(a):
                    assert np.abs(r.boxes - a.boxes).max() <= 0.5 and np.abs(r.scores - a.scores).max() <= 1e-3
            print(f"batch of {MAX_BATCH}: stages {pipe.last_timings}")
    finally:
        pipe.engine.enqueue = inner


def test_zero_allocations_after_warm_up_for_every_batch_size(pipe, photos):
    for n in range(1, MAX_BATCH + 1):  # warm-up: every slot sees this geometry
        pipe.process_batch([BgrFrame(photos[0])] * n)
    before = pipe.runtime.counters.snapshot()
    for k in range(40):
        n = 1 + k % MAX_BATCH
        pipe.process_batch([BgrFrame(photos[0])] * n)
    after = pipe.runtime.counters.snapshot()
    assert (after["device_allocs"], after["pinned_allocs"]) == (before["device_allocs"], before["pinned_allocs"])
    assert after["syncs"] - before["syncs"] == 40
