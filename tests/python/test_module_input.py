"""The fp4sim module against hostile input: each keyword and array means what it says or is refused with a
UsageError / DataError naming it, before anything is allocated (issue 26 round three, issue 21's argument
table). Run by ctest (python_module_input) as test_module.py is.
"""

import pathlib

import numpy as np
import pytest

import fp4sim
from module_helpers import cli, needs_analyses, needs_cli, tensor


# ---------------------------------------------------------------------------------------------------
# Hostile input, round three: each value means what it says or is refused, before anything is allocated


def test_big_endian_arrays_are_converted():
    x = tensor(4, 64, seed=21)
    for dtype in (">f4", ">f8", ">f2"):
        q, qn = fp4sim.quantize(x.astype(dtype), "nvfp4"), fp4sim.quantize(x.astype(dtype[1:]), "nvfp4")
        np.testing.assert_array_equal(q.codes, qn.codes)
        np.testing.assert_array_equal(q.scales, qn.scales)
    np.testing.assert_array_equal(fp4sim.gemm(x.astype(">f4"), x.astype(">f4"), "mxfp4"), fp4sim.gemm(x, x, "mxfp4"))


@pytest.mark.parametrize("shape", [(2, 0, 64), (0, 32, 64), (0, 64)])
def test_an_empty_batch_gives_empty_results(shape):
    q = fp4sim.quantize(np.zeros(shape, np.float32), "nvfp4")
    assert q.codes.shape == (*shape[:-1], 32) and q.scales.shape == (*shape[:-1], 4)
    assert fp4sim.dequantize(q).shape == shape


def test_dequantize_checks_the_shape_before_allocating():
    q = fp4sim.quantize(tensor(8, 64), "nvfp4")
    # 8 x 2^40 elements: allocated before the check this was a bare std::bad_alloc
    with pytest.raises(fp4sim.DataError, match=r"codes: shape \[8, 32\] does not hold"):
        fp4sim.dequantize(q.codes, q.scales, "nvfp4", shape=(8, 2**40), tensor_scale=q.tensor_amax)


@pytest.mark.parametrize("kind,value", [("amax", -3.0), ("amax", float("nan")), ("amax", float("inf")),
                                        ("encode", 0.0), ("decode", -1.0)])
def test_dequantize_refuses_a_tensor_scale_no_kernel_holds(kind, value):
    q = fp4sim.quantize(tensor(8, 64), "nvfp4", dequantize_order="portable")
    with pytest.raises(fp4sim.DataError, match="^tensor_scale: "):
        fp4sim.dequantize(q.codes, q.scales, "nvfp4", tensor_scale=value, tensor_scale_kind=kind,
                          dequantize_order="portable")


@pytest.mark.parametrize("keywords, message", [
    ({"two_d": 1}, r"two_d: expected a bool \(True or False\), got int"),
    ({"block": 16.0}, r"block: expected an integer, got float"),
    ({"tensor_scale": np.float32(2)}, r"tensor_scale: expected a string, got float32"),
    ({"seed": -1}, r"seed: expected an integer in 0\.\.2\^64-1, got -1"),
    ({"amax_ref": "3"}, r"amax_ref: expected a number, got str"),
    ({"block": True}, r"block: expected an integer, got bool"),
    ({"sr_bits": 17}, r"sr_bits: must be between 1 and 16, got 17"),
    ({"block": 2**40}, r"block: must be between -2147483648 and 2147483647, got 1099511627776"),
    ({"rht": np.int64(1)}, r"rht: expected a bool \(True or False\), got int64"),
    ({"target": [1.0]}, r"target: expected a number, got list"),
    ({"seed": 2**64}, r"seed: expected an integer in 0\.\.2\^64-1, got 18446744073709551616"),
])
def test_every_keyword_is_type_checked_naming_it_and_the_type_it_wants(keywords, message):
    with pytest.raises(fp4sim.UsageError, match=f"^{message}$"):
        fp4sim.quantize(tensor(4, 64), "nvfp4", **keywords)


def test_keywords_take_numpy_scalars_of_their_kind_and_mean_one_thing_in_every_call():
    x = tensor(4, 64)
    plain = fp4sim.quantize(x, "nvfp4", block=16, two_d=True, target=6.0, seed=3, amax_ref=5.0)
    numpy = fp4sim.quantize(x, "nvfp4", block=np.int64(16), two_d=np.bool_(True), target=np.float32(6.0),
                            seed=np.uint64(3), amax_ref=np.float32(5.0))
    assert (plain.codes == numpy.codes).all() and (plain.scales == numpy.scales).all()
    assert (fp4sim.dequantize(plain) == fp4sim.dequantize(numpy)).all()
    # the same keys with the same types in gemm and convert
    for call in (lambda: fp4sim.gemm(x, x, "nvfp4", seed=-1), lambda: fp4sim.convert(x, "e2m1", seed=-1)):
        with pytest.raises(fp4sim.UsageError, match=r"^seed: expected an integer in 0\.\.2\^64-1, got -1$"):
            call()
    with pytest.raises(fp4sim.UsageError, match=r"^amax_ref_a: expected a number, got str$"):
        fp4sim.gemm(x, x, "nvfp4", amax_ref_a="3")
    with pytest.raises(fp4sim.UsageError, match=r"^block: expected an integer, got float$"):
        fp4sim.gemm(x, x, "nvfp4", block=16.0)
    with pytest.raises(fp4sim.UsageError, match=r"^snap: expected a bool \(True or False\), got int$"):
        fp4sim.gemm(x, x, "nvfp4", snap=0)
    with pytest.raises(fp4sim.UsageError, match=r"^sr_bits: expected an integer, got float$"):
        fp4sim.convert(x, "e2m1", "sr", sr_bits=8.0)
    with pytest.raises(fp4sim.UsageError, match=r"^saturate: expected a bool \(True or False\), got int$"):
        fp4sim.convert(x, "e2m1", saturate=1)
    with pytest.raises(fp4sim.UsageError, match=r"^rounding: expected a string, got int$"):
        fp4sim.convert(x, "e2m1", 0)
    with pytest.raises(fp4sim.UsageError, match=r"^input_format: expected a string, got type$"):
        fp4sim.mma(np.ones((2, 16)), np.ones((16, 2)), datapath="sm90-bf16", input_format=np.float32)
    codes, scales = np.zeros((4, 32), np.uint8), np.zeros((4, 4), np.uint8)
    with pytest.raises(fp4sim.UsageError, match=r"^max_explained: expected an integer in 0\.\.2\^64-1, got -1$"):
        fp4sim.verify_quantize(x, codes, scales, "nvfp4", max_explained=-1)
    with pytest.raises(fp4sim.UsageError, match=r"^layout: expected a string, got int$"):
        fp4sim.verify_quantize(x, codes, scales, "nvfp4", layout=0)
    with pytest.raises(fp4sim.UsageError, match=r"^worst: expected an integer, got float$"):
        fp4sim.verify_gemm(x, x, np.zeros((4, 4), np.float32), "nvfp4", worst=2.5)


@needs_cli
def test_alpha_is_a_recipe_override_of_both_front_ends(tmp_path):
    x, w = tensor(4, 64), tensor(3, 64, seed=1)
    default = fp4sim.gemm(x, w, "nvfp4", datapath="exact")
    assert (fp4sim.gemm(x, w, "nvfp4", datapath="exact", alpha="division") == default).all()  # nvfp4's own rule
    unscaled = fp4sim.gemm(x, w, "nvfp4", datapath="exact", alpha="one")
    ratio = default / unscaled  # the exact datapath applies alpha exactly, then rounds once
    np.testing.assert_allclose(ratio, ratio.flat[0], rtol=1e-6)
    assert not np.isclose(ratio.flat[0], 1.0)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    cli("gemm", "--recipe", "nvfp4", "--datapath", "exact", "--alpha", "one", "--a", tmp_path / "x.npy", "--b",
        tmp_path / "w.npy", "--out", tmp_path / "c.npy")
    assert (np.load(tmp_path / "c.npy") == unscaled).all()
    with pytest.raises(fp4sim.UsageError, match=r"^alpha: expected one, reciprocal or division, got 'half'$"):
        fp4sim.gemm(x, w, "nvfp4", alpha="half")


def test_verify_reports_name_keywords():
    x = tensor(128, 64)
    q = fp4sim.quantize(x, "nvfp4")
    r = fp4sim.verify_quantize(x, q.codes, q.scales_in("swizzled-128x4"), "nvfp4")
    assert any("read as layout swizzled-128x4" in h for h in r["hints"]), r["hints"]
    assert not any("{" in h or "--" in h for h in r["hints"]), r["hints"]
    assert "{layout}" not in str(r) and "--layout" not in str(r)


def test_recipe_overrides_of_the_wrong_type_or_empty_are_usage_errors():
    x = tensor(4, 64)
    with pytest.raises(fp4sim.UsageError, match="block: expected an integer, got str"):
        fp4sim.quantize(x, "nvfp4", block="--help")
    with pytest.raises(fp4sim.UsageError, match="rht_signs=''"):
        fp4sim.quantize(x, "nvfp4", rht_signs="")


@needs_analyses
def test_replay_matches_a_long_layer_name_and_refuses_what_names_nothing(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "long.h5"
    name = "a" * 60_000  # std::regex's recursion overflowed the interpreter's stack on it
    with h5py.File(path, "w") as f:
        f.attrs["schema"], f.attrs["schema_version"] = "fp4-trace", 1
        g = f.create_group("step_000001")
        g.attrs["step"] = 1
        for t, shape in (("x", (16, 64)), ("w", (32, 64)), ("dy", (16, 32))):
            g[f"{name}/{t}"] = tensor(*shape)
    r = fp4sim.replay(path, "nvfp4", layers=".*", gemms=False)
    assert {e["layer"] for e in r["tensors"]} == {name}
    with pytest.raises(fp4sim.UsageError, match="^steps: .* names no step"):
        fp4sim.replay(path, "nvfp4", steps=[], gemms=False)
    for slab_mib in (float("inf"), 2e13):
        with pytest.raises(fp4sim.UsageError, match="^slab_mib must be in"):
            fp4sim.replay(path, "nvfp4", slab_mib=slab_mib)


class LazilyNegated:
    """A DLPack producer like a PyTorch view with its negative bit set: __dlpack__ exports the stored
    (unnegated) values, is_neg() says so, resolve_neg() gives the values the view stands for."""

    def __init__(self, stored):
        self.stored = stored

    def __dlpack__(self, **kwargs):
        return self.stored.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.stored.__dlpack_device__()

    def is_neg(self):
        return True

    def resolve_neg(self):
        return -self.stored


def test_a_lazily_negated_dlpack_view_is_read_as_its_values():
    x = tensor(4, 64, seed=5)
    q = fp4sim.quantize(LazilyNegated(x), "nvfp4")
    np.testing.assert_array_equal(q.codes, fp4sim.quantize(-x, "nvfp4").codes)
    np.testing.assert_array_equal(fp4sim.convert(LazilyNegated(x), "e2m1").view(np.uint8),
                                  fp4sim.convert(-x, "e2m1").view(np.uint8))


# ---------------------------------------------------------------------------------------------------
# What the argument-layer fuzzer found (tests/fuzz/py_args_fuzz.py, docs/fuzzing.md): each refused with
# fp4sim's own exception naming the parameter, never nanobind's signature dump or a bare C++ exception

def trace_path():
    return pathlib.Path(__file__).resolve().parents[2] / "traces" / "trace_a.h5"


@pytest.mark.parametrize("call,words", [
    (lambda x: fp4sim.quantize(x, 0), "^recipe: expected a string, got int$"),
    (lambda x: fp4sim.codes_to_order(np.zeros((1, 2), np.uint8), 1, 4, 0), "^nibbles: expected a string, got int$"),
    (lambda x: fp4sim.codes_to_order(np.zeros((1, 2), np.uint8), 1, -4, "unpacked"), "^cols: -4 is out of range$"),
    (lambda x: fp4sim.scales_to_layout(np.zeros((1, 4), np.uint8), 2**64, 64, 1, 16, "rowmajor"),
     "^rows: 18446744073709551616 is out of range$"),
    (lambda x: fp4sim.dequantize(np.zeros((4, 32), np.uint8), np.zeros((4, 4), np.uint8), "nvfp4", shape=0),
     r"^shape: expected \(rows, cols\), got 0$"),
    (lambda x: fp4sim.dequantize(np.zeros((4, 32), np.uint8), np.zeros((4, 4), np.uint8), "nvfp4",
                                 tensor_scale=[1.0]), "^tensor_scale: expected a number, got list$"),
    (lambda x: fp4sim.quantize(x, "nvfp4\udcaa"), "^recipe: not text UTF-8 can encode"),
    (lambda x: fp4sim.quantize(x, "nvfp4", scale_rule="\udcaa"), "^scale_rule: not text UTF-8 can encode"),
    (lambda x: fp4sim.gemm(x, x, "nvfp4", **{"\udcaa": 0}), "^a recipe override's name: not text UTF-8"),
    (lambda x: fp4sim.dequantize(np.zeros((4, 32), np.uint8), np.zeros((4, 4), np.uint8), "nvfp4",
                                 nibbles=np.zeros(0)), "^nibbles: expected a string, got ndarray$"),
])
def test_an_argument_of_the_wrong_kind_is_a_usage_error_naming_it(call, words):
    with pytest.raises(fp4sim.UsageError, match=words) as e:
        call(tensor(4, 64))
    assert "incompatible function arguments" not in str(e.value)


@needs_analyses
def test_analysis_arguments_of_the_wrong_kind_name_the_parameter():
    with pytest.raises(fp4sim.UsageError, match="^gemms: expected a bool"):
        fp4sim.replay(trace_path(), "nvfp4", steps=[1], layers="lm_head", gemms=2**63)
    with pytest.raises(fp4sim.UsageError, match="^rows: expected an integer, got str$"):
        fp4sim.sweep(synthetic="normal", rows="16", cols=32)
    with pytest.raises(fp4sim.UsageError, match="^slab_mib: .* is beyond the range of a double$"):
        fp4sim.sweep(synthetic="normal", rows=16, cols=32, slab_mib=-10**400)
    with pytest.raises(TypeError, match="^trace: expected a path"):
        fp4sim.replay(0, "nvfp4")
    with pytest.raises(TypeError, match="^recipe_map: expected a string or a list of strings, got object$"):
        fp4sim.replay(trace_path(), recipe_map=object())
    # NumPy's bools are bools, as for every keyword of the argument tables
    r = fp4sim.replay(trace_path(), "nvfp4", steps=[1], layers="lm_head", gemms=np.False_)
    assert r["gemms"] == []


def test_what_numpy_cannot_read_or_compare_is_refused_by_fp4sim():
    with pytest.raises(fp4sim.DTypeError, match="^x: not an array NumPy can read"):
        fp4sim.quantize([[1.0, 2.0], [3.0]], "nvfp4")
    with pytest.raises(TypeError, match="^format: expected a format name or a dtype, got dict$"):
        fp4sim.decode(np.zeros(3, np.uint8), format={"a": 1})
    with pytest.raises(fp4sim.UsageError, match="specials"):  # an array compared with a name element-wise
        fp4sim.convert(np.ones(4, np.float32), "e2m1", specials=np.zeros(0))


def test_a_batch_of_empty_rows_quantizes_to_empty_results():
    q = fp4sim.quantize(np.zeros((2, 3, 0), np.float32), "nvfp4")  # reshape(-1, 0) cannot infer the rows
    assert q.shape == (2, 3, 0) and fp4sim.dequantize(q).shape == (2, 3, 0)
