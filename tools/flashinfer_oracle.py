#!/usr/bin/env python3
"""FlashInfer's NVFP4 quantizer contract (its tests' torch references) against `fp4sim quantize`, bit for bit.

    tools/flashinfer_oracle.py [--fi-root tools/.oracles/flashinfer] [--binary build/fp4sim] [--seeds 1,2,3]

FlashInfer's NVFP4 kernels (CUDA and CuTe DSL, SM100+) are tested bitwise, with
FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1, against torch references in its tests
(tests/utils/test_fp4_quantize.py test_nvfp4_quantize_te_reference): ref_fp4_quant_te for standard NVFP4 and
ref_fp4_quant_4over6_te for 4over6 (PR #3448, merged as d9b175ac6). This script runs those references on the CPU
(tests/test_helpers/utils_fp4.py, which imports flashinfer/quantization/nvfp4_quantization_utils.py; both read
from --fi-root, never copied into fp4sim; the package's flashinfer.utils is replaced by the one helper the file
uses). It does not run FlashInfer's kernels: that needs an SM100 GPU. Setting up, from a clone at d9b175ac6:
    git -C flashinfer archive --prefix=flashinfer/ HEAD tests/test_helpers/utils_fp4.py \\
        flashinfer/quantization/nvfp4_quantization_utils.py | tar x -C tools/.oracles

Profiles (fp4sim flags <-> reference arguments), 1x16 blocks, each with --element-specials te-python
(cast_to_fp4 gives an exact -0 the value +0, sign(x) * 0 = -0 otherwise):
  nvfp4                       nvfp4-norht                                     ref_fp4_quant_te
  4over6 MAE|MSE 256|448      nvfp4-4over6 --block-choice 4over6-mae|mse      ref_fp4_quant_4over6_te,
                              --target 256|448 --four-over-six-error          NVFP44Over6Config(e4m3_max, err_mode,
    strict / fast-math        decode-scale / fast-math                        err_use_fast_math)
  per-token (each above)      + --amax-scope row (strict: the input domain)   per_token_rowwise=True, row amaxes
Inputs: tools/te_oracle.py's seeded generators (normal at several magnitudes, binary32-wide, random finite bit
patterns, E2M1 grid points and midpoints nudged by an ulp, bf16-valued, an outlier, Inf), no NaN. Codes are read
from the reference's E2M1 values (sign bit included), scales are its E4M3 bytes. Prints one line per profile;
exit 1 if any code or scale differs, 2 if the reference, torch or the binary is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from te_oracle import fp4sim_quantize, inputs  # noqa: E402  (the same generators and fp4sim call)

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def load_reference(fi_root: str):
    helpers = os.path.join(fi_root, "tests", "test_helpers", "utils_fp4.py")
    utils_path = os.path.join(fi_root, "flashinfer", "quantization", "nvfp4_quantization_utils.py")
    if not (os.path.isfile(helpers) and os.path.isfile(utils_path)):
        print(f"flashinfer_oracle: no utils_fp4.py / nvfp4_quantization_utils.py under --fi-root {fi_root!r}",
              file=sys.stderr)
        sys.exit(2)

    def load(name, path):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    package = types.ModuleType("flashinfer")
    package.__path__ = []
    quantization = types.ModuleType("flashinfer.quantization")
    quantization.__path__ = []
    stand_in = types.ModuleType("flashinfer.utils")  # the compiled package's helpers: utils_fp4 reads round_up
    stand_in.round_up = lambda x, y: (x + y - 1) // y * y
    package.utils = stand_in
    sys.modules.update({"flashinfer": package, "flashinfer.quantization": quantization, "flashinfer.utils": stand_in})
    nvfp4_utils = load("flashinfer.quantization.nvfp4_quantization_utils", utils_path)
    return load("flashinfer_utils_fp4", helpers), nvfp4_utils


def codes_of(values):
    """E2M1 codes of the reference's values, sign bit from the value's sign (-0 -> 0x8)."""
    v = values.numpy().astype(np.float64)
    mag = np.abs(v)
    if not np.isin(mag, E2M1).all():
        raise RuntimeError("reference value off the E2M1 grid")
    return np.searchsorted(E2M1, mag).astype(np.uint8) | (np.signbit(v).astype(np.uint8) << 3)


def with_settings(flags, settings):
    """flags with each FLAG=VALUE of settings replacing that flag's value (or added)."""
    flags = list(flags)
    for pair in settings:
        key, value = pair.split("=", 1)
        if f"--{key}" in flags:
            flags[flags.index(f"--{key}") + 1] = value
        else:
            flags += [f"--{key}", value]
    return flags


def profiles(nvfp4_utils):
    """(name, fp4sim flags, 4over6 config or None, per token)."""
    out = []
    for per_token in (False, True):
        prefix, row = ("per-token ", ["--amax-scope", "row"]) if per_token else ("", [])
        out.append((prefix + "nvfp4", ["--recipe", "nvfp4-norht", *row], None, per_token))
        for mode in ("MAE", "MSE"):
            for bound in (256, 448):
                for fast in (False, True):
                    config = nvfp4_utils.NVFP44Over6Config(e4m3_max=bound, err_mode=mode, err_use_fast_math=fast)
                    strict = "input" if per_token else "decode-scale"  # per token: the row amax's expression
                    flags = ["--recipe", "nvfp4-4over6", "--block-choice", f"4over6-{mode.lower()}", "--target",
                             str(bound), "--four-over-six-error", "fast-math" if fast else strict, *row]
                    out.append((f"{prefix}4over6 {mode} {bound} {'fast-math' if fast else 'strict'}", flags, config,
                                per_token))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fi-root",
                    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".oracles", "flashinfer"))
    ap.add_argument("--binary", default=os.environ.get("FP4SIM_BINARY", "build/fp4sim"))
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--only", default="", help="run only the profile of this name")
    ap.add_argument("--swap", action="append", default=[], metavar="FLAG=VALUE",
                    help="an fp4sim flag's value instead of the profile's (e.g. four-over-six-error=input, to see "
                         "the check fail)")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("flashinfer_oracle: torch is not importable", file=sys.stderr)
        return 2
    if not os.access(args.binary, os.X_OK):
        print(f"flashinfer_oracle: no fp4sim binary at {args.binary}", file=sys.stderr)
        return 2
    ref, nvfp4_utils = load_reference(args.fi_root)
    commit = os.path.join(args.fi_root, "COMMIT")
    print(f"flashinfer {open(commit).read().strip()[:9] if os.path.isfile(commit) else '(commit unknown)'} "
          f"test references, torch {torch.__version__}")
    total_bad = 0
    for name, flags, config, per_token in profiles(nvfp4_utils):
        if args.only and name != args.only:
            continue
        elements = blocks = bad_codes = bad_scales = 0
        for seed in (int(s) for s in args.seeds.split(",")):
            for x in inputs(seed).values():
                t = torch.from_numpy(x)
                amax = (torch.abs(t).amax(dim=1) if per_token else torch.abs(t).max()).to(torch.float32)
                if config is None:
                    values, scales = ref.ref_fp4_quant_te(t, amax, per_token_rowwise=per_token)
                else:
                    values, scales, _, _ = ref.ref_fp4_quant_4over6_te(t, amax, per_token_rowwise=per_token,
                                                                       nvfp4_4over6_config=config)
                want_codes = codes_of(values)
                want_scales = scales.contiguous().view(torch.uint8).numpy()
                codes, got_scales = fp4sim_quantize(args.binary, x, with_settings(
                    flags + ["--role", "activation", "--element-specials", "te-python"], args.swap))
                codes = np.stack([codes & 15, codes >> 4], axis=-1).reshape(codes.shape[0], -1)
                bad_codes += int(np.count_nonzero(codes != want_codes))
                bad_scales += int(np.count_nonzero(got_scales != want_scales))
                elements += x.size
                blocks += want_scales.size
        total_bad += bad_codes + bad_scales
        print(f"{name:38s} elements {elements:6d} blocks {blocks:5d} differing codes {bad_codes} scales {bad_scales}")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
