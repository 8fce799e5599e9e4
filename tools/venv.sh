# Sourced by tools/setup.sh, tools/run_main.sh and tools/test.sh: the project's own Python virtual
# environment, .venv/ at the repository root (git-ignored), or $FP4SIM_VENV. After tools/setup.sh has made
# it, `use_venv` puts its bin/ first on PATH, so CMake, the tests and the tools run its python3 and the
# system interpreter is never touched.
venv=${FP4SIM_VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv}
use_venv() {
  export VIRTUAL_ENV=$venv
  export PATH=$venv/bin:$PATH
}
