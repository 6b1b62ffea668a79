"""Configuration: the parameter schema and its validation (``python -m vrt_ros.settings.config FILE``), per-robot
parameter files, what the launch file makes of its arguments.

Nothing is imported here, so importing one module does not pull in the others."""
