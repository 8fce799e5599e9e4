"""The Python module `fp4sim` against the CLI it mirrors (same golden model, same bytes, same messages),
its zero-copy and DLPack paths, and verify_quantize / verify_gemm on planted defects.

Run by ctest (python_module) with PYTHONPATH at the built extension and FP4SIM_BINARY at the CLI.
"""

import json
import os
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest

import fp4sim

from module_helpers import (ANALYSES, BINARY, HAS_ANALYSES, ROOT, TRACE, cli, needs_analyses,  # noqa: F401
                            needs_cli, tensor)


class DLPackOnly:
    """An object that offers nothing but the DLPack protocol (as a PyTorch CPU tensor does)."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


# ---------------------------------------------------------------------------------------------------
# Same answers as the CLI


@needs_cli
def test_formats_match_the_cli():
    theirs = json.loads(cli("formats", "--json").stdout)
    ours = fp4sim.formats()
    assert [f["name"] for f in ours] == [f["name"] for f in theirs]
    for a, b in zip(ours, theirs):
        for key in ("bits", "exponent_bits", "mantissa_bits", "bias", "signed", "subnormals", "max_finite",
                    "min_normal", "min_subnormal", "has_inf", "has_nan"):
            assert a[key] == b[key], (a["name"], key)


@needs_cli
@pytest.mark.parametrize("fmt,rounding", [("e2m1", "rne"), ("e4m3", "rtz"), ("ue5m3", "rne"), ("e8m0", "rup"),
                                          ("e2m1", "sr-fastest"), ("bf16", "rna")])
def test_convert_matches_the_cli(tmp_path, fmt, rounding):
    x = tensor(3, 40, seed=5)
    if fmt.startswith("u") or fmt == "e8m0":
        x = np.abs(x) + np.float32(2**-20)
    np.save(tmp_path / "x.npy", x)
    cli("convert", "--format", fmt, "--rounding", rounding, "--seed", 9, "--in", tmp_path / "x.npy",
        "--out", tmp_path / "c.npy", "--decoded", tmp_path / "d.npy")
    theirs = np.load(tmp_path / "c.npy")
    ours = fp4sim.convert(x, fmt, rounding, seed=9).view(theirs.dtype)  # the codes under their ml_dtypes dtype
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)
    decoded = fp4sim.decode(ours, fmt)
    assert decoded.dtype == np.float32
    np.testing.assert_array_equal(decoded.astype(np.float64).view(np.uint64), np.load(tmp_path / "d.npy").view(np.uint64))


@needs_cli
@pytest.mark.parametrize("recipe", fp4sim.recipes())
@pytest.mark.parametrize("role", ["activation", "weight", "grad_output"])
def test_quantize_matches_the_cli(tmp_path, recipe, role):
    h5py = pytest.importorskip("h5py")
    x = tensor(37, 70, seed=zlib.crc32(f"{recipe}/{role}".encode()))
    np.save(tmp_path / "x.npy", x)
    cli("quantize", "--recipe", recipe, "--role", role, "--seed", 3, "--in", tmp_path / "x.npy", "--out", tmp_path / "q.h5")
    q = fp4sim.quantize(x, recipe, role, seed=3)
    with h5py.File(tmp_path / "q.h5") as f:
        np.testing.assert_array_equal(q.codes, f["codes"][()])
        np.testing.assert_array_equal(q.scales, f["scales"][()])
        np.testing.assert_array_equal(fp4sim.dequantize(q).view(np.uint32), f["dequantized"][()].view(np.uint32))
        assert q.tensor_scale == f.attrs["global_encode_scale"]
        assert q.global_decode_scale == f.attrs["global_decode_scale"]
        assert q.tensor_amax == f.attrs["tensor_amax"]
        assert q.block == (f.attrs["block_rows"], f.attrs["block_cols"])
        assert q.rounding == f.attrs["rounding"]


@needs_cli
@pytest.mark.parametrize("role", ["activation", "weight"])
def test_row_scaled_quantize_matches_the_cli(tmp_path, role):
    """A stack profile as the recipe, and the row amaxes (row-scaled NVFP4) beside the bytes."""
    h5py = pytest.importorskip("h5py")
    x = tensor(37, 64, seed=5) * np.exp2(np.arange(37) % 9 - 4)[:, None].astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    cli("quantize", "--recipe", "nvfp4-row", "--role", role, "--in", tmp_path / "x.npy", "--out", tmp_path / "q.h5")
    q = fp4sim.quantize(x, "nvfp4-row", role)
    with h5py.File(tmp_path / "q.h5") as f:
        np.testing.assert_array_equal(q.codes, f["codes"][()])
        np.testing.assert_array_equal(q.scales, f["scales"][()])
        np.testing.assert_array_equal(q.row_amax.view(np.uint32), f["row_amax"][()].view(np.uint32))
    np.testing.assert_array_equal(q.row_amax, np.abs(x).max(axis=1))
    assert fp4sim.quantize(x, "nvfp4-norht", role, two_d=False).row_amax.size == 0


@needs_cli
@pytest.mark.parametrize("recipe,datapath,k", [("nvfp4", None, 64), ("nvfp4", "sm90-bf16", 64),
                                               ("ue5m3", None, 128), ("mxfp4", "exact", 96)])
def test_gemm_matches_the_cli(tmp_path, recipe, datapath, k):
    a, b = tensor(9, k, seed=1), tensor(5, k, seed=2)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    extra = ["--datapath", datapath] if datapath else []
    cli("gemm", "--recipe", recipe, "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy", *extra, "--out", tmp_path / "c.npy")
    ours = fp4sim.gemm(a, b, recipe, datapath=datapath)
    np.testing.assert_array_equal(ours.view(np.uint32), np.load(tmp_path / "c.npy").view(np.uint32))


def test_gpu_kernel_table_is_in_every_build():
    """The binding hands out emu's kernel table even without the CUDA kernels (fp4sim.torch picks the same
    datapath on CPU tensors as on CUDA tensors from it): each kernel equals a golden datapath row."""
    rows = {row["name"]: row for row in fp4sim._fp4sim.gpu_kernels()}
    assert {name: row["datapath"] for name, row in rows.items()} == {
        "bf16-tc": "sm90-bf16", "probe-matched": "probe-matched", "exact": "exact"}
    assert all(row["datapath"] in fp4sim._fp4sim.datapaths() for row in rows.values())
    assert [rows[n]["k_multiple"] for n in ("bf16-tc", "probe-matched", "exact")] == [1, 64, 1]
    assert [rows[n]["workspace_k_align"] for n in ("bf16-tc", "probe-matched", "exact")] == [16, 16, 0]


@needs_cli
def test_mma_matches_the_cli(tmp_path):
    rng = np.random.default_rng(4)
    a = rng.integers(-8, 8, (4, 32)).astype(np.float32) / 4
    b = rng.integers(-8, 8, (32, 3)).astype(np.float32) / 8
    c = rng.standard_normal((4, 3)).astype(np.float32)
    for name, arr in (("a", a), ("b", b), ("c", c)):
        np.save(tmp_path / f"{name}.npy", arr)
    cli("mma", "--datapath", "sm90-bf16", "--input-format", "bf16", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy",
        "--c", tmp_path / "c.npy", "--out", tmp_path / "d.npy")
    ours = fp4sim.mma(a, b, c, datapath="sm90-bf16", input_format="bf16")
    np.testing.assert_array_equal(ours.view(np.uint32), np.load(tmp_path / "d.npy").view(np.uint32))
    # A and B in their own formats (wgmma e4m3 x e5m2): 1.125 is e4m3 only, 2^-16 e5m2 only.
    a8, b8 = np.zeros((1, 32), np.float32), np.zeros((32, 1), np.float32)
    a8[0, 0], b8[0, 0] = 1.125, 2.0**-16
    np.save(tmp_path / "a8.npy", a8)
    np.save(tmp_path / "b8.npy", b8)
    cli("mma", "--datapath", "sm90-fp8", "--a-format", "e4m3", "--b-format", "e5m2", "--a", tmp_path / "a8.npy",
        "--b", tmp_path / "b8.npy", "--out", tmp_path / "d8.npy")
    mixed = fp4sim.mma(a8, b8, datapath="sm90-fp8", a_format="e4m3", b_format="e5m2")
    np.testing.assert_array_equal(mixed.view(np.uint32), np.load(tmp_path / "d8.npy").view(np.uint32))
    assert mixed[0, 0] == np.float32(1.125 * 2.0**-16)


def python_terms(cli_message):
    """The CLI's message with each flag written as the keyword that sets it (--no-snap: snap=False)."""
    switches = {"--saturate": "saturate=True", "--no-saturate": "saturate=False", "--rht": "rht=True",
                "--no-rht": "rht=False", "--snap": "snap=True", "--no-snap": "snap=False", "--one-d": "two_d=False"}
    return re.sub(r"--[a-z][a-z0-9-]*", lambda m: switches.get(m.group(0), m.group(0)[2:].replace("-", "_")),
                  cli_message)


@needs_cli
def test_error_messages_are_the_clis_in_python_terms(tmp_path):
    x = tensor(4, 64)
    np.save(tmp_path / "x.npy", x)
    # A usage error raised by the shared recipe-override code (CLI exit 2).
    r = cli("quantize", "--recipe", "nvfp4", "--block", 1, "--in", tmp_path / "x.npy", "--out", tmp_path / "q.h5", check=False)
    assert r.returncode == 2
    with pytest.raises(fp4sim.UsageError) as e:
        fp4sim.quantize(x, "nvfp4", block=1)
    assert python_terms(r.stderr.strip()) == f"fp4sim: error: {e.value}"
    r = cli("quantize", "--recipe", "nvfp4", "--scale-format", "e9m9", "--in", tmp_path / "x.npy", "--out",
            tmp_path / "q.h5", check=False)
    with pytest.raises(fp4sim.UsageError) as e:
        fp4sim.quantize(x, "nvfp4", scale_format="e9m9")
    assert python_terms(r.stderr.strip()) == f"fp4sim: error: {e.value}"
    # A data error from the library (CLI exit 3).
    np.save(tmp_path / "a.npy", tensor(4, 48))
    r = cli("gemm", "--recipe", "ue5m3", "--a", tmp_path / "a.npy", "--b", tmp_path / "a.npy", "--out",
            tmp_path / "c.npy", check=False)
    assert r.returncode == 3
    with pytest.raises(fp4sim.DataError) as e:
        fp4sim.gemm(tensor(4, 48), tensor(4, 48), "ue5m3")
    assert python_terms(r.stderr.strip()) == f"fp4sim: error: {e.value}"
    assert issubclass(fp4sim.DataError, ValueError) and issubclass(fp4sim.UsageError, ValueError)


def test_docstring_examples_run_as_written(monkeypatch):
    import doctest

    monkeypatch.chdir(ROOT)  # the replay and sweep examples read traces/trace_a.h5
    tests = doctest.DocTestFinder().find(fp4sim, extraglobs={"np": np, "fp4sim": fp4sim})
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        if test.name.split(".")[-1] in ANALYSES and not HAS_ANALYSES:
            continue
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 40 and result.failed == 0


def test_every_public_function_shows_an_example():
    functions = [name for name in fp4sim.__all__
                 if callable(getattr(fp4sim, name)) and not isinstance(getattr(fp4sim, name), type)]
    assert len(functions) >= 17
    assert [name for name in functions if ">>> " not in (getattr(fp4sim, name).__doc__ or "")] == []


def test_errors_name_keywords_and_list_the_valid_values():
    x = tensor(2, 32)
    with pytest.raises(fp4sim.UsageError, match=r"^rounding: expected rne, rna, .*got 'nearest'$") as e:
        fp4sim.convert(x, "e2m1", "nearest")
    with pytest.raises(fp4sim.UsageError, match=r"^rbits needs a stochastic rounding$"):
        fp4sim.convert(x, "e2m1", rbits=np.zeros(x.shape, np.uint8))
    with pytest.raises(fp4sim.DataError, match=r"x: element \[0, 2\] = 7\.5 .*out of range and saturate=False") as e:
        fp4sim.convert(x, "e2m1", saturate=False)
    with pytest.raises(fp4sim.UsageError, match=r"^layout: expected rowmajor, .*got 'swizzled'"):
        fp4sim.verify_quantize(x, np.zeros((2, 16), np.uint8), np.zeros((2, 2), np.uint8), "nvfp4", layout="swizzled")
    with pytest.raises(fp4sim.UsageError, match=r"^format: unknown format 'e9m9' \(known: e2m1 e2m3 .*ml_dtypes/MLIR/PyTorch names such as float4_e2m1fn"):
        fp4sim.convert(x, "e9m9")
    with pytest.raises(fp4sim.DTypeError, match=r"^x: expected floating-point values"):
        fp4sim.convert(x.astype(np.int16), "e2m1")
    assert issubclass(fp4sim.DTypeError, TypeError) and issubclass(fp4sim.DTypeError, fp4sim.DataError)
    # a message naming one side of a switch names the keyword with its value
    with pytest.raises(fp4sim.UsageError, match=r"^snap=False applies only to datapath probe-matched$"):
        fp4sim.gemm(x, x, "mxfp4", snap=False)


# ---------------------------------------------------------------------------------------------------
# N-D tensors, 16-bit inputs, dequantize from a kernel's raw bytes


def test_leading_axes_are_batch():
    x = np.random.default_rng(4).standard_normal((2, 3, 32, 48)).astype(np.float32)
    flat = x.reshape(-1, 48)
    # 1-D blocks along the last axis: the tensor as [prod(leading), last].
    q, qf = fp4sim.quantize(x, "nvfp4"), fp4sim.quantize(flat, "nvfp4")
    assert q.shape == x.shape and q.codes.shape == (2, 3, 32, 24) and q.scales.shape == (2, 3, 32, 3)
    np.testing.assert_array_equal(q.codes.reshape(qf.codes.shape), qf.codes)
    np.testing.assert_array_equal(fp4sim.dequantize(q), fp4sim.dequantize(qf).reshape(x.shape))
    # 2-D tiles over the last two axes: each matrix's tiles are those of the matrix quantized alone under
    # the whole tensor's amax.
    q2 = fp4sim.quantize(x, "nvfp4", two_d=True)
    assert q2.scales.shape == (2, 3, 2, 3)
    alone = fp4sim.quantize(x[1, 2], "nvfp4", two_d=True, amax_ref=q2.tensor_amax, tensor_scale="periodic:1")
    np.testing.assert_array_equal(q2.scales[1, 2], alone.scales)
    np.testing.assert_array_equal(q2.codes[1, 2], alone.codes)
    np.testing.assert_array_equal(fp4sim.dequantize(q2)[1, 2], fp4sim.dequantize(alone))


def test_float16_and_bfloat16_tensors_quantize_as_their_float32_values():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = tensor(8, 64, seed=6)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        narrow = x.astype(dtype)
        q, q32 = fp4sim.quantize(narrow, "nvfp4"), fp4sim.quantize(narrow.astype(np.float32), "nvfp4")
        np.testing.assert_array_equal(q.codes, q32.codes)
        np.testing.assert_array_equal(q.scales, q32.scales)
        np.testing.assert_array_equal(fp4sim.gemm(narrow, narrow[:4], "nvfp4"),
                                      fp4sim.gemm(narrow.astype(np.float32), narrow[:4].astype(np.float32), "nvfp4"))


@pytest.mark.parametrize("recipe,overrides", [("nvfp4", {}), ("nvfp4", {"dequantize_order": "portable"}),
                                              ("mxfp4", {}), ("ue5m3", {})])
def test_dequantize_from_a_kernels_raw_bytes(recipe, overrides):
    x = tensor(128, 64, seed=12)
    q = fp4sim.quantize(x, recipe, **overrides)
    golden = fp4sim.dequantize(q)
    kinds = {"amax": q.tensor_amax, "encode": q.tensor_scale, "decode": q.global_decode_scale}
    if q.dequantize_order == "te_kernel":
        kinds = {"amax": q.tensor_amax}
    if not q.tensor_scaled:
        kinds = {"amax": None}
    for layout in ("rowmajor", "swizzled-128x4"):
        for nibbles in ("low-first", "high-first", "unpacked"):
            for kind, value in kinds.items():
                y = fp4sim.dequantize(q.codes_in(nibbles), q.scales_in(layout), recipe, shape=q.shape,
                                      tensor_scale=value, tensor_scale_kind=kind, layout=layout, nibbles=nibbles,
                                      **overrides)
                np.testing.assert_array_equal(y.view(np.uint32), golden.view(np.uint32),
                                              err_msg=f"{layout} {nibbles} {kind}")
    if q.tensor_scaled:
        with pytest.raises(ValueError, match="tensor_scale"):
            fp4sim.dequantize(q.codes, q.scales, recipe, **overrides)
        # A wrong tensor scale changes the values: the raw path does use it.
        y = fp4sim.dequantize(q.codes, q.scales, recipe, tensor_scale=q.tensor_amax * 2, **overrides)
        assert not np.array_equal(y, golden)


# ---------------------------------------------------------------------------------------------------
# Arrays in: zero copy, DLPack, dtypes


def test_float32_c_contiguous_is_read_in_place():
    x = tensor(16, 64)
    assert fp4sim._fp4sim._address(fp4sim._float32(x, "x")) == x.ctypes.data
    via_dlpack = fp4sim._float32(DLPackOnly(x), "x")
    assert fp4sim._fp4sim._address(via_dlpack) == x.ctypes.data


def test_convert_and_decode_hand_the_callers_buffer_to_the_library(monkeypatch):
    # The extension takes these arrays with noconvert (no implicit copy): the buffer it is handed is the one read.
    seen = {}  # the buffer of each function's last call
    for name in ("convert", "decode"):
        original = getattr(fp4sim._fp4sim, name)
        monkeypatch.setattr(fp4sim._fp4sim, name,
                            lambda a, *rest, _f=original, _n=name: (seen.__setitem__(_n, a.ctypes.data), _f(a, *rest))[1])
    x = tensor(16, 64)
    codes = fp4sim.convert(x, "e2m1").view(np.uint8)
    fp4sim.decode(codes, "e2m1")
    assert seen == {"convert": x.ctypes.data, "decode": codes.ctypes.data}


def test_dlpack_objects_quantize_like_arrays():
    x = tensor(16, 64, seed=8)
    q1, q2 = fp4sim.quantize(x, "nvfp4"), fp4sim.quantize(DLPackOnly(x), "nvfp4")
    np.testing.assert_array_equal(q1.codes, q2.codes)
    np.testing.assert_array_equal(q1.scales, q2.scales)
    r = fp4sim.verify_quantize(DLPackOnly(x), DLPackOnly(np.array(q1.codes)), q1.scales, "nvfp4")
    assert r.bit_exact


def test_torch_cpu_tensors_without_a_copy():
    torch = pytest.importorskip("torch")
    t = torch.randn(8, 32, dtype=torch.float32)
    a = fp4sim._float32(t, "x")
    assert fp4sim._fp4sim._address(a) == t.data_ptr()
    np.testing.assert_array_equal(fp4sim.quantize(t, "mxfp4").codes, fp4sim.quantize(t.numpy(), "mxfp4").codes)


def test_other_layouts_and_dtypes():
    x = tensor(16, 64, seed=3)
    q = fp4sim.quantize(x, "nvfp4")
    # A Fortran-ordered or strided view is copied to C order first, with the same result.
    np.testing.assert_array_equal(fp4sim.quantize(np.asfortranarray(x), "nvfp4").codes, q.codes)
    big = np.zeros((16, 128), np.float32)
    big[:, ::2] = x
    np.testing.assert_array_equal(fp4sim.quantize(big[:, ::2], "nvfp4").codes, q.codes)
    # float64 holding float32 values is accepted; anything else is a data error naming the element.
    np.testing.assert_array_equal(fp4sim.quantize(x.astype(np.float64), "nvfp4").codes, q.codes)
    bad = x.astype(np.float64)
    bad[1, 2] = 0.1
    with pytest.raises(fp4sim.DataError, match=r"x: element 66 \(0\.100000\) is not a binary32 value"):
        fp4sim.quantize(bad, "nvfp4")
    with pytest.raises(TypeError, match="x: expected float32, float16, bfloat16 or float64 values, got int32") as e:
        fp4sim.quantize(x.astype(np.int32), "nvfp4")
    assert isinstance(e.value, fp4sim.DataError)
    with pytest.raises(ValueError, match=r"multiple of 16 rows per matrix, got shape \(2, 8, 32\)"):
        fp4sim.quantize(np.zeros((2, 8, 32), np.float32), "nvfp4", two_d=True)
    # 1-D is one row (under the same tensor amax).
    np.testing.assert_array_equal(fp4sim.quantize(x[0], "nvfp4", amax_ref=q.tensor_amax, tensor_scale="periodic:1").codes,
                                  q.codes[:1])


def test_outputs_are_numpy_and_read_only():
    q = fp4sim.quantize(tensor(4, 33), "ue5m3")
    assert isinstance(q.codes, np.ndarray) and q.codes.dtype == np.uint8 and q.codes.shape == (4, 17)
    assert q.scales.shape == (4, 3)
    assert not q.codes.flags.writeable
    assert isinstance(q.tensor_scale, np.float32)
    y = q.dequantize()
    assert y.dtype == np.float32 and y.shape == (4, 33) and y.flags.writeable
    del q  # the views keep their storage alive
    assert y.sum() == y.sum()


# ---------------------------------------------------------------------------------------------------
# verify_quantize / verify_gemm from Python


def test_verify_quantize_finds_a_tie_and_a_swapped_nibble():
    # MXFP4: a block of 32 with amax 6 has scale 2^0, so y = x; 2.5 is the E2M1 midpoint of 2 and 3.
    x = np.full((1, 64), 0.5, np.float32)
    x[0, 0] = 6.0
    x[0, 5] = 2.5
    x[0, 40:42] = [1.5, -4.0]
    q = fp4sim.quantize(x, "mxfp4")
    codes = np.array(q.codes)
    codes[0, 2] = (codes[0, 2] & 0x0F) | (0x5 << 4)  # element 5: 0x4 (2) -> 0x5 (3), the tie the other way
    codes[0, 20] = ((codes[0, 20] << 4) | (codes[0, 20] >> 4)) & 0xFF  # elements 40 and 41 exchanged
    r = fp4sim.verify_quantize(x, codes, q.scales, "mxfp4")
    assert not r.bit_exact and not r
    assert r["mismatched_elements"] == 3 and r["swapped_nibble_pairs"] == 1
    tie, first, second = r["mismatches"]
    assert (tie["col"], tie["golden"], tie["theirs"], tie["tie"]) == (5, 0x4, 0x5, True)
    assert "RNE keeps the even code 0x4" in tie["explanation"]
    assert first["swapped_nibbles"] and second["swapped_nibbles"]
    assert "NOT BIT-EXACT: 3 element and 0 scale mismatch(es)" in str(r)


def test_verify_quantize_layouts_and_tensor_scale():
    x = tensor(130, 96, seed=12)
    q = fp4sim.quantize(x, "nvfp4", "weight")
    assert q.block == (16, 16)
    for layout in ("rowmajor", "te-rowrep", "swizzled-128x4"):
        stored = q.scales_in(layout)
        np.testing.assert_array_equal(fp4sim.scales_from_layout(stored, 130, 96, 16, 16, layout), q.scales)
        for nibbles in ("low-first", "high-first", "unpacked"):
            r = fp4sim.verify_quantize(x, q.codes_in(nibbles), stored, "nvfp4", "weight", layout=layout, nibbles=nibbles,
                                       tensor_scale=q.tensor_scale)
            assert r.bit_exact, str(r)
            assert r["tensor_scale_matched"] == "encode"
    r = fp4sim.verify_quantize(x, q.codes, q.scales, "nvfp4", "weight", tensor_scale=np.float32(1.5))
    assert not r.bit_exact and r["mismatches"][0]["kind"] == "tensor_scale"
    # A string is the policy override: without a tensor scale every block changes.
    r = fp4sim.verify_quantize(x, q.codes, q.scales, "nvfp4", "weight", tensor_scale="none")
    assert not r.bit_exact and r["mismatched_scales"] > 0


def test_verify_gemm_exact_planted_and_auto():
    a, b = tensor(6, 128, seed=20), tensor(5, 128, seed=21)
    c = fp4sim.gemm(a, b, "ue5m3")
    r = fp4sim.verify_gemm(a, b, c, "ue5m3")
    assert r.bit_exact and r["exact_matches"] == 30 and r["datapath"] == "probe-matched"
    c2 = c.copy()
    c2[2, 3] = np.nextafter(c2[2, 3], np.float32(np.inf))
    r = fp4sim.verify_gemm(a, b, c2, "ue5m3", worst=1)
    assert not r.bit_exact and r["mismatches"] == 1 and r["ulp_histogram"] == {"+1": 1}
    assert (r["worst"][0]["row"], r["worst"][0]["col"]) == (2, 3)
    assert "E_max" in r["worst"][0]["explanation"]
    theirs = fp4sim.gemm(a, b, "ue5m3", datapath="probe-matched", inner="sm100-f16")
    r = fp4sim.verify_gemm(a, b, theirs, "ue5m3", datapath="auto")
    assert r.bit_exact
    assert any(name.startswith("probe-matched (inner sm100-f16") for name in r["explained_by"])


def test_unknown_options_are_usage_errors():
    x = tensor(2, 32)
    with pytest.raises(fp4sim.UsageError, match="unknown recipe override 'blok'"):
        fp4sim.quantize(x, "nvfp4", blok=32)
    with pytest.raises(fp4sim.UsageError, match="^layout: expected rowmajor"):
        fp4sim.verify_quantize(x, np.zeros((2, 16), np.uint8), np.zeros((2, 2), np.uint8), "nvfp4", layout="colmajor")
    with pytest.raises(fp4sim.UsageError, match="unknown datapath"):
        fp4sim.gemm(x, x, "nvfp4", datapath="sm42")


# ---------------------------------------------------------------------------------------------------
# The worked example of docs/validate-your-kernel.md, run as written: every planted defect is found and
# explained.


def _doc_block(name, index):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    text = open(os.path.join(root, "docs", name)).read()
    return text.split("```python\n")[index + 1].split("```")[0]


def test_worked_example_finds_and_explains_every_planted_defect(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(_doc_block("validate-your-kernel.md", 0), "validate-your-kernel.md", "exec"), {})
    x, codes, scales = np.load("x.npy"), np.load("codes.npy"), np.load("scales.npy")
    r = fp4sim.verify_quantize(x, codes, scales, "nvfp4", max_explained=20)
    assert not r.bit_exact
    assert (r["mismatched_elements"], r["mismatched_scales"], r["swapped_nibble_pairs"]) == (7, 1, 1)
    assert r["elements_consistent_with_their_scale"] == 4
    by_kind = {}
    for m in r["mismatches"]:
        by_kind.setdefault(m["kind"], []).append(m)
    # (a) the element tie
    tie = [m for m in by_kind["element"] if (m["row"], m["col"]) == (1, 7)][0]
    assert tie["tie"] and tie["scaled"] == 2.5 and (tie["golden"], tie["theirs"]) == (4, 5)
    assert "ties away from zero (rna)" in tie["explanation"]
    # (b) the swapped nibbles
    swapped = [m for m in by_kind["element"] if m["swapped_nibbles"]]
    assert sorted((m["row"], m["col"]) for m in swapped) == [(3, 20), (3, 21)]
    # (c) the scale tie, and the element mismatches that follow from it
    (scale,) = by_kind["scale"]
    assert (scale["block_row"], scale["block_col"], scale["golden"], scale["theirs"]) == (2, 1, 0x7A, 0x7B)
    assert scale["tie"] and scale["ideal_scale"] == 336.0
    assert "RNA" in scale["theirs_matches"]
    assert all(m["consistent_with_their_scale"] for m in by_kind["element"] if m["row"] == 2)


def test_worked_gemm_example_is_explained_by_auto(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(_doc_block("validate-your-kernel.md", 2), "validate-your-kernel.md", "exec"), {})
    a, b, c = np.load("a.npy"), np.load("b.npy"), np.load("c.npy")
    r = fp4sim.verify_gemm(a, b, c, "ue5m3")
    assert not r.bit_exact and r["mismatches"] > 0
    r = fp4sim.verify_gemm(a, b, c, "ue5m3", datapath="auto", worst=0)
    assert r.bit_exact and "probe-matched (inner sm90-bf16, no snap)" in r["explained_by"]


def test_fp4sim_torch_without_torch_is_one_clear_import_error():
    # torch made unimportable in a child interpreter (None in sys.modules): the rest of fp4sim still works.
    code = ("import sys; sys.modules['torch'] = None\n"
            "import fp4sim, numpy as np\n"
            "fp4sim.quantize(np.ones(16, np.float32), 'nvfp4')\n"
            "try:\n    import fp4sim.torch\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ImportError: fp4sim.torch needs PyTorch"), r.stdout


# ---------------------------------------------------------------------------------------------------
# replay and sweep: the CLI's numbers, records a DataFrame takes


def _without_run_time(report):
    return {k: v for k, v in report.items() if k != "seconds"}


@needs_cli
@needs_analyses
def test_replay_is_the_clis_json(tmp_path):
    cli("replay", TRACE, "--recipes", "nvfp4,mxfp4", "--steps", "200", "--layers", "layers.0.mlp.down", "--seed", 5,
        "--period", 20, "--json", tmp_path / "r.json", "--csv", tmp_path / "r.csv", "-q")
    theirs = json.load(open(tmp_path / "r.json"))
    ours = fp4sim.replay(TRACE, ["nvfp4", "mxfp4"], steps=200, layers="layers.0.mlp.down", seed=5, period=20)
    assert isinstance(ours, dict) and isinstance(ours, fp4sim.AnalysisReport)
    theirs["trace"]["path"] = ours["trace"]["path"]
    assert _without_run_time(ours) == _without_run_time(theirs)
    assert len(ours["tensors"]) == 6 and len(ours["gemms"]) == 6 and len(ours["headroom"]) == 3
    assert str(ours).startswith("fp4sim replay: ") and "Per recipe" in str(ours)
    # Every CSV column is a field of the entry (block statistics under block_stats) with the same value.
    import csv
    for kind in ("tensors", "gemms", "headroom"):
        rows = list(csv.DictReader(open(tmp_path / f"r_{kind}.csv")))
        assert len(rows) == len(ours[kind])
        for row, entry in zip(rows, ours[kind]):
            fields = {**entry, **entry.get("block_stats", {})}
            for fmt, counts in entry.get("formats", {}).items():  # headroom: per scale format
                fields.update({f"{fmt}_{k}": v for k, v in counts.items()}, blocks=counts["blocks"])
            for column, text in row.items():
                if column == "distribution" or text == "":
                    continue
                value = fields[column]
                if isinstance(value, bool):
                    assert text == str(value).lower(), column
                elif isinstance(value, int):
                    assert int(text) == value, column
                elif isinstance(value, float):
                    assert float(text) == value, column
                else:
                    assert text == value, column


@needs_cli
@needs_analyses
def test_replay_recipe_map_is_the_clis(tmp_path):
    maps = ["lm_head=bf16,*=nvfp4", "*=nvfp4"]
    cli("replay", TRACE, "--recipe-map", "; ".join(maps), "--steps", "1", "--layers", "lm_head|layers.0.mlp.down",
        "--no-gemms", "--json", tmp_path / "r.json", "-q")
    theirs = json.load(open(tmp_path / "r.json"))
    ours = fp4sim.replay(TRACE, recipe_map=maps, steps=1, layers="lm_head|layers.0.mlp.down", gemms=False)
    theirs["trace"]["path"] = ours["trace"]["path"]
    assert _without_run_time(ours) == _without_run_time(theirs)
    assert ours["policies"] == maps and "Per policy" in str(ours)
    taken = [(e["layer"], e["tensor"], e["policy"], e["recipe"]) for e in ours["tensors"]]
    assert ("lm_head", "x", maps[0], "bf16") in taken and ("lm_head", "x", maps[1], "nvfp4") in taken
    assert ("model.layers.0.mlp.down_proj", "x", maps[0], "nvfp4") in taken and len(taken) == 2 * 2 * 3
    with pytest.raises(fp4sim.UsageError, match="recipes or recipe_map"):
        fp4sim.replay(TRACE, "nvfp4", recipe_map="*=nvfp4")
    with pytest.raises(fp4sim.UsageError, match="recipe_map.*no rule for layer"):
        fp4sim.replay(TRACE, recipe_map="lm_head=bf16", gemms=False)


def test_a_user_defined_recipe_is_its_preset_with_keywords():
    x = tensor(48, 96, seed=8)
    spec = fp4sim.quantize(x, "mxfp4:scale_rule=rceil,block=16", "weight")
    keywords = fp4sim.quantize(x, "mxfp4", "weight", scale_rule="rceil", block=16)
    assert spec.recipe == "mxfp4:scale_rule=rceil,block=16" and keywords.recipe == "mxfp4"
    np.testing.assert_array_equal(np.array(spec.codes), np.array(keywords.codes))
    np.testing.assert_array_equal(np.array(spec.scales), np.array(keywords.scales))
    assert fp4sim.quantize(x, "mxfp4:block=16", block=32).block == (1, 32)  # a keyword overrides the spec
    c1 = fp4sim.gemm(x, x, "nvfp4:two_d=false,block=32", "wgrad", seed=3)
    c2 = fp4sim.gemm(x, x, "nvfp4", "wgrad", seed=3, two_d=False, block=32)
    np.testing.assert_array_equal(c1.view(np.uint32), c2.view(np.uint32))
    with pytest.raises(fp4sim.UsageError, match=r"^recipe 'mxfp4:two_d=1': two_d=1: expected true or false$"):
        fp4sim.quantize(x, "mxfp4:two_d=1")


@needs_analyses
def test_replay_takes_user_defined_recipes_in_a_list():
    kw = dict(steps=[1], layers="lm_head", gemms=False)
    r = fp4sim.replay(TRACE, ["mxfp4:scale_rule=rceil,two_d=false", "mxfp4-rceil"], **kw)
    by = {}
    for e in r["tensors"]:
        e = dict(e)
        by.setdefault(e.pop("recipe"), []).append(e)
    assert list(by) == ["mxfp4:scale_rule=rceil,two_d=false", "mxfp4-rceil"]
    assert by["mxfp4:scale_rule=rceil,two_d=false"] == by["mxfp4-rceil"]
    with pytest.raises(fp4sim.UsageError, match="recipes 'mxfp4:bogus=1': unknown override 'bogus'"):
        fp4sim.replay(TRACE, "nvfp4,mxfp4:bogus=1", **kw)


@needs_analyses
def test_sweep_crosses_scale_rules_and_refuses_one_a_scale_format_cannot_take():
    kw = dict(synthetic="normal", rows=16, cols=64, tensor_scales="none", blocks=32)
    r = fp4sim.sweep(scale_formats="e8m0", scale_rules=["floor", "rceil"], **kw)
    assert r["configs"] == ["e2m1/e8m0/b32/none/rne/floor", "e2m1/e8m0/b32/none/rne/rceil"]
    with pytest.raises(fp4sim.UsageError, match="^scale_rules rceil with scale_formats ue4m3: scale rules floor/"):
        fp4sim.sweep(scale_formats="ue4m3", scale_rules="rceil", **kw)


@needs_analyses
def test_replay_records_are_rows_of_scalars():
    r = fp4sim.replay(TRACE, "nvfp4", steps="1", layers="lm_head", gemms=False)
    assert r["gemms"] == [] and len(r["tensors"]) == 3
    for entry in r["tensors"]:
        # What pandas.DataFrame(r["tensors"]) makes one row of: scalars, the nested block statistics, and the
        # decomposition per block-amax decile (pandas.json_normalize(r["tensors"], "amax_deciles", [...])).
        nested = ("block_stats", "amax_deciles")
        assert all(isinstance(v, (int, float, str, bool, type(None))) for k, v in entry.items() if k not in nested)
        assert isinstance(entry["block_stats"], dict)
        assert [d["decile"] for d in entry["amax_deciles"]] == list(range(10))
        assert all(isinstance(v, (int, float, type(None))) for d in entry["amax_deciles"] for k, v in d.items()
                   if not k.endswith("_note"))
    assert [e["tensor"] for e in r["tensors"]] == ["x", "w", "dy"]


@needs_cli
@needs_analyses
@pytest.mark.parametrize("on_trace", [False, True])
def test_sweep_is_the_clis_json(tmp_path, on_trace):
    grid = ["--blocks", "16,32", "--scale-formats", "ue4m3,e8m0", "--tensor-scales", "none,current",
            "--roundings", "rne,sr-fastest", "--seed", 3]
    if on_trace:
        source = [TRACE, "--steps", "1,2000", "--layers", "lm_head", "--hold", "previous"]
        ours = fp4sim.sweep(TRACE, steps=[1, 2000], layers="lm_head", hold="previous", blocks=[16, 32],
                            scale_formats=["ue4m3", "e8m0"], tensor_scales="none,current", roundings=["rne", "sr-fastest"],
                            seed=3)
    else:
        source = ["--synthetic", "normal,student-t:3+outliers:0.01:50", "--rows", 8, "--cols", 512, "--role", "weight"]
        ours = fp4sim.sweep(synthetic=["normal", "student-t:3+outliers:0.01:50"], rows=8, cols=512, role="weight",
                            blocks="16,32", scale_formats="ue4m3,e8m0", tensor_scales=["none", "current"],
                            roundings="rne,sr-fastest", seed=3)
    cli("sweep", *source, *grid, "--json", tmp_path / "s.json", "-q")
    theirs = json.load(open(tmp_path / "s.json"))
    if on_trace:
        theirs["input"] = theirs["trace"]["path"] = ours["input"]
    assert _without_run_time(ours) == _without_run_time(theirs)
    assert len(ours["configs"]) == 2 * 2 * 2 * 2 - 4 and ours["skipped"]  # e8m0 with a tensor scale is no recipe
    assert str(ours).startswith("fp4sim sweep: ")


@needs_analyses
def test_replay_and_sweep_errors_name_the_keyword_and_the_valid_values(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such trace file"):
        fp4sim.replay(tmp_path / "missing.h5")
    not_a_trace = tmp_path / "x.h5"
    not_a_trace.write_bytes(b"not HDF5")
    with pytest.raises(fp4sim.DataError, match="not an HDF5 file"):
        fp4sim.replay(not_a_trace)
    with pytest.raises(fp4sim.UsageError, match=r"^recipes: unknown recipe 'nvfp5' \(known: ue5m3, .*nvfp4"):
        fp4sim.replay(TRACE, "nvfp5")
    with pytest.raises(fp4sim.UsageError, match=r"^steps: step 7 is not in .*\(captured: 1, 200, 2000\)"):
        fp4sim.replay(TRACE, steps=[7])
    with pytest.raises(fp4sim.UsageError, match=r"^hold: expected window or previous, got .last.$"):
        fp4sim.replay(TRACE, hold="last")
    with pytest.raises(fp4sim.UsageError, match=r"^blocks: '1' is not a block size in 2\.\.256$"):
        fp4sim.sweep(blocks=[1])
    with pytest.raises(fp4sim.UsageError, match=r"^synthetic: unknown distribution 'cauchy' \(normal, laplace"):
        fp4sim.sweep(synthetic="cauchy")
    with pytest.raises(TypeError, match="^steps: expected a string, a value or a list of values, got object$"):
        fp4sim.replay(TRACE, steps=object())
    assert issubclass(FileNotFoundError, OSError)


def test_replay_without_hdf5_is_one_clear_error(monkeypatch):
    monkeypatch.delattr(fp4sim._fp4sim, "replay", raising=False)
    with pytest.raises(NotImplementedError, match=r"this build of the module has no HDF5\. Install the wheel .*"
                                                  r"libhdf5-dev libcli11-dev libcereal-dev\) and run pip install \."):
        fp4sim.replay(TRACE)


# ---------------------------------------------------------------------------------------------------
# PyTorch CPU tensors (torch is not a dependency: skipped without it)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_cpu_tensors_are_taken_as_arrays(dtype):
    torch = pytest.importorskip("torch")
    import ml_dtypes

    t = (torch.randn(32, 64, generator=torch.Generator().manual_seed(1)) * 3).to(getattr(torch, dtype))
    as_numpy = t.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if dtype == "bfloat16" else t.numpy()
    q, qn = fp4sim.quantize(t, "nvfp4"), fp4sim.quantize(as_numpy, "nvfp4")
    np.testing.assert_array_equal(q.codes, qn.codes)
    np.testing.assert_array_equal(q.scales, qn.scales)
    np.testing.assert_array_equal(fp4sim.convert(t, "e2m1").view(np.uint8), fp4sim.convert(as_numpy, "e2m1").view(np.uint8))
    np.testing.assert_array_equal(fp4sim.gemm(t, t[:8], "nvfp4"), fp4sim.gemm(as_numpy, as_numpy[:8], "nvfp4"))
    # A strided view (every other column) is the same values.
    np.testing.assert_array_equal(fp4sim.convert(t[:, ::2], "e2m1").view(np.uint8),
                                  fp4sim.convert(np.ascontiguousarray(as_numpy[:, ::2]), "e2m1").view(np.uint8))


def test_torch_bfloat16_is_viewed_without_a_copy():
    torch = pytest.importorskip("torch")
    import ml_dtypes

    t = torch.randn(4, 16).to(torch.bfloat16)
    view = fp4sim._as_numpy(t, "x")
    assert view.dtype == ml_dtypes.bfloat16 and view.ctypes.data == t.data_ptr()
    assert fp4sim.convert(torch.tensor(1.3, dtype=torch.bfloat16), "e4m3") == 1.25  # a scalar in, a scalar out
    with pytest.raises(fp4sim.DataError, match=r"x: cannot view through DLPack .*give a CPU tensor"):
        fp4sim.quantize(torch.randn(4, 16, requires_grad=True), "nvfp4")


def test_one_version():
    """fp4sim.__version__, `fp4sim --version`, the replay JSON's `fp4sim` field and the package metadata are
    project()'s VERSION in CMakeLists.txt: pyproject.toml reads it from there (dynamic), nothing repeats it."""
    import importlib.metadata
    import re

    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        cmake = f.read()
    version = re.search(r"^project\(fp4sim VERSION ([0-9.]+)", cmake, re.M).group(1)
    assert fp4sim.__version__ == version
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        pyproject = f.read()
    assert re.search(r'^dynamic = \["version"\]', pyproject, re.M), "pyproject.toml states a version of its own"
    assert re.search(r'^input = "CMakeLists.txt"$', pyproject, re.M)
    regex = re.search(r"^regex = '(.*)'$", pyproject, re.M).group(1)
    assert re.search(regex, cmake, re.M).group("value") == version
    try:  # installed (pip install ., a wheel): the metadata scikit-build-core wrote
        assert importlib.metadata.version("fp4sim") == version
    except importlib.metadata.PackageNotFoundError:
        pass  # the build tree's module, on PYTHONPATH
    if BINARY:
        assert cli("--version").stdout == f"fp4sim {version}\n"
    if HAS_ANALYSES:
        s = fp4sim.sweep(synthetic="normal", rows=4, cols=64, blocks=16, scale_formats="ue4m3", tensor_scales="current")
        assert s["fp4sim"] == version
