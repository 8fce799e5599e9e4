#!/usr/bin/env bash
# The main job, from a fresh clone: set up, configure, build, and run fp4sim on the input shipped in the
# repo. Outputs go to out/ (git-ignored). Build directory: $FP4SIM_BUILD_DIR, default build-setup/.
#
# Usage: tools/run_main.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${FP4SIM_BUILD_DIR:-$root/build-setup}
out=$root/out
jobs=$(nproc)

"$root/tools/setup.sh"
# CMake finds nvcc on PATH; a login shell puts /usr/local/cuda/bin there, a bare one may not.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" --target fp4sim -j "$jobs"
fp4sim=$build/fp4sim
mkdir -p "$out"

# Converts an array to E2M1 and prints input, code and decoded value side by side.
convert_example() {
  local input=$1
  "$fp4sim" convert --format e2m1 --rounding rne --in "$input" --out "$out/example_e2m1.npy" \
    --decoded "$out/example_e2m1_decoded.npy"
  python3 - "$input" "$out/example_e2m1.npy" "$out/example_e2m1_decoded.npy" <<'EOF'
import sys
import numpy as np
x, codes, decoded = (np.load(p) for p in sys.argv[1:4])
print(f"fp4sim convert --format e2m1 --rounding rne --in {sys.argv[1]}")
print(f"{'input':>12} {'code':>6} {'decoded':>8}")
for v, c, d in zip(x.ravel(), codes.ravel(), decoded.ravel()):
    print(f"{v:12.6g} {c:#06b} {d:8.6g}")
EOF
}

# The main job (one line; the replay of traces/trace_a.h5 replaces it when `replay` lands).
"$fp4sim" formats && convert_example traces/example.npy
