"""``vrt_ros.pools.keyed_cache.KeyedCache``: kernel arguments built once per key (pure Python)."""

from __future__ import annotations

import pytest

from vrt_ros.boxes.geometry import letterbox
from vrt_ros.pools.keyed_cache import KeyedCache
from vrt_ros.types import Letterbox, PostprocessParams


def test_a_value_is_built_once_per_key_and_then_reused():
    cache = KeyedCache()
    made = []

    def build(tag):
        made.append(tag)
        return (tag, object())

    first = cache.get(("geometry", 640, 480), lambda: build("a"))
    for _ in range(100):  # a steady stream of frames of one geometry builds nothing more
        assert cache.get(("geometry", 640, 480), lambda: build("again")) is first
    other = cache.get(("geometry", 1280, 720), lambda: build("b"))
    assert other is not first and made == ["a", "b"] and cache.builds == 2 and len(cache) == 2


def test_the_frame_keys_used_by_the_gpu_path_are_hashable_and_change_with_their_values():
    cache = KeyedCache()
    lb = letterbox(832, 624, 416, 416, "center")
    assert isinstance(lb, Letterbox)
    params = PostprocessParams()
    key = ((1, 2), lb, params)
    cache.get(key, lambda: "x")
    assert cache.get(((1, 2), letterbox(832, 624, 416, 416, "center"), PostprocessParams()), lambda: "rebuilt") == "x"
    other_frame = letterbox(640, 480, 416, 416, "center")
    assert cache.get(((1, 2), other_frame, params), lambda: "new geometry") == "new geometry"
    changed = PostprocessParams(score_threshold=params.score_threshold + 0.1)
    assert cache.get(((1, 2), lb, changed), lambda: "new thresholds") == "new thresholds"  # runtime change honoured


def test_capacity_bounds_the_cache():
    cache = KeyedCache(capacity=3)
    for i in range(10):  # e.g. a camera whose resolution changes every frame
        cache.get(i, lambda i=i: i)
        assert len(cache) <= 3
    assert cache.builds == 10
    with pytest.raises(ValueError, match="capacity 0"):
        KeyedCache(capacity=0)
