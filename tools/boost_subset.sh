#!/usr/bin/env bash
# The Boost headers fp4sim's build needs, copied into .boost/ (ignored by git) for a machine without Boost
# (the H200 image): Boost is used only by src/core/gemm_reference.cpp, header-only Boost.Multiprecision
# (cpp_int). Debian's bcp (apt-get install libboost1.74-tools-dev) follows the #includes from the system
# headers; configure with -DBoost_INCLUDE_DIR=<repo>/.boost (tools/device_torch.sh does).
#
#   tools/boost_subset.sh        # writes .boost/, prints its size
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.boost"
if ! command -v bcp >/dev/null; then
  echo "boost_subset.sh: needs bcp (apt-get install libboost1.74-tools-dev)" >&2
  exit 2
fi
# bcp writes outside its destination too (a system header it follows lands in ../include), so it runs in
# a scratch directory and only its boost/ tree is kept (no documentation or build files).
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/work/out"
# version.hpp: CMake's FindBoost reads the version there. bcp's CAUTION lines about macro includes are noise.
(cd "$scratch/work" && bcp --boost=/usr/include boost/multiprecision/cpp_int.hpp boost/version.hpp out >/dev/null 2>&1)
rm -rf "$dest"
mkdir -p "$dest"
mv "$scratch/work/out/boost" "$dest/boost"
du -sh "$dest"
