"""Backends behind :class:`vrt_ros.inference.pipeline.Pipeline`: ``cpu`` (ONNX Runtime, the reference) and ``cuda``."""
