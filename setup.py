"""ament_python packaging for vrt_ros (colcon on a ROS 2 install, or `pip install -e .` into the venv)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "vrt_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    # the Fast DDS large-frames profile is read from the package directory (vrt_ros.ros.dds.PROFILE)
    package_data={f"{PACKAGE}.ros": ["*.xml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", sorted(glob("launch/*.py"))),
        (f"share/{PACKAGE}/config", sorted(glob("config/*.yaml"))),
        (f"share/{PACKAGE}/kernels", sorted(glob("kernels/*.cu"))),
        # the Fast DDS large-frames profile, also for a camera driver's launch outside Python (vrt_ros.ros.dds)
        (f"share/{PACKAGE}/dds", [f"{PACKAGE}/ros/fastdds_large_frames.xml"]),
    ],
    # Runtime dependencies come from the ROS distribution (package.xml) or requirements/runtime.txt (venv).
    install_requires=["setuptools"],
    # `colcon test` runs pytest (not unittest) when the package lists it as a test dependency (package.xml too).
    # Optional GPU JPEG decode of compressed camera input (vrt_ros.gpu.jpeg; detected at start-up, else OpenCV on
    # the CPU): `pip install ".[gpu-decode]"` (CUDA 13), `.[gpu-decode-cu12]` (CUDA 12), `.[gpu-decode-jetson]`.
    extras_require={
        "test": ["pytest"],
        "gpu-decode": ["nvidia-nvimgcodec-cu13[nvjpeg]>=0.9,<0.10"],
        "gpu-decode-cu12": ["nvidia-nvimgcodec-cu12[nvjpeg]>=0.9,<0.10"],
        "gpu-decode-jetson": ["nvidia-nvimgcodec-tegra-cu12>=0.9,<0.10"],
        # the benchmark's torch rows: the torch engine and the Ultralytics-style peer (vrt_ros/bench/stages/torch_peer.py)
        "bench-torch": ["torch>=2.4,<3", "torchvision>=0.19,<1", "onnx2torch>=1.5,<2"],
        # python -m vrt_ros.tools.batch_model (a batch-N model from a batch-1 ONNX)
        "model-tools": ["onnx>=1.17,<2"],
        # python -m vrt_ros.bench.cameras.scaling_plot (the many-cameras scaling curve from the committed JSON)
        "bench-plot": ["matplotlib>=3.8,<4"],
        # python -m vrt_ros.bench.robustness.fuzz (the fuzz campaign against a running node; the same pin as requirements/test.txt)
        "bench-fuzz": ["hypothesis>=6.100,<7"],
    },
    zip_safe=False,
    maintainer="vrt_ros maintainers",
    maintainer_email="vrt_ros@example.invalid",
    description="Real-time 2D detection and keypoint node for ROS 2 (ONNX Runtime on CPU, CUDA on GPU).",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "detector_node = vrt_ros.ros.main:main",
            "replay = vrt_ros.tools.replay:main",
            "record = vrt_ros.tools.record:main",
            "dds_profile = vrt_ros.ros.dds:main",
            "publish_images = vrt_ros.tools.publish_images:main",
            "demo = vrt_ros.tools.demo:main",
        ],
    },
)
