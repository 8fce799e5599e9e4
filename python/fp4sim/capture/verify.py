"""Checking recorded quantized operands with ``fp4sim verify`` (docs/trace-format.md, "Quantized operands").

For every ``fp4/`` group of a version-2 trace (written for fp4sim.torch.Linear layers) this writes the
recorded arrays as .npy files and builds the command lines that judge them against the golden model of
the recorded inputs:

* ``fp4sim verify quantize`` per operand (``fp4/<gemm>.<a|b>``): the recorded codes and scales against
  the quantization of the recorded input with the operand's own spec (its blocks, rounding, RHT and
  target, given as overrides), its held amax and its Philox seed or recorded random integers, and the
  recorded tensor scale G. Operand B rounded stochastically from Philox draws stream 1, which
  ``verify quantize`` does not select: such an operand is checked through its GEMM only.
* ``fp4sim verify gemm`` per GEMM (``fp4/<gemm>``): the recorded output C against the golden GEMM of the
  recorded inputs (quantized as the layer did, A on stream 0 and B on stream 1 of the seed) through the
  recorded datapath.

From a shell: ``python3 -m fp4sim.capture.verify trace.h5 [--fp4sim PATH] [--out DIR]`` prints one line
per check and the report of each that failed; exit 0 when every check is bit-exact, 4 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import List, NamedTuple, Optional, Tuple

import h5py
import numpy as np

from .. import _fp4sim


class VerifyCommand(NamedTuple):
    what: str         # "step 2 fc1/call_000001 fprop.a" (the trace path of what is checked)
    argv: List[str]


# The role whose preset spec is the starting point of each GEMM operand (its own spec is then given).
_ROLE = {"fprop.a": "activation", "fprop.b": "weight", "dgrad.a": "grad_output", "dgrad.b": "weight",
         "wgrad.a": "grad_output", "wgrad.b": "activation"}


def _override_flags(overrides: dict) -> List[str]:
    flags = []
    for key, value in overrides.items():
        if key == "two_d":
            flags.append("--two-d" if value else "--one-d")
        elif key == "rht":
            flags.append("--rht" if value else "--no-rht")
        else:
            flags += ["--" + key.replace("_", "-"), str(value)]
    return flags


def _number(v) -> str:
    """A float32 value as decimal text that reads back to the same float32."""
    return repr(float(np.float32(v)))


def _attr(group, name: str) -> str:
    v = group.attrs[name]
    return v.decode() if isinstance(v, bytes) else str(v)


class _Files:
    def __init__(self, outdir: str):
        self.outdir = outdir
        self.count = 0

    def save(self, array: np.ndarray, what: str) -> str:
        self.count += 1
        path = os.path.join(self.outdir, "%05d_%s.npy" % (self.count, what))
        np.save(path, np.ascontiguousarray(array))
        return path


def _quantize_command(fp4sim: str, og, files: _Files) -> Optional[List[str]]:
    operand = _attr(og, "operand")
    recipe = _attr(og, "recipe")
    overrides = json.loads(_attr(og, "overrides") or "{}")
    info = dict(_fp4sim.operand_info(recipe, overrides, operand))
    has_rbits = "rbits" in og
    if operand.endswith(".b") and info["rounding"] != "rne" and not has_rbits:
        return None  # Philox stream 1: checked through the GEMM
    spec = dict(overrides, rounding=info["rounding"], two_d=info["block_rows"] > 1, rht=bool(info["rht"]),
                target=_number(info["target"]))
    argv = [fp4sim, "verify", "quantize", "--recipe", recipe, *_override_flags(spec), "--role", _ROLE[operand],
            "--in", files.save(og["input"][...], "in"), "--codes", files.save(og["codes"][...], "codes"),
            "--scales", files.save(og["scales"][...], "scales")]
    if "amax_ref" in og.attrs:
        argv += ["--amax-ref", _number(og.attrs["amax_ref"])]
    if has_rbits:
        argv += ["--rbits", files.save(og["rbits"][...], "rbits")]
    elif info["rounding"] != "rne":
        argv += ["--seed", str(int(og.attrs["seed"]))]
    if info["tensor_scaled"]:
        argv += ["--tensor-scale-value", _number(og.attrs["global_encode_scale"]), "--tensor-scale-kind", "encode"]
    return argv


def _gemm_command(fp4sim: str, fp4, gemm: str, files: _Files) -> List[str]:
    g = fp4[gemm]
    a, b = fp4[gemm + ".a"], fp4[gemm + ".b"]
    overrides = json.loads(_attr(g, "overrides") or "{}")
    argv = [fp4sim, "verify", "gemm", "--recipe", _attr(g, "recipe"), *_override_flags(overrides), "--gemm", gemm,
            "--datapath", _attr(g, "datapath"), "--seed", str(int(g.attrs["seed"])), "--no-progress",
            "--a", files.save(a["input"][...], "a"), "--b", files.save(b["input"][...], "b"),
            "--c", files.save(g["c"][...], "c")]
    for side, og in (("a", a), ("b", b)):
        if "amax_ref" in og.attrs:
            argv += ["--amax-ref-" + side, _number(og.attrs["amax_ref"])]
        if "rbits" in og:
            argv += ["--rbits-" + side, files.save(og["rbits"][...].astype(np.uint8), "rbits_" + side)]
    return argv


def verify_commands(trace: str, outdir: str, fp4sim: str = "fp4sim") -> List[VerifyCommand]:
    """The ``fp4sim verify`` command lines that check every quantized operand and GEMM output recorded in
    `trace`, their .npy inputs written under `outdir` (created)."""
    os.makedirs(outdir, exist_ok=True)
    files = _Files(outdir)
    commands: List[VerifyCommand] = []
    with h5py.File(trace, "r") as f:
        groups: List[Tuple[str, h5py.Group]] = []
        f.visititems(lambda name, obj: groups.append((name, obj))
                     if isinstance(obj, h5py.Group) and name.rsplit("/", 1)[-1] == "fp4" else None)
        for name, fp4 in groups:
            where = name[: -len("/fp4")]
            for key in sorted(fp4):
                if "." in key:
                    argv = _quantize_command(fp4sim, fp4[key], files)
                else:
                    argv = _gemm_command(fp4sim, fp4, key, files)
                if argv is not None:
                    commands.append(VerifyCommand("%s %s" % (where, key), argv))
    return commands


def verify(trace: str, outdir: str, fp4sim: str = "fp4sim") -> List[Tuple[VerifyCommand, subprocess.CompletedProcess]]:
    """Runs :func:`verify_commands`; each result's returncode is 0 when bit-exact, 4 on mismatches (its
    stdout explains them)."""
    return [(c, subprocess.run(c.argv, capture_output=True, text=True)) for c in verify_commands(trace, outdir, fp4sim)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m fp4sim.capture.verify",
                                description="Check a trace's recorded quantized operands with fp4sim verify.")
    p.add_argument("trace")
    p.add_argument("--fp4sim", default=os.environ.get("FP4SIM_BINARY", "fp4sim"), help="the fp4sim executable")
    p.add_argument("--out", default=None, help="keep the .npy files and commands here (default: a temporary folder)")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        results = verify(a.trace, a.out or scratch, a.fp4sim)
    failed = 0
    for c, r in results:
        print("%-9s %s" % ("ok" if r.returncode == 0 else "MISMATCH", c.what))
        if r.returncode != 0:
            failed += 1
            print("  " + " ".join(c.argv) + "\n" + r.stdout + r.stderr)
    print("%d of %d checks bit-exact" % (len(results) - failed, len(results)))
    if not results:
        print("no quantized operands in %s (recorded for fp4sim.torch.Linear layers)" % a.trace, file=sys.stderr)
        return 3
    return 0 if failed == 0 else 4


if __name__ == "__main__":
    sys.exit(main())
