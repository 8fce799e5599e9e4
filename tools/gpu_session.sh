#!/usr/bin/env bash
# One GPU session on the H200 (issue 5): build, GPU tests, tensor-core probes, crosscheck, benchmarks.
# Runs in the repository root on the device machine; logs and raw results go to $OUT (at most 8 files).
#
#   tools/gpu_session.sh [steps]      steps: any of build tests probes corners crosscheck bench (default: all
#                                      but corners)
#
# emu/ is built for sm_90a (tools/probes/nvcc_sm90a.sh as CMAKE_CUDA_COMPILER_LAUNCHER turns CMake's sm_90
# target into sm_90a) so that bf16-tc runs on the wgmma kernel (emu/gemm_wgmma.cu); configure build-gpu here
# the same way: cmake -S . -B build-gpu -DCMAKE_CUDA_COMPILER_LAUNCHER=$PWD/tools/probes/nvcc_sm90a.sh
# Binaries: built there with CMake (-j16) when the machine has fp4sim's build dependencies; otherwise the
# prebuilt x86-64 binaries carried in .gpu_carry/ (bin/ and the shared libraries they need in lib/, made
# here by `tools/gpu_session.sh pack`, carried as .gpu_carry.txz) are used. The probe program (sm_90a, wgmma)
# has no dependencies and is compiled there with nvcc unless a carried one runs.
# Environment knobs: XC_ELEMENTS (quantize elements per preset, default 1e8), XC_GEMMS (default 10000),
# XC_LARGE (large GEMMs, default 4), PROBE_CASES (random cases per instruction, default 1000000),
# BENCH_ROWS/BENCH_COLS (quantize benchmark shape, default 16384 x 16384 = 256M elements).
set -uo pipefail
steps="${*:-tests probes crosscheck bench}"
# Steps run in the order given (bench first puts the GEMM kernel's own bit check before the long runs).
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
log="$OUT/session.log"
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log"; }

if [ "${1:-}" = "pack" ]; then
  # Here (no GPU): collect the prebuilt binaries and their non-system shared libraries.
  rm -rf .gpu_carry && mkdir -p .gpu_carry/bin .gpu_carry/lib
  for b in fp4sim fp4sim_gpu_bench gpu_quantize_test gpu_quantize_variants_test gpu_convert_test; do
    for d in build-gpu build-gpu/tests; do [ -x "$d/$b" ] && cp "$d/$b" .gpu_carry/bin/; done
  done
  nvcc -O2 -std=c++17 -Xcompiler -fopenmp -gencode=arch=compute_90a,code=sm_90a tools/probes/mma_probe.cu \
    -o .gpu_carry/bin/mma_probe
  for b in .gpu_carry/bin/*; do
    ldd "$b" | awk '/=> \//{print $3}' | grep -Ev 'libc\.so|libm\.so|libdl|libpthread|librt|libresolv|ld-linux|libgcc_s|libstdc\+\+|libcuda\.so|libcudart|libcublas' || true
  done | sort -u | while read -r lib; do cp -L "$lib" .gpu_carry/lib/; done
  # xz-compressed the binaries take a sixth of the space, which keeps them and the tree under the device's
  # carry limit: carry .gpu_carry.txz, the session unpacks it.
  tar cJf .gpu_carry.txz .gpu_carry
  du -sh .gpu_carry .gpu_carry.txz
  exit 0
fi

say "session start: $(hostname) steps: $steps"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$log"
nproc | tee -a "$log"

BIN=""
if [ -f .gpu_carry.txz ] && [ ! -d .gpu_carry ]; then tar xJf .gpu_carry.txz; fi
cublas_pip=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$PWD/.gpu_carry/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${cublas_pip}:${LD_LIBRARY_PATH:-}"
if [[ "$steps" != *build* ]] && ! .gpu_carry/bin/fp4sim crosscheck --help >/dev/null 2>&1; then
  say "carried binaries do not run here: building on the device"
  .gpu_carry/bin/fp4sim crosscheck --help 2>&1 | head -3 | tee -a "$log"
  steps="build $steps"
fi
if [[ "$steps" == *build* ]]; then
  say "build (cmake, -j16)"
  if cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4SIM_CUDA=ON -DFP4SIM_BENCH=OFF \
      -DCMAKE_CUDA_COMPILER_LAUNCHER="$PWD/tools/probes/nvcc_sm90a.sh" \
      >"$OUT/build.log" 2>&1 &&
     cmake --build build-dev -j16 --target fp4sim fp4sim_gpu_bench gpu_quantize_test gpu_quantize_variants_test gpu_convert_test && cp build-dev/tests/gpu_*_test build-dev/ \
      >>"$OUT/build.log" 2>&1; then
    BIN=build-dev
    say "built on the device"
  else
    say "device build failed (see build.log tail below); using carried binaries"
    tail -5 "$OUT/build.log" | tee -a "$log"
  fi
fi
if [ -z "$BIN" ]; then BIN=.gpu_carry/bin; fi
say "binaries from $BIN"
PROBE=.gpu_carry/bin/mma_probe
if ! [ -x "$PROBE" ]; then
  nvcc -O2 -std=c++17 -Xcompiler -fopenmp -gencode=arch=compute_90a,code=sm_90a tools/probes/mma_probe.cu -o /tmp/mma_probe \
    >>"$log" 2>&1 && PROBE=/tmp/mma_probe
fi

step_tests() {
  say "GPU tests"
  for t in gpu_convert_test gpu_quantize_test gpu_quantize_variants_test; do
    timeout "${TEST_TIMEOUT:-300}" "$BIN/$t" --gtest_brief=1 2>&1 | tail -15 | tee -a "$log"
  done
}
step_probes() {
  say "tensor-core probes"
  timeout 300 "$PROBE" "$OUT" "${PROBE_CASES:-1000000}" 2>&1 | tee -a "$log"
}
step_corners() {
  # The corner-case measurements vendored in tests/data/tensorcore_corners (its README), as one archive.
  say "tensor-core corner cases"
  nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/probes/corner_probe.cu -o /tmp/corner_probe \
    >>"$log" 2>&1 || { say "corner_probe did not build"; return; }
  rm -rf /tmp/corners && mkdir -p /tmp/corners
  timeout 300 /tmp/corner_probe /tmp/corners 2>&1 | tee -a "$log"
  tar czf "$OUT/corners.tgz" -C /tmp/corners .
}
step_crosscheck() {
  say "crosscheck"
  timeout "${XC_TIMEOUT:-480}" "$BIN/fp4sim" crosscheck --elements "${XC_ELEMENTS:-1e8}" --gemms "${XC_GEMMS:-10000}" \
    --large-gemms "${XC_LARGE:-4}" ${XC_ARGS:-} >"$OUT/crosscheck.log" 2>&1
  echo "crosscheck exit $?" | tee -a "$log"
  grep -v "^gemm .*: 0 mismatching" "$OUT/crosscheck.log" | tail -40 | tee -a "$log"
  grep "^gemm .*x4096" "$OUT/crosscheck.log" | tee -a "$log"
}
step_bench() {
  say "benchmarks"
  timeout "${BENCH_TIMEOUT:-300}" "$BIN/fp4sim_gpu_bench" "${BENCH_ROWS:-16384}" "${BENCH_COLS:-16384}" 8192 2>&1 | tee "$OUT/bench.log" | tee -a "$log"
}
for step in $steps; do
  case "$step" in
    tests | probes | corners | crosscheck | bench) "step_$step" ;;
  esac
done
say "session end"
