"""3D positions from a registered depth image and ``sensor_msgs/CameraInfo``, without ROS or a GPU.

The pieces, each in its own module:

- :mod:`~vrt_ros.depth.reasons`: the one table of reasons a frame's 3D output (or one box's) is refused, counted
  by the node.
- :mod:`~vrt_ros.depth.image`: a depth image's view (``16UC1`` millimetres, ``32FC1`` metres) and the checks of
  a depth frame against its colour frame (frame id, size: a uniform scale is followed, anything else refused).
- :mod:`~vrt_ros.depth.camera_model`: the camera model from camera_info (K, D, distortion model, P), rays through
  image points (OpenCV's ``undistortPoints``), and its refusals (K all zeros, unknown distortion).
- :mod:`~vrt_ros.depth.stats`: the per-box robust statistic of the valid depth (nearest-rank percentiles), the
  CPU reference of the GPU kernel ``kernels/depth.cu``.
- :mod:`~vrt_ros.depth.boxes3d`: a frame's 3D boxes from its 2D boxes, the statistic and the camera model.
- :mod:`~vrt_ros.depth.pairing`: the ring of recent depth frames per camera and pairing by stamp.

Frames: every 3D quantity is in the colour camera's optical frame (REP-103: x right, y down, z forward, metres).
Image coordinates follow :mod:`vrt_ros.boxes.geometry` (pixel ``i`` covers ``[i, i + 1)``); camera_info's K and P use
OpenCV's convention (pixel centres at integers), so a box point ``(u, v)`` is the camera point ``(u - 0.5, v - 0.5)``.
"""
