"""Backends behind :class:`vrt_ros.pipeline.Pipeline`: ``cpu`` (ONNX Runtime, the reference) and ``cuda``."""
