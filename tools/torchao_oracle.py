#!/usr/bin/env python3
"""torchao's MX quantizer (prototype/mx_formats to_mx) against `fp4sim quantize`, codes and scales bit for bit.

    tools/torchao_oracle.py --ao-root tools/.oracles/ao [--binary build/fp4sim] [--seeds 1,2]

--ao-root holds a pytorch/ao source tree (its torchao/ package is imported from there, eager mode on the CPU,
never copied into fp4sim; a COMMIT file beside it, if present, is printed). Needs torch and numpy. Setting up,
from a clone of pytorch/ao at 36027d8:  git -C ao archive --prefix=ao/ HEAD torchao | tar x -C tools/.oracles

NVFP4 tensor (prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize, block 16, on the inputs of
tools/nvfp4_stack_inputs.py, finite, and for one-level a tensor with +-Inf elements): nvfp4-torchao (per_tensor_scale None) and nvfp4-torchao-two-level
(per_tensor_scale = per_tensor_amax_to_scale(max|x|), as NVFP4Tensor's dynamic activation path computes it), each
the fp4sim flags of its profile in NVFP4_PROFILES; --swap FLAG=VALUE changes one (to see the check fail).

Profiles (fp4sim flags <-> torchao): MXFP4 (E2M1 elements), MXFP8 (E4M3 and E5M2) and MXFP6 (E2M3 and E3M2,
mxfp4 with --element-format; FP8 and FP6 codes one a byte), E8M0 scales, block 32, under each
ScaleCalculationMode: --scale-rule floor <-> FLOOR, ceil-exponent <-> CEIL, even <-> EVEN, rceil <-> RCEIL
(presets mxfp4, mxfp8, mxfp8-e5m2 with the rule as an override).
Inputs come from seeded generators: normal data at several magnitudes, blocks whose amax is a random
binary32 bit pattern (every exponent field 0..254, mantissas random or at the EVEN and CEIL boundaries of the
element's mantissa width) over smaller random elements, blocks of the element grid's rounding midpoints and
subnormals under a random power of two, signed zeros, and blocks holding NaN or Inf. Scales are compared for every block;
codes wherever both sides give a finite scale (torchao scales a NaN-scale block's elements by NaN and casts
the NaN bit patterns, fp4sim encodes them unscaled: both are implementation-defined, docs/semantics.md M5,
and such a block decodes to NaN on both sides). Prints one line per profile; exit 1 if anything differs, 2 if
torchao, torch or the binary is missing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvfp4_stack_inputs import nvfp4_infinities, nvfp4_inputs, pack_nibbles_unpacked  # noqa: E402

ROWS, COLS, BLOCK = 64, 256, 32
MODES = {"floor": "FLOOR", "ceil-exponent": "CEIL", "even": "EVEN", "rceil": "RCEIL"}
# fp4sim recipe (a preset, or mxfp4 with another element format) <-> torchao element dtype (a torch dtype's
# name, or torchao's FP6 string), its mantissa bits and largest finite value.
ELEMENTS = {"mxfp4": ("float4_e2m1fn_x2", 1, 6.0), "mxfp8": ("float8_e4m3fn", 3, 448.0),
            "mxfp8-e5m2": ("float8_e5m2", 2, 57344.0), "mxfp4:e2m3": ("fp6_e2m3", 3, 7.5),
            "mxfp4:e3m2": ("fp6_e3m2", 2, 28.0)}

# docs/recipes.md "Stack profiles": finfo(float8_e4m3fn).tiny = 2^-6 is torchao's lower scale clamp.
TORCHAO_NVFP4 = ["--recipe", "nvfp4-norht", "--scale-order", "torchao", "--scale-min", "0.015625", "--one-d"]
NVFP4_PROFILES = {"nvfp4-torchao": TORCHAO_NVFP4 + ["--tensor-scale", "none"],
                  "nvfp4-torchao-two-level": TORCHAO_NVFP4}


def load_torchao(ao_root: str):
    if not os.path.isfile(os.path.join(ao_root, "torchao", "prototype", "mx_formats", "mx_tensor.py")):
        print(f"torchao_oracle: no torchao package under --ao-root {ao_root!r}", file=sys.stderr)
        sys.exit(2)
    os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")  # the Python reference needs no kernels
    sys.path.insert(0, os.path.abspath(ao_root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats import mx_tensor, nvfp4_tensor
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
    return mx_tensor, ScaleCalculationMode, nvfp4_tensor


def element_grid(mbits: int, max_pos: float):
    """Every non-negative finite value of a float format with mbits mantissa bits and largest value max_pos
    (bias chosen so that the top binade holds max_pos; subnormals included), from integer stepping."""
    top = int(np.floor(np.log2(max_pos)))
    values = {0.0}
    for e in range(top, top - 40, -1):
        for m in range(1 << mbits):
            v = (1 + m / (1 << mbits)) * 2.0 ** e
            if v <= max_pos:
                values.add(v)
    return np.array(sorted(values))


def inputs(seed: int, mbits: int = 1, max_pos: float = 6.0):
    """Seeded tensors [ROWS, COLS] float32: name -> array."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    normal = (rng.standard_normal((ROWS, COLS)) * 10.0 ** rng.integers(-6, 7, (ROWS, 1))).astype(f32)
    # Blocks whose amax is a chosen bit pattern: exponent field anywhere in 0..254, mantissa random or at the
    # boundaries EVEN and CEIL decide on (E2M1's one mantissa bit: 0x200000 is half an ulp).
    blocks = ROWS * COLS // BLOCK
    field = rng.integers(0, 255, blocks).astype(np.uint32)
    half = 1 << (22 - mbits)  # half an element ulp in amax's binary32 mantissa
    edges = np.array([0, 1, half - 1, half, half + 1, 2 * half - 1, 2 * half, 3 * half, 0x7FFFFF], np.uint32)
    mant = np.where(rng.random(blocks) < 0.5, rng.choice(edges, blocks), rng.integers(0, 1 << 23, blocks))
    amax = ((field << 23) | mant.astype(np.uint32)).view(f32)
    rest = rng.uniform(-1, 1, (blocks, BLOCK)).astype(f32) * amax[:, None]
    where = rng.integers(0, BLOCK, blocks)
    rest[np.arange(blocks), where] = amax * rng.choice([-1, 1], blocks).astype(f32)
    patterned = rest.reshape(ROWS, COLS).astype(f32)
    # The element grid's values and the midpoints between neighbours (RNE ties), a value just either side of
    # each midpoint, and the element format's subnormals, under a random power of two per block that leaves
    # the block's amax at max_pos (so the scale is 2^0 relative to it under every rule but CEIL's).
    grid = element_grid(mbits, max_pos)
    mid = (grid[:-1] + grid[1:]) / 2
    pool = np.concatenate([grid, mid, np.nextafter(mid.astype(f32), f32(0)), np.nextafter(mid.astype(f32), f32(np.inf))])
    pool = pool[pool <= max_pos]
    picks = rng.choice(pool, (blocks, BLOCK)) * rng.choice([-1, 1], (blocks, BLOCK))
    picks[np.arange(blocks), where] = max_pos
    midpoints = (picks * np.exp2(rng.integers(-120, 100, (blocks, 1)) - np.floor(np.log2(max_pos)))).astype(f32)
    midpoints = midpoints.reshape(ROWS, COLS)
    special = normal.copy()
    special[0, :BLOCK] = 0.0
    special[1, :BLOCK] = -0.0
    special[2, 5] = np.nan
    special[3, 40] = np.inf
    special[4, 70] = -np.inf
    special[5, :BLOCK] = np.float32(2.97747071e38)  # EVEN: the rounded amax overflows (issue 23)
    return {"normal": normal, "patterned": patterned, "midpoints": midpoints, "special": special}


def fp4sim_run(binary, x, flags):
    with tempfile.TemporaryDirectory() as d:
        xin, codes, scales = (os.path.join(d, n) for n in ("x.npy", "c.npy", "s.npy"))
        np.save(xin, x)
        p = subprocess.run([binary, "quantize", "--in", xin, "--codes", codes, "--scales", scales, *flags],
                           capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if p.returncode != 0:
            raise RuntimeError(f"fp4sim quantize {' '.join(flags)}: {p.stderr.strip()}")
        return np.load(codes), np.load(scales)


def fp4sim_quantize(binary, x, recipe, rule):
    preset, _, element = recipe.partition(":")
    return fp4sim_run(binary, x, ["--recipe", preset, "--role", "activation", "--scale-rule", rule,
                                  *(["--element-format", element] if element else [])])


def swapped(flags, swaps):
    """flags with each --FLAG's value replaced as the FLAG=VALUE swaps say."""
    out = list(flags)
    for swap in swaps:
        flag, _, value = swap.partition("=")
        out[out.index("--" + flag) + 1] = value
    return out


def compare_nvfp4(binary, nvfp4_tensor, seeds, swaps):
    """The NVFP4 profiles against nvfp4_quantize; returns the number of differing codes and scales."""
    import torch

    total_bad = 0
    for name, flags in NVFP4_PROFILES.items():
        elements = blocks = bad_codes = bad_scales = 0
        for seed in seeds:
            tensors = list(nvfp4_inputs(seed).values())
            if not name.endswith("two-level"):
                tensors.append(nvfp4_infinities(seed))  # one-level: Inf saturates the scale; docs/semantics.md §4
            for x in tensors:
                t = torch.from_numpy(x)
                per_tensor = (nvfp4_tensor.per_tensor_amax_to_scale(torch.max(torch.abs(t)))
                              if name.endswith("two-level") else None)
                scale, data = nvfp4_tensor.nvfp4_quantize(t, 16, per_tensor)
                codes, scales = fp4sim_run(binary, x, swapped(flags, swaps))
                bad_codes += int(np.count_nonzero(pack_nibbles_unpacked(codes) !=
                                                  pack_nibbles_unpacked(data.view(torch.uint8).numpy())))
                bad_scales += int(np.count_nonzero(scales != scale.view(torch.uint8).numpy()))
                elements += x.size
                blocks += scales.size
        total_bad += bad_codes + bad_scales
        print(f"{name:23s} elements {elements:7d} blocks {blocks:5d} differing codes {bad_codes} scales {bad_scales}")
    return total_bad


def unpacked(codes, packed_fp4):
    """One code a byte: E2M1 codes are two to a byte, element 2j in the low nibble (both sides); FP8's are bytes."""
    if not packed_fp4:
        return codes
    return np.stack([codes & 15, codes >> 4], axis=-1).reshape(codes.shape[0], -1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ao-root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".oracles", "ao"))
    ap.add_argument("--binary", default=os.environ.get("FP4SIM_BINARY", "build/fp4sim"))
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--presets", default=",".join(ELEMENTS),
                    help="element families to check (default: all; mxfp4:e2m3 is mxfp4 --element-format e2m3)")
    ap.add_argument("--rule", action="append", default=[], metavar="RULE=MODE",
                    help="pair fp4sim's RULE with torchao's MODE instead (e.g. ceil=CEIL, to see the check fail)")
    ap.add_argument("--swap", action="append", default=[], metavar="FLAG=VALUE",
                    help="give an NVFP4 profile's flag another value (e.g. --swap scale-order=te)")
    args = ap.parse_args(argv)
    modes = dict(MODES)
    for pair in args.rule:
        rule, mode = pair.split("=")
        modes = {rule if m == mode else r: m for r, m in modes.items()}
    try:
        import torch
    except ImportError:
        print("torchao_oracle: torch is not importable", file=sys.stderr)
        return 2
    if not os.access(args.binary, os.X_OK):
        print(f"torchao_oracle: no fp4sim binary at {args.binary}", file=sys.stderr)
        return 2
    mx_tensor, Mode, nvfp4_tensor = load_torchao(args.ao_root)
    commit = os.path.join(args.ao_root, "COMMIT")
    print(f"torchao {open(commit).read().strip() if os.path.isfile(commit) else '(commit unknown)'}, "
          f"torch {torch.__version__}")
    total_bad = 0
    for preset in args.presets.split(","):
        dtype_name, mbits, max_pos = ELEMENTS[preset]
        elem_dtype = getattr(torch, dtype_name, dtype_name)  # FP6: torchao names it by a string
        packed_fp4 = dtype_name == "float4_e2m1fn_x2"
        for rule, mode in modes.items():
            elements = blocks = nan_blocks = bad_codes = bad_scales = 0
            for seed in (int(s) for s in args.seeds.split(",")):
                for x in inputs(seed, mbits, max_pos).values():
                    scale, data = mx_tensor.to_mx(torch.from_numpy(x), elem_dtype, BLOCK, getattr(Mode, mode))
                    want_scales = scale.view(torch.uint8).numpy()
                    want_codes = unpacked(data.view(torch.uint8).numpy(), packed_fp4)
                    codes, scales = fp4sim_quantize(args.binary, x, preset, rule)
                    codes = unpacked(codes, packed_fp4)
                    bad_scales += int(np.count_nonzero(scales != want_scales))
                    finite = np.repeat((scales != 0xFF) & (want_scales != 0xFF), BLOCK, axis=1)
                    bad_codes += int(np.count_nonzero((codes != want_codes) & finite))
                    elements += x.size
                    blocks += scales.size
                    nan_blocks += int(np.count_nonzero(want_scales == 0xFF))
            total_bad += bad_codes + bad_scales
            print(f"{preset:10s} {mode:6s} (--scale-rule {rule:13s}) elements {elements:7d} blocks {blocks:5d} "
                  f"(NaN-scale {nan_blocks}) differing codes {bad_codes} scales {bad_scales}")
    total_bad += compare_nvfp4(args.binary, nvfp4_tensor, [int(s) for s in args.seeds.split(",")], args.swap)
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
