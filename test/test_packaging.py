"""Packaging: package.xml, setup.py and setup.cfg agree with the tree, for colcon on a ROS 2 install and for the venv.

Static checks read the files (setup.py is executed with ``setuptools.setup`` replaced by a recorder); the install
test runs the same ``setup.py install`` that colcon runs for ament_python packages into a temporary prefix and
checks the ament layout (share/vrt_ros/..., lib/vrt_ros/<console scripts>).
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import runpy
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "vrt_ros"

# Third-party modules that vrt_ros imports, by where a user gets them.
ROS_PACKAGES = {  # ROS packages: exec_depend in package.xml (a ROS install provides them)
    "rclpy", "rcl_interfaces", "builtin_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs", "vision_msgs",
    "diagnostic_msgs", "rosgraph_msgs", "ament_index_python", "launch", "launch_ros",
    "lifecycle_msgs",  # the recovery bench's lifecycle client (the node itself uses rclpy.lifecycle)
}  # fmt: skip
ROSDEP_KEYS = {"numpy": "python3-numpy", "cv2": "python3-opencv", "yaml": "python3-yaml", "scipy": "python3-scipy"}
PIP_ONLY = {"onnxruntime": "onnxruntime", "rosbags": "rosbags"}  # pip keys, and requirements/ros-native.txt
PIP_ROSDEP_KEYS = {"onnxruntime": "python3-onnxruntime-pip", "rosbags": "python3-rosbags-pip"}  # rosdistro python.yaml
# What the tests import beyond vrt_ros's own dependencies: test_depend keys in package.xml.
TEST_KEYS = {"pytest": "python3-pytest", "hypothesis": "python3-hypothesis", "onnx": "python3-onnx",
             "setuptools": "python3-setuptools", "rosgraph_msgs": "rosgraph_msgs", "launch_testing": "launch_testing",
             "launch_testing_ros": "launch_testing_ros", "ros2launch": "ros2launch",
             "lifecycle_msgs": "lifecycle_msgs"}  # fmt: skip
# Test-only, installed with `pip install --no-deps -r requirements/test-nodeps.txt` (no rosdep key; the tests that
# need it skip without it): module -> its pinned distribution name there.
PIP_TEST_ONLY = {"trackeval": "trackeval"}
# GPU-only and optional, imported lazily by vrt_ros/gpu, inference/backends/cuda.py and engines/<lib>.py.
GPU_OPTIONAL = {"cuda", "cupy", "torch", "onnx", "onnx2torch", "tensorrt", "tensorrt_lean", "tensorrt_lean_bindings",
                "tensorrt_rtx_bindings", "onnxconverter_common",
                "nvidia",  # nvidia: nvImageCodec (nvidia.nvimgcodec), pinned in setup.py's gpu-decode extras
                "torchvision",  # the benchmark's Ultralytics-style peer only; setup.py's bench-torch extra
                "matplotlib",  # the many-camera bench's scaling curve only; setup.py's bench-plot extra
                "ultralytics",  # the H200 parity run only (scripts/parity_ultralytics.py), carried there as wheels
                "hypothesis"}  # the fuzz campaign only (vrt_ros.bench.robustness.fuzz); setup.py's bench-fuzz extra, requirements/test.txt
# ROS packages that each distro's pin file (ROS_PIN_FILES) must pin as ros-<distro>-* wheels for the venv path (the
# distro is read from the file's rclpy pin, never written here). vision_msgs is built
# from interfaces/vision_msgs; launch, launch_ros are not on any registry here; the rest come with rclpy.
VENV_ROS_WHEELS = {"rclpy", "std_msgs", "sensor_msgs", "geometry_msgs", "diagnostic_msgs", "builtin_interfaces",
                   "lifecycle_msgs"}
# The venvs' ROS pins: requirements/runtime.txt (the main venv, Jazzy), requirements/kilted.txt (the Kilted leg).
ROS_PIN_FILES = ("runtime.txt", "kilted.txt")


@pytest.fixture(scope="module")
def manifest() -> ET.Element:
    return ET.parse(REPO / "package.xml").getroot()


@pytest.fixture(scope="module")
def setup_kwargs() -> dict:
    """The keyword arguments setup.py passes to setuptools.setup, evaluated in the repository root."""
    setuptools = pytest.importorskip("setuptools", reason="setuptools not installed")
    captured: dict = {}
    original = setuptools.setup
    cwd = Path.cwd()
    setuptools.setup = lambda **kw: captured.update(kw)
    try:
        os.chdir(REPO)
        runpy.run_path(str(REPO / "setup.py"), run_name="__main__")
    finally:
        setuptools.setup = original
        os.chdir(cwd)
    assert captured, "setup.py did not call setuptools.setup"
    return captured


def _console_scripts(kwargs: dict) -> dict[str, str]:
    entries = kwargs["entry_points"]["console_scripts"]
    return dict(re.fullmatch(r"\s*(\S+)\s*=\s*(\S+)\s*", e).groups() for e in entries)


def _imported_top_level_modules(folder: str = PACKAGE, recursive: bool = True) -> dict[str, set[str]]:
    """Top-level module name -> files under ``folder`` importing it (any scope, absolute imports only, and the
    names given to ``pytest.importorskip``)."""
    found: dict[str, set[str]] = {}
    files = (REPO / folder).rglob("*.py") if recursive else (REPO / folder).glob("*.py")
    for path in sorted(files):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip" and node.args
                  and isinstance(node.args[0], ast.Constant)):
                names = [node.args[0].value]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(REPO)))
    return found


def _requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


# ---------------------------------------------------------------------------------------------- package.xml


def _distro_prefix(names: set[str]) -> str:
    """"ros-<distro>-" from a pin file's ros-<distro>-rclpy requirement."""
    (prefix,) = {m.group(1) for n in names if (m := re.fullmatch(r"(ros-[a-z]+-)rclpy", n))}
    return prefix


def test_each_distro_pin_file_pins_one_distro():
    prefixes = {f: _distro_prefix(_requirement_names(REPO / "requirements" / f)) for f in ROS_PIN_FILES}
    assert len(set(prefixes.values())) == len(ROS_PIN_FILES), prefixes  # one distro each, all different
    for f, prefix in prefixes.items():
        names = _requirement_names(REPO / "requirements" / f)
        other = [n for n in names if n.startswith("ros-") and not n.startswith(prefix)]
        assert not other, f"{f} mixes distros: {other}"


def test_package_xml_is_format_3_ament_python(manifest):
    assert manifest.tag == "package" and manifest.get("format") == "3"
    assert manifest.findtext("name") == PACKAGE
    assert manifest.findtext("export/build_type") == "ament_python"
    assert manifest.findtext("license")
    assert manifest.find("maintainer").get("email")


def test_package_xml_version_matches_setup(manifest, setup_kwargs):
    assert manifest.findtext("version") == setup_kwargs["version"]
    assert setup_kwargs["name"] == PACKAGE


def test_package_xml_declares_the_required_exec_depends(manifest):
    declared = {e.text for e in manifest.iter() if e.tag in ("exec_depend", "depend")}
    required = {"rclpy", "sensor_msgs", "std_msgs", "vision_msgs", "diagnostic_msgs",
                "python3-numpy", "python3-opencv", "python3-yaml"}  # fmt: skip
    assert required <= declared, f"missing exec_depend: {sorted(required - declared)}"


def test_every_third_party_import_is_declared(manifest):
    """Each module vrt_ros imports is stdlib, vrt_ros, a declared dependency, or GPU-only and optional."""
    declared = {e.text for e in manifest.iter() if e.tag in ("exec_depend", "depend")}
    runtime = _requirement_names(REPO / "requirements" / "runtime.txt")
    ros_native = _requirement_names(REPO / "requirements" / "ros-native.txt")
    pins = {f: _requirement_names(REPO / "requirements" / f) for f in ROS_PIN_FILES}
    problems = []
    for module, files in sorted(_imported_top_level_modules().items()):
        where = ", ".join(sorted(files))
        if module in sys.stdlib_module_names or module in (PACKAGE, "__future__"):
            continue
        if module in ROS_PACKAGES:
            if module not in declared:
                problems.append(f"{module} (imported in {where}): add <exec_depend>{module}</exec_depend>")
            for f, names in pins.items():
                wheel = _distro_prefix(names) + module.replace("_", "-")
                if module in VENV_ROS_WHEELS and wheel not in names:
                    problems.append(f"{module}: pin {wheel} in requirements/{f}")
        elif module in ROSDEP_KEYS:
            if ROSDEP_KEYS[module] not in declared:
                problems.append(f"{module} (imported in {where}): add <exec_depend>{ROSDEP_KEYS[module]}</exec_depend>")
        elif module in PIP_ONLY:
            for name, req in (("runtime.txt", runtime), ("ros-native.txt", ros_native)):
                if PIP_ONLY[module] not in req:
                    problems.append(f"{module} (imported in {where}): pin {PIP_ONLY[module]} in requirements/{name}")
        elif module in PIP_TEST_ONLY:  # the metrics command (vrt_ros/bench/tracker/tracking_eval.py), imported lazily
            if PIP_TEST_ONLY[module] not in _requirement_names(REPO / "requirements" / "test-nodeps.txt"):
                problems.append(f"{module} (imported in {where}): pin it in requirements/test-nodeps.txt")
        elif module not in GPU_OPTIONAL:
            problems.append(f"{module} (imported in {where}) is not declared anywhere: classify it in test_packaging.py")
    assert not problems, "\n".join(problems)


def test_pip_only_dependencies_have_their_rosdep_keys(manifest):
    """rosdep installs ONNX Runtime and rosbags on a ROS machine through their rosdistro pip keys."""
    declared = {e.text for e in manifest.iter() if e.tag in ("exec_depend", "depend")}
    assert set(PIP_ROSDEP_KEYS.values()) <= declared, sorted(set(PIP_ROSDEP_KEYS.values()) - declared)


def test_every_test_import_is_declared(manifest):
    """Each module a test imports (also through importorskip) is declared, so `colcon test` can collect them all."""
    depends = {e.text for e in manifest.iter() if e.tag in ("exec_depend", "depend", "test_depend")}
    local = {p.stem for p in (REPO / "test").glob("*.py")}
    found = _imported_top_level_modules("test", recursive=False)
    problems = []
    for module, files in sorted(found.items()):
        if module in sys.stdlib_module_names or module in local or module in (PACKAGE, "__future__") or module in GPU_OPTIONAL:
            continue
        if module in PIP_TEST_ONLY:
            if PIP_TEST_ONLY[module] not in _requirement_names(REPO / "requirements" / "test-nodeps.txt"):
                problems.append(f"{module} (imported in {', '.join(sorted(files))}): pin it in requirements/test-nodeps.txt")
            continue
        key = TEST_KEYS.get(module) or ROSDEP_KEYS.get(module) or PIP_ROSDEP_KEYS.get(module) or (
            module if module in ROS_PACKAGES else None)
        if key is None:
            problems.append(f"{module} (imported in {', '.join(sorted(files))}): classify it in TEST_KEYS")
        elif key not in depends:
            problems.append(f"{module} (imported in {', '.join(sorted(files))}): add <test_depend>{key}</test_depend>")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------- setup.py / cfg


def test_console_scripts_are_the_agreed_set(setup_kwargs):
    assert _console_scripts(setup_kwargs) == {
        "detector_node": "vrt_ros.ros.main:main",
        "replay": "vrt_ros.tools.replay:main",
        "record": "vrt_ros.tools.record:main",
        "demo": "vrt_ros.tools.demo:main",
        "dds_profile": "vrt_ros.ros.dds:main",
        "publish_images": "vrt_ros.tools.publish_images:main",
    }


def test_console_script_targets_exist(setup_kwargs):
    """Each entry point names a module file under vrt_ros/ that defines the function at top level."""
    missing = []
    for script, target in sorted(_console_scripts(setup_kwargs).items()):
        module, func = target.split(":")
        path = REPO.joinpath(*module.split(".")).with_suffix(".py")
        if not path.is_file():
            missing.append(f"{script}: {path.relative_to(REPO)} does not exist")
            continue
        tree = ast.parse(path.read_text())
        if not any(isinstance(n, ast.FunctionDef) and n.name == func for n in tree.body):
            missing.append(f"{script}: {path.relative_to(REPO)} defines no top-level {func}()")
    assert not missing, "\n".join(missing)


def test_packages_cover_every_subpackage(setup_kwargs):
    on_disk = {
        ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / PACKAGE).rglob("__init__.py")
    }
    assert on_disk <= set(setup_kwargs["packages"]), f"not packaged: {sorted(on_disk - set(setup_kwargs['packages']))}"


def test_data_files_install_launch_config_kernels_and_markers(setup_kwargs):
    data = {dest: set(files) for dest, files in setup_kwargs["data_files"]}
    assert data["share/ament_index/resource_index/packages"] == {f"resource/{PACKAGE}"}
    assert (REPO / "resource" / PACKAGE).is_file()
    assert "package.xml" in data[f"share/{PACKAGE}"]
    for folder, pattern in (("launch", "*.py"), ("config", "*.yaml"), ("kernels", "*.cu")):
        on_disk = {str(p.relative_to(REPO)) for p in (REPO / folder).glob(pattern)}
        assert data[f"share/{PACKAGE}/{folder}"] == on_disk, folder
        if (REPO / folder).is_dir():
            installed = {Path(f).name for f in on_disk}
            stray = [p.name for p in (REPO / folder).iterdir()
                     if p.is_file() and not p.name.startswith(".") and p.name not in installed]  # fmt: skip
            assert not stray, f"{folder}/ files that would not be installed: {stray}"


def test_setup_cfg_puts_executables_where_ros2_run_looks():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    assert cfg["develop"]["script_dir"] == f"$base/lib/{PACKAGE}"
    assert cfg["install"]["install_scripts"] == f"$base/lib/{PACKAGE}"


def test_setup_py_install_produces_the_ament_layout(tmp_path, setup_kwargs):
    """What colcon does for an ament_python package: `setup.py install` into a prefix, from a copy of the tree."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "setup.cfg", "package.xml"):
        shutil.copy2(REPO / name, src / name)
    for folder in ("resource", PACKAGE, "launch", "config", "kernels"):
        if (REPO / folder).is_dir():
            shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    prefix = tmp_path / "install"
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "build", "--build-base", str(tmp_path / "build"),
         "install", "--prefix", str(prefix), "--record", str(tmp_path / "record.txt"),
         "--single-version-externally-managed"],
        cwd=src, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (prefix / "share/ament_index/resource_index/packages" / PACKAGE).is_file()
    assert (prefix / "share" / PACKAGE / "package.xml").is_file()
    for folder, pattern in (("launch", "*.py"), ("config", "*.yaml"), ("kernels", "*.cu")):
        for path in (REPO / folder).glob(pattern):
            assert (prefix / "share" / PACKAGE / folder / path.name).is_file(), f"{folder}/{path.name} not installed"
    for script in _console_scripts(setup_kwargs):
        assert (prefix / "lib" / PACKAGE / script).is_file(), f"lib/{PACKAGE}/{script} missing (ros2 run needs it)"
    site = list(prefix.glob(f"lib/python3*/site-packages/{PACKAGE}/__init__.py"))
    assert site, "the vrt_ros package itself was not installed"
    # package data read at run time: the Fast DDS large-frames profile (vrt_ros.ros.dds.PROFILE), and the same file
    # under share/ for a camera driver's launch outside Python
    assert (site[0].parent / "ros" / "fastdds_large_frames.xml").is_file(), "the Fast DDS profile was not installed"
    shared_copy = prefix / "share" / PACKAGE / "dds" / "fastdds_large_frames.xml"
    assert shared_copy.read_bytes() == (REPO / PACKAGE / "ros" / "fastdds_large_frames.xml").read_bytes()


def test_gpu_decode_extras_pin_nvimagecodec():
    """The optional GPU JPEG decoder (vrt_ros.gpu.jpeg) is installable as an extra, with a version range per build."""
    import ast

    tree = ast.parse((REPO / "setup.py").read_text())
    [extras] = [kw.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                for kw in node.keywords if kw.arg == "extras_require"]
    extras = ast.literal_eval(extras)
    for name, package in (("gpu-decode", "nvidia-nvimgcodec-cu13"), ("gpu-decode-cu12", "nvidia-nvimgcodec-cu12"),
                          ("gpu-decode-jetson", "nvidia-nvimgcodec-tegra-cu12")):
        [req] = extras[name]
        assert req.startswith(package) and ">=" in req and ",<" in req, (name, req)
