"""Through ROS: end to end, the zero-work relay, the DDS floor, raw reads.

Nothing is imported here, so importing one module does not pull in the others."""
