"""The plan registry of fp4sim._fp4sim (python/plans.hpp), which fp4sim.torch's operators take their settings
from: a plan gives the bytes the string path gives, equal settings share one handle, and a bad recipe, override,
operand or datapath fails when the plan is resolved, with the UsageError naming it. Needs no PyTorch (run by
ctest as python_plans, beside test_module.py)."""

import numpy as np
import pytest

import fp4sim
from fp4sim import _fp4sim
from module_helpers import tensor

RECIPES = ["ue5m3", "ue5m3-te", "nvfp4", "mxfp4"]


def rbits(shape, seed):
    return "uint8", np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint32)


def assert_same_tensor(ours, ref):
    np.testing.assert_array_equal(np.array(ours.codes), np.array(ref.codes))
    np.testing.assert_array_equal(np.array(ours.scales), np.array(ref.scales))
    assert (ours.tensor_amax, ours.global_encode_scale, ours.global_decode_scale) == \
        (ref.tensor_amax, ref.global_encode_scale, ref.global_decode_scale)


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_plan_quantizes_and_multiplies_as_the_string_path(recipe):
    a, b = tensor(32, 128, seed=1), tensor(48, 128, seed=2) * 3
    for gemm in ("fprop", "wgrad"):
        plan = _fp4sim.gemm_plan(recipe, {}, gemm, "", True)
        info = _fp4sim.plan_info(plan)
        for side, x, amax in (("a", a, None), ("b", b, 7.5)):
            q = _fp4sim.plan_quantize(info[side], x, amax, 11, None)
            ref = _fp4sim.quantize(x, recipe, {}, f"{gemm}.{side}", amax, 11, None)
            assert_same_tensor(q, ref)
            # the bytes rebuilt into a tensor of the plan, as fp4sim.torch's CPU GEMM does
            rebuilt = _fp4sim.plan_quantized(info[side], np.array(q.codes), np.array(q.scales), q.rows, q.cols,
                                             q.tensor_amax, q.global_encode_scale, q.global_decode_scale)
            assert_same_tensor(rebuilt, ref)
        for bf16 in (False, True):
            out = "bf16" if bf16 else "f32"
            c = _fp4sim.plan_gemm(plan, a, b, 11, None, 7.5, None, None, bf16)
            ref = fp4sim.gemm(a, b, recipe, gemm, seed=11, amax_ref_b=7.5, out_dtype=out)
            np.testing.assert_array_equal(c.view(np.uint32), ref.view(np.uint32))
        # the golden operands multiplied alone: what the whole GEMM computes
        qa = _fp4sim.quantize(a, recipe, {}, f"{gemm}.a", None, 3, None)
        qb = _fp4sim.quantize(b, recipe, {}, f"{gemm}.b", None, 3, None)
        np.testing.assert_array_equal(_fp4sim.plan_gemm_quantized(plan, qa, qb, False).view(np.uint32),
                                      fp4sim.gemm(a, b, recipe, gemm, seed=3).view(np.uint32))


def test_a_plan_takes_explicit_bits_and_overrides_as_the_string_path():
    x = tensor(16, 64, seed=3)
    bits = rbits(x.shape, 4)
    plan = _fp4sim.quantize_plan("ue5m3", {"block": 32}, "dgrad.a")
    assert_same_tensor(_fp4sim.plan_quantize(plan, x, None, 0, bits),
                       _fp4sim.quantize(x, "ue5m3", {"block": 32}, "dgrad.a", None, 0, bits))
    assert _fp4sim.plan_info(plan)["block_cols"] == 32


def test_equal_settings_share_a_handle():
    h = _fp4sim.quantize_plan("nvfp4", {"block": 16, "two_d": True}, "weight")
    assert _fp4sim.quantize_plan("nvfp4", {"two_d": np.bool_(True), "block": np.int64(16)}, "weight") == h
    assert _fp4sim.quantize_plan("nvfp4", {"block": 16}, "weight") != h
    assert _fp4sim.quantize_plan("nvfp4", {"block": 16, "two_d": True}, "activation") != h
    # "" asks for the recipe's own datapath; a GEMM plan's operands are the quantize plans of <gemm>.a / .b
    g = _fp4sim.gemm_plan("ue5m3", {}, "dgrad", "", True)
    assert _fp4sim.gemm_plan("ue5m3", {}, "dgrad", "probe-matched", True) == g
    assert _fp4sim.gemm_plan("ue5m3", {}, "dgrad", "probe-matched", False) != g
    info = _fp4sim.plan_info(g)
    assert (info["a"], info["b"]) == (_fp4sim.quantize_plan("ue5m3", {}, "dgrad.a"),
                                      _fp4sim.quantize_plan("ue5m3", {}, "dgrad.b"))
    assert (info["datapath"], info["kernel"], info["k_multiple"]) == ("probe-matched", "probe-matched", 64)
    assert _fp4sim.plan_info(_fp4sim.gemm_plan("nvfp4", {}, "fprop", "", True))["kernel"] is None  # fp32-seq


@pytest.mark.parametrize("call,key", [
    (lambda: _fp4sim.quantize_plan("nvfp5", {}, "weight"), "nvfp5"),
    (lambda: _fp4sim.quantize_plan("nvfp4", {"blok": 16}, "weight"), "blok"),
    (lambda: _fp4sim.quantize_plan("nvfp4", {"block": "16"}, "weight"), "block"),
    (lambda: _fp4sim.quantize_plan("nvfp4", {"scale_format": "ue9m9"}, "weight"), "scale_format"),
    (lambda: _fp4sim.quantize_plan("nvfp4", {}, "fprop.c"), "fprop.c"),
    (lambda: _fp4sim.quantize_plan("nvfp4", {"amax_scope": "rows"}, "weight"), "amax_scope"),
    (lambda: _fp4sim.quantize_plan("nvfp4", {}, "bias"), "role"),
    (lambda: _fp4sim.gemm_plan("nvfp4", {}, "fprop", "fp33-seq", True), "datapath"),
    (lambda: _fp4sim.gemm_plan("nvfp4", {}, "xgrad", "", True), "gemm"),
    (lambda: _fp4sim.gemm_plan("nvfp4", {"rht": 1}, "fprop", "", True), "rht"),
])
def test_a_bad_setting_fails_when_the_plan_is_resolved(call, key):
    with pytest.raises(fp4sim.UsageError, match=key):
        call()


def test_per_call_arguments_are_still_checked_with_their_keys():
    a = tensor(16, 64, seed=5)
    fprop = _fp4sim.gemm_plan("ue5m3", {}, "fprop", "", True)
    info = _fp4sim.plan_info(fprop)
    with pytest.raises(fp4sim.UsageError, match="amax_ref_b"):
        _fp4sim.plan_quantize(info["b"], a, -1.0, 0, None)
    with pytest.raises(fp4sim.UsageError, match="rbits_a"):  # fprop's A rounds to nearest
        _fp4sim.plan_gemm(fprop, a, a, 0, None, None, rbits(a.shape, 1), None, False)
    with pytest.raises(fp4sim.UsageError, match="amax_ref"):
        _fp4sim.plan_quantize(_fp4sim.quantize_plan("ue5m3", {}, "weight"), a, float("nan"), 0, None)


def test_a_handle_no_call_returned_or_of_the_other_kind_is_refused():
    with pytest.raises(fp4sim.UsageError, match="no plan has this handle"):
        _fp4sim.plan_info(2**31)
    q = _fp4sim.quantize_plan("mxfp4", {}, "weight")
    g = _fp4sim.gemm_plan("mxfp4", {}, "fprop", "", True)
    a = tensor(8, 32)
    with pytest.raises(fp4sim.UsageError, match="a quantize plan where a GEMM plan is expected"):
        _fp4sim.plan_gemm(q, a, a, 0, None, None, None, None, False)
    with pytest.raises(fp4sim.UsageError, match="a GEMM plan where a quantize plan is expected"):
        _fp4sim.plan_quantize(g, a, None, 0, None)


def test_a_failed_resolve_registers_nothing():
    # handles count the registry's plans: settings no other test asks for give consecutive handles
    first = _fp4sim.quantize_plan("nvfp4", {"target": 123.0}, "weight")
    with pytest.raises(fp4sim.UsageError, match="target"):
        _fp4sim.quantize_plan("nvfp4", {"target": -1.0}, "weight")
    with pytest.raises(fp4sim.UsageError, match="datapath"):
        _fp4sim.gemm_plan("nvfp4", {"target": 125.0}, "fprop", "fp33-seq", True)
    assert _fp4sim.quantize_plan("nvfp4", {"target": 124.0}, "weight") == first + 1
    assert _fp4sim.quantize_plan("nvfp4", {"target": 123}, "weight") == first  # 123 and 123.0: one setting


def test_a_user_defined_recipe_is_a_plan_as_its_preset_with_keywords():
    """fp4sim.torch names its recipe by the text it was given: a spec resolves to the plan of the preset with the
    same keywords, and keywords given beside a spec override it."""
    x = tensor(32, 128, seed=5)
    spec = _fp4sim.quantize_plan("nvfp4:block=32,two_d=false,rounding=sr-fast", {}, "weight")
    flags = _fp4sim.quantize_plan("nvfp4", {"block": 32, "two_d": False, "rounding": "sr-fast"}, "weight")
    assert_same_tensor(_fp4sim.plan_quantize(spec, x, None, 9, None), _fp4sim.plan_quantize(flags, x, None, 9, None))
    info = _fp4sim.plan_info(spec)
    assert (info["block_rows"], info["block_cols"], info["rounding"]) == (1, 32, "sr-fast")
    assert _fp4sim.plan_info(_fp4sim.quantize_plan("nvfp4:block=32", {"block": 16}, "weight"))["block_cols"] == 16
    gemm = _fp4sim.plan_info(_fp4sim.gemm_plan("mxfp4:scale_rule=rceil", {}, "fprop", "", True))
    rceil = _fp4sim.plan_info(_fp4sim.gemm_plan("mxfp4-rceil", {}, "fprop", "", True))
    assert_same_tensor(_fp4sim.plan_quantize(gemm["a"], x, None, 0, None),
                       _fp4sim.plan_quantize(rceil["a"], x, None, 0, None))
    with pytest.raises(fp4sim.UsageError, match=r"^recipe 'mxfp4:block=x': block=x: not an integer$"):
        _fp4sim.quantize_plan("mxfp4:block=x", {}, "weight")
