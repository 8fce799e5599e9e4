#!/usr/bin/env python3
"""Error of each GEMM datapath against `exact` on the GEMMs of a tensor trace (docs/datapaths.md).

Reads the trace with h5py (docs/trace-format.md), forms the three GEMMs of every captured linear layer
(fprop A = x, B = w; dgrad A = dy, B = w^T; wgrad A = dy^T, B = x^T), runs `fp4sim gemm` once per
(recipe, datapath) and compares every output with the `exact` datapath of the same quantized operands
(the quantization is deterministic, so all datapaths see the same codes and scales):

  rel_fro      ||C_d - C_exact||_F / ||C_exact||_F
  max_ulp      largest distance in binary32 units in the last place (ordered bit patterns)
  identical    fraction of outputs bit-identical to exact
  q_rel_fro    ||C_exact - X W^T||_F / ||X W^T||_F against the float64 product of the unquantized
               operands (the quantization error the datapath error sits beside)

Usage: tools/datapath_error.py TRACE.h5 [--fp4sim build-setup/fp4sim] [--json out.json] [--steps 1,200]
       tools/datapath_error.py synthetic   (heavy-tailed operands; ue5m3-native at F = 66 and F = 35)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

CASES = [
    # (recipe, datapaths compared with exact)
    ("ue5m3", ["ue5m3-native", "probe-matched", "fp32-seq", "sm90-bf16"]),
    ("nvfp4", ["sm100-mxf4nvf4", "fp32-seq"]),
]


def ordered(bits):
    bits = bits.astype(np.int64)
    return np.where(bits & 0x80000000, 0x80000000 - bits, bits)


def compare(c, ref):
    diff = c.astype(np.float64) - ref.astype(np.float64)
    norm = np.linalg.norm(ref.astype(np.float64))
    rel = float(np.linalg.norm(diff) / norm) if norm > 0 else 0.0
    ulp = np.abs(ordered(c.view(np.uint32)) - ordered(ref.view(np.uint32)))
    return rel, int(ulp.max()), float(np.mean(ulp == 0))


def run_gemm(fp4sim, recipe, gemm, datapath, a_path, b_path, out_path, extra=()):
    cmd = [fp4sim, "gemm", "--recipe", recipe, "--gemm", gemm, "--a", a_path, "--b", b_path,
           "--datapath", datapath, "--out", out_path, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(cmd) + " failed: " + r.stderr)
    return np.load(out_path)


def synthetic(fp4sim, seeds=4, m=256, n=256, k=1024, spread=24):
    """Heavy-tailed operands: every 16-block of a row gets magnitude 2^-u, u uniform in [0, spread]
    binades, N(0,1) values inside; quantized under ue5m3 (fprop). Compares the native UE5M3 window
    F = 66 with the same instruction at sm100-mxf4nvf4's F = 35 and with the other datapaths."""
    variants = [("ue5m3-native", ()), ("ue5m3-native", ("--frac-bits", "35")), ("probe-matched", ()),
                ("fp32-seq", ()), ("sm90-bf16", ())]
    def heavy_tailed(rng, rows):
        scale = np.exp2(-rng.uniform(0, spread, size=(rows, k // 16))).repeat(16, axis=1)
        return (rng.standard_normal((rows, k)) * scale).astype(np.float32)

    def cancelling(rng, rows, negate):
        # Per 64-element instruction: sub-blocks 0 and 1 are +x and (A: -x | B: +x), so their products
        # cancel exactly inside the instruction; sub-blocks 2 and 3 are ~2^-U(18,24) smaller.
        out = np.empty((rows, k), np.float32)
        for c in range(0, k, 64):
            x = rng.standard_normal((rows, 16))
            out[:, c:c + 16] = x
            out[:, c + 16:c + 32] = -x if negate else x
            out[:, c + 32:c + 64] = rng.standard_normal((rows, 32)) * np.exp2(-rng.uniform(18, 24, size=(rows, 1)))
        return out

    cases = [(f"block magnitudes 2^-U(0,{spread})", lambda rng: (heavy_tailed(rng, m), heavy_tailed(rng, n))),
             ("cancellation inside each instruction, small sub-blocks 2^-U(18,24)",
              lambda rng: (cancelling(rng, m, True), cancelling(rng, n, False)))]
    with tempfile.TemporaryDirectory() as tmp:
        for title, make in cases:
            results = {}
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                a, b = make(rng)
                a_path, b_path = os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy")
                np.save(a_path, a)
                np.save(b_path, b)
                exact = run_gemm(fp4sim, "ue5m3", "fprop", "exact", a_path, b_path, os.path.join(tmp, "e.npy"))
                for dp, extra in variants:
                    c = run_gemm(fp4sim, "ue5m3", "fprop", dp, a_path, b_path, os.path.join(tmp, "c.npy"), extra)
                    results.setdefault((dp, extra), []).append(compare(c, exact))
            print(f"\nsynthetic: {seeds} GEMMs {m}x{n}x{k}, ue5m3 fprop, {title}")
            print("| datapath | F | mean rel_fro vs exact | max ulp | outputs identical to exact |")
            print("|---|---|---|---|---|")
            for (dp, extra), vals in results.items():
                f = extra[1] if extra else {"ue5m3-native": "66", "probe-matched": "25 (inner)",
                                            "sm90-bf16": "25"}.get(dp, "-")
                print(f"| {dp} | {f} | {np.mean([v[0] for v in vals]):.3g} | {max(v[1] for v in vals)} | "
                      f"{100 * np.mean([v[2] for v in vals]):.2f} % |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    found = [p for p in (os.path.join(root, d, "fp4sim") for d in ("build-setup", "build", "build-dp"))
             if os.access(p, os.X_OK)]
    ap.add_argument("--fp4sim", default=found[0] if found else "fp4sim", help="the fp4sim binary")
    ap.add_argument("--json")
    ap.add_argument("--steps", help="comma-separated steps (default: all captured)")
    ap.add_argument("--synthetic", action="store_true", help="also run the synthetic heavy-tailed comparison")
    args = ap.parse_args()
    if args.trace == "synthetic":
        synthetic(args.fp4sim)
        return
    steps = None if not args.steps else {int(s) for s in args.steps.split(",")}

    rows = []
    with h5py.File(args.trace, "r") as f, tempfile.TemporaryDirectory() as tmp:
        for step_name in sorted(f.keys()):
            group = f[step_name]
            step = int(group.attrs["step"])
            if steps is not None and step not in steps:
                continue
            for layer in sorted(group.keys()):
                lg = group[layer]
                x = np.asarray(lg["x"], dtype=np.float32)
                w = np.asarray(lg["w"], dtype=np.float32)
                dy = np.asarray(lg["dy"], dtype=np.float32)
                gemms = {
                    "fprop": (x, w),
                    "dgrad": (dy, np.ascontiguousarray(w.T)),
                    "wgrad": (np.ascontiguousarray(dy.T), np.ascontiguousarray(x.T)),
                }
                for gemm, (a, b) in gemms.items():
                    a_path, b_path = os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy")
                    np.save(a_path, np.ascontiguousarray(a))
                    np.save(b_path, np.ascontiguousarray(b))
                    f64 = a.astype(np.float64) @ b.astype(np.float64).T
                    f64_norm = np.linalg.norm(f64)
                    for recipe, datapaths in CASES:
                        exact = run_gemm(args.fp4sim, recipe, gemm, "exact", a_path, b_path, os.path.join(tmp, "e.npy"))
                        q_rel = float(np.linalg.norm(exact - f64) / f64_norm) if f64_norm > 0 else 0.0
                        for dp in datapaths:
                            c = run_gemm(args.fp4sim, recipe, gemm, dp, a_path, b_path, os.path.join(tmp, "c.npy"))
                            rel, max_ulp, same = compare(c, exact)
                            rows.append(dict(step=step, layer=layer, gemm=gemm, recipe=recipe, datapath=dp,
                                             m=int(a.shape[0]), n=int(b.shape[0]), k=int(a.shape[1]),
                                             rel_fro=rel, max_ulp=max_ulp, identical=same, q_rel_fro=q_rel))
                print(f"step {step} {layer}: done", file=sys.stderr)

    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)

    # Summary: per (recipe, datapath, gemm) the worst and the median relative error, outputs identical.
    print("| recipe | datapath | GEMM | GEMMs | median rel_fro vs exact | max rel_fro vs exact | max ulp | "
          "outputs identical to exact | median quantization rel_fro (exact vs f64) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for recipe, datapaths in CASES:
        for dp in datapaths:
            for gemm in ("fprop", "dgrad", "wgrad"):
                sel = [r for r in rows if r["recipe"] == recipe and r["datapath"] == dp and r["gemm"] == gemm]
                if not sel:
                    continue
                rel = np.array([r["rel_fro"] for r in sel])
                outputs = sum(r["m"] * r["n"] for r in sel)
                same = sum(r["identical"] * r["m"] * r["n"] for r in sel) / outputs
                print(f"| {recipe} | {dp} | {gemm} | {len(sel)} | {np.median(rel):.3g} | {rel.max():.3g} | "
                      f"{max(r['max_ulp'] for r in sel)} | {100 * same:.4f} % | "
                      f"{np.median([r['q_rel_fro'] for r in sel]):.3g} |")


if __name__ == "__main__":
    main()
