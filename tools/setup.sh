#!/usr/bin/env bash
# Installs what fp4sim needs to build, test and benchmark on Debian 12, and nothing when everything is
# already there:
#  * Debian packages (as root, or with sudo), each checked with dpkg-query first; `apt-get update` runs
#    at most once, and apt's output goes to a log that is printed only when apt fails;
#  * the Python packages pinned in requirements.txt, into the project's own virtual environment
#    (.venv/ at the repository root, git-ignored, or $FP4SIM_VENV), made with the machine's python3 when it
#    is missing. Nothing is installed into the system interpreter: tools/test.sh checks that its packages
#    are the same before and after.
# The callers (tools/run_main.sh, tools/test.sh) then put its bin/ first on PATH (tools/venv.sh).
#
# The CUDA toolkit is not installed here (Debian 12 has none recent enough for sm_90); CMake builds
# the kernels in emu/ when it finds nvcc, and leaves them out otherwise.
#
# Usage: tools/setup.sh            (called by tools/run_main.sh and tools/test.sh)
set -euo pipefail

# Debian packages, and what needs each.
debian_packages=(
  g++ make cmake ninja-build pkg-config git  # the build (CMake >= 3.25, Ninja)
  ccache                                     # tools/test.sh: the pip install test reuses the release build's objects
  libboost-dev                               # Boost.Multiprecision, header only: the exact datapath
  libhdf5-dev hdf5-tools                     # HDF5 C API (traces, quantize output); h5dump for debugging
  libcli11-dev                               # command line
  libcereal-dev                              # replay/sweep results as bytes between MPI ranks
  openmpi-bin libopenmpi-dev                 # mpirun -np N fp4sim replay|sweep (optional to the build)
  libgtest-dev libgmock-dev googletest       # tests
  zlib1g-dev                                 # the vendored tensor-core vectors (.txt.gz)
  libbenchmark-dev                           # tests/bench_*.cpp (Google Benchmark)
  libopenblas-dev                            # BLAS for the float32 reference GEMM
  libomp-dev                                 # OpenMP runtime headers (g++ itself uses libgomp)
  clang libclang-rt-14-dev libomp-14-dev     # tools/fuzz.sh: clang, its libFuzzer and sanitizer runtimes, LLVM's OpenMP
  python3 python3-venv python3-dev           # the virtual environment below; headers for the module
)
# Python packages: exactly the versions pinned in requirements.txt (NumPy/h5py read and write arrays
# and traces, ml_dtypes and gfloat are independent oracles, pytest runs the Python tests, matplotlib draws
# the figures, nanobind and scikit-build-core build the Python module).
requirements=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/requirements.txt

# shellcheck source=tools/debian_packages.sh
. "$(dirname "${BASH_SOURCE[0]}")/debian_packages.sh"
install_missing_debian_packages setup.sh "${debian_packages[@]}"

# shellcheck source=tools/venv.sh
. "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
if [ ! -x "$venv/bin/python3" ]; then
  echo "setup.sh: making the virtual environment $venv"
  python3 -m venv "$venv"
fi
python=$venv/bin/python3
# The pins that the environment's packages do not meet (a missing package, or another version).
unmet=$("$python" - "$requirements" <<'PY'
import sys
from importlib import metadata
for line in open(sys.argv[1]):
    requirement = line.split("#", 1)[0].strip()
    if not requirement:
        continue
    name, version = requirement.split("==")
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        installed = None
    if installed != version:
        print(requirement)
PY
)
if [ -n "$unmet" ]; then
  echo "setup.sh: installing pinned Python packages into $venv:" $unmet
  "$python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
fi

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup.sh: ready (CUDA toolkit found: emu/ kernels will be built)"
else
  echo "setup.sh: ready (no CUDA toolkit: emu/ kernels and GPU tests are left out)"
fi
