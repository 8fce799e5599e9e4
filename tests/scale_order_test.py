"""`--scale-order torchao|modelopt` and `--scale-min` (docs/cli.md; docs/semantics.md §4, §4b) against the
stacks' NVFP4 orders written out in numpy float32 (one IEEE rounding per operation, E4M3 and E2M1 casts by
ml_dtypes), so the rules are checked where the peers themselves (tests/stack_oracle_test.py) are absent; and the
profiles nvfp4-torchao, nvfp4-torchao-two-level, nvfp4-modelopt as `verify quantize --profile` names them.
The inputs are tools/nvfp4_stack_inputs.py's (scale and element ties, E4M3 subnormal and clamped scales, +-0).

The binary is $FP4SIM_BINARY (ctest sets it to $<TARGET_FILE:fp4sim>).
"""

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from cli_run import needs_binary, refused, run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from nvfp4_stack_inputs import BLOCK, nvfp4_inputs, nvfp4_nans, pack_nibbles_unpacked  # noqa: E402

pytestmark = needs_binary
f32 = np.float32
TORCHAO = ["--recipe", "nvfp4-norht", "--scale-order", "torchao", "--scale-min", "0.015625", "--one-d"]
MODELOPT = ["--recipe", "nvfp4-norht", "--scale-order", "modelopt", "--scale-min", "0.001953125", "--zero-scale",
            "one", "--element-specials", "modelopt", "--nan-amax", "propagate", "--one-d"]


def e4m3(u):
    """Scale codes and their float32 values of u (in range: the stacks clamp before the cast)."""
    q = u.astype(ml_dtypes.float8_e4m3fn)
    return q.view(np.uint8) | np.uint8(np.isnan(u)) * 0x7F, q.astype(f32)  # a NaN of either sign: 0x7F


def e2m1(y, exact_minus_zero_code):
    """RNE, saturating at +-6; an exact -0 gets exact_minus_zero_code (torchao 0x8, ModelOpt 0x0); NaN 0x7
    (ModelOpt's searchsorted; torchao's NaN codes are not modelled)."""
    codes = np.clip(y, f32(-6), f32(6)).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 15
    codes = np.where(np.isnan(y), np.uint8(7), codes)
    return np.where((y == 0) & np.signbit(y), np.uint8(exact_minus_zero_code), codes)


def torchao(x, two_level):
    blocks = x.reshape(x.shape[0], -1, BLOCK)
    amax = np.max(np.abs(blocks), axis=-1)
    p = np.max(np.abs(x)) / f32(2688) if two_level else f32(1)
    codes, s = e4m3(np.clip(amax / f32(6) / p, f32(2.0 ** -6), f32(448)))
    y = blocks * ((f32(1) / p) / s)[..., None]
    return e2m1(y, 0x8).reshape(x.shape), codes


def modelopt(x):
    blocks = x.reshape(x.shape[0], -1, BLOCK)
    amax = np.max(np.abs(blocks), axis=-1)
    p = np.max(np.abs(x)) / f32(2688)
    u = amax / (f32(6) * p)
    u[u == 0] = f32(1)
    codes, s = e4m3(np.clip(u, f32(2.0 ** -9), f32(448)))
    y = blocks / (s * p)[..., None]
    return e2m1(y, 0x0).reshape(x.shape), codes


CASES = {"torchao one-level": (TORCHAO + ["--tensor-scale", "none"], lambda x: torchao(x, False)),
         "torchao two-level": (TORCHAO, lambda x: torchao(x, True)),
         "modelopt": (MODELOPT, modelopt)}
NANS = {"modelopt"}  # the cases whose NaN rule is modelled: also a tensor holding NaN


def fp4sim(tmp_path, x, flags):
    np.save(tmp_path / "x.npy", x)
    r = run("quantize", "--in", tmp_path / "x.npy", "--codes", tmp_path / "c.npy", "--scales", tmp_path / "s.npy",
            *flags)
    assert r.returncode == 0, r.stderr
    return pack_nibbles_unpacked(np.load(tmp_path / "c.npy")), np.load(tmp_path / "s.npy")


def differing(tmp_path, flags, model, nans):
    bad = 0
    for x in [*nvfp4_inputs(1).values(), *([nvfp4_nans(1)] if nans else [])]:
        codes, scales = fp4sim(tmp_path, x, flags)
        want_codes, want_scales = model(x)
        bad += int(np.count_nonzero(codes != want_codes)) + int(np.count_nonzero(scales != want_scales))
    return bad


@pytest.mark.parametrize("case", CASES)
def test_the_orders_match_their_numpy_models(tmp_path, case):
    flags, model = CASES[case]
    assert differing(tmp_path, flags, model, case in NANS) == 0


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("swap", [("--scale-order", "te"), ("--scale-min", "0")])
def test_flipping_a_rule_is_seen(tmp_path, case, swap):
    flags, model = CASES[case]
    flags = list(flags)
    flags[flags.index(swap[0]) + 1] = swap[1]
    assert differing(tmp_path, flags, model, case in NANS) > 0


def test_modelopt_nan_rule_flipped_is_seen(tmp_path):
    for swap in (("--nan-amax", "ignore"), ("--element-specials", "te-python")):
        flags = list(MODELOPT)
        flags[flags.index(swap[0]) + 1] = swap[1]
        assert differing(tmp_path, flags, modelopt, True) > 0, swap


@pytest.mark.parametrize("profile, flags", [("nvfp4-torchao", TORCHAO + ["--tensor-scale", "none"]),
                                            ("nvfp4-torchao-two-level", TORCHAO), ("nvfp4-modelopt", MODELOPT)])
def test_each_profile_is_its_flags(tmp_path, profile, flags):
    fp4sim(tmp_path, nvfp4_inputs(2)["scale-ties"], flags)
    r = run("verify", "quantize", "--in", tmp_path / "x.npy", "--codes", tmp_path / "c.npy", "--scales",
            tmp_path / "s.npy", "--profile", profile)
    assert r.returncode == 0 and "BIT-EXACT" in r.stdout, r.stdout + r.stderr


def test_an_order_without_its_preconditions_is_a_usage_error(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 32), f32))
    common = ("quantize", "--in", tmp_path / "x.npy", "--codes", tmp_path / "c.npy")
    refused(run(*common, "--recipe", "nvfp4-4over6", "--scale-order", "torchao"), 2, "scale order")
    refused(run(*common, "--recipe", "mxfp4", "--scale-min", "0.5"), 2, "scale_min")
