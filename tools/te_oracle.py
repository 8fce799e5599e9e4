#!/usr/bin/env python3
"""TransformerEngine's NVFP4 reference quantizer against `fp4sim quantize`, codes and scales bit for bit.

    tools/te_oracle.py --te-root tools/.oracles/TransformerEngine [--binary build/fp4sim] [--seeds 1,2,3]

--te-root holds a TransformerEngine source tree (only transformer_engine/pytorch/custom_recipes/ is read,
never copied into fp4sim; a COMMIT file beside it, if present, is printed). Its reference_nvfp4.py
(NVFP4QuantizerRef._quantize, rowwise) runs on the CPU with torch, with its sibling files reference_utils.py and
gemm.py; the modules they import from TE's compiled package (quantized_tensor's Quantizer base class,
tensor.utils) are replaced by small stand-ins, of which the rowwise path reads only the usage flags. Needs
torch and numpy (no h5py: fp4sim writes .npy). Setting up, from a clone of NVIDIA/TransformerEngine at d0067d0:
    git -C TE archive --prefix=TransformerEngine/ HEAD transformer_engine/pytorch/custom_recipes | tar x -C tools/.oracles
Every fp4sim run takes --element-specials te-python: the reference's cast_to_fp4x2 gives an exact -0 code 0.

Profiles (fp4sim flags <-> TE constructor arguments):
  nvfp4 1-D / 2-D              nvfp4-norht, role activation / weight    quant_tile_shape (1,16) / (16,16)
  row-scaled                   + --amax-scope row                       row_scaled_nvfp4=True
  4over6 MAE|MSE x 256|448     + --block-choice 4over6-mae|mse --target nvfp4_use_4over6, err_mode, e4m3_max
     x 1-D|2-D x input|fast-math  --four-over-six-error fast-math       nvfp4_4over6_err_use_fast_math
  NaN rule                     + --nan-amax propagate (inputs with NaN) (torch.amax propagates NaN)
  RHT, BF16 | float32 input    nvfp4 --rht on x^T [--rht-precision   columnwise, with_rht=True, input dtype
     x TE's | no | custom signs  float32] [--rht-signs S]            with_random_sign_mask / get_wgrad_sign_vector
The RHT profiles quantize the transposed tensor (TE's columnwise output, the wgrad operand) and give TE a BF16
tensor where the profile says BF16. TE's reference multiplies by the 16x16 matrix with torch's CPU GEMM; on
float32 its sum order is fp4sim's (ascending), on BF16 oneDNN's may differ, so a block whose transformed value
differs from the ascending-order sum rounded to BF16 (computed here) is counted apart ("order") and not failed.
Inputs come from seeded generators (normal at several magnitudes, log-uniform over the binary32 range, random
finite bit patterns, E2M1 grid points and midpoints nudged by one ulp, Inf, NaN), fp32 and bf16-valued; the
profile never sees them first. Prints one line per profile; exit 1 if any code or scale differs, 2 if TE,
torch or the binary is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import types

import numpy as np

try:
    import torch
except ImportError:
    print("te_oracle: torch is not importable", file=sys.stderr)
    sys.exit(2)

ROWS, COLS = 64, 128


def load_reference(te_root: str):
    """reference_nvfp4 from TE's tree, its compiled-extension imports replaced by stand-ins."""
    recipes = os.path.join(te_root, "transformer_engine", "pytorch", "custom_recipes")
    path = os.path.join(recipes, "reference_nvfp4.py")
    if not os.path.isfile(path):
        print(f"te_oracle: no {path}", file=sys.stderr)
        sys.exit(2)

    class Quantizer:  # the rowwise/columnwise flags are all the reference reads from its base
        def __init__(self, *, rowwise=True, columnwise=True):
            self.rowwise_usage = rowwise
            self.columnwise_usage = columnwise

    package = "transformer_engine.pytorch"
    stand_ins = {name: types.ModuleType(name) for name in (
        "transformer_engine", package, f"{package}.custom_recipes", f"{package}.quantized_tensor",
        f"{package}.tensor", f"{package}.tensor.utils")}
    stand_ins[f"{package}.quantized_tensor"].Quantizer = Quantizer
    stand_ins[f"{package}.quantized_tensor"].QuantizedTensorStorage = object
    stand_ins[f"{package}.tensor.utils"].is_custom = lambda *_: True
    sys.modules.update(stand_ins)
    loaded = {}
    for name in ("reference_utils", "gemm"):  # TE's own files, plain Python over torch
        spec = importlib.util.spec_from_file_location(f"{package}.custom_recipes.{name}",
                                                      os.path.join(recipes, f"{name}.py"))
        loaded[name] = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = loaded[name]
        spec.loader.exec_module(loaded[name])
        setattr(stand_ins[f"{package}.custom_recipes"], name, loaded[name])
    utils = loaded["reference_utils"]
    spec = importlib.util.spec_from_file_location("te_reference_nvfp4", path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    return ref, utils


def inputs(seed: int):
    """Seeded tensors [ROWS, COLS] float32: name -> array."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    normal = (rng.standard_normal((ROWS, COLS)) * 10.0 ** rng.integers(-4, 5, (ROWS, 1))).astype(f32)
    wide = (rng.choice([-1, 1], (ROWS, COLS)) * np.exp2(rng.uniform(-135, 127.9, (ROWS, COLS)))).astype(f32)
    bits = rng.integers(0, 2**32, (ROWS, COLS), dtype=np.uint64).astype(np.uint32)
    bits[(bits & 0x7F800000) == 0x7F800000] &= 0xBF7FFFFF  # finite patterns only
    bits = bits.view(f32)
    # E2M1 grid points and midpoints at a power of two per block, each nudged by -1, 0 or +1 ulp.
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5], f32)
    block_scale = np.exp2(rng.integers(-8, 8, (ROWS, COLS // 16))).repeat(16, 1)
    g = (rng.choice(grid, (ROWS, COLS)) * rng.choice([-1, 1], (ROWS, COLS)) * block_scale).astype(f32)
    g = g.view(np.uint32).astype(np.int64) + rng.integers(-1, 2, g.shape) * (g != 0)
    g = g.astype(np.uint32).view(f32)
    bf16 = torch.from_numpy(normal * f32(3.7)).to(torch.bfloat16).to(torch.float32).numpy()
    outlier = normal.copy()
    outlier[rng.integers(ROWS), rng.integers(COLS)] = f32(3e38)
    with_inf = normal.copy()
    with_inf[rng.integers(ROWS, size=3), rng.integers(COLS, size=3)] = np.array([np.inf, -np.inf, np.inf], f32)
    return {"normal": normal, "wide": wide, "bits": bits, "grid": g, "bf16": bf16, "outlier": outlier,
            "inf": with_inf}


def with_nan(x, seed, rows_with_nan):
    rng = np.random.default_rng(seed)
    y = x.copy()
    for r in rng.choice(ROWS, rows_with_nan, replace=False):
        y[r, rng.integers(COLS)] = np.nan
    return y


TE_SIGNS = "+++-+------+-+--"  # get_wgrad_sign_vector() at d0067d0


def te_rht_quantize(ref, utils, x, *, signs, bf16):
    """TE's columnwise (transposed, RHT) codes and scales of x; signs None: with_random_sign_mask=False."""
    q = ref.NVFP4QuantizerRef(dtype=utils.Fp4Formats.E2M1, rowwise=False, columnwise=True, pow_2_scales=False,
                              quant_tile_shape=(1, 16), with_rht=True, with_random_sign_mask=signs is not None)
    te_signs = ref.get_wgrad_sign_vector
    ref.get_wgrad_sign_vector = lambda: torch.tensor([1.0 if c == "+" else -1.0 for c in signs or TE_SIGNS])
    try:
        t = torch.from_numpy(x)
        if bf16:
            t = t.to(torch.bfloat16)
        _, _, qx, sx, *_ = q._quantize(t)
        transformed = q._apply_rht(t.t().contiguous()).to(torch.float32).numpy()
    finally:
        ref.get_wgrad_sign_vector = te_signs
    return qx.numpy(), sx.contiguous().view(torch.uint8).numpy(), transformed


def ascending_rht_bf16(xt, signs):
    """BF16_RN of the transform's binary32 sum in ascending order, rows of xt in groups of 16 (to tell oneDNN's
    BF16 GEMM order apart from a modelling difference)."""
    s = np.array([1 if c == "+" else -1 for c in signs or "+" * 16], np.float32)
    h = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)], np.float32)
    m = s[:, None] * h * np.float32(0.25)
    groups = xt.reshape(-1, 16)
    acc = np.zeros(groups.shape, np.float32)
    for i in range(16):
        acc = (acc + groups[:, i:i + 1] * m[i]).astype(np.float32)
    return torch.from_numpy(acc).to(torch.bfloat16).to(torch.float32).numpy().reshape(xt.shape)


def te_quantize(ref, utils, x, *, two_d=False, row=False, four_over_six=None, bound=448, fast_math=False):
    q = ref.NVFP4QuantizerRef(dtype=utils.Fp4Formats.E2M1, rowwise=True, columnwise=False, pow_2_scales=False,
                              quant_tile_shape=(16, 16) if two_d else (1, 16), row_scaled_nvfp4=row,
                              nvfp4_use_4over6=four_over_six is not None, nvfp4_e4m3_max=bound,
                              nvfp4_4over6_err_mode=four_over_six or "MAE",
                              nvfp4_4over6_err_use_fast_math=fast_math)
    qx, sx, *_ = q._quantize(torch.from_numpy(x))
    scales = sx.contiguous().view(torch.uint8).numpy()
    return qx.numpy(), scales[::16] if two_d else scales


def fp4sim_quantize(binary, x, flags):
    with tempfile.TemporaryDirectory() as d:
        xin, codes, scales = (os.path.join(d, n) for n in ("x.npy", "c.npy", "s.npy"))
        np.save(xin, x)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        p = subprocess.run([binary, "quantize", "--in", xin, "--codes", codes, "--scales", scales, *flags],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"fp4sim quantize {' '.join(flags)}: {p.stderr.strip()}")
        return np.load(codes), np.load(scales)


def profiles():
    """(name, fp4sim flags, TE keyword arguments, needs NaN inputs). Every fp4sim run adds --element-specials
    te-python: the reference's cast_to_fp4x2 gives an exact -0 (and NaN) code 0, where the kernels keep -0."""
    out = []
    for two_d in (False, True):
        role = ["--role", "weight" if two_d else "activation"]
        dim = "2-D" if two_d else "1-D"
        out.append((f"nvfp4 {dim}", ["--recipe", "nvfp4-norht", *role], dict(two_d=two_d), False))
        out.append((f"nvfp4 {dim} nan-amax propagate", ["--recipe", "nvfp4-norht", *role, "--nan-amax", "propagate"],
                    dict(two_d=two_d), True))
        for mode in ("MAE", "MSE"):
            for bound in (256, 448):
                for fast in (False, True):
                    flags = ["--recipe", "nvfp4-norht", *role, "--block-choice", f"4over6-{mode.lower()}",
                             "--target", str(bound)]
                    if fast:
                        flags += ["--four-over-six-error", "fast-math"]
                    out.append((f"4over6 {mode} {bound} {dim}{' fast-math' if fast else ''}", flags,
                                dict(two_d=two_d, four_over_six=mode, bound=bound, fast_math=fast), False))
    out.append(("row-scaled", ["--recipe", "nvfp4-norht", "--role", "activation", "--amax-scope", "row"],
                dict(row=True), False))
    out.append(("row-scaled nan-amax propagate", ["--recipe", "nvfp4-norht", "--role", "activation", "--amax-scope",
                                                   "row", "--nan-amax", "propagate"], dict(row=True), True))
    for mode in ("MAE", "MSE"):
        for fast in (False, True):
            flags = ["--recipe", "nvfp4-norht", "--role", "activation", "--amax-scope", "row", "--block-choice",
                     f"4over6-{mode.lower()}", "--target", "256"]
            if fast:
                flags += ["--four-over-six-error", "fast-math"]
            out.append((f"row-scaled 4over6 {mode} 256{' fast-math' if fast else ''}", flags,
                        dict(row=True, four_over_six=mode, bound=256, fast_math=fast), False))
    for bf16 in (True, False):
        for label, signs in (("TE's signs", TE_SIGNS), ("no signs", None), ("custom signs", "-+-++--+--+++-+-")):
            flags = ["--recipe", "nvfp4", "--role", "activation", "--rht", "--rht-signs", signs or "+" * 16]
            if not bf16:
                flags += ["--rht-precision", "float32"]
            out.append((f"rht {'bf16' if bf16 else 'float32'} input {label}", flags, dict(rht=signs, bf16=bf16),
                        False))
    out.append(("rht float32 input nan-amax propagate", ["--recipe", "nvfp4", "--role", "activation", "--rht",
                                                         "--rht-precision", "float32", "--nan-amax", "propagate"],
                dict(rht=TE_SIGNS, bf16=False), True))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--te-root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".oracles",
                                                      "TransformerEngine"))
    ap.add_argument("--binary", default=os.environ.get("FP4SIM_BINARY", "build/fp4sim"))
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--only", default="", help="run the profiles whose name contains this text")
    ap.add_argument("--fp4sim-extra", default="", help="flags appended to every fp4sim run (to see the check fail)")
    args = ap.parse_args(argv)
    if not os.access(args.binary, os.X_OK):
        print(f"te_oracle: no fp4sim binary at {args.binary}", file=sys.stderr)
        return 2
    ref, utils = load_reference(args.te_root)
    commit = os.path.join(args.te_root, "COMMIT")
    print(f"TransformerEngine {open(commit).read().strip() if os.path.isfile(commit) else '(commit unknown)'}")
    seeds = [int(s) for s in args.seeds.split(",")]
    total_bad = 0
    for name, flags, kw, nan in profiles():
        if args.only not in name:
            continue
        elements = blocks = bad_codes = bad_scales = nan_scales = order_elements = order_blocks = 0
        for seed in seeds:
            for kind, x in inputs(seed).items():
                if nan:
                    x = with_nan(x, seed, 1 if kind != "normal" else 5)
                order = None
                if "rht" in kw:
                    want_codes, want_scales, transformed = te_rht_quantize(ref, utils, x, signs=kw["rht"],
                                                                           bf16=kw["bf16"])
                    x = np.ascontiguousarray(x.T)
                    if kw["bf16"]:
                        x = torch.from_numpy(x).to(torch.bfloat16).to(torch.float32).numpy()
                        ours = ascending_rht_bf16(x, kw["rht"]).view(np.uint32)
                        differs = (ours != transformed.view(np.uint32)) & ~(np.isnan(transformed) & np.isnan(
                            ours.view(np.float32)))
                        order = differs.reshape(differs.shape[0], -1, 16).any(axis=2)  # per block
                        order_elements += int(np.count_nonzero(differs))
                else:
                    want_codes, want_scales = te_quantize(ref, utils, x, **kw)
                codes, scales = fp4sim_quantize(args.binary, x, flags + ["--element-specials", "te-python"] +
                                                args.fp4sim_extra.split())
                if order is not None:  # blocks the GEMM order changed: counted apart
                    order_blocks += int(np.count_nonzero(order))
                    keep = ~order.repeat(8, axis=1)
                    codes, want_codes = codes[keep], want_codes[keep]
                    scales, want_scales = scales[~order], want_scales[~order]
                # Codes as nibbles: two per byte, both sides low nibble first.
                bad_codes += int(np.count_nonzero((codes & 15) != (want_codes & 15)) +
                                 np.count_nonzero((codes >> 4) != (want_codes >> 4)))
                # A NaN scale compares as NaN: E4M3 has two (0x7F, 0xFF) and which one torch's cast gives
                # follows the sign of the NaN the host's arithmetic made (0xFF on x86 CPUs); fp4sim's unsigned
                # scale format has one, 0x7F.
                nan_scale = ((scales & 0x7F) == 0x7F) & ((want_scales & 0x7F) == 0x7F)
                bad_scales += int(np.count_nonzero((scales != want_scales) & ~nan_scale))
                nan_scales += int(np.count_nonzero(nan_scale))
                elements += x.size
                blocks += scales.size + (0 if order is None else int(np.count_nonzero(order)))
        total_bad += bad_codes + bad_scales
        apart = f" (order: {order_elements} elements in {order_blocks} blocks set apart)" if "rht" in kw else ""
        print(f"{name:36s} elements {elements:6d} blocks {blocks:5d} (NaN-scale {nan_scales:4d}) "
              f"differing codes {bad_codes} scales {bad_scales}{apart}")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
