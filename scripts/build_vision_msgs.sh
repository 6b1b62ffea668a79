#!/usr/bin/env bash
# Build interfaces/vision_msgs into a venv prefix (scripts/build_interface.sh does the work; recipe and pitfalls in
# ../shared/ENVIRONMENT.md). Usage: scripts/build_vision_msgs.sh VENV_DIR
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$repo/scripts/build_interface.sh" "${1:?usage: $0 VENV_DIR}" "$repo/interfaces/vision_msgs" \
  "import vision_msgs.msg as m; m.Detection2DArray()"
