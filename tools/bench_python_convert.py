#!/usr/bin/env python3
"""float32 -> codes through the two user-facing paths against numpy + ml_dtypes doing the same job, on this
machine, in one run:

1. in Python: ``fp4sim.convert(x, fmt)`` against ``x.astype(ml_dtypes dtype)`` on 16 Mi float32 values
   (median of RUNS interleaved timings each), and the peak memory each adds above the input (a fresh
   process per side, ru_maxrss after minus before);
2. as whole processes: ``fp4sim convert --format e2m1 --in x.npy --out c.npy`` (32 Mi float32) against
   ``python3 -c 'np.save(out, np.load(in).astype(float4_e2m1fn).view(np.uint8))'``, timed by
   ``/usr/bin/time -v`` (wall clock and maximum resident set size), RUNS interleaved runs, medians.

The targets (issue 15): each fp4sim side at least 2x the ml_dtypes side; fp4sim's peak at most input +
output + a small constant.

Usage: PYTHONPATH=build/python tools/bench_python_convert.py --binary build/fp4sim [--runs 5]
(OMP_NUM_THREADS=1 in front gives the one-thread figures.)
"""

import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import ml_dtypes
import numpy as np

import fp4sim

IN_PROCESS_N = 1 << 24
PROCESS_N = 1 << 25
FORMATS = {"e2m1": ml_dtypes.float4_e2m1fn, "e4m3": ml_dtypes.float8_e4m3fn}


def data(n):
    rng = np.random.default_rng(0x5EED)
    return rng.standard_normal(n, dtype=np.float32) * np.float32(3)


def in_process(runs):
    x = data(IN_PROCESS_N)
    rows = []
    for fmt, dtype in FORMATS.items():
        ours, theirs = [], []
        assert np.array_equal(fp4sim.convert(x, fmt).view(np.uint8), x.astype(dtype).view(np.uint8))
        for _ in range(runs):
            t0 = time.perf_counter()
            fp4sim.convert(x, fmt)
            t1 = time.perf_counter()
            x.astype(dtype)
            t2 = time.perf_counter()
            ours.append(t1 - t0)
            theirs.append(t2 - t1)
        a, b = statistics.median(ours), statistics.median(theirs)
        rows.append((fmt, dtype.__name__, a, b))
    return rows


PEAK_CHILD = r"""
import sys, numpy as np, ml_dtypes, fp4sim
def peak_kib():  # VmHWM: this process's own peak (ru_maxrss keeps the forking parent's across exec)
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
x = np.empty({n}, np.float32)
np.random.default_rng(1).standard_normal(out=x, dtype=np.float32)  # no temporary: the peak so far is x
fp4sim.convert(x[:1024], "e2m1"); x[:1024].astype(ml_dtypes.float4_e2m1fn)  # first-call set-up
before = peak_kib()
y = fp4sim.convert(x, "e2m1") if sys.argv[1] == "fp4sim" else x.astype(ml_dtypes.float4_e2m1fn)
after = peak_kib()
print((after - before) / 1024)
"""


def peak_added(side):
    out = subprocess.run([sys.executable, "-c", PEAK_CHILD.format(n=IN_PROCESS_N), side], check=True,
                         capture_output=True, text=True).stdout
    return float(out)


def timed(cmd):
    r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", r.stderr)
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    return seconds, rss_kib / 1024


def as_process(binary, runs):
    with tempfile.TemporaryDirectory() as tmp:
        x_path, ours_path, theirs_path = (os.path.join(tmp, f) for f in ("x.npy", "ours.npy", "theirs.npy"))
        np.save(x_path, data(PROCESS_N))
        ours_cmd = [binary, "convert", "--format", "e2m1", "--in", x_path, "--out", ours_path]
        theirs_cmd = [sys.executable, "-c", "import sys, numpy as np, ml_dtypes; "
                      "np.save(sys.argv[2], np.load(sys.argv[1]).astype(ml_dtypes.float4_e2m1fn).view(np.uint8))",
                      x_path, theirs_path]
        ours, theirs = [], []
        for _ in range(runs):
            ours.append(timed(ours_cmd))
            theirs.append(timed(theirs_cmd))
        assert np.array_equal(np.load(ours_path), np.load(theirs_path))
    med = lambda rows, i: statistics.median(r[i] for r in rows)  # noqa: E731
    return (med(ours, 0), med(ours, 1)), (med(theirs, 0), med(theirs, 1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", required=True, help="the fp4sim CLI")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    print(f"date:    {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {os.cpu_count()} CPUs; load {' '.join(open('/proc/loadavg').read().split()[:3])}; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print(f"numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, fp4sim {fp4sim.__file__}")
    print(f"\n1. in Python, {IN_PROCESS_N} float32 values, median of {args.runs}")
    for fmt, name, a, b in in_process(args.runs):
        print(f"  {fmt:5} fp4sim.convert {a * 1e3:7.1f} ms ({IN_PROCESS_N / a / 1e6:6.0f} Melem/s)   "
              f"astype({name}) {b * 1e3:7.1f} ms ({IN_PROCESS_N / b / 1e6:6.0f} Melem/s)   {b / a:4.1f}x")
    input_mib, output_mib = IN_PROCESS_N * 4 / 2**20, IN_PROCESS_N / 2**20
    print(f"  peak memory added by the call (input {input_mib:.0f} MiB already held, output {output_mib:.0f} MiB): "
          f"fp4sim {peak_added('fp4sim'):.1f} MiB, ml_dtypes {peak_added('ml_dtypes'):.1f} MiB")
    (ow, orss), (tw, trss) = as_process(args.binary, args.runs)
    print(f"\n2. whole processes, {PROCESS_N} float32 values (.npy {PROCESS_N * 4 / 2**20:.0f} MiB in, "
          f"{PROCESS_N / 2**20:.0f} MiB out), median of {args.runs}")
    print(f"  fp4sim convert        {ow:6.2f} s wall, peak {orss:6.0f} MiB")
    print(f"  numpy + ml_dtypes     {tw:6.2f} s wall, peak {trss:6.0f} MiB")
    print(f"  ratio                 {tw / ow:6.1f}x faster, {orss / trss:.2f}x the memory")


if __name__ == "__main__":
    main()
