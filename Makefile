# Fresh-machine set-up and checks for vrt_ros (no ROS install needed: ROS 2 Jazzy comes from PyPI wheels).
#   make venv       create/update .venv (pinned deps, vision_msgs built when missing, vrt_ros editable)
#                   the first run about 5 minutes on 2 cores (measured 3 min 9 s to 6.5 min), later runs about 2 s
#   make test       venv, test extras (TensorRT for RTX, scripts/test_extras.sh), with ../shared/ros2_launch the
#                   real launch stack (launch tests), then pytest (DDS kept on localhost, own domain id); a full
#                   run (no PYTEST_ARGS) then the Python 3.10, Kilted and aarch64 legs: every leg runs even when one
#                   fails, each leg's result is printed at the end (scripts/test_legs.sh)
#   make test-py310 only the Python 3.10 / numpy 1.21 leg (Humble / JetPack 6 stand-in; scripts/test_py310.sh)
#   make test-kilted only the rclpy 9 / Fast DDS 3 leg (ROS 2 Kilted wheels, the Lyrical stand-in; scripts/test_kilted.sh)
#   make test-aarch64 the numeric core tests on aarch64 under qemu user mode (also a leg of `make test`)
#   make demo       venv, then the embedded-default demo (faces on registry photos)
#   make demo-coco  venv, then YOLOX-nano on a real bag: make demo-coco MODEL=... BAG=...
# Every target that starts ROS keeps DDS discovery on this machine and uses its own domain id, whatever the
# calling shell has set (see ../shared/ENVIRONMENT.md); override on the command line: `make test ROS_DOMAIN_ID=42`.

SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
# The shared data folder (models, bags, photos): SHARED=... or VRT_SHARED_DIR=..., the same for every target.
SHARED ?= $(or $(VRT_SHARED_DIR),../shared)
export VRT_SHARED_DIR := $(abspath $(SHARED))
MODEL ?= $(SHARED)/models/yolox_nano.onnx
BAG ?= $(SHARED)/data/bags/vtest_compressed_mcap
PYTEST_ARGS ?=

export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
ROS_DOMAIN_ID := 57
DEMO_DOMAIN_ID := 58
export ROS_DOMAIN_ID
# test/conftest.py takes the tests' domain id from here.
export VRT_TEST_DOMAIN_ID := $(ROS_DOMAIN_ID)
# rclpy's log files stay in the tree, not in ~/.ros.
export ROS_LOG_DIR ?= $(CURDIR)/build/ros_log

.PHONY: venv test test-py310 test-kilted test-aarch64 demo demo-coco clean-venv clean

venv:
	@PYTHON=$(PYTHON) scripts/venv.sh $(VENV)

test: venv
	@scripts/test_extras.sh $(VENV)
	@scripts/launch_stack.sh $(VENV)
	@scripts/test_legs.sh $(VENV) $(PYTEST_ARGS)

test-py310:
	@scripts/test_py310.sh $(PYTEST_ARGS)

test-kilted:
	@scripts/test_kilted.sh $(PYTEST_ARGS)

test-aarch64:
	@scripts/test_aarch64_qemu.sh $(PYTEST_ARGS)

demo demo-coco: ROS_DOMAIN_ID := $(DEMO_DOMAIN_ID)

demo: venv
	$(VENV)/bin/python -m vrt_ros.tools.demo --domain-id $(ROS_DOMAIN_ID)

demo-coco: venv
	$(VENV)/bin/python -m vrt_ros.tools.demo --domain-id $(ROS_DOMAIN_ID) --coco --model $(MODEL) --bag $(BAG)

clean-venv:
	rm -rf $(VENV) .venv-py310 .venv-kilted build/vision_msgs-* build/composition_interfaces-*

clean:
	rm -rf build/ .pytest_cache
