"""Shared test fixtures.

DDS stays on this machine: discovery is limited to localhost and the tests use their own domain id, set here
before any test module can initialise rclpy (see ../shared/ENVIRONMENT.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = os.environ.get("VRT_TEST_DOMAIN_ID", "57")

REPO_ROOT = Path(__file__).resolve().parents[1]


def _shared_dir() -> Path | None:
    env = os.environ.get("VRT_SHARED_DIR")
    candidate = Path(env) if env else REPO_ROOT.parent / "shared"
    return candidate if (candidate / "models").is_dir() else None


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared data folder (models, bags, photos): ``$VRT_SHARED_DIR`` or ``../shared``.

    Skips the test, with the reason, when the folder is absent: the product never needs it.
    """
    path = _shared_dir()
    if path is None:
        where = os.environ.get("VRT_SHARED_DIR") or str(REPO_ROOT.parent / "shared")
        pytest.skip(f"shared test data not found at {where} (set VRT_SHARED_DIR to the shared/ folder)")
    return path


LAUNCH_TEST_FILES = ("test_launch_real.py", "test_lifecycle_launch.py")


def pytest_collection_modifyitems(config, items):
    """A leg without launch wheels for its distro (scripts/test_kilted.sh sets VRT_NO_LAUNCH_REASON) skips the
    launch tests with that reason instead of the generic "not installed" one."""
    reason = os.environ.get("VRT_NO_LAUNCH_REASON")
    if reason:
        for item in items:
            if item.path.name in LAUNCH_TEST_FILES:
                item.add_marker(pytest.mark.skip(reason=reason))
