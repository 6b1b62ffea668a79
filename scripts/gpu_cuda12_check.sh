#!/usr/bin/env bash
# Run on the GPU machine (repo root): the GPU tests with the CUDA 12 user-space stack (JetPack 6 stand-in, see
# ../shared/ENVIRONMENT.md "CUDA 12 on the H200"), then hand over to scripts/gpu_check.sh.
# Wheels (cp312 manylinux x86_64) in $VRT_CU12_WHEELS (default .gpu_data/whl12): cuda-bindings 12.x, cuda-core,
# cuda-pathfinder, nvidia-cuda-nvrtc-cu12. The NVRTC 12 library is preloaded, otherwise cuda-pathfinder finds the
# image's NVRTC 13 first.
set -u -o pipefail
cd "$(dirname "$0")/.."
W="${VRT_CU12_WHEELS:-.gpu_data/whl12}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site12 "$W"/*.whl || exit 1
export PYTHONPATH="/tmp/site12${PYTHONPATH:+:$PYTHONPATH}"
export LD_PRELOAD=/tmp/site12/nvidia/cuda_nvrtc/lib/libnvrtc.so.12
python3 -c "
from cuda.bindings import nvrtc, driver
import cuda.bindings, cuda.core
print('CUDA 12 stack: cuda.bindings', cuda.bindings.__version__, '| cuda.core', cuda.core.__version__,
      '| NVRTC', nvrtc.nvrtcVersion()[1:], '| driver', driver.cuDriverGetVersion()[1])
" || exit 1
exec scripts/gpu_check.sh "$@"
