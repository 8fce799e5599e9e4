"""What the fp4sim module's tests share: the CLI they compare with, the shipped trace, test tensors."""

import os
import subprocess

import numpy as np
import pytest

import fp4sim

BINARY = os.environ.get("FP4SIM_BINARY")
needs_cli = pytest.mark.skipif(not BINARY, reason="FP4SIM_BINARY not set (ctest sets it)")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TRACE = os.path.join(ROOT, "traces", "trace_a.h5")
# replay and sweep read HDF5 traces: a module built without HDF5 (FP4SIM_IO=OFF) lacks them.
ANALYSES = ("replay", "sweep", "stats", "AnalysisReport")
HAS_ANALYSES = hasattr(fp4sim._fp4sim, "replay")
needs_analyses = pytest.mark.skipif(not HAS_ANALYSES, reason="module built without HDF5 (FP4SIM_IO=OFF)")


def cli(*args, check=True):
    r = subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"fp4sim {' '.join(map(str, args))} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def tensor(rows, cols, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    x[0, :4] = [0.0, -0.0, 2.5 * scale, -1e-30]
    return x
