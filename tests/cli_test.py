"""The `fp4sim convert` / `fp4sim formats` contract of docs/cli.md, driven through the built binary.

Exit codes: 0 success; 2 usage (bad flag, unknown name); 3 bad input data (unreadable or malformed
file, shape mismatch, a value the format cannot hold). On failure no output file, partial or
temporary, is left behind, and an existing output file is left untouched.

The binary is $FP4SIM_BINARY (ctest sets it to $<TARGET_FILE:fp4sim>).
"""

import json
import os
import struct
import subprocess

import numpy as np
import pytest

FP4SIM = os.environ.get("FP4SIM_BINARY")

pytestmark = pytest.mark.skipif(
    not FP4SIM or not os.path.exists(FP4SIM), reason="FP4SIM_BINARY does not name a built fp4sim binary"
)


def run(*args):
    return subprocess.run([FP4SIM, *map(str, args)], capture_output=True, text=True, timeout=120)


def npy_header(descr, shape, fortran=False, version=(1, 0)):
    """A .npy header written by hand, so malformed variants can be made from it."""
    shape_text = "(" + "".join(f"{d}, " for d in shape).rstrip(" ") + ")" if len(shape) != 1 else f"({shape[0]},)"
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape_text}, }}"
    length_bytes = 2 if version[0] == 1 else 4
    unpadded = 6 + 2 + length_bytes + len(header) + 1
    header += " " * ((64 - unpadded % 64) % 64) + "\n"
    length = struct.pack("<H" if length_bytes == 2 else "<I", len(header))
    return b"\x93NUMPY" + bytes(version) + length + header.encode("latin1")


def files_in(directory):
    return sorted(os.listdir(directory))


@pytest.fixture
def x32(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.array([0.0, 0.25, 0.75, 2.5, -0.0, -7.0, 5.0, 3.5], dtype=np.float32))
    return path


# --- success ------------------------------------------------------------------------------------


def test_convert_e2m1_codes_and_decoded(tmp_path, x32):
    out, dec = tmp_path / "codes.npy", tmp_path / "y.npy"
    r = run("convert", "--format", "e2m1", "--in", x32, "--out", out, "--decoded", dec)
    assert r.returncode == 0, r.stderr
    codes = np.load(out)
    assert codes.dtype == np.uint8 and codes.shape == (8,)
    # docs/semantics.md G3: 0.25 -> 0, 0.75 -> 1.0 (0x2), 2.5 -> 2 (0x4), -0 -> 0x8, -7 -> -6 (0xF), 5 -> 4, 3.5 -> 4
    assert codes.tolist() == [0x0, 0x0, 0x2, 0x4, 0x8, 0xF, 0x6, 0x6]
    y = np.load(dec)
    assert y.dtype == np.float64 and y.shape == (8,)
    assert y.tolist() == [0.0, 0.0, 1.0, 2.0, -0.0, -6.0, 4.0, 4.0]
    assert np.signbit(y[4])
    assert files_in(tmp_path) == ["codes.npy", "x.npy", "y.npy"]


def test_convert_keeps_2d_shape_and_reads_float64(tmp_path):
    x = np.array([[1.0, -2.0, 448.0], [1e9, 0.0019531250000000002, -0.0]], dtype=np.float64)
    np.save(tmp_path / "x.npy", x)
    r = run("convert", "--format", "e4m3", "--in", tmp_path / "x.npy", "--out", tmp_path / "c.npy")
    assert r.returncode == 0, r.stderr
    codes = np.load(tmp_path / "c.npy")
    assert codes.shape == (2, 3) and codes.dtype == np.uint8
    assert codes.tolist() == [[0x38, 0xC0, 0x7E], [0x7E, 0x01, 0x80]]


def test_convert_e2m1fn_is_ml_dtypes_float4_e2m1fn(tmp_path):
    # ml_dtypes' float4_e2m1fn (MLIR f4E2M1FN): no NaN, max 6, so 6 and 100 are both the code 0x7.
    x = np.array([6.0, 100.0, 5.0, -7.0], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    for name in ("e2m1fn", "f4E2M1FN", "float4_e2m1fn"):
        r = run("convert", "--format", name, "--in", tmp_path / "x.npy", "--out", tmp_path / "c.npy")
        assert r.returncode == 0, r.stderr
        assert np.load(tmp_path / "c.npy").tolist() == [0x7, 0x7, 0x6, 0xF], name


@pytest.mark.parametrize("fmt,dtype", [("bf16", np.uint16), ("fp16", np.uint16), ("fp32", np.uint32), ("e8m0", np.uint8)])
def test_code_dtype_follows_the_format_width(tmp_path, x32, fmt, dtype):
    x = np.array([1.0, 2.0, 0.5], dtype=np.float32)
    np.save(tmp_path / "p.npy", x)
    r = run("convert", "--format", fmt, "--in", tmp_path / "p.npy", "--out", tmp_path / "c.npy", "--decoded", tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "c.npy").dtype == dtype
    assert np.load(tmp_path / "y.npy").tolist() == [1.0, 2.0, 0.5]


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_versions_1_to_3_are_read(tmp_path, version):
    path = tmp_path / "v.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.array([1.5, -3.0], dtype="<f4"), version=version)
    r = run("convert", "--format", "e2m1", "--in", path, "--out", tmp_path / "c.npy")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "c.npy").tolist() == [0x3, 0xD]


def test_explicit_rbits(tmp_path):
    # sr-fastest, k = 8: 2.25 has delta 1/4 between 2 (0x4) and 3 (0x5): up iff r >= 192.
    np.save(tmp_path / "x.npy", np.array([2.25, 2.25, -2.25], dtype=np.float32))
    np.save(tmp_path / "r.npy", np.array([191, 192, 255], dtype=np.uint8))
    r = run("convert", "--format", "e2m1", "--rounding", "sr-fastest", "--rbits", tmp_path / "r.npy",
            "--in", tmp_path / "x.npy", "--out", tmp_path / "c.npy")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "c.npy").tolist() == [0x4, 0x5, 0xD]
    # uint16 random integers with --sr-bits 12: 2.25 needs r >= 3072.
    np.save(tmp_path / "r16.npy", np.array([3071, 3072, 4095], dtype=np.uint16))
    r = run("convert", "--format", "e2m1", "--rounding", "sr-fastest", "--sr-bits", 12, "--rbits", tmp_path / "r16.npy",
            "--in", tmp_path / "x.npy", "--out", tmp_path / "c.npy")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "c.npy").tolist() == [0x4, 0x5, 0xD]


def test_seeded_stochastic_rounding_is_reproducible(tmp_path):
    np.save(tmp_path / "x.npy", np.full(1000, 2.5, dtype=np.float32) + np.linspace(0, 0.49, 1000, dtype=np.float32))
    outs = []
    for name in ("a", "b"):
        r = run("convert", "--format", "e2m1", "--rounding", "sr-fast", "--seed", 7, "--in", tmp_path / "x.npy",
                "--out", tmp_path / f"{name}.npy")
        assert r.returncode == 0, r.stderr
        outs.append(np.load(tmp_path / f"{name}.npy"))
    assert (outs[0] == outs[1]).all()
    assert set(np.unique(outs[0]).tolist()) == {0x4, 0x5}  # 2 or 3: both occur


def test_help_and_version_exit_zero():
    for args in (["--help"], ["convert", "--help"], ["formats", "--help"], ["--version"]):
        r = run(*args)
        assert r.returncode == 0, (args, r.stderr)


# --- usage errors: exit 2 -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        ["--format", "e9m9"],
        ["--format", "fp8"],
        ["--format", "E2M1"],
        ["--format", "e1m2"],  # the message names e1m2fin and e1m2fn
        ["--format", "float8_e4m3fnuz"],  # an encoding fp4sim does not model, said so
        ["--format", "e2m1", "--rounding", "nearest"],
        ["--format", "e2m1", "--bogus-flag"],
        ["--format", "e2m1", "--saturate", "--no-saturate"],
        ["--format", "e2m1", "--sr-bits", "0"],
        ["--format", "e2m1", "--sr-bits", "17"],
        ["--format", "e2m1", "--specials", "python"],
        ["--format", "e2m1", "--rounding", "rne", "--rbits", "RBITS"],  # --rbits needs a stochastic mode
        ["--rounding", "rne"],  # --format missing
    ],
    ids=lambda a: " ".join(a),
)
def test_usage_errors_exit_2_and_write_nothing(tmp_path, x32, extra):
    np.save(tmp_path / "rbits.npy", np.zeros(8, dtype=np.uint8))
    extra = [str(tmp_path / "rbits.npy") if a == "RBITS" else a for a in extra]
    before = files_in(tmp_path)
    r = run("convert", *extra, "--in", x32, "--out", tmp_path / "c.npy", "--decoded", tmp_path / "y.npy")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip(), "a diagnostic is printed"
    assert files_in(tmp_path) == before


def test_usage_errors_without_subcommand_or_with_unknown_one():
    assert run().returncode == 2
    assert run("frobnicate").returncode == 2
    assert run("convert").returncode == 2  # required flags missing


# --- data errors: exit 3 --------------------------------------------------------------------------


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def f32(values):
    return np.asarray(values, dtype="<f4").tobytes()


BAD_INPUTS = {
    "bad_magic": lambda: b"\x93NUMPZ\x01\x00" + npy_header("<f4", (2,))[8:] + f32([1, 2]),
    "not_npy_at_all": lambda: b"hello, world\n",
    "empty_file": lambda: b"",
    "truncated_magic": lambda: b"\x93NUM",
    "truncated_header": lambda: npy_header("<f4", (2,))[:30],
    "truncated_data": lambda: npy_header("<f4", (4,)) + f32([1, 2, 3]),
    "fortran_order": lambda: npy_header("<f4", (2, 2), fortran=True) + f32([1, 2, 3, 4]),
    "dtype_int32": lambda: npy_header("<i4", (2,)) + np.array([1, 2], "<i4").tobytes(),
    "dtype_big_endian_float": lambda: npy_header(">f4", (2,)) + np.array([1, 2], ">f4").tobytes(),
    "dtype_uint8_values": lambda: npy_header("|u1", (2,)) + bytes([1, 2]),
    "dtype_float16": lambda: npy_header("<f2", (2,)) + np.array([1, 2], "<f2").tobytes(),
    "three_dimensional": lambda: npy_header("<f4", (1, 2, 2)) + f32([1, 2, 3, 4]),
    "unsupported_version": lambda: npy_header("<f4", (2,), version=(4, 0)) + f32([1, 2]),
    "no_shape_key": lambda: b"\x93NUMPY\x01\x00" + struct.pack("<H", 54) + b"{'descr': '<f4', 'fortran_order': False, }".ljust(53) + b"\n" + f32([1]),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_malformed_input_exits_3_and_writes_nothing(tmp_path, case):
    path = write(tmp_path / "x.npy", BAD_INPUTS[case]())
    before = files_in(tmp_path)
    r = run("convert", "--format", "e2m1", "--in", path, "--out", tmp_path / "c.npy", "--decoded", tmp_path / "y.npy")
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "x.npy" in r.stderr, "the message names the file"
    assert files_in(tmp_path) == before


def test_missing_input_file_exits_3(tmp_path):
    r = run("convert", "--format", "e2m1", "--in", tmp_path / "absent.npy", "--out", tmp_path / "c.npy")
    assert r.returncode == 3, r.stderr
    assert files_in(tmp_path) == []


@pytest.mark.parametrize(
    "fmt,values,flags",
    [
        ("ue4m3", [1.0, -2.0], []),                      # negative into an unsigned format
        ("ue5m3", [1.0, -0.5], []),
        ("e8m0", [4.0, -1.0], []),
        ("ue5m3", [1.0, float("nan")], ["--no-saturate"]),  # NaN, and ue5m3 has no NaN
        ("e2m1", [float("nan")], ["--no-saturate"]),
        ("ue5m3", [61441.0 * 1.04], ["--no-saturate"]),  # above 61,440 (rounds past it): no Inf, no NaN
        ("e2m1", [7.0], ["--no-saturate"]),              # ties up to 8: overflow without saturation
        ("e8m0", [0.0], ["--no-saturate"]),              # no zero: NaN without saturation
        ("e2m3", [float("inf")], ["--no-saturate"]),
    ],
)
def test_values_the_format_cannot_hold_exit_3(tmp_path, fmt, values, flags):
    np.save(tmp_path / "x.npy", np.array(values, dtype=np.float64))
    before = files_in(tmp_path)
    r = run("convert", "--format", fmt, *flags, "--in", tmp_path / "x.npy", "--out", tmp_path / "c.npy",
            "--decoded", tmp_path / "y.npy")
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "element [" in r.stderr, "the message names the element"
    assert files_in(tmp_path) == before


def test_values_that_saturate_are_not_errors(tmp_path):
    np.save(tmp_path / "x.npy", np.array([1.0, float("nan"), 1e6], dtype=np.float64))
    r = run("convert", "--format", "ue5m3", "--in", tmp_path / "x.npy", "--out", tmp_path / "c.npy")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "c.npy").tolist() == [0x78, 0xF7, 0xF7]


def test_overflow_and_special_values_follow_nvidia(tmp_path):
    # docs/semantics.md §0.2, as cuda_fp8.h: saturating, +-Inf -> +-max in e5m2 too; not saturating, an
    # e4m3 overflow NaN keeps the sign; a NaN input is the canonical 0x7F in both.
    x = np.array([np.inf, -np.inf, 1e6, -1e6, np.nan, -np.nan], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    expected = {("e5m2", "--saturate"): [0x7B, 0xFB, 0x7B, 0xFB, 0x7F, 0x7F],
                ("e5m2", "--no-saturate"): [0x7C, 0xFC, 0x7C, 0xFC, 0x7F, 0x7F],
                ("e4m3", "--saturate"): [0x7E, 0xFE, 0x7E, 0xFE, 0x7F, 0x7F],
                ("e4m3", "--no-saturate"): [0x7F, 0xFF, 0x7F, 0xFF, 0x7F, 0x7F]}
    for (fmt, sat), codes in expected.items():
        r = run("convert", "--format", fmt, sat, "--in", tmp_path / "x.npy", "--out", tmp_path / "c.npy")
        assert r.returncode == 0, r.stderr
        assert np.load(tmp_path / "c.npy").tolist() == codes, (fmt, sat)


@pytest.mark.parametrize(
    "rbits",
    [
        np.zeros(7, dtype=np.uint8),                # shape mismatch
        np.zeros((2, 4), dtype=np.uint8),           # same size, other shape
        np.zeros(8, dtype=np.float32),              # not integers
        np.array([0] * 7 + [256], dtype=np.uint16),  # does not fit --sr-bits 8
    ],
    ids=["short", "reshaped", "float32", "too_wide"],
)
def test_bad_rbits_exit_3(tmp_path, x32, rbits):
    np.save(tmp_path / "r.npy", rbits)
    before = files_in(tmp_path)
    r = run("convert", "--format", "e2m1", "--rounding", "sr-fast", "--rbits", tmp_path / "r.npy", "--in", x32,
            "--out", tmp_path / "c.npy", "--decoded", tmp_path / "y.npy")
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert files_in(tmp_path) == before


def test_missing_rbits_file_exits_3(tmp_path, x32):
    r = run("convert", "--format", "e2m1", "--rounding", "sr-fast", "--rbits", tmp_path / "absent.npy", "--in", x32,
            "--out", tmp_path / "c.npy")
    assert r.returncode == 3, r.stderr


def test_failure_leaves_an_existing_output_untouched(tmp_path):
    np.save(tmp_path / "x.npy", np.array([-1.0], dtype=np.float32))
    (tmp_path / "c.npy").write_bytes(b"previous contents")
    r = run("convert", "--format", "ue4m3", "--in", tmp_path / "x.npy", "--out", tmp_path / "c.npy")
    assert r.returncode == 3
    assert (tmp_path / "c.npy").read_bytes() == b"previous contents"
    assert files_in(tmp_path) == ["c.npy", "x.npy"]


def test_unwritable_output_exits_3(tmp_path, x32):
    r = run("convert", "--format", "e2m1", "--in", x32, "--out", tmp_path / "no" / "such" / "dir" / "c.npy")
    assert r.returncode == 3, r.stderr
    assert files_in(tmp_path) == ["x.npy"]


def test_unwritable_codes_output_leaves_no_decoded_file(tmp_path, x32):
    r = run("convert", "--format", "e2m1", "--in", x32, "--out", tmp_path / "no" / "dir" / "c.npy",
            "--decoded", tmp_path / "y.npy")
    assert r.returncode == 3, r.stderr
    assert files_in(tmp_path) == ["x.npy"]


# --- formats --------------------------------------------------------------------------------------


def strict_json(text):
    def no_constants(name):
        raise ValueError(f"bare {name} in JSON")

    return json.loads(text, parse_constant=no_constants)


EXPECTED_FORMATS = {
    # name: bits, exponent_bits, mantissa_bits, bias, signed, subnormals, max_finite, min_normal, min_subnormal, has_inf, has_nan
    "e2m1": (4, 2, 1, 1, True, True, 6.0, 1.0, 0.5, False, False),
    "e2m3": (6, 2, 3, 1, True, True, 7.5, 1.0, 0.125, False, False),
    "e3m2": (6, 3, 2, 3, True, True, 28.0, 0.25, 0.0625, False, False),
    "e4m3": (8, 4, 3, 7, True, True, 448.0, 2.0**-6, 2.0**-9, False, True),
    "e5m2": (8, 5, 2, 15, True, True, 57344.0, 2.0**-14, 2.0**-16, True, True),
    "ue4m3": (8, 4, 3, 7, False, True, 448.0, 2.0**-6, 2.0**-9, False, True),
    "ue5m3": (8, 5, 3, 15, False, True, 61440.0, 2.0**-14, 2.0**-17, False, False),
    "ue5m3fn": (8, 5, 3, 15, False, True, 114688.0, 2.0**-14, 2.0**-17, False, True),
    "e8m0": (8, 8, 0, 127, False, False, 2.0**127, 2.0**-127, None, False, True),
    "bf16": (16, 8, 7, 127, True, True, float.fromhex("0x1.FEp127"), 2.0**-126, 2.0**-133, True, True),
    "fp16": (16, 5, 10, 15, True, True, 65504.0, 2.0**-14, 2.0**-24, True, True),
    "fp32": (32, 8, 23, 127, True, True, float.fromhex("0x1.FFFFFEp127"), 2.0**-126, 2.0**-149, True, True),
}
KEYS = ["bits", "exponent_bits", "mantissa_bits", "bias", "signed", "subnormals", "max_finite", "min_normal",
        "min_subnormal", "has_inf", "has_nan"]


def test_formats_json_keys_and_values():
    r = run("formats", "--json")
    assert r.returncode == 0, r.stderr
    rows = strict_json(r.stdout)
    assert isinstance(rows, list)
    names = [row["name"] for row in rows]
    assert len(names) == len(set(names)), "one row per format"
    assert [n for n in names if n in EXPECTED_FORMATS] == list(EXPECTED_FORMATS), "docs/cli.md's names, in its order"
    for row in rows:
        if row["name"] not in EXPECTED_FORMATS:
            continue  # docs/cli.md: formats may be added
        for key in ["name", *KEYS]:
            assert key in row, (row["name"], key)
        expected = dict(zip(KEYS, EXPECTED_FORMATS[row["name"]]))
        for key, want in expected.items():
            got = row[key]
            if want is None:
                assert got is None and row.get(f"{key}_note"), (row["name"], key, "null needs a *_note")
            elif isinstance(want, bool):
                assert got is want, (row["name"], key, got, want)
            elif isinstance(want, int):
                assert type(got) is int and got == want, (row["name"], key, got, want)
            else:
                assert isinstance(got, (int, float)) and not isinstance(got, bool) and got == want, (row["name"], key, got, want)
        for key in ("bits", "exponent_bits", "mantissa_bits", "bias"):
            assert isinstance(row[key], int) and not isinstance(row[key], bool), (row["name"], key)
        for key in ("signed", "subnormals", "has_inf", "has_nan"):
            assert isinstance(row[key], bool), (row["name"], key)


def test_formats_table_lists_every_format():
    r = run("formats")
    assert r.returncode == 0, r.stderr
    for name in EXPECTED_FORMATS:
        assert any(line.split()[0] == name for line in r.stdout.splitlines() if line.strip()), name
