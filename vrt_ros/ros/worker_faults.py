"""What the node's worker does with a failed frame or batch, by the fault table (:mod:`vrt_ros.faults`).

- :meth:`FaultHandler.fault`: one failed frame: an input fault is dropped and counted under its reason; an engine
  fault is counted (``engine_error``) and goes to the :class:`~vrt_ros.faults.FaultPolicy`, which says when it is
  fatal: the worker then takes no further frame and ``on_fatal(reason)`` is called (the node decides what happens).
- :meth:`FaultHandler.fault_batch`: a whole batch failed: classified once; the fault policy hears of an engine fault
  once (one engine call failed), every frame is dropped.
- :meth:`FaultHandler.drop`: a dropped frame: counted by reason, logged at most once per camera and reason every
  :data:`~vrt_ros.ros.camera_log.WARN_THROTTLE_S` seconds.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from vrt_ros.faults import ENGINE_ERROR, INPUT, PIPELINE, FaultPolicy, classify
from vrt_ros.ros.camera import Camera
from vrt_ros.ros.camera_log import WARN_THROTTLE_S, drop_frame  # noqa: F401 (WARN_THROTTLE_S: documented here)


class FaultHandler:
    """Fault handling of one worker (module docstring).

    Args:
        faults: the engine fault policy (kept across start/stop).
        logger: the node's ROS logger.
        stop: makes the worker take no further frame (called before ``on_fatal``).
        on_fatal: called once, from the worker thread, with the reason when a fault is fatal.
    """

    def __init__(self, faults: FaultPolicy, logger: Any, stop: Callable[[], None],
                 on_fatal: Callable[[str], None]) -> None:
        self.faults = faults
        self._logger = logger
        self._stop = stop
        self._on_fatal = on_fatal
        self._fatal_reported = False  # on_fatal called (once per worker)

    def fault(self, cam: Camera, exc: BaseException, stage: str = PIPELINE) -> None:
        """One frame of ``cam`` failed with ``exc`` in ``stage`` (:data:`~vrt_ros.faults.READ`,
        :data:`~vrt_ros.faults.DECODE` or :data:`~vrt_ros.faults.PIPELINE`), classified by the fault table
        (:func:`vrt_ros.faults.classify`): an input fault is dropped under its reason and leaves the fault policy
        alone; an engine fault is counted (``engine_error``) and goes to the fault policy; a fatal one stops the
        worker and calls ``on_fatal``."""
        fault = classify(exc, stage)
        if fault.kind == INPUT:
            self.drop(cam, fault.reason, fault.message)
            return
        self.drop(cam, ENGINE_ERROR, fault.message, error=True)
        fatal = self.faults.failure(exc)
        if fatal is not None and not self._fatal_reported:
            self._fatal_reported = True
            self._stop()
            self._on_fatal(fatal)

    def fault_batch(self, cams: Sequence[Camera], exc: BaseException) -> None:
        """A whole batch failed with ``exc``: classified once by the fault table; every frame is dropped under its
        verdict, but the fault policy hears of an engine fault once (one engine call failed, not ``len(cams)``)."""
        fault = classify(exc, PIPELINE)
        if fault.kind == INPUT:
            for cam in cams:
                self.drop(cam, fault.reason, fault.message)
            return
        for cam in cams[:-1]:
            self.drop(cam, ENGINE_ERROR, f"{fault.message} (batch of {len(cams)})", error=True)
        self.fault(cams[-1], exc, PIPELINE)

    def drop(self, cam: Camera, reason: str, message: str, error: bool = False) -> None:
        """Count and log (throttled) a dropped frame of ``cam`` (:func:`vrt_ros.ros.camera_log.drop_frame`)."""
        drop_frame(cam, reason, message, self._logger, error)
