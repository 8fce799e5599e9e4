"""Independent reference of OCP MX v1.0 MXFP4 (E2M1 elements, E8M0 scales, B = 32).

Source: docs/semantics.md §3 and §7.2 (M1-M6) and docs/design.md (floor rule from
the exponent field).  Written from those documents, not from fp4sim's C++.

    amax  = max|x_i| over the block; any NaN or Inf in the block -> scale code 0xFF (M2)
    e     = unbiased FP32 exponent field of amax: ((bits >> 23) & 0xFF) - 127
            (FP32-subnormal amax and amax == 0 give -127)  -- never a float log2 (M3)
    shared= clamp(e - 2, -127, 127);  code = shared + 127                     (M4)
    y_i   = x_i * 2^(-shared)  (FP32 multiply by a power of two)              (M5)
    q_i   = E2M1_RN(y_i) (G3: RNE, saturate at +-6, NaN -> 0x7, Inf -> +-6)
    dequantize: e2m1(q) * 2^(code - 127); code 0xFF -> NaN                   (M6)

gfloat's `compute_scale_amax` takes floor(log2(amax)) in floating point; in
float32 that rounds up to the next integer for amax just below a power of two
(e.g. amax = 4 * (1 - 2^-24): log2 rounds to 2.0), giving a scale twice too
large.  `gfloat_dequantize` below exposes that behaviour for the comparison test;
this reference never copies it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import fpref
from .fpref import F32, f32

E2M1_EMAX = 2


@dataclass
class Result:
    codes: np.ndarray
    nibbles: np.ndarray
    scales: np.ndarray
    dequantized: np.ndarray
    block_amax: np.ndarray
    nonfinite_block: np.ndarray     # per block: the block had a NaN or an Inf
    payload_input: np.ndarray


def pow2_f32(k):
    """2^k as float32 for integer k in [-149, 127] (exact)."""
    k = np.asarray(k, dtype=np.int64)
    return np.ldexp(np.ones(k.shape, np.float64), k).astype(np.float32)


def scale_code_floor(amax):
    """E8M0 code by the OCP floor rule from the FP32 exponent field (M3/M4).
    amax: non-negative float32 (finite)."""
    amax = f32(amax)
    bits = amax.view(np.uint32).astype(np.int64)
    e = ((bits >> 23) & 0xFF) - 127
    shared = np.clip(e - E2M1_EMAX, -127, 127)
    return (shared + 127).astype(np.uint8)


def quantize(x, *, block=32, rounding="rne", rbits=None):
    x64 = fpref.as_2d(x)
    x = x64.astype(np.float32)
    assert np.array_equal(x.astype(np.float64), x64.astype(np.float64), equal_nan=True)
    rows, cols = x.shape
    with fpref.errstate():
        xp = fpref.pad_to(x, 1, block)
        mag = np.abs(xp)
        nonfinite = fpref.block_any(~np.isfinite(xp), 1, block)
        bamax = np.where(np.isfinite(mag), mag, F32(0.0)).reshape(
            xp.shape[0], -1, block).max(axis=2).astype(np.float32)
        code = scale_code_floor(bamax)
        code = np.where(nonfinite, np.uint8(0xFF), code).astype(np.uint8)
        shared = code.astype(np.int64) - 127
        # multiplier 2^(-shared); for a 0xFF block the element codes of finite
        # elements are implementation-defined, use the finite-block multiplier
        # of its finite amax so that NaN/Inf elements still follow G3.
        fin_code = scale_code_floor(bamax).astype(np.int64) - 127
        mult_b = pow2_f32(-fin_code)
        mult = fpref.expand_blocks(mult_b, 1, block)[:rows, :cols]
        y = (x * mult).astype(np.float32)
        r = None
        if rounding != "rne":
            r = fpref.as_2d(np.asarray(rbits)).astype(np.int64)
        nib = fpref.e2m1_quantize(y, mode=rounding, rbits=r)
        q = fpref.e2m1_value_of_code(nib)
        sc = fpref.expand_blocks(pow2_f32(np.clip(shared, -149, 127)), 1, block)[:rows, :cols]
        deq = (q * sc).astype(np.float32)
        bad = fpref.expand_blocks(nonfinite, 1, block)[:rows, :cols]
        deq = np.where(bad, F32(np.nan), deq).astype(np.float32)
    return Result(codes=fpref.pack_nibbles(nib), nibbles=nib, scales=code, dequantized=deq,
                  block_amax=bamax, nonfinite_block=nonfinite, payload_input=y)


def gfloat_dequantize(block_vals, dtype=np.float32):
    """gfloat's own MX block quantize-dequantize of one block (TiesToEven),
    with the values given in `dtype` (float32 exposes its float log2)."""
    from gfloat import RoundMode
    from gfloat.block import quantize_block, compute_scale_amax
    from gfloat.formats import format_info_mxfp4_e2m1
    v = np.asarray(block_vals, dtype=dtype)
    return quantize_block(format_info_mxfp4_e2m1, v, compute_scale_amax, RoundMode.TiesToEven)


def gfloat_scale_log2(block_vals, dtype=np.float32):
    from gfloat.block import compute_scale_amax
    v = np.asarray(block_vals, dtype=dtype)
    return int(np.log2(float(compute_scale_amax(2, v))))
