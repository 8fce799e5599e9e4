#!/usr/bin/env bash
# Fuzzes fp4sim's input parsers (docs/fuzzing.md): builds the libFuzzer harnesses of tests/fuzz/ with clang
# under AddressSanitizer + UndefinedBehaviorSanitizer in build-fuzz/ (-DFP4SIM_FUZZ=ON), then runs every
# harness for a bounded time, all at once, from its committed seed corpus tests/fuzz/corpus/<name>/ and
# dictionary tests/fuzz/<name>.dict. New inputs go to a working corpus in the build directory, never into
# the repository. Fails on any crash, leak, sanitizer report, input that runs past 10 s, or single
# allocation past 256 MiB (every input is a few kB: a larger allocation is a size taken from the input and
# not checked against it). One exception: HDF5 1.10 itself can loop forever or fault on a corrupted heap
# (docs/fuzzing.md), so trace_read runs in libFuzzer's fork mode, which keeps every failing input and goes
# on; afterwards each is run again alone, and only a hang, or a fault of HDF5's own (hdf5_own_fault below:
# in libhdf5, on memory libhdf5 allocated; an overflow of a buffer fp4sim passed to HDF5 still fails), is
# reported without failing the run. There an impossible malloc (HDF5 sizing a buffer from
# corrupted metadata) returns null, as glibc's does, instead of aborting; fp4sim's own allocations are
# C++ `new`, which ASan still reports (a finding, as before).
# The Python harnesses, tests/fuzz/*_fuzz.py (the argument layer of the fp4sim module, the v2 capture
# reader), run under atheris (libFuzzer for Python, pinned in requirements.txt) in the project's
# environment (tools/venv.sh) with the release build's module: the sanitized tree has none (an
# ASan-instrumented extension cannot load into a plain Python). Without that module, atheris or (for
# capture_verify) the release fp4sim, such a harness prints SKIPPED and why, never "clean", and does not
# fail the run. They fail on an uncaught Python exception (each harness says which outcomes it accepts),
# a crash, an input past 10 s, or 2 GiB resident.
# Every failing or hanging input is kept in <build>/fuzz/artifacts/<name>/. Prints the executions each
# harness ran and, for each finding, the innermost frames of its report and the input (base64, up to 16 kB).
#
# Usage: tools/fuzz.sh [NAME...]     (default: every tests/fuzz/*_fuzz.cpp and *_fuzz.py; NAME as in npy_read)
#   FUZZ_SECONDS              seconds per harness (default 60)
#   FP4SIM_FUZZ_BUILD_DIR     build directory (default build-fuzz/)
#   FP4SIM_RELEASE_BUILD_DIR  the release build whose python/ module and fp4sim the Python harnesses run
#                             (default: $FP4SIM_BUILD_DIR, else build-setup/, as tools/test.sh builds it)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FP4SIM_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
release=${FP4SIM_RELEASE_BUILD_DIR:-${FP4SIM_BUILD_DIR:-$root/build-setup}}
# shellcheck source=tools/venv.sh
. "$root/tools/venv.sh"
python=$venv/bin/python3
[ -x "$python" ] || python=python3

if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for source in "$root"/tests/fuzz/*_fuzz.cpp "$root"/tests/fuzz/*_fuzz.py; do
    name=$(basename "$source")
    name=${name%.*}
    names+=("${name%_fuzz}")
  done
fi

# Why the Python harness $1 cannot run here, if it cannot (empty when it can).
python_skip_reason() {
  if ! compgen -G "$release/python/fp4sim/_fp4sim*.so" > /dev/null; then
    echo "no release-built module in $release/python/fp4sim/ (set FP4SIM_RELEASE_BUILD_DIR)"
  elif ! "$python" -c 'import atheris' 2> /dev/null; then
    echo "atheris is not installed in $python (requirements.txt; tools/setup.sh)"
  elif [ "$1" = capture_verify ] && [ ! -x "$release/fp4sim" ]; then
    echo "no release-built fp4sim at $release/fp4sim"
  fi
}

# libFuzzer ships with clang (Debian: clang and libclang-rt-14-dev, tools/setup.sh); the rest of the project
# keeps its own compiler in its other build directories. A tree already configured with FP4SIM_FUZZ=ON is
# used as it is: tools/test.sh builds its sanitized tests and the fuzzers in one tree.
cxx_names=0
for name in "${names[@]}"; do
  [ -f "$root/tests/fuzz/${name}_fuzz.py" ] || cxx_names=$((cxx_names + 1))
done
if [ "$cxx_names" -eq 0 ]; then
  :  # Python harnesses only: no clang tree needed
elif ! grep -qx 'FP4SIM_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP4SIM_FUZZ=ON \
    -DFP4SIM_TESTS=OFF -DFP4SIM_BENCH=OFF -DFP4SIM_PYTHON=OFF -DFP4SIM_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
    ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER}
fi
[ "$cxx_names" -eq 0 ] || cmake --build "$build" -j "$(nproc)" --target fuzzers

export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1
export LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1
pids=()
skipped=()
for name in "${names[@]}"; do
  work=$build/fuzz/corpus/$name
  artifacts=$build/fuzz/artifacts/$name
  mkdir -p "$work" "$artifacts"
  rm -f "$artifacts"/*
  skipped+=("")
  if [ -f "$root/tests/fuzz/${name}_fuzz.py" ]; then
    skipped[-1]=$(python_skip_reason "$name")
    if [ -n "${skipped[-1]}" ]; then
      pids+=("")
      continue
    fi
    # One OpenMP thread: the harnesses share the cores with each other and the C++ harnesses.
    options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/")
    [ "$name" = capture_verify ] && options+=(-max_len=65536)  # the seed traces are 19 to 46 kB
    [ -f "$root/tests/fuzz/$name.dict" ] && options+=(-dict="$root/tests/fuzz/$name.dict")
    OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$release/python FP4SIM_BINARY=$release/fp4sim \
      FUZZ_WORK=$build/fuzz "$python" "$root/tests/fuzz/${name}_fuzz.py" "${options[@]}" "$work" \
      "$root/tests/fuzz/corpus/$name" > "$build/fuzz/$name.log" 2>&1 &
    pids+=($!)
    continue
  fi
  options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1
           -artifact_prefix="$artifacts/")
  if [ "$name" = trace_read ]; then
    # A hang there is HDF5's and let pass: 2 s (an input takes milliseconds) wastes less of the budget.
    options+=(-fork=1 -ignore_timeouts=1 -ignore_ooms=1 -ignore_crashes=1 -timeout=2)
  fi
  if [ -f "$root/tests/fuzz/$name.dict" ]; then
    options+=(-dict="$root/tests/fuzz/$name.dict")
  fi
  asan_options=$ASAN_OPTIONS
  if [ "$name" = trace_read ]; then
    asan_options+=:allocator_may_return_null=1
  fi
  ASAN_OPTIONS=$asan_options "$build/fuzz/fuzz_$name" "${options[@]}" "$work" "$root/tests/fuzz/corpus/$name" \
    > "$build/fuzz/$name.log" 2>&1 &
  pids+=($!)
done

# Whether the sanitizer report $1 is HDF5's own fault: a SEGV, overlapping memcpy, heap overflow or
# oversized malloc whose innermost frame outside libc, the sanitizers and libFuzzer is in libhdf5, and,
# where the report names the block it overflowed, a block that libhdf5 allocated (never one of fp4sim's).
innermost_frame() {
  grep -E '^ +#[0-9]+ ' | grep -vE 'libc\.so|sysdeps|__interceptor_|__asan|__sanitizer|fuzzer::| in malloc | in calloc | in realloc ' |
    head -n 1
}
hdf5_own_fault() {
  grep -qE 'ERROR: (AddressSanitizer: (SEGV|memcpy-param-overlap|heap-buffer-overflow)|libFuzzer: out-of-memory \(malloc)' \
    <<< "$1" || return 1
  sed '/allocated by thread/,$d' <<< "$1" | innermost_frame | grep -q libhdf5 || return 1
  if grep -q 'allocated by thread' <<< "$1"; then
    sed -n '/allocated by thread/,$p' <<< "$1" | innermost_frame | grep -q libhdf5 || return 1
  fi
}

failed=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  log=$build/fuzz/$name.log
  if [ -n "${skipped[$i]}" ]; then
    printf 'fuzz %-14s SKIPPED, NOT RUN: %s\n' "$name" "${skipped[$i]}"
    continue
  fi
  rc=0
  wait "${pids[$i]}" || rc=$?
  # The final statistics, or in fork mode the last status line "#<executions>: cov: ...".
  runs=$(sed -n -E 's/^stat::number_of_executed_units: *//p; s/^#([0-9]+): cov:.*/\1/p' "$log" | tail -n 1)
  # Fork mode exits with the code of the last job it let pass (70 after a hang): there the kept inputs
  # decide, below.
  if [ "$name" = trace_read ]; then
    if [ -n "$runs" ]; then rc=0; else rc=1; fi
  fi
  if [ "$rc" -eq 0 ]; then
    status=clean
  else
    status="FAILED (log: $log)"
    failed=1
  fi
  # A hang of a C++ harness other than trace_read has failed it already; one of a Python harness too.
  hangs=0
  [ -f "$root/tests/fuzz/${name}_fuzz.py" ] || hangs=$(find "$build/fuzz/artifacts/$name" -name 'timeout-*' | wc -l)
  # Fork mode went on past crashes, leaks and oversized allocations: each is a failure unless, run again
  # alone, it is clean (a leak of HDF5's own, suppressed) or HDF5's own fault. The run alone has room for
  # the memory HDF5 touched before it asked for more than 256 MiB at once, so that malloc names its caller.
  hdf5_faults=0
  python_harness=0
  [ -f "$root/tests/fuzz/${name}_fuzz.py" ] && python_harness=1
  if [ "$python_harness" -eq 1 ] && [ "$rc" -ne 0 ]; then
    # The uncaught exception (its type and message, the harness's description of the call) and the input.
    grep -A 2 -E '=== Uncaught Python exception' "$log" | head -n 3 | cut -c 1-600 | sed 's/^/  /' || true
    for artifact in $(find "$build/fuzz/artifacts/$name" -type f); do
      if [ "$(stat -c %s "$artifact")" -le 16384 ]; then
        echo "  input $(basename "$artifact") (base64 -d to reproduce): $(base64 -w 0 "$artifact")"
      fi
    done
  fi
  for artifact in $(find "$build/fuzz/artifacts/$name" \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' \)); do
    [ "$python_harness" -eq 1 ] && break  # a C++ harness's fork-mode leftovers only
    if replay=$(ASAN_OPTIONS=$ASAN_OPTIONS:allocator_may_return_null=1 "$build/fuzz/fuzz_$name" -rss_limit_mb=4096 \
                  -malloc_limit_mb=256 "$artifact" 2>&1); then
      continue
    elif hdf5_own_fault "$replay"; then
      hdf5_faults=$((hdf5_faults + 1))
    else
      status="FAILED ($artifact)"
      failed=1
      # The report's first lines and the four innermost frames of each stack (the access, the
      # allocation): enough to tell from CI's log alone whose fault it is.
      grep -E 'ERROR|SUMMARY|runtime error|^ +#[0-3] |allocated by|freed by' <<< "$replay" | head -n 20 | sed 's/^/  /'
      # The input itself when it is small (a CI machine's build tree does not outlive the run).
      if [ "$(stat -c %s "$artifact")" -le 16384 ]; then
        echo "  input (base64 -d to reproduce): $(base64 -w 0 "$artifact")"
      fi
    fi
  done
  printf 'fuzz %-14s %10s executions in %s s: %s' "$name" "${runs:-?}" "$seconds" "$status"
  if [ "$hangs" -gt 0 ] || [ "$hdf5_faults" -gt 0 ]; then
    printf '; inside HDF5: %d hang(s), %d fault(s) (kept in %s)' "$hangs" "$hdf5_faults" "$build/fuzz/artifacts/$name/"
  fi
  printf '\n'
  if [ "$status" != clean ]; then
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==' "$log" | head -n 20 | sed 's/^/  /' || true
  fi
done
# capture_verify's scratch folders (libFuzzer's exit skips the harness's own clean-up)
rm -rf "$build"/fuzz/capture-verify.*
exit $failed
