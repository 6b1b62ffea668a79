"""One-release aliases of the modules moved when the package was laid out by concern (issue 37).

Importing an old name (``import vrt_ros.pipeline``, ``from vrt_ros.config import ParamSpec``) warns with a
:class:`DeprecationWarning` naming the new module and gives the new module itself (one object: patching either name
patches both); ``python -m OLD`` runs the new module after a one-line note on stderr. Written by the relayout kit
(the table is its move table); remove this module and its two lines in ``vrt_ros/__init__.py`` in vrt_ros 0.2.
Pure Python (importlib only): ``import vrt_ros`` stays light.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings

#: old dotted name -> new dotted name
MOVED = {
    "vrt_ros.assets": "vrt_ros.tools.assets",
    "vrt_ros.backends": "vrt_ros.inference.backends",
    "vrt_ros.backends.cpu": "vrt_ros.inference.backends.cpu",
    "vrt_ros.backends.cuda": "vrt_ros.inference.backends.cuda",
    "vrt_ros.backends.cuda_run": "vrt_ros.inference.backends.cuda_run",
    "vrt_ros.backends.cuda_staging": "vrt_ros.inference.backends.cuda_staging",
    "vrt_ros.backends.gpu_engine": "vrt_ros.inference.backends.gpu_engine",
    "vrt_ros.backends.gpu_release": "vrt_ros.inference.backends.gpu_release",
    "vrt_ros.batch_serial": "vrt_ros.inference.batch_serial",
    "vrt_ros.batching": "vrt_ros.inference.batching",
    "vrt_ros.bench.baseline": "vrt_ros.bench.stages.baseline",
    "vrt_ros.bench.batch_staging": "vrt_ros.bench.stages.batch_staging",
    "vrt_ros.bench.camera_pub": "vrt_ros.bench.cameras.camera_pub",
    "vrt_ros.bench.cameras_e2e": "vrt_ros.bench.cameras.cameras_e2e",
    "vrt_ros.bench.cameras_report": "vrt_ros.bench.cameras.cameras_report",
    "vrt_ros.bench.cameras_targets": "vrt_ros.bench.cameras.cameras_targets",
    "vrt_ros.bench.dds_floor": "vrt_ros.bench.transport.dds_floor",
    "vrt_ros.bench.dds_floor_procs": "vrt_ros.bench.transport.dds_floor_procs",
    "vrt_ros.bench.depth_cost": "vrt_ros.bench.outputs.depth_cost",
    "vrt_ros.bench.e2e_probe": "vrt_ros.bench.transport.e2e_probe",
    "vrt_ros.bench.e2e_report": "vrt_ros.bench.transport.e2e_report",
    "vrt_ros.bench.fuzz": "vrt_ros.bench.robustness.fuzz",
    "vrt_ros.bench.fuzz_campaign": "vrt_ros.bench.robustness.fuzz_campaign",
    "vrt_ros.bench.fuzz_msgs": "vrt_ros.bench.robustness.fuzz_msgs",
    "vrt_ros.bench.fuzz_report": "vrt_ros.bench.robustness.fuzz_report",
    "vrt_ros.bench.gpu_memory": "vrt_ros.bench.stages.gpu_memory",
    "vrt_ros.bench.gpu_stages": "vrt_ros.bench.stages.gpu_stages",
    "vrt_ros.bench.heads": "vrt_ros.bench.outputs.heads",
    "vrt_ros.bench.host_copy": "vrt_ros.bench.stages.host_copy",
    "vrt_ros.bench.jpeg_batch": "vrt_ros.bench.stages.jpeg_batch",
    "vrt_ros.bench.jpeg_decode": "vrt_ros.bench.stages.jpeg_decode",
    "vrt_ros.bench.raw_read": "vrt_ros.bench.transport.raw_read",
    "vrt_ros.bench.recovery": "vrt_ros.bench.restart.recovery",
    "vrt_ros.bench.recovery_lifecycle": "vrt_ros.bench.restart.recovery_lifecycle",
    "vrt_ros.bench.recovery_probe": "vrt_ros.bench.restart.recovery_probe",
    "vrt_ros.bench.recovery_procs": "vrt_ros.bench.restart.recovery_procs",
    "vrt_ros.bench.recovery_respawn": "vrt_ros.bench.restart.recovery_respawn",
    "vrt_ros.bench.relay": "vrt_ros.bench.transport.relay",
    "vrt_ros.bench.report": "vrt_ros.bench.stages.report",
    "vrt_ros.bench.ros_e2e": "vrt_ros.bench.transport.ros_e2e",
    "vrt_ros.bench.runner": "vrt_ros.bench.stages.runner",
    "vrt_ros.bench.scaling_plot": "vrt_ros.bench.cameras.scaling_plot",
    "vrt_ros.bench.soak": "vrt_ros.bench.robustness.soak",
    "vrt_ros.bench.torch_fp16": "vrt_ros.bench.stages.torch_fp16",
    "vrt_ros.bench.torch_peer": "vrt_ros.bench.stages.torch_peer",
    "vrt_ros.bench.tracking": "vrt_ros.bench.tracker.tracking",
    "vrt_ros.bench.tracking_bag": "vrt_ros.bench.tracker.tracking_bag",
    "vrt_ros.bench.tracking_eval": "vrt_ros.bench.tracker.tracking_eval",
    "vrt_ros.bench.writer_3d": "vrt_ros.bench.outputs.writer_3d",
    "vrt_ros.buffer_budget": "vrt_ros.pools.buffer_budget",
    "vrt_ros.compressed": "vrt_ros.intake.compressed",
    "vrt_ros.compressed_route": "vrt_ros.intake.compressed_route",
    "vrt_ros.config": "vrt_ros.settings.config",
    "vrt_ros.demo": "vrt_ros.tools.demo",
    "vrt_ros.draw": "vrt_ros.boxes.draw",
    "vrt_ros.encodings": "vrt_ros.intake.encodings",
    "vrt_ros.frames": "vrt_ros.intake.frames",
    "vrt_ros.geometry": "vrt_ros.boxes.geometry",
    "vrt_ros.keyed_cache": "vrt_ros.pools.keyed_cache",
    "vrt_ros.labels": "vrt_ros.model.labels",
    "vrt_ros.launch_args": "vrt_ros.settings.launch_args",
    "vrt_ros.masks": "vrt_ros.boxes.masks",
    "vrt_ros.model_file": "vrt_ros.model.model_file",
    "vrt_ros.model_setup": "vrt_ros.model.model_setup",
    "vrt_ros.nms": "vrt_ros.boxes.nms",
    "vrt_ros.onnx_batch": "vrt_ros.model.onnx_batch",
    "vrt_ros.param_files": "vrt_ros.settings.param_files",
    "vrt_ros.pipeline": "vrt_ros.inference.pipeline",
    "vrt_ros.postprocess": "vrt_ros.boxes.postprocess",
    "vrt_ros.preprocess": "vrt_ros.intake.preprocess",
    "vrt_ros.ros.delivery": "vrt_ros.tools.delivery",
    "vrt_ros.ros.demo": "vrt_ros.tools.demo",
    "vrt_ros.ros.demo_bag": "vrt_ros.tools.demo_bag",
    "vrt_ros.ros.demo_report": "vrt_ros.tools.demo_report",
    "vrt_ros.ros.msgtypes": "vrt_ros.tools.msgtypes",
    "vrt_ros.ros.publish_images": "vrt_ros.tools.publish_images",
    "vrt_ros.ros.record": "vrt_ros.tools.record",
    "vrt_ros.ros.replay": "vrt_ros.tools.replay",
    "vrt_ros.ros.tool": "vrt_ros.tools.tool",
    "vrt_ros.rotated": "vrt_ros.boxes.rotated",
}
UNTIL = "vrt_ros 0.2"


class _Alias(importlib.abc.Loader):
    """Loads an old name as the new module (import), or runs the new module's code (``python -m``)."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec):
        warnings.warn(f"{self.old} moved to {self.new}; the old name works until {UNTIL}", DeprecationWarning,
                      stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        """Nothing: the new module is already executed."""

    def get_code(self, fullname: str):
        """``python -m OLD`` (runpy): the new module's code, after a note on stderr."""
        print(f"note: python -m {self.old} is now python -m {self.new} (the old name works until {UNTIL})",
              file=sys.stderr)
        spec = importlib.util.find_spec(self.new)
        return spec.loader.get_code(self.new)


class _Finder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: an old name never loads its file a second time under that name."""

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        found = importlib.util.find_spec(new)
        return importlib.machinery.ModuleSpec(fullname, _Alias(fullname, new),
                                              origin=found.origin if found else None)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
