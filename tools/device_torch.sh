#!/usr/bin/env bash
# fp4sim.torch on the H200 image (torch 2.11, Python 3.12, nvcc 13, CMake, ninja, nanobind, scikit-build-core;
# no Boost, HDF5, CLI11 or GoogleTest; no network): builds and installs the package with the CUDA kernels
# (emu/ for sm_90a, so the bf16-tc and probe-matched GEMMs run on wgmma), then runs
# tests/python/test_torch.py. Logs in $OUT: device_torch.log (the steps and timings), pip_install.log,
# test_torch.log.
#
#   tools/boost_subset.sh          # here, once: the Boost headers the build needs, into .boost/ (~13 MB)
#   tools/device_torch.sh          # there, carrying .boost
#   tools/device_torch.sh CMD ...  # and then CMD in the same environment (the installed package, the CUDA
#                                  # runtime on LD_LIBRARY_PATH), from the repository root, output in
#                                  # $OUT/after.log; e.g. python3 tools/bench_peer_train.py --peer-root .peer
# Environment: PYTEST_ARGS (extra pytest arguments, e.g. "-k llama"), FP4SIM_TORCH_CHECK=all (check every
# linear of the small model, not a sample).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
OUT="${OUT:-$root/out}"
mkdir -p "$OUT"
log="$OUT/device_torch.log"
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log"; }

if [ ! -f .boost/boost/multiprecision/cpp_int.hpp ]; then
  say "no .boost/ here: run tools/boost_subset.sh on a machine with Boost and carry .boost"
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee -a "$log"
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.is_available())' 2>&1 | tee -a "$log"

say "pip install (FP4SIM_CUDA=ON, sm_90a, Boost from .boost)"
start=$(date +%s)
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" PIP_BREAK_SYSTEM_PACKAGES=1
python3 -m pip install --no-build-isolation --no-deps --no-index -v \
    --config-settings=cmake.define.FP4SIM_CUDA=ON \
    --config-settings=cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER="$root/tools/probes/nvcc_sm90a.sh" \
    --config-settings=cmake.define.Boost_INCLUDE_DIR="$root/.boost" \
    --config-settings=cmake.define.Boost_NO_SYSTEM_PATHS=ON --config-settings=cmake.define.Boost_NO_BOOST_CMAKE=ON \
    --config-settings=build-dir="$root/build-torch" . >"$OUT/pip_install.log" 2>&1
status=$?
say "pip install: exit $status after $(( $(date +%s) - start )) s"
if [ $status -ne 0 ]; then
  tail -40 "$OUT/pip_install.log" | tee -a "$log"
  exit $status
fi

# The extension links the CUDA runtime shared library (libcudart.so.13): from the toolkit, or the copy
# torch's CUDA wheels install (nvidia/cu13/lib), whichever the loader finds first.
cuda_wheel_lib=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "*", "lib", "libcudart.so*"))})))' 2>/dev/null || true)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib:${cuda_wheel_lib}:${LD_LIBRARY_PATH:-}"
(cd /tmp && python3 -c 'import fp4sim.torch as ft; print("fp4sim.torch imported; cuda_available:", ft.cuda_available())') 2>&1 | tee -a "$log"

say "tests/python/test_torch.py"
start=$(date +%s)
# From outside the repository, so that `import fp4sim` is the installed package.
(cd /tmp && python3 -m pytest -q -rs -p no:cacheprovider ${PYTEST_ARGS:-} "$root/tests/python/test_torch.py") \
    >"$OUT/test_torch.log" 2>&1
status=$?
tail -15 "$OUT/test_torch.log" | tee -a "$log"
say "test_torch: exit $status after $(( $(date +%s) - start )) s"
if [ $# -gt 0 ]; then
  say "after: $*"
  start=$(date +%s)
  "$@" >"$OUT/after.log" 2>&1
  after=$?
  tail -5 "$OUT/after.log" | tee -a "$log"
  say "after: exit $after after $(( $(date +%s) - start )) s"
  [ $status -ne 0 ] || status=$after
fi
exit $status
