#!/usr/bin/env bash
# The whole test suite, from a fresh clone, as CI runs it (.ci/run):
#  1. set up (tools/setup.sh: Debian packages, the project's virtual environment .venv/), and check that
#     the system interpreter's packages are the same as before;
#  2. configure and build everything with g++ in build-setup/, run every ctest label (unit, oracle, docs
#     and exhaustive: the all-2^32 sweeps, the comparisons with independent references and the README's
#     examples run here, once);
#  3. configure and build again with clang under AddressSanitizer + UndefinedBehaviorSanitizer and
#     libFuzzer's coverage instrumentation in build-asan/: one tree for the sanitized tests and the fuzzers
#     (tests/fuzz/), so the library is compiled once for both. Run the unit label (the exhaustive,
#     oracle and docs labels run once, in step 2: tests/CMakeLists.txt says why); any sanitizer report fails the run;
#  4. fuzz the input parsers (tools/fuzz.sh, docs/fuzzing.md) from that tree, and the Python argument layer
#     and the capture reader (atheris) with step 2's module and binary, each harness for $FUZZ_SECONDS
#     (default 60), all at once. Any crash, leak, sanitizer report, hang, oversized allocation or
#     unexpected exception fails the run;
#  5. cross-compile the core layers and their unit tests for aarch64 and run them under qemu-user
#     (tools/aarch64_check.sh, which prints what it leaves out) in build-aarch64/.
# Prints the wall-clock and CPU time (user + system, of every process the stage ran) of each stage, and,
# when a stage fails, ends with that stage and the tests that failed in it.
# Build directories: $FP4SIM_BUILD_DIR (default build-setup/) and $FP4SIM_ASAN_BUILD_DIR (default
# build-asan/), build-aarch64/. For local runs only, $FP4SIM_CTEST_ARGS adds ctest arguments to step 2 (e.g. "-LE exhaustive"
# to skip the 2^32 sweeps); CI sets nothing.
#
# Usage: tools/test.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${FP4SIM_BUILD_DIR:-$root/build-setup}
asan_build=${FP4SIM_ASAN_BUILD_DIR:-$root/build-asan}
jobs=$(nproc)
timings=()
stage="setup"
failed_tests_log=""  # ctest's list of the failed tests of the running stage, if it is a ctest stage
# CPU seconds used so far by the processes this script waited for, into $cpu_now: bash's `times`, second
# line. It must run in this shell, not in a subshell ($(...) or a pipe), which has no children of its own.
times_file=$(mktemp)
read_children_cpu() {
  times > "$times_file"
  cpu_now=$(tail -n 1 "$times_file" | awk '{ t = 0; for (i = 1; i <= 2; ++i) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%d", t }')
}
read_children_cpu
stage_start=$SECONDS
stage_cpu=$cpu_now
stage_done() {
  read_children_cpu
  timings+=("$(printf '%-34s %5d s wall %6d s CPU' "$1" $((SECONDS - stage_start)) $((cpu_now - stage_cpu)))")
  stage_start=$SECONDS
  stage_cpu=$cpu_now
}
# On every exit: the stage table; after a failure, its cause in the last lines, where CI's log ends.
report() {
  local status=$?
  read_children_cpu
  echo "== test.sh timings"
  [ ${#timings[@]} -eq 0 ] || printf '  %s\n' "${timings[@]}"
  printf '  %-34s %5d s wall %6d s CPU\n' total "$SECONDS" "$cpu_now"
  rm -f "$times_file"
  if [ "$status" -ne 0 ]; then
    echo "== test.sh FAILED (exit $status) in stage: $stage"
    if [ -n "$failed_tests_log" ] && [ -s "$failed_tests_log" ]; then
      echo "failed tests (number:name, from $failed_tests_log):"
      sed 's/^/  /' "$failed_tests_log"
    fi
  fi
}
trap report EXIT

# shellcheck source=tools/venv.sh
. "$root/tools/venv.sh"
# The packages of the interpreter the set-up must leave alone (python3 on PATH, unless that is the project's
# own environment, already activated), before and after it.
system_python=$(command -v python3)
case "$system_python" in "$venv"/*) system_python=true ;; esac
system_packages() {
  "$system_python" -c 'import importlib.metadata as m; print("\n".join(sorted(str(d.metadata["Name"]) + "==" + str(d.version) for d in m.distributions())))'
}
system_before=$(system_packages)
"$root/tools/setup.sh"
if [ "$(system_packages)" != "$system_before" ]; then
  echo "test.sh: tools/setup.sh changed the packages of $system_python:" >&2
  diff <(echo "$system_before") <(system_packages) >&2 || true
  exit 1
fi
use_venv
stage_done "setup"

# OpenMP threads that finish a parallel region sleep instead of spinning for the next one (libgomp spins
# about 300,000 iterations, LLVM's libomp 200 ms): with twice as many tests as cores, and on a busy machine,
# the spinning takes cores from the tests that have work. Measured on two idle cores: the ReplayShares tests
# 13.5 -> 11.1 CPU-s (g++, libgomp), under ASan (clang, libomp) the slowest of them 112 -> 79 CPU-s; an
# all-2^32 sweep (one long region) unchanged. Nothing an OpenMP program computes depends on it.
export OMP_WAIT_POLICY=PASSIVE

# CMake finds nvcc on PATH; a login shell puts /usr/local/cuda/bin there, a bare one may not.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

stage="configure + build (release)"
# Under ccache (Debian package, tools/setup.sh), with its cache in the build tree: the `pip install .` test
# (python/CMakeLists.txt) compiles the library again with the same commands and takes its objects from
# there. No CCACHE_BASEDIR: pip's build tree lies elsewhere, and only absolute paths match from both.
export CCACHE_DIR=$build/ccache
unset CCACHE_BASEDIR
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build "$build" -j "$jobs"
stage_done "$stage"

stage="ctest${FP4SIM_CTEST_ARGS:+ $FP4SIM_CTEST_ARGS}${FP4SIM_CTEST_ARGS:-, all labels}"
failed_tests_log=$build/Testing/Temporary/LastTestsFailed.log
rm -f "$failed_tests_log"
# shellcheck disable=SC2086  # word splitting of the optional extra arguments is intended
# Three times as many tests as cores at once: several tests mostly wait (the five mpi_test.py groups spend
# 20 to 80 s each in mpirun's stop sequence for under 3 CPU-s; with twice as many, three of them held three
# of the four places at the start), and the exhaustive sweeps count as two each (PROCESSORS,
# tests/CMakeLists.txt).
ctest --test-dir "$build" --output-on-failure -j $((3 * jobs)) ${FP4SIM_CTEST_ARGS:-}
stage_done "$stage"

# The sanitizer build is clang's, as libFuzzer needs (tools/fuzz.sh), and leaves out the CUDA kernels
# (nvcc takes no -fsanitize; device code cannot be sanitized), the benchmarks, the Python module (an
# ASan-instrumented extension cannot load into a plain Python) and MPI: OpenMPI never frees what MPI_Init
# allocates, in plugins it unloads and libraries built without frame pointers, so LeakSanitizer would
# report ~120 kB at every exit and suppressions cannot name those frames (they can with
# OMPI_MCA_mca_base_component_disable_dlclose=1 and LSAN_OPTIONS=fast_unwind_on_malloc=0, far too slow
# for the whole suite). The code that splits and joins the work is sanitized through share_test;
# mpi_test.py reports as skipped here. -fno-sanitize-recover=all (CMakeLists.txt) makes UBSan abort; the
# options below make every report fatal and readable.
stage="configure + build (sanitizers, fuzzers)"
failed_tests_log=""
# -O1 and line tables only (file:line in every report, no variable info): what ASan's documentation asks
# for, and 39% less compile CPU than -O2 -g on the heaviest translation units (src/cli/verify.cpp).
CC=clang CXX=clang++ cmake -S "$root" -B "$asan_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DFP4SIM_FUZZ=ON -DFP4SIM_CUDA=OFF -DFP4SIM_BENCH=OFF -DFP4SIM_PYTHON=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
cmake --build "$asan_build" -j "$jobs"
stage_done "$stage"

stage="ctest, sanitizers, -L unit"
failed_tests_log=$asan_build/Testing/Temporary/LastTestsFailed.log
rm -f "$failed_tests_log"
(
  export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1
  export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
  ctest --test-dir "$asan_build" --output-on-failure -j 2 -L unit
)
stage_done "$stage"

stage="fuzz (${FUZZ_SECONDS:-60} s per harness)"
failed_tests_log=""
FP4SIM_FUZZ_BUILD_DIR=$asan_build FP4SIM_RELEASE_BUILD_DIR=$build "$root/tools/fuzz.sh"
stage_done "$stage"

stage="aarch64 (cross-compiled, qemu-user)"
"$root/tools/aarch64_check.sh" "$root/build-aarch64"
stage_done "$stage"
