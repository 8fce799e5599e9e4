"""fp4sim.convert and fp4sim.decode as a NumPy/ml_dtypes user meets them, against ml_dtypes 0.7.0 bit for bit:
every float16 and every bfloat16 value into every format ml_dtypes has (specials="ml_dtypes"), float32
inputs with NaN payloads, Inf and overflow, the names and dtypes accepted, shapes and scalars, the fast
binary32 path against the golden binary64 one (codes and errors), and the memory a conversion adds.

Run by ctest (python_ml_dtypes) with PYTHONPATH at the built extension.
"""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import fp4sim
from fp4sim import _dtypes

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN/Inf/overflow casts are the point

ML_FORMATS = {"e2m1": ml_dtypes.float4_e2m1fn, "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn,
              "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "ue5m3fn": ml_dtypes.float8_e5m3fnu,
              "e8m0": ml_dtypes.float8_e8m0fnu, "bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32}


def codes(a):
    return a.view(f"u{a.dtype.itemsize}")


def every_value(dtype):
    return np.arange(1 << 16, dtype=np.uint16).view(dtype)


@pytest.mark.parametrize("source", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("fmt", list(ML_FORMATS))
def test_every_16_bit_input_as_ml_dtypes_casts_it(source, fmt):
    x = every_value(source)
    dtype = np.dtype(ML_FORMATS[fmt])
    ours = fp4sim.convert(x, dtype.name, specials="ml_dtypes")
    assert ours.dtype == dtype and ours.shape == x.shape
    theirs = x.astype(dtype)
    bad = np.flatnonzero(codes(ours) != codes(theirs))
    assert bad.size == 0, f"{bad.size} differ, first {codes(x)[bad[:5]]} -> {codes(ours)[bad[:5]]} vs {codes(theirs)[bad[:5]]}"


@pytest.mark.parametrize("source", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("fmt", [f for f in ML_FORMATS if f not in ("e8m0", "ue5m3fn")])
def test_every_16_bit_value_but_nan_as_ml_dtypes_by_default(source, fmt):
    """The hardware convention differs from ml_dtypes only on NaN and overflow: everything in range agrees."""
    x = every_value(source)
    wide = x.astype(np.float32)
    info = next(f for f in fp4sim.formats() if f["name"] == fmt)
    keep = np.isfinite(wide) & (np.abs(wide) <= info["max_finite"])
    theirs = x[keep].astype(ML_FORMATS[fmt])
    np.testing.assert_array_equal(codes(fp4sim.convert(x[keep], fmt)), codes(theirs))


def awkward_float32(n=200_000, seed=11):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    specials = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000, 0xFF812345, 0x7FFFFFFF, 0x7F800000,
                         0xFF800000, 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x7F7FFFFF, 0xFF7FFFFF],
                        np.uint32).view(np.float32)
    return np.concatenate([specials, x])


@pytest.mark.parametrize("fmt", list(ML_FORMATS))
def test_float32_and_float64_inputs_as_ml_dtypes_casts_them(fmt):
    x = awkward_float32()
    for a in (x, x.astype(np.float64)):
        ours = fp4sim.convert(a, fmt, specials="ml_dtypes")
        np.testing.assert_array_equal(codes(ours), codes(a.astype(ML_FORMATS[fmt])), err_msg=f"{fmt} from {a.dtype}")


@pytest.mark.parametrize("fmt", [f["name"] for f in fp4sim.formats()])
@pytest.mark.parametrize("rounding", ["rne", "rna", "rtz", "rup", "rdown", "sr-fast"])
def test_the_fast_binary32_path_equals_the_golden_binary64_path(fmt, rounding):
    x = awkward_float32(50_000)
    info = next(f for f in fp4sim.formats() if f["name"] == fmt)
    if not info["signed"]:
        x = np.abs(x)
    fast = codes(np.asarray(fp4sim.convert(x, fmt, rounding, seed=3)))
    golden = codes(np.asarray(fp4sim.convert(x.astype(np.float64), fmt, rounding, seed=3)))
    np.testing.assert_array_equal(fast, golden)


@pytest.mark.parametrize("fmt,bad_value", [("e2m1", 7.0), ("e2m1", np.nan), ("e8m0", 0.0), ("ue4m3", -1.0),
                                           ("e3m2", 1e6)])
def test_the_fast_path_reports_the_first_value_without_a_code_as_the_golden_path_does(fmt, bad_value):
    x = np.full((3, 50), 0.75, np.float32)
    x[1, 7] = bad_value
    x[2, 9] = bad_value
    messages = []
    for a in (x, x.astype(np.float64)):
        with pytest.raises(fp4sim.DataError) as e:
            fp4sim.convert(a, fmt, saturate=False)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "[1, 7]" in messages[0], messages


def test_names_and_dtypes_of_formats():
    x = np.array([0.3, -2.6, 7.0], np.float32)
    expected = codes(x.astype(ml_dtypes.float4_e2m1fn))
    for name in ("e2m1", "E2M1", "float4_e2m1fn", ml_dtypes.float4_e2m1fn, np.dtype(ml_dtypes.float4_e2m1fn)):
        np.testing.assert_array_equal(codes(fp4sim.convert(x, name)), expected)
    assert fp4sim.convert(x, np.float16).dtype == np.float16
    assert fp4sim.convert(x, "bfloat16").dtype == ml_dtypes.bfloat16
    assert fp4sim.convert(np.abs(x), "ue4m3").dtype == np.uint8  # no ml_dtypes twin: codes
    with pytest.raises(ValueError, match="int8 is not a format"):
        fp4sim.convert(x, np.int8)


def test_shapes_and_scalars():
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 5)).astype(np.float32)
    y = fp4sim.convert(x, "float8_e4m3fn")
    assert y.shape == x.shape
    np.testing.assert_array_equal(codes(y), codes(x.astype(ml_dtypes.float8_e4m3fn)))
    s = fp4sim.convert(1.3, "e4m3")
    assert np.ndim(s) == 0 and isinstance(s, ml_dtypes.float8_e4m3fn) and float(s) == 1.25
    assert isinstance(fp4sim.convert(np.float16(0.3), "e2m1"), ml_dtypes.float4_e2m1fn)
    # Strided and Fortran-ordered inputs give the same codes as their C-ordered copies.
    np.testing.assert_array_equal(codes(fp4sim.convert(x[:, ::2].T, "e2m1")),
                                  codes(np.ascontiguousarray(x[:, ::2].T).astype(ml_dtypes.float4_e2m1fn)))
    with pytest.raises(TypeError, match="x: expected floating-point values"):
        fp4sim.convert(np.arange(4), "e2m1")


def test_decode_gives_float32_and_takes_ml_dtypes_arrays():
    x = awkward_float32(10_000)
    for fmt, dtype in ML_FORMATS.items():
        y = fp4sim.convert(x, fmt, specials="ml_dtypes")
        for decoded in (fp4sim.decode(y), fp4sim.decode(codes(y), fmt)):
            assert decoded.dtype == np.float32
            np.testing.assert_array_equal(decoded, y.astype(np.float32), err_msg=fmt)


def test_convert_adds_no_memory_but_its_output():
    """The peak resident memory a float32 conversion adds is its output and a small constant (1 MiB)."""
    child = r"""
import numpy as np, fp4sim
def peak_kib():  # VmHWM: this process's own peak (ru_maxrss keeps the forking parent's across exec)
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
x = np.empty(1 << 23, np.float32)
np.random.default_rng(1).standard_normal(out=x, dtype=np.float32)
fp4sim.convert(x[:1024], "e2m1"); fp4sim.convert(x[:1024], "bf16")
for fmt in ("e2m1", "bf16"):
    before = peak_kib()
    y = fp4sim.convert(x, fmt)
    print(fmt, (peak_kib() - before) / 1024, y.nbytes / 2**20)
    del y
"""
    out = subprocess.run([sys.executable, "-c", child], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        fmt, added, output = line.split()
        assert float(added) <= float(output) + 1, line


@pytest.mark.parametrize("fmt", list(ML_FORMATS))
def test_every_code_decodes_as_ml_dtypes_reads_it(fmt):
    info = next(f for f in fp4sim.formats() if f["name"] == fmt)
    dtype = np.dtype(ML_FORMATS[fmt])
    if info["bits"] > 16:
        all_codes = np.random.default_rng(5).integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    else:
        all_codes = np.arange(1 << info["bits"], dtype=f"u{dtype.itemsize}")
    ours = fp4sim.decode(all_codes, fmt)
    theirs = all_codes.view(dtype).astype(np.float32)
    assert ours.dtype == np.float32
    nan = np.isnan(theirs)
    np.testing.assert_array_equal(np.isnan(ours), nan)
    np.testing.assert_array_equal(ours[~nan].view(np.uint32), theirs[~nan].view(np.uint32))


# Every name ml_dtypes, MLIR (builtin float types) and PyTorch (torch.<dtype>) give a format fp4sim models,
# beside the ml_dtypes dtype it must mean: MLIR's f8E4M3FN is ml_dtypes' float8_e4m3fn, and so on.
ECOSYSTEM_NAMES = {
    "float4_e2m1fn": ml_dtypes.float4_e2m1fn, "f4E2M1FN": ml_dtypes.float4_e2m1fn, "e2m1fn": ml_dtypes.float4_e2m1fn,
    "float6_e2m3fn": ml_dtypes.float6_e2m3fn, "f6E2M3FN": ml_dtypes.float6_e2m3fn, "e2m3fn": ml_dtypes.float6_e2m3fn,
    "float6_e3m2fn": ml_dtypes.float6_e3m2fn, "f6E3M2FN": ml_dtypes.float6_e3m2fn, "e3m2fn": ml_dtypes.float6_e3m2fn,
    "float8_e3m4": ml_dtypes.float8_e3m4, "f8E3M4": ml_dtypes.float8_e3m4,
    "float8_e4m3": ml_dtypes.float8_e4m3, "f8E4M3": ml_dtypes.float8_e4m3,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "torch.float8_e4m3fn": ml_dtypes.float8_e4m3fn, "e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2, "f8E5M2": ml_dtypes.float8_e5m2, "torch.float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e5m3fnu": ml_dtypes.float8_e5m3fnu, "e5m3fnu": ml_dtypes.float8_e5m3fnu,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
    "torch.float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "e8m0fnu": ml_dtypes.float8_e8m0fnu,
    "bfloat16": ml_dtypes.bfloat16, "torch.bfloat16": ml_dtypes.bfloat16,
    "float16": np.float16, "f16": np.float16, "half": np.float16,
    "float32": np.float32, "f32": np.float32, "float": np.float32,
}


@pytest.mark.parametrize("name", list(ECOSYSTEM_NAMES))
def test_ecosystem_names_mean_what_ml_dtypes_means(name):
    """Every code of the format decodes to ml_dtypes' value (NaN where it has NaN, Inf where it has Inf), so
    the bias, the subnormals and the special encodings agree; the largest finite value is finfo's max."""
    dtype = np.dtype(ECOSYSTEM_NAMES[name])
    fmt = _dtypes.format_name(name)
    info = next((f for f in fp4sim.formats() if f["name"] == fmt), None)  # a preset: its table row
    count = 1 << min(dtype.itemsize * 8, 16)
    if dtype.itemsize == 4:  # float32: every sign, exponent, and the edges of the mantissa
        all_codes = np.concatenate([np.arange(0, 1 << 32, 1 << 16, dtype=np.uint64),
                                    np.arange(0, 1 << 32, 1 << 16, dtype=np.uint64) + 0xFFFF]).astype(np.uint32)
    else:
        bits = ml_dtypes.finfo(dtype).bits if dtype.kind == "V" else dtype.itemsize * 8
        all_codes = np.arange(min(count, 1 << bits), dtype=f"u{dtype.itemsize}")
    theirs = all_codes.view(dtype).astype(np.float32)
    ours = fp4sim.decode(all_codes, name)
    np.testing.assert_array_equal(ours, theirs, err_msg=name)  # NaN positions compared as equal
    largest = float(ml_dtypes.finfo(dtype).max)
    assert float(ours[np.isfinite(ours)].max()) == largest, name
    if info is not None:
        assert info["max_finite"] == largest


def test_e2m1fn_is_the_ocp_format_and_refused_names_say_why():
    # As ml_dtypes' astype: 6 and 100 are both the code 0x7 (value 6); the CLI test checks `--format e2m1fn`.
    x = np.array([6.0, 100.0, 5.0, 4.5], np.float32)
    expected = codes(x.astype(ml_dtypes.float4_e2m1fn))
    np.testing.assert_array_equal(expected, [0x7, 0x7, 0x6, 0x6])
    for name in ("e2m1fn", "E2M1FN", "f4E2M1FN", "FLOAT4_E2M1FN"):
        np.testing.assert_array_equal(codes(fp4sim.convert(x, name)), expected)
    assert _dtypes.format_name(ml_dtypes.float8_e4m3) == "e4m3b7"  # IEEE-style E4M3, not OCP's E4M3FN
    np.testing.assert_array_equal(fp4sim.decode(np.array([1.5, -240, np.inf], ml_dtypes.float8_e4m3)), [1.5, -240, np.inf])
    for name in ("float8_e4m3fnuz", "f8E5M2FNUZ", ml_dtypes.float8_e4m3b11fnuz):
        with pytest.raises(fp4sim.UsageError, match=r"no -0 and one NaN at the negative-zero code 0x80"):
            fp4sim.convert(x, name)
    with pytest.raises(fp4sim.UsageError, match=r"'torch.float4_e2m1fn_x2' is PyTorch's two e2m1 codes in one byte"):
        fp4sim.convert(x, "torch.float4_e2m1fn_x2")
    with pytest.raises(fp4sim.UsageError, match=r"^format: 'e1m2' has a 1-bit exponent.*write 'e1m2fin'"):
        fp4sim.convert(x, "e1m2")


@pytest.mark.parametrize("recipe,dtype", [("mxfp4", ml_dtypes.float8_e8m0fnu), ("nvfp4", ml_dtypes.float8_e4m3fn)])
def test_scales_as_ml_dtypes_hold_the_decoded_scales(recipe, dtype):
    x = np.random.default_rng(5).standard_normal((8, 64)).astype(np.float32) * 1e3
    q = fp4sim.quantize(x, recipe)
    typed = q.scales_as_ml_dtypes()
    assert typed.dtype == dtype and np.shares_memory(typed, q.scales)
    np.testing.assert_array_equal(typed.astype(np.float32), fp4sim.decode(q.scales, q.scale_format))
    with pytest.raises(ValueError, match="no dtype for ue5m3 scales"):
        fp4sim.quantize(x, "ue5m3").scales_as_ml_dtypes()
