"""``python -m vrt_ros.demo``: the embedded-default demo (``make demo``).

The demo starts a ROS graph, so it lives at the ROS edge (:mod:`vrt_ros.ros.demo`); this module only forwards to
it, so that importing :mod:`vrt_ros` never imports rclpy.
"""

from __future__ import annotations

import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; see :func:`vrt_ros.ros.demo.main` for the options."""
    from vrt_ros.ros.demo import main as demo_main

    return demo_main(argv)


if __name__ == "__main__":
    sys.exit(main())
