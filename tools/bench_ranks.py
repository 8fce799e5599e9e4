#!/usr/bin/env python3
"""Replay throughput on 1 and N MPI ranks, one OpenMP thread per rank (issue 14; docs/BENCHMARKS.md).

Runs `fp4sim replay TRACE -q --json ...` as a plain process and under `mpirun -np R` for each R, REPEATS
times in rotation (so a burst of load on a shared machine hits every configuration alike), and prints per
configuration the minimum wall time of the whole command (mpirun's start included), the minimum of the
run's own "seconds" (the slowest rank's replay), the float32 MB per second per recipe of each, the
speed-up over one rank; and, from /usr/bin/time around each rank, the CPU seconds (user + system) of all
ranks together and of the busiest rank. Minima, because on a shared machine the noise only ever adds
time. On a machine whose cores are busy with other work the wall times show little of the split; the
busiest rank's CPU seconds are the time the run takes on idle cores (a rank never waits for I/O here),
so their ratio is the speed-up the split gives, and the sum shows that no work is done twice.

  tools/bench_ranks.py [--binary build/fp4sim] [--trace traces/trace_a.h5] [--ranks 1,2] [--repeats 5]
                       [--bind core|none] [-- extra replay flags]

--bind core is OpenMPI's default for 2 ranks or fewer (each rank pinned to a core): right on an idle
machine; on a shared one a pinned rank waits for its core while another is free, and --bind none (the
kernel places the ranks) measures what the split itself gains.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

root = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(root / "build" / "fp4sim"))
    parser.add_argument("--trace", default=str(root / "traces" / "trace_a.h5"))
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--bind", choices=["core", "none"], default="core")
    parser.add_argument("flags", nargs="*", help="extra replay flags (after --)")
    args = parser.parse_args()

    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    configs = [("plain", [])] + [(f"mpirun -np {r}", [args.mpirun, "--bind-to", args.bind, "-np", str(r)])
                                 for r in map(int, args.ranks.split(","))]
    wall = {name: [] for name, _ in configs}
    run = {name: [] for name, _ in configs}
    total_cpu = {name: [] for name, _ in configs}
    busiest = {name: [] for name, _ in configs}
    mb = None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        times = Path(tmp) / "times"
        for _ in range(args.repeats):
            for name, prefix in configs:
                times.write_text("")
                command = prefix + ["/usr/bin/time", "-a", "-o", str(times), "-f", "%U %S", args.binary, "replay",
                                    args.trace, "-q", "--json", str(out), *args.flags]
                start = time.monotonic()
                subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
                wall[name].append(time.monotonic() - start)
                ranks = [sum(map(float, line.split())) for line in times.read_text().splitlines()]
                total_cpu[name].append(sum(ranks))
                busiest[name].append(max(ranks))
                result = json.loads(out.read_text())
                run[name].append(result["seconds"])
                mb = result["tensor_bytes"] / 1e6
    print(f"{args.trace}: {mb:.2f} MB of float32 tensor data per recipe; flags {' '.join(args.flags) or '(none)'};"
          f" OMP_NUM_THREADS=1; --bind-to {args.bind}; {args.repeats} repeats;"
          f" load average {os.getloadavg()[0]:.1f} at the end")
    base_wall, base_run = min(wall[configs[1][0]]), min(run[configs[1][0]])
    base_cpu = min(busiest[configs[1][0]])
    print(f"{'configuration':16} {'wall min s':>10} {'MB/s/recipe':>12} {'speed-up':>9} {'run min s':>10}"
          f" {'speed-up':>9} {'CPU all s':>10} {'busiest s':>10} {'MB/s/recipe':>12} {'speed-up':>9}")
    for name, _ in configs:
        w, r, c = min(wall[name]), min(run[name]), min(busiest[name])
        print(f"{name:16} {w:10.2f} {mb / w:12.1f} {base_wall / w:8.2f}x {r:10.2f} {base_run / r:8.2f}x"
              f" {min(total_cpu[name]):10.2f} {c:10.2f} {mb / c:12.1f} {base_cpu / c:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
