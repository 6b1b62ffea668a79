"""The ROS edge of vrt_ros, the node's side of it: the node (:mod:`~vrt_ros.ros.node`, its worker, cameras, parameters,
QoS, message conversion, diagnostics, depth input), ``main()`` (init, executor, shutdown), the managed node, the
warm-standby supervisor and the Fast DDS profile (``dds_profile``). The command-line tools are in
:mod:`vrt_ros.tools`.

Nothing is imported here, so importing one module does not pull in the others."""
