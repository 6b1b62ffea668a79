"""Multi-object tracking per camera (issue 24): ByteTrack association over a constant-velocity Kalman filter.

- :mod:`vrt_ros.tracking.kalman`: the SORT/DeepSORT ``xyah`` Kalman filter, batched, in real time steps;
- :mod:`vrt_ros.tracking.association`: IoU matrix and the gated assignment (SciPy's ``linear_sum_assignment``);
- :mod:`vrt_ros.tracking.tracker`: :class:`ByteTracker`, one camera's tracks, its birth, loss and reset rules;
- :mod:`vrt_ros.tracking.scenes`: synthetic sequences with ground truth (metrics tests, benchmark).

Core code: numpy and SciPy, no ROS, no GPU. Importing this package imports SciPy's optimiser (about 0.2 s), so
``import vrt_ros`` does not import it.
"""

from vrt_ros.tracking.tracker import NO_TRACK, ByteTracker, TrackerParams

__all__ = ["NO_TRACK", "ByteTracker", "TrackerParams"]
