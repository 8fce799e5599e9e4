"""Independent reference of the NVFP4 variants TE ships beside its default recipe.

Written from docs/semantics.md §1.12-1.13 and §1.8 (TE's quantize_4over6_kernel.cuh and reference_nvfp4.py as the
project describes them), not from fp4sim's C++.  Plain numpy, one loop per block where the order of the
FP32 operations matters.

Row-scaled NVFP4 (`--amax-scope row`): the N3-N7 rule of nvfp4_ref with the amax of each row in place
of the tensor's; dequantized with that row's amax (N10).

4over6 (`--block-choice 4over6-mae|4over6-mse`), for one block with amax a, tensor amax A and target T:
    S_enc = min(RN(RN(6*T) / A), FLT_MAX), 1 if A == 0 or S_enc == 0;  S_dec = RN(1/S_enc)
    base  = RN(RN(a / 6) * S_enc)
    s6    = E4M3(min(base, 448));  s4 = E4M3(min(RN(base * 1.5), 448))
    for s in (s4, s6): enc = min(RN(1 / RN(s * S_dec)), FLT_MAX); q = E2M1_RN(RN(x * enc))
        e_j = v_j - x_j with v_j = RN(RN(RN(q_j * s) * A) / RN(6*T)), one RN for the difference
        row error = sum over the row's elements in order from +0 of |e_j| (MAE) or RN(e_j * e_j) (MSE)
        a 16-row tile sums its rows' errors pairwise: v[i] += v[i + h] for h = 8, 4, 2, 1
    map-to-4 is kept only when its error is strictly lower.
"""

from __future__ import annotations

import numpy as np
import ml_dtypes

from . import fpref, nvfp4_ref
from .fpref import F32, FLT_MAX, f32


def _candidate(x, s_code, S_dec):
    """Codes of one block under scale code s_code (TE N6-N7, RNE)."""
    s = np.array([s_code], np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)[0]
    with fpref.errstate():
        enc = F32(min(F32(F32(1.0) / F32(s * S_dec)), FLT_MAX))
        return s, fpref.e2m1_quantize(f32(x * enc))


def _row_errors(x, codes, s, A, denom, squared):
    """One error per row of the block x [rows, cols], each summed in column order from +0."""
    q = fpref.e2m1_value_of_code(codes)
    out = []
    with fpref.errstate():
        for r in range(x.shape[0]):
            err = F32(0.0)
            for j in range(x.shape[1]):
                v = F32(F32(F32(q[r, j] * s) * A) / denom)
                e = F32(v - x[r, j])
                err = F32(err + (F32(e * e) if squared else abs(e)))
            out.append(err)
    return out


def tree_sum(values):
    """A warp's shuffle-down sum of len(values) lanes (padded with +0 to a power of two)."""
    width = 1
    while width < len(values):
        width *= 2
    v = [F32(a) for a in values] + [F32(0.0)] * (width - len(values))
    h = width // 2
    while h >= 1:
        for i in range(h):
            v[i] = F32(v[i] + v[i + h])
        h //= 2
    return v[0]


def quantize_4over6(x, *, squared=False, two_d=False, target=256.0, block=16):
    """Returns (codes [rows, cols] uint8 nibbles, scale codes [scale_rows, scale_cols], A, picked_map4 mask)."""
    x = f32(fpref.as_2d(x))
    rows, cols = x.shape
    rb, cb = (block, block) if two_d else (1, block)
    A = fpref.tensor_amax(x)
    S_enc, S_dec = nvfp4_ref.global_scales(A, target)
    denom = F32(F32(6.0) * F32(target))
    xp = fpref.pad_to(x, rb, cb)
    bamax = fpref.block_reduce_max(np.abs(xp), rb, cb)
    codes = np.zeros(xp.shape, np.uint8)
    scales = np.zeros(bamax.shape, np.uint8)
    picked = np.zeros(bamax.shape, bool)
    with fpref.errstate():
        for br in range(bamax.shape[0]):
            for bc in range(bamax.shape[1]):
                blk = xp[br * rb:(br + 1) * rb, bc * cb:(bc + 1) * cb]
                base = F32(min(F32(F32(bamax[br, bc] / F32(6.0)) * S_enc), FLT_MAX))
                s6_code = fpref.e4m3_te_cast(np.array([base], np.float32))[0]
                s4_code = fpref.e4m3_te_cast(np.array([min(F32(base * F32(1.5)), FLT_MAX)], np.float32))[0]
                s6, q6 = _candidate(blk, s6_code, S_dec)
                s4, q4 = _candidate(blk, s4_code, S_dec)
                e6 = tree_sum(_row_errors(blk, q6, s6, A, denom, squared))
                e4 = tree_sum(_row_errors(blk, q4, s4, A, denom, squared))
                four = bool(e4 < e6)
                picked[br, bc] = four
                scales[br, bc] = s4_code if four else s6_code
                codes[br * rb:(br + 1) * rb, bc * cb:(bc + 1) * cb] = q4 if four else q6
    return codes[:rows, :cols], scales, A, picked


def quantize_row_scaled(x, *, target=448.0, block=16):
    """Row-scaled NVFP4 with 1-D blocks: nvfp4_ref's rule row by row, each with its own amax.

    Returns (codes [rows, cols] nibbles, scale codes [rows, ceil(cols/B)], dequantized, row amaxes)."""
    x = f32(fpref.as_2d(x))
    results = [nvfp4_ref.quantize(x[r:r + 1], block=block, target=target) for r in range(x.shape[0])]
    codes = np.concatenate([res.nibbles for res in results])
    scales = np.concatenate([res.scales for res in results])
    deq = np.concatenate([res.dequantized for res in results])
    return codes, scales, deq, np.array([res.tensor_amax for res in results], np.float32)


def rht_with_signs(x, signs):
    """nvfp4_ref.rht with another sign vector (16 entries +-1)."""
    saved = nvfp4_ref.RHT_SIGNS
    nvfp4_ref.RHT_SIGNS = np.asarray(signs, np.int64)
    try:
        return nvfp4_ref.rht(x)
    finally:
        nvfp4_ref.RHT_SIGNS = saved


def rht_float32(x):
    """TE's reference on a float32 tensor (reference_nvfp4.py _apply_rht builds its matrix in the input's dtype,
    docs/semantics.md 1.8): the 16-term FP32 sum, sequential in i from +0.0, left in float32 (no BF16 rounding)."""
    x = f32(fpref.as_2d(x))
    rows, cols = x.shape
    m = nvfp4_ref.rht_matrix()
    groups = x.reshape(rows, cols // 16, 16)
    acc = np.zeros(groups.shape, np.float32)
    with fpref.errstate():
        for i in range(16):
            acc = (acc + (groups[:, :, i:i + 1] * m[i][None, None, :]).astype(np.float32)).astype(np.float32)
    return acc.reshape(rows, cols)
