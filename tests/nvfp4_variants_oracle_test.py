"""`fp4sim quantize` with TE's NVFP4 variants against the independent reference, bit for bit.

tests/reference/nvfp4_variants_ref.py holds the references (4over6, row-scaled amax, another RHT sign
vector), written from docs/semantics.md §1.12-1.13 and §1.8.  Each case writes X.npy, runs `fp4sim quantize` with
the variant's flags (docs/cli.md) and compares the codes, the scale codes and the dequantized values.

The binary: env FP4SIM_BINARY (ctest sets it), else <repo>/build/fp4sim; without one the tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import h5py
import ml_dtypes
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from reference import fpref, nvfp4_ref, nvfp4_variants_ref as ref  # noqa: E402
from reference.fpref import F32  # noqa: E402


def _find_binary():
    for c in (os.environ.get("FP4SIM_BINARY"), os.path.join(os.path.dirname(HERE), "build", "fp4sim")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


BIN = _find_binary()
pytestmark = pytest.mark.skipif(BIN is None, reason="no fp4sim binary")


def run(tmp_path, x, *flags):
    xin, out = tmp_path / "x.npy", tmp_path / "q.h5"
    np.save(xin, np.asarray(x, np.float32))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([BIN, "quantize", "--in", str(xin), "--out", str(out), *flags],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    with h5py.File(out, "r") as f:
        res = {k: f[k][()] for k in f.keys()}
        res["attrs"] = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    return res


def nibbles(res, cols):
    return fpref.unpack_nibbles(res["codes"], cols)


def inputs(seed):
    rng = np.random.default_rng(seed)
    normal = rng.standard_normal((48, 80)).astype(np.float32)
    # A 16 x 16 tile of 5c values and one 6c: map-to-4 represents it better (5c -> 3.33 -> 3 against
    # 5c -> 5 -> 4 at twice the step), so 2-D tiles also pick map-to-4 somewhere.
    normal[16:32, 16:32] = np.float32(1.5)
    normal[16, 16] = np.float32(1.8)
    laplace = (rng.laplace(size=(48, 80)) * 10.0 ** rng.integers(-3, 3, (48, 1))).astype(np.float32)
    edge = rng.standard_normal((48, 80)).astype(np.float32)
    edge[0] = 0.0                                         # an all-zero row (and blocks)
    edge[1, :16] = np.float32(1e-30)                      # a block whose scale underflows
    edge[2, 16:32] = np.array([6.0, -4.0, 5.0, 4.5] * 4, np.float32) * F32(100.0)  # near-max values
    edge[4, :] = np.float32(-2.5)                         # constant row
    return {"normal": normal, "laplace": laplace, "edge": edge}


def te_kernel_dequantize(codes, scale_codes, A, target, rb, cb):
    """N10: RN(q * RN(RN(s * A) * RN(1/RN(6T)))) with A a scalar or one per row."""
    rows, cols = codes.shape
    s = np.asarray(scale_codes, np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    s = fpref.expand_blocks(s, rb, cb)[:rows, :cols]
    A = np.broadcast_to(np.asarray(A, np.float32).reshape(-1, 1), (rows, 1)) if np.ndim(A) else np.float32(A)
    with fpref.errstate():
        finv = F32(F32(1.0) / F32(F32(6.0) * F32(target)))
        f = ((s * A).astype(np.float32) * finv).astype(np.float32)
        return (fpref.e2m1_value_of_code(codes) * f).astype(np.float32)


@pytest.mark.parametrize("mode", ["4over6-mae", "4over6-mse"])
@pytest.mark.parametrize("kind", ["normal", "laplace", "edge"])
@pytest.mark.parametrize("role", ["activation", "weight"])
def test_four_over_six(tmp_path, mode, kind, role):
    x = inputs(7)[kind]
    two_d = role == "weight"
    res = run(tmp_path, x, "--recipe", "nvfp4-norht", "--role", role, "--block-choice", mode, "--target", "256")
    codes, scales, A, picked = ref.quantize_4over6(x, squared=mode.endswith("mse"), two_d=two_d)
    assert np.array_equal(nibbles(res, x.shape[1]), codes)
    assert np.array_equal(res["scales"], scales)
    rb = 16 if two_d else 1
    want = te_kernel_dequantize(codes, scales, A, 256.0, rb, 16)
    assert fpref.same_bits_f32(res["dequantized"], want).all()
    assert res["attrs"]["block_choice"] == mode
    # Both candidates occur, so the selection itself is checked (not only one branch).
    if kind == "normal" or not two_d:
        assert picked.any() and not picked.all()


@pytest.mark.parametrize("role", ["activation", "weight"])
def test_four_over_six_nonfinite_and_huge(tmp_path, role):
    x = inputs(5)["normal"]
    x[3, 5] = np.float32(3e38)      # the tensor amax: every other block's scale underflows (a tie: map-to-6)
    x[20, 40] = np.inf
    x[33, 70] = np.nan
    res = run(tmp_path, x, "--recipe", "nvfp4-norht", "--role", role, "--block-choice", "4over6-mse",
              "--target", "256")
    codes, scales, _, _ = ref.quantize_4over6(x, squared=True, two_d=role == "weight")
    assert np.array_equal(nibbles(res, x.shape[1]), codes)
    assert np.array_equal(res["scales"], scales)


def test_four_over_six_at_448_and_a_single_partial_block(tmp_path):
    x = np.array([[0.1, -2.0, 3.3, 4.9, 5.5, -0.7, 1.2]], np.float32)  # one 7-element block
    res = run(tmp_path, x, "--recipe", "nvfp4-norht", "--block-choice", "4over6-mae")
    codes, scales, _, _ = ref.quantize_4over6(x, target=448.0)
    assert np.array_equal(nibbles(res, 7), codes)
    assert np.array_equal(res["scales"], scales)


@pytest.mark.parametrize("kind", ["normal", "laplace", "edge"])
def test_row_scaled(tmp_path, kind):
    x = inputs(11)[kind]
    res = run(tmp_path, x, "--recipe", "nvfp4-norht", "--amax-scope", "row")
    codes, scales, deq, row_amax = ref.quantize_row_scaled(x)
    assert np.array_equal(nibbles(res, x.shape[1]), codes)
    assert np.array_equal(res["scales"], scales)
    assert fpref.same_bits_f32(res["dequantized"], deq).all()
    assert fpref.same_bits_f32(res["row_amax"], row_amax).all()
    # Not the per-tensor result: the rows with small amax get other scales.
    assert not np.array_equal(nvfp4_ref.quantize(x).scales, scales)


def test_rht_signs(tmp_path):
    x = inputs(3)["laplace"]
    signs = "-+-+++--+-+---++"
    res = run(tmp_path, x, "--recipe", "nvfp4", "--rht", f"--rht-signs={signs}")
    want = nvfp4_ref.quantize(ref.rht_with_signs(x, [1 if c == "+" else -1 for c in signs]))
    assert np.array_equal(nibbles(res, x.shape[1]), want.nibbles)
    assert np.array_equal(res["scales"], want.scales)
    assert res["attrs"]["rht_signs"] == signs
    default = nvfp4_ref.quantize(x, rht_on=True)
    assert not np.array_equal(default.nibbles, want.nibbles)


# TE's reference keeps the RHT of a float32 tensor in float32 (--rht-precision float32): the codes and scales of
# the unrounded transform, which the BF16 one (every preset) does not give.
def test_rht_precision_float32(tmp_path):
    x = inputs(3)["laplace"]
    res = run(tmp_path, x, "--recipe", "nvfp4", "--rht", "--rht-precision", "float32")
    want = nvfp4_ref.quantize(ref.rht_float32(x))
    assert np.array_equal(nibbles(res, x.shape[1]), want.nibbles)
    assert np.array_equal(res["scales"], want.scales)
    assert res["attrs"]["rht_precision"] == "float32"
    bf16 = nvfp4_ref.quantize(x, rht_on=True)
    assert not np.array_equal(bf16.nibbles, want.nibbles)


def test_reference_tree_sum_order():
    # 16 lanes summed v[i] += v[i + h], h = 8, 4, 2, 1: the tiny terms pair up before they meet the 1.
    v = [F32(1.0)] + [F32(2.0 ** -24)] * 15
    tree = ref.tree_sum(v)
    seq = F32(0.0)
    for a in v:
        seq = F32(seq + a)
    assert seq == F32(1.0)          # each tiny term is lost against 1 in sequence
    # 1 + 2^-24 ties to 1; then + 2^-23, + 2^-22, + 2^-21 are exact: 1 + 7 * 2^-23.
    assert tree == F32(1.0 + 7 * 2.0 ** -23)


def test_verify_names_four_over_six_from_the_command_line(tmp_path):
    # A "kernel" that runs 4over6 (its bytes from `fp4sim quantize --block-choice`), verified as plain NVFP4:
    # the JSON ranks 4over6 first, reproducing every byte; given the variant's flags, it is bit-exact.
    x = inputs(9)["normal"]
    xin = tmp_path / "x.npy"
    np.save(xin, x)
    flags = ["--recipe", "nvfp4-norht", "--target", "256"]
    subprocess.run([BIN, "quantize", "--in", str(xin), "--codes", str(tmp_path / "c.npy"), "--scales",
                    str(tmp_path / "s.npy"), "--block-choice", "4over6-mse", *flags], check=True)
    verify = [BIN, "verify", "quantize", "--in", str(xin), "--codes", str(tmp_path / "c.npy"), "--scales",
              str(tmp_path / "s.npy"), "--json", *flags]
    p = subprocess.run(verify, capture_output=True, text=True)
    assert p.returncode == 4, p.stderr      # not bit-exact (docs/cli.md)
    top = json.loads(p.stdout)["alternatives"][0]
    assert "4over6-mse" in top["rule"] and top["exact"], top
    p = subprocess.run(verify + ["--block-choice", "4over6-mse"], capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)["bit_exact"], p.stdout


@pytest.mark.parametrize("role", ["activation", "weight", "grad_output"])
def test_four_over_six_preset_is_the_reference_and_replays(tmp_path, role):
    # The preset nvfp4-4over6 quantizes as the independent reference with TE's defaults (MAE, T = 256,
    # RNE, 16x16 weight tiles), and replay takes it like any preset.
    x = inputs(11)["normal"]
    res = run(tmp_path, x, "--recipe", "nvfp4-4over6", "--role", role)
    two_d = role == "weight"
    codes, scales, _, _ = ref.quantize_4over6(x, two_d=two_d)  # MAE, T = 256: TE's defaults
    assert np.array_equal(nibbles(res, x.shape[1]), codes)
    assert np.array_equal(res["scales"], scales)
    if role != "activation":
        return
    trace = os.path.join(os.path.dirname(HERE), "traces", "trace_a.h5")
    p = subprocess.run([BIN, "replay", trace, "--recipes", "nvfp4,nvfp4-4over6", "--steps", "1", "--layers",
                        r"layers\.0\.mlp\.down", "--json", "-", "-q"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    recipes = {t["recipe"] for t in json.loads(p.stdout)["tensors"]}
    assert recipes == {"nvfp4", "nvfp4-4over6"}
