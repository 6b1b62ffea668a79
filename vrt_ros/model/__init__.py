"""Model files and the model set-up: ONNX detection, the engine input size, head choice and preprocessing spec,
class-name files, the batch-N model rewrite (the heads themselves: vrt_ros.heads).

Nothing is imported here, so importing one module does not pull in the others."""
