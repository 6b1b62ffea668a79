"""The Jetson installs resolve (issue 28, item 4): ``pip install -c requirements/jetpackN-constraints.txt -r
requirements/jetpackN.txt`` for JetPack 6.2 (Ubuntu 22.04, glibc 2.35, Python 3.10, CUDA 12) and JetPack 7.x (Ubuntu
24.04, glibc 2.39, Python 3.12, CUDA 13), checked with pip's resolver against the package index (``--dry-run
--only-binary=:all:``) for aarch64, whatever this machine is. A glibc-2.35 machine takes every manylinux tag up to
2_35 (and manylinux2014 = 2_17), so all of those are passed, as pip would accept them there. rclpy, TensorRT, CUDA,
OpenCV and numpy's system copy come from JetPack / apt (the constraints files say so); not resolved here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pip_resolve import resolve

REPO = Path(__file__).resolve().parents[1]
REQ = REPO / "requirements"
# JetPack: (glibc minor, Python, CUDA major, nvImageCodec wheel, numpy line)
JETPACKS = {"jetpack6": (35, "3.10", 12, "nvidia-nvimgcodec-tegra-cu12", "1.21."),
            "jetpack7": (39, "3.12", 13, "nvidia-nvimgcodec-cu13", "1.26.")}


def _resolve(tmp_path: Path, jetpack: str) -> dict[str, str]:
    glibc, python, *_ = JETPACKS[jetpack]
    tags = ["manylinux2014_aarch64"] + [f"manylinux_2_{i}_aarch64" for i in range(17, glibc + 1)]
    return resolve(tmp_path / f"{jetpack}.json", python, tags, [REQ / f"{jetpack}-constraints.txt"],
                   [REQ / f"{jetpack}.txt"])


@pytest.mark.slow
@pytest.mark.parametrize("jetpack", sorted(JETPACKS))
def test_the_jetpack_install_resolves_for_aarch64(tmp_path, jetpack):
    _, python, cuda, nvimgcodec, numpy_line = JETPACKS[jetpack]
    got = _resolve(tmp_path, jetpack)
    print(f"\n{jetpack} (Python {python}, aarch64): {got}")
    assert got["numpy"].startswith(numpy_line), got  # the system OpenCV's numpy 1.x line, never numpy 2
    assert int(got["cuda-bindings"].split(".")[0]) == cuda, got  # cuda-python of the JetPack's CUDA major
    assert nvimgcodec in got and "cuda-core" in got and "onnxruntime" in got and "rosbags" in got, got
    assert not {"opencv-python", "opencv-python-headless", "torch", "tensorrt"} & set(got), got  # from JetPack/apt


def test_the_constraints_pin_what_the_requirements_name():
    """Every package the JetPack requirement files name (directly or through -r) is constrained, so nothing floats."""
    for jetpack in JETPACKS:
        constrained = {line.split("#")[0].strip().split("[")[0].split(">")[0].split("=")[0].split("<")[0].lower()
                       for line in (REQ / f"{jetpack}-constraints.txt").read_text().splitlines()
                       if line.split("#")[0].strip()}
        named = set()
        for f in [REQ / f"{jetpack}.txt", REQ / "ros-native.txt", REQ / "gpu.txt"]:
            for line in f.read_text().splitlines():
                line = line.split("#")[0].strip()
                if line and not line.startswith("-"):
                    named.add(line.split("[")[0].split(">")[0].split("=")[0].split("<")[0].lower())
        assert named <= constrained, f"{jetpack}: not constrained: {sorted(named - constrained)}"
