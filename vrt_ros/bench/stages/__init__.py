"""The pipeline in one process, stage by stage, against a typical node and an Ultralytics-style peer (``python -m
vrt_ros.bench``), GPU memory, host copies, JPEG decode, torch FP16.

Nothing is imported here, so importing one module does not pull in the others."""
