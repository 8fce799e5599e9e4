#!/usr/bin/env bash
# Conversion throughput of fp4sim's fast path beside this machine's copy bandwidth and ml_dtypes'
# NumPy casts, all measured here in one run, with the issue's targets marked met or not:
#   one thread  >= 2x ml_dtypes' rate;   all threads >= 60% of the (all-thread) copy bandwidth.
# Also prints the measured OpenMP threshold of encode_array (src/core/codec.cpp kParallelThreshold).
# Raw results: out/bench_convert.json (Google Benchmark), out/bench_ml_dtypes.json.
#
# Usage: tools/bench_convert.sh [extra Google Benchmark flags, e.g. --benchmark_repetitions=5]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${FP4SIM_BUILD_DIR:-$root/build-setup}
out=$root/out
mkdir -p "$out"

"$root/tools/setup.sh" >/dev/null
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP4SIM_BENCH=ON >/dev/null
cmake --build "$build" --target bench_convert -j "$(nproc)"

echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB"
echo "load:    $(cut -d" " -f1-3 /proc/loadavg) (1, 5, 15 min load average; 2 CPUs)"
echo "commit:  $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src include || echo ' (+ local changes)')"

"$build/bench/bench_convert" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/bench_convert.json" --benchmark_out_format=json "$@"

# ml_dtypes: NumPy astype (one thread; NumPy casts do not use threads), same element count and input
# distribution, best of 3 after a warm-up cast.
python3 - "$out/bench_ml_dtypes.json" <<'EOF'
import json, sys, time
import numpy as np
import ml_dtypes

n = 1 << 26
rng = np.random.default_rng(0x5EED)
magnitude = np.exp2(rng.uniform(-12, 11, n)).astype(np.float32)
signed = np.where(rng.integers(0, 2, n) == 1, -magnitude, magnitude).astype(np.float32)
results = {"ml_dtypes_version": ml_dtypes.__version__, "numpy_version": np.__version__, "elements": n, "rates": {}}
# ml_dtypes has no ue5m3: its nearest cast, float8_e5m2 (5 exponent bits), stands in, labelled so.
for name, dtype, x in [("e2m1", ml_dtypes.float4_e2m1fn, signed), ("e4m3", ml_dtypes.float8_e4m3fn, signed),
                       ("ue5m3", ml_dtypes.float8_e5m2, magnitude)]:
    x.astype(dtype)
    best = min((lambda t0: (x.astype(dtype), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(3))
    results["rates"][name] = {"dtype": np.dtype(dtype).name, "elements_per_s": n / best}
json.dump(results, open(sys.argv[1], "w"), indent=1)
EOF

python3 - "$out/bench_convert.json" "$out/bench_ml_dtypes.json" <<'EOF'
import json, sys
bench = json.load(open(sys.argv[1]))
ml = json.load(open(sys.argv[2]))
median = {b["run_name"].removesuffix("/real_time"): b for b in bench["benchmarks"]
          if b.get("aggregate_name") == "median"}
def rate(name, key):
    return median[name][key] if name in median else float("nan")
all_t = max(int(n.rsplit(":", 1)[1]) for n in median if n.startswith("copy/threads:"))
copy1 = rate("copy/threads:1", "bytes_per_second")
copyN = rate(f"copy/threads:{all_t}", "bytes_per_second")
G = 1e9
print()
print(f"copy bandwidth (memcpy, read+write): 1 thread {copy1/G:6.2f} GB/s, {all_t} threads {copyN/G:6.2f} GB/s")
print(f"ml_dtypes {ml['ml_dtypes_version']} (NumPy {ml['numpy_version']}), {ml['elements']} elements")
print()
print(f"{'format':<7} {'1 thread':>18} {f'{all_t} threads':>18} {'ml_dtypes':>18} {'1T/ml_dtypes':>13} "
      f"{'target>=2':>10} {'NT/copy':>8} {'target>=0.6':>12}")
for fmt in ("e2m1", "e4m3", "ue5m3"):
    one = rate(f"encode/{fmt}/rne/threads:1", "items_per_second")
    alln = rate(f"encode/{fmt}/rne/threads:{all_t}", "items_per_second")
    m = ml["rates"][fmt]
    ratio = one / m["elements_per_s"]
    frac = rate(f"encode/{fmt}/rne/threads:{all_t}", "bytes_per_second") / copyN
    label = "" if m["dtype"].startswith("float8_e4m3") or m["dtype"].startswith("float4") else f" ({m['dtype']})"
    print(f"{fmt:<7} {one/1e6:10.0f} Melem/s {alln/1e6:10.0f} Melem/s {m['elements_per_s']/1e6:10.0f} Melem/s "
          f"{ratio:13.2f} {'met' if ratio >= 2 else 'NOT met':>10} {frac:8.2f} {'met' if frac >= 0.6 else 'NOT met':>12}"
          f"{label}")
print("(bytes per element: 4 read + 1 written; NT/copy compares bytes/s with the copy's read+write bytes/s)")

serial = {int(n.rsplit("/", 1)[1]): b["real_time"] for n, b in median.items() if n.startswith("threshold/serial/")}
parallel = {int(n.rsplit("/", 1)[1]): b["real_time"] for n, b in median.items() if n.startswith("threshold/parallel/")}
sizes = sorted(set(serial) & set(parallel))
wins = [n for n in sizes if all(parallel[m] < serial[m] for m in sizes if m >= n)]
print()
print("OpenMP threshold (e2m1, one thread vs all threads, median real time in us):")
for n in sizes:
    print(f"  n = {n:>8}: serial {serial[n]:10.1f}  parallel {parallel[n]:10.1f}  {'parallel wins' if parallel[n] < serial[n] else ''}")
print(f"measured threshold: parallel wins from n = {wins[0] if wins else 'never (in this range)'}")
EOF
