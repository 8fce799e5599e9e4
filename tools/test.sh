#!/usr/bin/env bash
# The whole test suite, from a fresh clone, as CI runs it (.ci/run):
#  1. set up, configure and build everything in build-setup/, run every ctest label (unit and exhaustive);
#  2. configure and build again with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and run
#     everything but the exhaustive label. Any sanitizer report fails the run;
#  3. fuzz the input parsers (tools/fuzz.sh, docs/fuzzing.md): build the libFuzzer harnesses with clang
#     under the same sanitizers in build-fuzz/ and run each for $FUZZ_SECONDS (default 60), all at once.
#     Any crash, leak, sanitizer report, hang or oversized allocation fails the run.
# Prints the wall-clock and CPU time (user + system, of every process the stage ran) of each stage. Build directories: $FP4SIM_BUILD_DIR (default build-setup/) and
# $FP4SIM_ASAN_BUILD_DIR (default build-asan/), $FP4SIM_FUZZ_BUILD_DIR (default build-fuzz/). For local runs only, $FP4SIM_CTEST_ARGS adds ctest
# arguments to step 1 (e.g. "-LE exhaustive" to skip the 2^32 sweeps); CI sets nothing.
#
# Usage: tools/test.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${FP4SIM_BUILD_DIR:-$root/build-setup}
asan_build=${FP4SIM_ASAN_BUILD_DIR:-$root/build-asan}
jobs=$(nproc)
timings=()
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
report() {
  read_children_cpu
  echo "== test.sh timings"
  printf '  %s\n' "${timings[@]}"
  printf '  %-34s %5d s wall %6d s CPU\n' total "$SECONDS" "$cpu_now"
  rm -f "$times_file"
}
trap report EXIT

"$root/tools/setup.sh"
stage_done "setup"

# CMake finds nvcc on PATH; a login shell puts /usr/local/cuda/bin there, a bare one may not.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"
stage_done "configure + build (release)"

# shellcheck disable=SC2086  # word splitting of the optional extra arguments is intended
ctest --test-dir "$build" --output-on-failure -j 2 ${FP4SIM_CTEST_ARGS:-}
stage_done "ctest${FP4SIM_CTEST_ARGS:+ $FP4SIM_CTEST_ARGS}${FP4SIM_CTEST_ARGS:-, all labels}"

# The sanitizer build leaves out the CUDA kernels (nvcc takes no -fsanitize; device code cannot be
# sanitized), the benchmarks and MPI: OpenMPI never frees what MPI_Init allocates, in plugins it unloads
# and libraries built without frame pointers, so LeakSanitizer would report ~120 kB at every exit and
# suppressions cannot name those frames (they can with OMPI_MCA_mca_base_component_disable_dlclose=1 and
# LSAN_OPTIONS=fast_unwind_on_malloc=0, far too slow for the whole suite). The code that splits and joins
# the work is sanitized through share_test; mpi_test.py reports as skipped here. -fno-sanitize-recover=all
# (CMakeLists.txt) makes UBSan abort; the options below make every report fatal and readable.
cmake -S "$root" -B "$asan_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP4SIM_SANITIZE=ON \
  -DFP4SIM_CUDA=OFF -DFP4SIM_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
cmake --build "$asan_build" -j "$jobs"
stage_done "configure + build (sanitizers)"

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
ctest --test-dir "$asan_build" --output-on-failure -j 2 -LE exhaustive
stage_done "ctest, sanitizers, -LE exhaustive"

"$root/tools/fuzz.sh"
stage_done "fuzz (build + ${FUZZ_SECONDS:-60} s per harness)"
