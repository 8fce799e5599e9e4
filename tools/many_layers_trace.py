"""Writes a trace of many tiny layers (docs/trace-format.md, schema version 1), for timing replay against
the number of layers (docs/BENCHMARKS.md "Replay at many layers").

    python tools/many_layers_trace.py OUT.h5 --layers 4000 [--steps 2]
"""

import argparse

import h5py
import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--steps", type=int, default=2)
    a = p.parse_args()
    rng = np.random.default_rng(26)
    with h5py.File(a.out, "w") as f:
        f.attrs["schema"] = "fp4-trace"
        f.attrs["schema_version"] = 1
        for step in range(1, a.steps + 1):
            g = f.create_group("step_%06d" % step)
            g.attrs["step"] = np.int64(step)
            for layer in range(a.layers):
                t = g.create_group("layer_%05d" % layer)
                t["x"] = rng.standard_normal((16, 32), dtype=np.float32)
                t["w"] = rng.standard_normal((16, 32), dtype=np.float32)
                t["dy"] = rng.standard_normal((16, 16), dtype=np.float32)


if __name__ == "__main__":
    main()
