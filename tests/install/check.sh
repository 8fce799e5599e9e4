#!/bin/sh
# ctest install_consumer: `cmake --install` the build tree into a scratch prefix, build the consumer
# of tests/install/ against it with HDF5 and Boost unfindable, run it, and check that nothing in its
# link line or its ELF dependencies is HDF5.
# Usage: check.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR CXX_COMPILER
set -eu
build=$1 source=$2 scratch=$3 compiler=$4
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source/tests/install" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$compiler" \
      -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_DISABLE_FIND_PACKAGE_HDF5=TRUE \
      -DCMAKE_DISABLE_FIND_PACKAGE_Boost=TRUE >/dev/null
cmake --build "$scratch/build"
"$scratch/build/consumer"
link=$(cd "$scratch/build" && ninja -t commands consumer | tail -n 1)
case "$link" in *hdf5*) echo "the consumer's link line names HDF5: $link"; exit 1 ;; esac
if readelf -d "$scratch/build/consumer" | grep -i 'NEEDED.*hdf5'; then
  echo "the consumer depends on HDF5"
  exit 1
fi
echo "install_consumer: fp4sim::core alone, no HDF5 and no Boost needed"
