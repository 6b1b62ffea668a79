"""The README's Humble / JetPack 6 install (issue 11): ``pip install -c requirements/humble-constraints.txt -r
requirements/ros-native.txt`` must resolve without numpy 2 (numpy 2 breaks the system OpenCV built for numpy 1.x),
keeping numpy on the system's 1.21 line, for Python 3.10 on x86_64 and on Jetson (aarch64). Checked with pip's
resolver against the package index (``--dry-run --report``), for the target platform, whatever this machine is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pip_resolve import resolve

REPO = Path(__file__).resolve().parents[1]
PLATFORMS = {"x86_64": ["manylinux2014_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64"],
             "aarch64": ["manylinux2014_aarch64", "manylinux_2_27_aarch64", "manylinux_2_28_aarch64"]}


def _resolve(tmp_path: Path, arch: str, constrained: bool) -> dict[str, str]:
    constraints = [REPO / "requirements" / "humble-constraints.txt"] if constrained else []
    return resolve(tmp_path / f"report_{arch}_{constrained}.json", "3.10", PLATFORMS[arch], constraints,
                   [REPO / "requirements" / "ros-native.txt"])


@pytest.mark.slow
@pytest.mark.parametrize("arch", sorted(PLATFORMS))
def test_humble_install_resolves_without_numpy_2(tmp_path, arch):
    got = _resolve(tmp_path, arch, constrained=True)
    assert got["numpy"].startswith("1.21."), got
    assert got["onnxruntime"].startswith("1.20."), got  # the release the Python 3.10 leg of `make test` runs
    assert "rosbags" in got and "opencv-python" not in got and "opencv-python-headless" not in got, got


@pytest.mark.slow
def test_without_the_constraints_pip_would_pull_numpy_2(tmp_path):
    """The failure the constraints file prevents (what the README's old robot install did)."""
    got = _resolve(tmp_path, "x86_64", constrained=False)
    assert int(got["numpy"].split(".")[0]) >= 2, got


def test_readme_gives_the_constrained_humble_install():
    text = (REPO / "README.md").read_text()
    assert "pip install -c src/vrt_ros/requirements/humble-constraints.txt -r src/vrt_ros/requirements/ros-native.txt" in text
