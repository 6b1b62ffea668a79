"""Freeing what a GPU pipeline holds, quietly: used by :class:`vrt_ros.inference.backends.cuda.CudaPipeline` at ``close`` and
after a failed start-up, when the context may be poisoned (a sticky CUDA error): every part is freed that can be,
and no error is raised.
"""

from __future__ import annotations

from typing import Any, Iterable


def _quietly(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:  # a poisoned context: free what can be freed, raise nothing
        pass


def release_quietly(stream: Any, router: Any, parts: Iterable[Any], buffers: Iterable[Any], events: Iterable[Any],
                    engine: Any) -> None:
    """Free, in order: the compressed router's GPU decoder, ``parts`` (objects with ``close(stream)``; None
    skipped), device ``buffers`` (``close(stream)``), timing ``events`` (``close()``), the ``engine`` (its
    ``close()`` if it has one), then synchronise and destroy ``stream``. Errors are ignored."""
    if router is not None and router.decoder is not None:
        _quietly(router.decoder.close)
    for part in [*parts, *buffers]:
        if part is not None:
            _quietly(part.close, stream)
    for event in events:
        _quietly(event.close)
    if engine is not None and hasattr(engine, "close"):
        _quietly(engine.close)
    if stream is not None:
        _quietly(lambda: (stream.sync(), stream.close()))
