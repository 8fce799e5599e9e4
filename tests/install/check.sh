#!/bin/sh
# ctest install_consumer: `cmake --install` the build tree into a scratch prefix, then, as users of the
# installed package in projects of C++ alone (project(x CXX)):
#  - build the consumer of tests/install/ (COMPONENTS core) with HDF5 and Boost unfindable, run it, and
#    check that nothing in its link line or its ELF dependencies is HDF5;
#  - build and run examples/cpp (plain find_package, README "Using fp4sim from C++") the same way;
#  - where the build has fp4sim::io, configure a project asking for COMPONENTS io analysis: HDF5 is
#    searched then, with the C language enabled for it by the package.
# Each is compiled by the compiler that built the package (a sanitized package needs that compiler's
# sanitizer runtime).
# Usage: check.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR CXX_COMPILER
set -eu
build=$1 source=$2 scratch=$3 compiler=$4
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
for consumer in tests/install:consumer examples/cpp:quantize_gemm; do
  dir=${consumer%%:*} program=${consumer#*:}
  cmake -S "$source/$dir" -B "$scratch/$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release --no-warn-unused-cli \
        -DCMAKE_CXX_COMPILER="$compiler" \
        -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=TRUE \
        -DCMAKE_DISABLE_FIND_PACKAGE_Boost=TRUE >/dev/null
  cmake --build "$scratch/$dir"
  "$scratch/$dir/$program"
  link=$(cd "$scratch/$dir" && ninja -t commands "$program" | tail -n 1)
  case "$link" in *hdf5*) echo "$dir: the link line names HDF5: $link"; exit 1 ;; esac
  if readelf -d "$scratch/$dir/$program" | grep -i 'NEEDED.*hdf5'; then
    echo "$dir: $program depends on HDF5"
    exit 1
  fi
done
echo "install_consumer: fp4sim::core alone (tests/install, examples/cpp), no HDF5 and no Boost needed"
if [ -f "$scratch"/prefix/lib*/cmake/fp4sim/fp4sim-io-targets.cmake ]; then
  mkdir -p "$scratch/io-src"
  cat >"$scratch/io-src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(fp4sim_io_consumer LANGUAGES CXX)
find_package(fp4sim REQUIRED COMPONENTS io analysis)
if(NOT TARGET fp4sim::analysis OR NOT TARGET HDF5::HDF5)
  message(FATAL_ERROR "fp4sim::analysis or HDF5::HDF5 missing")
endif()
CMAKE
  cmake -S "$scratch/io-src" -B "$scratch/io-build" -G Ninja -DCMAKE_CXX_COMPILER="$compiler" \
        -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
  echo "install_consumer: COMPONENTS io analysis found in a CXX-only project"
fi
