#!/usr/bin/env bash
# The aarch64 (Grace: GH200, GB200) build, checked on an x86-64 Debian 12 machine: cross-compiles
# fp4sim::core, fp4sim::verify and the HDF5-free part of fp4sim::io (.npy, output files) with Debian's
# g++-aarch64-linux-gnu, with the flags CMake gives them, and runs the unit tests of those layers under
# qemu-aarch64. GoogleTest is compiled for the target from Debian's googletest sources; Boost is header
# only (the exact datapath's reference), so the host's headers serve. Installs its Debian packages when
# they are missing (checked with dpkg-query first, as tools/setup.sh does); with ccache installed, a second
# run only links and tests. What it leaves out, and why, it prints first.
#
# Usage: tools/aarch64_check.sh [SCRATCH_DIR]   (default: build-aarch64/ in the source tree)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/build-aarch64}
sysroot=/usr/aarch64-linux-gnu

# The unit tests that link only the layers built here; the rest is left out, and why is printed.
tests=(format_test codec_roundtrip_test codec_boost_test datapath_test layout_test philox_test stochastic_test
       quantize_test gemm_test verify_test)
# The parts left out of three of them (GoogleTest filters), to keep the run to a few minutes of emulation:
# the random Boost cases (the hand cases and every representable value, midpoint and neighbour stay), the
# k = 256 fast-versus-reference GEMM cases (the k = 128 and 200 ones still cover every datapath), and the
# tests that run the fp4sim command, which is not built here.
declare -A filters=(
  [codec_boost_test]='BoostReferenceSelfCheck.*:*RepresentableValuesMidpointsAndTheirNeighbours*'
  [gemm_test]='-*_k256'
  [verify_test]='-Cli.*'
)
echo "aarch64_check: left out: fp4sim::io's HDF5 part, fp4sim::analysis and the fp4sim command (HDF5, CLI11"
echo "  and cereal for arm64 need Debian's multiarch -dev packages), so the tests that run the command skip;"
echo "  tensorcore_vectors_test (zlib for arm64); the *_exhaustive_test programs (2^32 inputs, hours under"
echo "  emulation); the Python module; emu/ (CUDA). The x86 kernels (AVX2, AVX-512) do not exist on aarch64:"
echo "  the portable GEMM kernels and the baseline encode loops are what run. Test filters:"
for test in "${!filters[@]}"; do echo "  $test --gtest_filter='${filters[$test]}'"; done

debian_packages=(g++-aarch64-linux-gnu qemu-user googletest libboost-dev ninja-build)
# shellcheck source=tools/debian_packages.sh
. "$root/tools/debian_packages.sh"
install_missing_debian_packages aarch64_check "${debian_packages[@]}"

mkdir -p "$out/include"
ln -sfn /usr/include/boost "$out/include/boost"  # the host's Boost headers alone, not all of /usr/include
launcher=$(command -v ccache || true)
gtest=/usr/src/googletest/googletest

# One build.ninja: an object per source, one archive of the layers, one program per test.
ninja_file="$out/build.ninja"
{
  echo "cxx = $launcher aarch64-linux-gnu-g++"
  echo "flags = -std=c++20 -O2 -DNDEBUG -fopenmp -ffp-contract=off -fno-fast-math -Wall -Wextra" \
       "-I$root/include -isystem $out/include -isystem $gtest/include -isystem $gtest" \
       "-DFP4SIM_SOURCE_DIR=\\\"$root\\\" -DFP4SIM_BINARY=\\\"$out/no-fp4sim-command\\\""
  printf 'rule cxx\n  command = $cxx -MD -MF $out.d $flags -c $in -o $out\n  depfile = $out.d\n  deps = gcc\n'
  printf '  description = CXX $out\n'
  printf 'rule ar\n  command = rm -f $out && aarch64-linux-gnu-ar qcs $out $in\n  description = AR $out\n'
  printf 'rule link\n  command = aarch64-linux-gnu-g++ -fopenmp -pthread $in -o $out\n  description = LINK $out\n'
  archive() {  # archive() NAME SOURCE...: the objects of the sources and their archive lib/NAME.a
    local name=$1 objects=() source object
    shift
    for source in "$@"; do
      object="obj/$name/$(basename "$source").o"
      echo "build $object: cxx $source"
      objects+=("$object")
    done
    echo "build lib/$name.a: ar ${objects[*]}"
  }
  archive fp4sim "$root"/src/core/*.cpp "$root"/src/verify/*.cpp "$root"/src/io/npy.cpp "$root"/src/io/output_file.cpp "$root"/src/io/input_path.cpp
  archive gtest "$gtest"/src/gtest-all.cc "$gtest"/src/gtest_main.cc
  for test in "${tests[@]}"; do
    echo "build obj/tests/$test.o: cxx $root/tests/$test.cpp"
    echo "build bin/$test: link obj/tests/$test.o lib/fp4sim.a lib/gtest.a"
  done
} >"$ninja_file"

# The compiler's diagnostics are shown; ninja's progress lines are not.
ninja -C "$out" -j "$(nproc)" | sed '/^\[[0-9]*\/[0-9]*\] /d'

# All programs at once (most are single-threaded under qemu, so one at a time left a core idle), each
# waited for and reported in the list's order.
declare -A pids=()
for test in "${tests[@]}"; do
  OMP_NUM_THREADS=2 qemu-aarch64 -L "$sysroot" "$out/bin/$test" --gtest_brief=1 --gtest_filter="${filters[$test]:-*}" >"$out/$test.log" 2>&1 &
  pids[$test]=$!
done
failed=()
for test in "${tests[@]}"; do
  if wait "${pids[$test]}"; then
    echo "aarch64_check: $test: $(grep -E '^\[  (PASSED|SKIPPED) ' "$out/$test.log" | tr '\n' ' ')"
  else
    cat "$out/$test.log"
    failed+=("$test")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "aarch64_check: FAILED under qemu-aarch64: ${failed[*]}"
  exit 1
fi
echo "aarch64_check: ${#tests[@]} test programs built for aarch64 and passed under qemu-aarch64"
