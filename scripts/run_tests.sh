#!/usr/bin/env bash
# Run the test suite with the venv's pytest. Usage: scripts/run_tests.sh VENV_DIR [pytest args...]
#
# DDS stays on this machine: discovery limited to localhost, and a domain id of our own (the Makefile sets
# both; defaults here for direct calls). pytest's exit code 5 ("no tests collected") is turned into a failure
# with an explanation: with this repository it can only mean that collection is broken.
set -uo pipefail

venv="${1:?usage: $0 VENV_DIR [pytest args...]}"
shift
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-57}"
export VRT_TEST_DOMAIN_ID="${VRT_TEST_DOMAIN_ID:-$ROS_DOMAIN_ID}"
export ROS_LOG_DIR="${ROS_LOG_DIR:-$repo/build/ros_log}"

"$venv/bin/python" -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run_tests: pytest collected no tests (exit code 5). The suite is never empty, so test discovery is" >&2
  echo "run_tests: broken: check pytest.ini (testpaths = test), the -k/-m filters given, and import errors above." >&2
  exit 1
fi
exit "$rc"
