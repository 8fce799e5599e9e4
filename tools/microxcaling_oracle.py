#!/usr/bin/env python3
"""microxcaling's MX quantizer (mx/mx_ops.py _quantize_mx) against `fp4sim quantize`, codes and scales bit for bit.

    tools/microxcaling_oracle.py [--mx-root tools/.oracles/microxcaling] [--binary build/fp4sim] [--seeds 1,2]

--mx-root holds microsoft/microxcaling's mx/ package (imported from there, the pure-PyTorch path on the CPU:
custom_cuda=False; never copied into fp4sim; a COMMIT file beside it, if present, is printed). Needs torch and
numpy. Setting up, from a clone of microsoft/microxcaling at 7bc4195:
    git -C microxcaling archive --prefix=microxcaling/ HEAD mx | tar x -C tools/.oracles

_quantize_mx returns dequantized values, not codes. The scale is the reference's own shared exponent
(mx_ops._shared_exponents on the same blocks, minus the element's emax and clamped to [-127, 127] as
_quantize_mx does; NaN -> 0xFF); the codes are the E2M1 codes of the output divided by that power of two (sign
of zero kept), and every such quotient must lie on the E2M1 grid. Profiles: MXFP4 (fp4_e2m1, scale_bits 8,
shared_exp_method "max", mx_flush_fp32_subnorms False as in MxSpecs' defaults), block 32 and 16, under each
rounding "nearest", "even", "floor".
Inputs come from seeded generators as in tools/torchao_oracle.py: normal data at several magnitudes, blocks
whose amax is a random binary32 bit pattern (every exponent field, mantissas random or at the top of the
binade, where the float log2 rounds up to the next power of two), the E2M1 grid's values and midpoints and
their binary32 neighbours under a random power of two, FP32 subnormals, signed zeros, and blocks holding NaN
or Inf. Scales are compared for every block, codes wherever both sides give a finite scale. Prints one line
per profile; exit 1 if anything differs, 2 if the reference, torch or the binary is missing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROWS, COLS = 64, 256
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
# The profiles mxfp4-microxcaling[-even|-floor] (src/verify/profiles.cpp): mxfp4 with these overrides.
MICROXCALING = {"recipe": "mxfp4", "scale-rule": "float-log2", "element-specials": "microxcaling"}
ROUNDINGS = {"nearest": "rna", "even": "rne", "floor": "rtz"}  # microxcaling round -> fp4sim --rounding
BLOCKS = (32, 16)


def load_microxcaling(mx_root: str):
    if not os.path.isfile(os.path.join(mx_root, "mx", "mx_ops.py")):
        print(f"microxcaling_oracle: no mx package under --mx-root {mx_root!r}", file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, os.path.abspath(mx_root))
    from mx import formats, mx_ops
    return mx_ops, formats


def inputs(seed: int, block: int):
    """Seeded tensors [ROWS, COLS] float32: name -> array."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    normal = (rng.standard_normal((ROWS, COLS)) * 10.0 ** rng.integers(-6, 7, (ROWS, 1))).astype(f32)
    blocks = ROWS * COLS // block
    # amax bit patterns: any exponent field (0 = FP32 subnormal), mantissa random or among the top 64 of the
    # binade (just below a power of two, where the float log2 rounds up) or the bottom few.
    field = rng.integers(0, 255, blocks).astype(np.uint32)
    top = rng.integers(0x7FFFFF - 63, 0x800000, blocks)
    mant = np.where(rng.random(blocks) < 0.5, top, np.where(rng.random(blocks) < 0.2, rng.integers(0, 4, blocks),
                                                            rng.integers(0, 1 << 23, blocks)))
    amax = ((field << 23) | mant.astype(np.uint32)).view(f32)
    rest = rng.uniform(-1, 1, (blocks, block)).astype(f32) * amax[:, None]
    where = rng.integers(0, block, blocks)
    rest[np.arange(blocks), where] = amax * rng.choice([-1, 1], blocks).astype(f32)
    patterned = rest.reshape(ROWS, COLS)
    # E2M1 values, midpoints and the binary32 values either side of each, under 2^k with the amax at 6 * 2^k.
    mid = (E2M1[:-1] + E2M1[1:]) / 2
    pool = np.concatenate([E2M1, mid, np.nextafter(mid.astype(f32), f32(0)), np.nextafter(mid.astype(f32), f32(9)),
                           np.nextafter(E2M1[1:].astype(f32), f32(0))])
    picks = rng.choice(pool, (blocks, block)) * rng.choice([-1, 1], (blocks, block))
    picks[np.arange(blocks), where] = 6.0
    midpoints = (picks * np.exp2(rng.integers(-124, 126, (blocks, 1)) - 2.0)).astype(f32).reshape(ROWS, COLS)
    special = normal.copy()
    special[0, :block] = 0.0
    special[1, :block] = -0.0
    special[2, 5] = np.nan
    special[3, 40] = np.inf
    special[4, 70] = -np.inf
    special[5, :block] = (rng.integers(1, 1 << 23, block).astype(np.uint32)).view(f32)  # FP32 subnormals
    special[6, :block] = np.float32(3.4028235e38)
    return {"normal": normal, "patterned": patterned, "midpoints": midpoints, "special": special}


def reference(mx_ops, formats, x, rnd, block):
    """microxcaling's output, and its scale codes and element codes [ROWS, COLS] (0xFF scale: codes unset)."""
    import torch
    fmt = formats.ElemFormat.fp4_e2m1
    ebits, mbits, emax, max_norm, _ = formats._get_format_params(fmt)
    a = torch.from_numpy(x)
    out = mx_ops._quantize_mx(a, 8, fmt, shared_exp_method="max", axes=[-1], block_size=block, round=rnd,
                              flush_fp32_subnorms=False, custom_cuda=False).numpy()
    blocked, axes, _, _ = mx_ops._reshape_to_blocks(a, [-1], block)
    shared = mx_ops._shared_exponents(blocked, method="max", axes=[x + 1 for x in axes], ebits=0) - emax
    shared = shared.reshape(ROWS, COLS // block).numpy()
    shared = np.where(shared > 127, np.nan, np.maximum(shared, -127))
    nan = np.isnan(shared)
    scales = np.where(nan, 255, np.nan_to_num(shared) + 127).astype(np.uint8)
    exponent = np.repeat(np.nan_to_num(shared), block, axis=1)
    q = out.astype(np.float64) / np.exp2(exponent)
    # A float log2 that rounds up to 128 gives the scale 2^126 and an element that rounds to 4 the product
    # 2^128: the reference outputs +-Inf for a finite input. 4 is the only E2M1 value it can be (the scaled
    # amax is below 4 there), the code fp4sim writes and dequantizes to the same +-Inf.
    overflow = np.isinf(q) & np.isfinite(x) & (exponent == 126)
    q = np.where(overflow, np.sign(q) * 4.0, q)
    mag = np.abs(q)
    codes = np.searchsorted(E2M1, mag).astype(np.uint8) | (np.signbit(q).astype(np.uint8) << 3)
    finite = ~np.repeat(nan, block, axis=1)
    off_grid = finite & ~np.isin(mag, E2M1)
    if off_grid.any():
        raise RuntimeError(f"microxcaling output off the E2M1 grid at {np.argwhere(off_grid)[:3].tolist()}")
    return codes, scales


def fp4sim_quantize(binary, x, settings):
    flags = [a for key, value in settings.items() for a in (f"--{key}", value)]
    with tempfile.TemporaryDirectory() as d:
        xin, codes, scales = (os.path.join(d, n) for n in ("x.npy", "c.npy", "s.npy"))
        np.save(xin, x)
        p = subprocess.run([binary, "quantize", "--in", xin, "--codes", codes, "--scales", scales, "--role",
                            "activation", *flags], capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        if p.returncode != 0:
            raise RuntimeError(f"fp4sim quantize {' '.join(flags)}: {p.stderr.strip()}")
        c = np.load(codes)
        return np.stack([c & 15, c >> 4], axis=-1).reshape(c.shape[0], -1), np.load(scales)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mx-root",
                    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".oracles", "microxcaling"))
    ap.add_argument("--binary", default=os.environ.get("FP4SIM_BINARY", "build/fp4sim"))
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--rounds", default=",".join(ROUNDINGS), help="microxcaling rounding modes to check")
    ap.add_argument("--blocks", default="32,16")
    ap.add_argument("--swap", action="append", default=[], metavar="FLAG=VALUE",
                    help="an fp4sim flag's value instead of the profile's (e.g. scale-rule=floor, to see the check fail)")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("microxcaling_oracle: torch is not importable", file=sys.stderr)
        return 2
    if not os.access(args.binary, os.X_OK):
        print(f"microxcaling_oracle: no fp4sim binary at {args.binary}", file=sys.stderr)
        return 2
    mx_ops, formats = load_microxcaling(args.mx_root)
    commit = os.path.join(args.mx_root, "COMMIT")
    print(f"microxcaling {open(commit).read().strip()[:7] if os.path.isfile(commit) else '(commit unknown)'}, "
          f"torch {torch.__version__}, cpu {torch.backends.cpu.get_cpu_capability()}")
    total_bad = 0
    for rnd, block in ((r, int(b)) for r in args.rounds.split(",") for b in args.blocks.split(",")):
        settings = dict(MICROXCALING, rounding=ROUNDINGS[rnd], block=str(block))
        settings.update(pair.split("=", 1) for pair in args.swap)
        name = "mxfp4-microxcaling" + ("" if rnd == "nearest" else "-" + rnd)
        elements = blocks = nan_blocks = bad_codes = bad_scales = 0
        for seed in (int(s) for s in args.seeds.split(",")):
            for x in inputs(seed, block).values():
                want_codes, want_scales = reference(mx_ops, formats, x, rnd, block)
                codes, scales = fp4sim_quantize(args.binary, x, settings)
                bad_scales += int(np.count_nonzero(scales != want_scales))
                finite = np.repeat((scales != 0xFF) & (want_scales != 0xFF), block, axis=1)
                bad_codes += int(np.count_nonzero((codes != want_codes) & finite))
                elements += x.size
                blocks += scales.size
                nan_blocks += int(np.count_nonzero(want_scales == 0xFF))
        total_bad += bad_codes + bad_scales
        print(f"{name:25s} round={rnd:7s} block {block:2d} elements {elements:7d} blocks {blocks:5d} "
              f"(NaN-scale {nan_blocks}) differing codes {bad_codes} scales {bad_scales}")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
