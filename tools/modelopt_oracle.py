#!/usr/bin/env python3
"""ModelOpt's NVFP4 quantizer (NVFP4QTensor.quantize) against `fp4sim quantize`, codes and scales bit for bit.

    tools/modelopt_oracle.py --modelopt-root tools/.oracles/modelopt [--binary build/fp4sim] [--seeds 1,2]

--modelopt-root holds NVIDIA/Model-Optimizer's modelopt/ package (a COMMIT file beside it is printed). Setting up,
from a snapshot of NVIDIA/Model-Optimizer at a2fbac7:
    git --git-dir=REPO archive --prefix=modelopt/modelopt/ HEAD modelopt | tar x -C tools/.oracles
The package does not import without its installed metadata and its dependencies (requests, pydantic, ...), so
this script imports only what the quantizer uses: modelopt/torch/quantization/qtensor/nvfp4_tensor.py and
utils/numeric_utils.py as they are, the parent packages as empty namespaces (their __init__ files never run),
and from utils/core_utils.py the three functions nvfp4_tensor calls (reduce_amax, reduce_block_amax,
reduce_block_padding) and _FP8_DTYPES, compiled from that file's own source text. base_qtensor's two FSDP
helpers, unused by quantize, are stubs. The CUDA/TensorRT-LLM path is off on the CPU (fp4_compatible() False).

Profile (docs/recipes.md "Stack profiles"): nvfp4-modelopt = nvfp4-norht --scale-order modelopt --scale-min 2^-9
--zero-scale one --element-specials modelopt --nan-amax propagate --one-d: weights_scaling_factor_2 P =
max|x| / 2688, per-block scale RN(amax_b / RN(6 * P)), a zero set to 1.0, clamped to [2^-9, 448], cast to E4M3;
elements divided by RN(s * P) and cast by _cast_fp4 (searchsorted RNE, saturating, sign from x < 0 so an exact -0
gives 0x0, NaN 0x7); a NaN anywhere makes P NaN: every scale NaN, every code 0x7 (torch writes the NaN scale
of a block holding the NaN as 0xFF, the sign x86 arithmetic gives it; fp4sim's unsigned scale format has the one
NaN 0x7F: NaN scales compare as NaN, as tools/te_oracle.py does). Inputs:
tools/nvfp4_stack_inputs.py, finite, and a tensor holding NaNs (Inf is not modelled: docs/semantics.md §4b).
Prints one line per profile; exit 1 if anything differs, 2 if ModelOpt, torch or the binary is missing.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvfp4_stack_inputs import BLOCK, nvfp4_inputs, nvfp4_nans, pack_nibbles_unpacked  # noqa: E402

PROFILES = {"nvfp4-modelopt": ["--recipe", "nvfp4-norht", "--scale-order", "modelopt", "--scale-min", "0.001953125",
                               "--zero-scale", "one", "--element-specials", "modelopt", "--nan-amax", "propagate",
                               "--one-d"]}
CORE_NAMES = ("_FP8_DTYPES", "reduce_amax", "reduce_block_amax", "reduce_block_padding")


def load_modelopt(root: str):
    """modelopt.torch.quantization.qtensor.nvfp4_tensor, imported without the package's __init__ files."""
    quant = os.path.join(root, "modelopt", "torch", "quantization")
    if not os.path.isfile(os.path.join(quant, "qtensor", "nvfp4_tensor.py")):
        print(f"modelopt_oracle: no modelopt package under --modelopt-root {root!r}", file=sys.stderr)
        sys.exit(2)
    import torch
    import torch.nn.functional as F

    for name in ("modelopt", "modelopt.torch", "modelopt.torch.quantization", "modelopt.torch.quantization.qtensor",
                 "modelopt.torch.quantization.backends", "modelopt.torch.quantization.utils"):
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = package
    utils = sys.modules["modelopt.torch.quantization.utils"]
    core_path = os.path.join(quant, "utils", "core_utils.py")
    tree = ast.parse(open(core_path).read(), core_path)
    wanted = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name in CORE_NAMES) or
              (isinstance(n, ast.Assign) and any(getattr(t, "id", "") in CORE_NAMES for t in n.targets))]
    namespace = {"torch": torch, "F": F}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), core_path, "exec"), namespace)
    missing = [n for n in CORE_NAMES if n not in namespace]
    if missing:
        print(f"modelopt_oracle: {core_path} lacks {', '.join(missing)}", file=sys.stderr)
        sys.exit(2)
    for n in CORE_NAMES:
        setattr(utils, n, namespace[n])
    utils.fsdp2_aware_weight_update = utils.patch_fsdp_mp_dtypes = None  # base_qtensor's FSDP helpers, unused
    import importlib

    return importlib.import_module("modelopt.torch.quantization.qtensor.nvfp4_tensor")


def swapped(flags, swaps):
    """flags with each --FLAG's value replaced as the FLAG=VALUE swaps say."""
    out = list(flags)
    for swap in swaps:
        flag, _, value = swap.partition("=")
        out[out.index("--" + flag) + 1] = value
    return out


def fp4sim_quantize(binary, x, flags):
    with tempfile.TemporaryDirectory() as d:
        xin, codes, scales = (os.path.join(d, n) for n in ("x.npy", "c.npy", "s.npy"))
        np.save(xin, x)
        p = subprocess.run([binary, "quantize", "--in", xin, "--codes", codes, "--scales", scales, *flags],
                           capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if p.returncode != 0:
            raise RuntimeError(f"fp4sim quantize {' '.join(flags)}: {p.stderr.strip()}")
        return np.load(codes), np.load(scales)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modelopt-root",
                    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".oracles", "modelopt"))
    ap.add_argument("--binary", default=os.environ.get("FP4SIM_BINARY", "build/fp4sim"))
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--swap", action="append", default=[], metavar="FLAG=VALUE",
                    help="give a profile flag another value (e.g. --swap scale-order=te, to see the check fail)")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("modelopt_oracle: torch is not importable", file=sys.stderr)
        return 2
    if not os.access(args.binary, os.X_OK):
        print(f"modelopt_oracle: no fp4sim binary at {args.binary}", file=sys.stderr)
        return 2
    nvfp4 = load_modelopt(args.modelopt_root)
    commit = os.path.join(args.modelopt_root, "COMMIT")
    print(f"Model-Optimizer {open(commit).read().strip() if os.path.isfile(commit) else '(commit unknown)'}, "
          f"torch {torch.__version__}")
    total_bad = 0
    for name, flags in PROFILES.items():
        elements = blocks = nan_blocks = bad_codes = bad_scales = 0
        for seed in (int(s) for s in args.seeds.split(",")):
            for x in [*nvfp4_inputs(seed).values(), nvfp4_nans(seed)]:
                packed, scale, _ = nvfp4.NVFP4QTensor.quantize(torch.from_numpy(x.copy()), BLOCK)
                want_codes = pack_nibbles_unpacked(packed._quantized_data.numpy())
                # torch casts a NaN scale to the E4M3 NaN of the NaN's sign (0xFF where the block holds the NaN,
                # from the CPU's arithmetic); fp4sim's unsigned UE4M3 has the one NaN 0x7F: compared as NaN.
                want_scales = scale.view(torch.uint8).numpy().copy()
                want_scales[want_scales == 0xFF] = 0x7F
                nan_blocks += int(np.count_nonzero(want_scales == 0x7F))
                codes, scales = fp4sim_quantize(args.binary, x, swapped(flags, args.swap))
                bad_codes += int(np.count_nonzero(pack_nibbles_unpacked(codes) != want_codes))
                bad_scales += int(np.count_nonzero(scales != want_scales))
                elements += x.size
                blocks += scales.size
        total_bad += bad_codes + bad_scales
        print(f"{name:16s} elements {elements:7d} blocks {blocks:5d} (NaN-scale {nan_blocks}) "
              f"differing codes {bad_codes} scales {bad_scales}")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
