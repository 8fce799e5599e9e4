"""The MXFP8 presets (docs/recipes.md) against OCP MX v1.0 computed here with numpy and ml_dtypes, bit for bit.

Scales come from the spec's rules written out on the amax's binary32 fields (FLOOR: the exponent field minus the
element's emax; RCEIL: RN(amax * RN(1/max)) rounded up to a power of two), elements from ml_dtypes' own
float8_e4m3fn / float8_e5m2 casts of x * 2^-shared clamped to the element's largest value (torchao's clamp, the
spec's saturation), decoded values from ml_dtypes times the scale. Inputs: the element grid's values, its
rounding midpoints and their binary32 neighbours, the element subnormals, values in the clipping range above
max, under a random power of two per block; normal data; zero, -0, NaN and Inf blocks.

The binary: $FP4SIM_BINARY (ctest sets it).
"""

from __future__ import annotations

import os
import subprocess

import ml_dtypes
import numpy as np
import pytest

FP4SIM = os.environ.get("FP4SIM_BINARY")
pytestmark = pytest.mark.skipif(not FP4SIM or not os.path.exists(FP4SIM), reason="FP4SIM_BINARY not built")

BLOCK = 32
# preset -> (ml_dtypes element type, largest finite element, emax of the element, scale rule)
PRESETS = {
    "mxfp8": (ml_dtypes.float8_e4m3fn, 448.0, 8, "floor"),
    "mxfp8-rceil": (ml_dtypes.float8_e4m3fn, 448.0, 8, "rceil"),
    "mxfp8-e5m2": (ml_dtypes.float8_e5m2, 57344.0, 15, "floor"),
    "mxfp8-e5m2-rceil": (ml_dtypes.float8_e5m2, 57344.0, 15, "rceil"),
}


def element_values(dtype):
    """Every non-negative finite value of the element type, from its 256 bit patterns."""
    v = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    return np.unique(v[np.isfinite(v) & (v >= 0)])


def inputs(dtype, max_pos, emax, seed=1, rows=64):
    rng = np.random.default_rng(seed)
    f32 = np.float32
    grid = element_values(dtype)
    mid = (grid[:-1] + grid[1:]) / 2
    above = max_pos * np.array([1.01, 1.03, 1.0625, 1.1, 1.5, 1.9])  # clipped or rounded down to max
    pool = np.concatenate([grid, mid, np.nextafter(mid.astype(f32), f32(0)), np.nextafter(mid.astype(f32), f32(np.inf)),
                           above])
    blocks = rows * 8
    x = rng.choice(pool, (blocks, BLOCK)) * rng.choice([-1.0, 1.0], (blocks, BLOCK))
    # Each block's amax sets its scale; shift by a random power of two inside binary32's normal range.
    shift = np.exp2(rng.integers(-100, 100, (blocks, 1)).astype(np.float64))
    x = (x * shift).astype(f32).reshape(rows, 8 * BLOCK)
    normal = (rng.standard_normal((8, 8 * BLOCK)) * 10.0 ** rng.integers(-8, 9, (8, 1))).astype(f32)
    x = np.concatenate([x, normal])
    x[0, :BLOCK] = 0.0
    x[1, :BLOCK] = -0.0
    x[2, 3] = np.nan
    x[3, 40] = np.inf
    x[4, 70] = -np.inf
    return x


def reference(x, dtype, max_pos, emax, rule):
    """(codes uint8, scales uint8, decoded float32 or NaN where the scale is NaN) by the spec."""
    blocks = x.reshape(x.shape[0], -1, BLOCK)
    amax = np.max(np.abs(np.where(np.isnan(blocks), 0, blocks)), axis=-1).astype(np.float32)
    nonfinite = ~np.all(np.isfinite(blocks), axis=-1)
    if rule == "floor":
        field = (amax.view(np.uint32) >> 23).astype(np.int64)
        shared = field - 127 - emax
    else:
        descale = amax * (np.float32(1.0) / np.float32(max_pos))  # RN(amax * RN(1/max)), binary32
        m, e = np.frexp(descale.astype(np.float64))  # descale = m * 2^e, m in [0.5, 1): ceil(log2) = e - (m == 0.5)
        shared = np.where(descale == 0, -127, e - (m == 0.5))
    shared = np.clip(shared, -127, 127)
    scales = np.where(nonfinite, 255, shared + 127).astype(np.uint8)
    y = blocks.astype(np.float64) * np.exp2(-shared.astype(np.float64))[..., None]
    y = y.astype(np.float32).astype(np.float64)  # fp4sim and torchao scale in binary32 (exact but for its subnormals)
    codes = np.clip(y, -max_pos, max_pos).astype(dtype).view(np.uint8).reshape(x.shape)
    decoded = (codes.view(dtype).astype(np.float64).reshape(blocks.shape) * np.exp2(shared.astype(np.float64))[..., None])
    decoded = np.where(nonfinite[..., None], np.nan, decoded).astype(np.float32).reshape(x.shape)
    return codes, scales, decoded


def quantize(tmp_path, x, preset, *extra):
    np.save(tmp_path / "x.npy", x)
    p = subprocess.run([FP4SIM, "quantize", "--recipe", preset, "--in", tmp_path / "x.npy", "--codes", tmp_path / "c.npy",
                        "--scales", tmp_path / "s.npy", "--dequantized", tmp_path / "d.npy", *extra],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return np.load(tmp_path / "c.npy"), np.load(tmp_path / "s.npy"), np.load(tmp_path / "d.npy")


def finite_blocks(scales):
    return np.repeat(scales != 255, BLOCK, axis=1)


@pytest.mark.parametrize("preset", PRESETS)
def test_codes_scales_and_decoded_values_match_the_spec(tmp_path, preset):
    dtype, max_pos, emax, rule = PRESETS[preset]
    x = inputs(dtype, max_pos, emax)
    codes, scales, decoded = quantize(tmp_path, x, preset)
    want_codes, want_scales, want_decoded = reference(x, dtype, max_pos, emax, rule)
    assert codes.shape == x.shape and codes.dtype == np.uint8  # a byte per code, no nibbles
    np.testing.assert_array_equal(scales, want_scales)
    live = finite_blocks(scales)
    np.testing.assert_array_equal(np.where(live, codes, 0), np.where(live, want_codes, 0))
    np.testing.assert_array_equal(np.where(live, decoded, 0).view(np.uint32), np.where(live, want_decoded, 0).view(np.uint32))
    assert np.all(np.isnan(decoded[~live]))


def test_the_inputs_hold_ties_so_a_wrong_tie_rule_is_seen(tmp_path):
    dtype, max_pos, emax, rule = PRESETS["mxfp8"]
    x = inputs(dtype, max_pos, emax)
    codes, scales, _ = quantize(tmp_path, x, "mxfp8", "--rounding", "rna")
    want_codes, _, _ = reference(x, dtype, max_pos, emax, rule)
    live = finite_blocks(scales)
    assert np.count_nonzero((codes != want_codes) & live) > 100
