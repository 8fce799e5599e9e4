#!/usr/bin/env bash
# Fuzzes fp4sim's input parsers (docs/fuzzing.md): builds the libFuzzer harnesses of tests/fuzz/ with clang
# under AddressSanitizer + UndefinedBehaviorSanitizer in build-fuzz/ (-DFP4SIM_FUZZ=ON), then runs every
# harness for a bounded time, all at once (one process each), from its committed seed corpus
# tests/fuzz/corpus/<name>/ and dictionary tests/fuzz/<name>.dict. New inputs go to a working corpus in
# the build directory, never into the repository. Fails on any crash, leak, sanitizer report, input that
# runs past 10 s, or single allocation past 256 MiB (every input is a few kB: a larger allocation is a
# size taken from the input and not checked against it); the input that did it is kept in
# <build>/fuzz/artifacts/<name>/. Prints the executions each harness ran.
#
# Usage: tools/fuzz.sh [NAME...]     (default: every tests/fuzz/*_fuzz.cpp; NAME as in npy_read)
#   FUZZ_SECONDS           seconds per harness (default 60)
#   FP4SIM_FUZZ_BUILD_DIR  build directory (default build-fuzz/)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FP4SIM_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}

if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for source in "$root"/tests/fuzz/*_fuzz.cpp; do
    name=$(basename "$source" .cpp)
    names+=("${name%_fuzz}")
  done
fi

# libFuzzer ships with clang (Debian: clang and libclang-rt-14-dev, tools/setup.sh); the rest of the project
# keeps its own compiler in its other build directories.
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP4SIM_FUZZ=ON \
  -DFP4SIM_TESTS=OFF -DFP4SIM_BENCH=OFF -DFP4SIM_PYTHON=OFF -DFP4SIM_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER}
cmake --build "$build" -j "$(nproc)" --target fuzzers

export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1
pids=()
for name in "${names[@]}"; do
  work=$build/fuzz/corpus/$name
  artifacts=$build/fuzz/artifacts/$name
  mkdir -p "$work" "$artifacts"
  options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1
           -artifact_prefix="$artifacts/")
  if [ -f "$root/tests/fuzz/$name.dict" ]; then
    options+=(-dict="$root/tests/fuzz/$name.dict")
  fi
  "$build/fuzz/fuzz_$name" "${options[@]}" "$work" "$root/tests/fuzz/corpus/$name" > "$build/fuzz/$name.log" 2>&1 &
  pids+=($!)
done

failed=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  log=$build/fuzz/$name.log
  if wait "${pids[$i]}"; then
    status=clean
  else
    status="FAILED (log: $log)"
    failed=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  printf 'fuzz %-14s %10s executions in %s s: %s\n' "$name" "${runs:-?}" "$seconds" "$status"
  if [ "$status" != clean ]; then
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==' "$log" | head -n 20 | sed 's/^/  /'
  fi
done
exit $failed
