"""Command-line tools apart from the node: ``replay`` and ``record`` (rosbag2 through rosbags), the demo (``demo``,
``make demo``) with its bag, report and embedded assets, ``python -m vrt_ros.tools.batch_model`` (a batch-N model
from a batch-1 ONNX).

Nothing is imported here, so importing one module does not pull in the others."""
