"""``python -m vrt_ros.bench``: see :mod:`vrt_ros.bench.cli`."""

import sys

from vrt_ros.bench.cli import main

sys.exit(main())
