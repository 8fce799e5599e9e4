"""Independent reference of TransformerEngine's NVFP4 quantizer (kernel semantics).

Source: docs/semantics.md §1.2-1.9 and §7 (G1-G4, N1-N10).  Written from
those documents, not from fp4sim's C++.

    A      = max|x| over the tensor (NaN-ignoring, fmaxf), or the held reference
    S_enc  = min(RN32(RN32(6*T) / A), FLT_MAX);  S_enc = 1 if A == 0 or S_enc == 0   (N3)
    S_dec  = RN32(1 / S_enc)
    m      = RN32(S_enc * RN32(1/6))                                                 (N4)
    s_f    = min(RN32(amax_b * m), FLT_MAX)
    s_b    = E4M3 RNE satfinite with subnormals (TE Python: clamp to 448, cast)      (N5)
    enc_b  = min(RN32(1 / RN32(s_b * S_dec)), FLT_MAX)    (s_b = 0 -> FLT_MAX)       (N6)
    y      = RN32(x * enc_b);  q = E2M1_RN(y) (G3)  or  E2M1_SR(y, r) (G4)           (N7)
    RHT (N8): x'_j = BF16_RN(sum_{i=0..15} x_i * s_i * H16[i][j] * 0.25), FP32 sequential
    dequantize (N10): f = RN32(RN32(s_b * A) * RN32(1/RN32(6*T)));  out = RN32(q * f)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import ml_dtypes

from . import fpref
from .fpref import F32, FLT_MAX, f32

# TE's fixed wgrad sign vector (docs/semantics.md §1.8, nvfp4_tensor.py::get_wgrad_sign_vector).
RHT_SIGNS = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.int64)


def hadamard16():
    i = np.arange(16)
    pop = np.vectorize(lambda v: bin(v).count("1"))(i[:, None] & i[None, :])
    return np.where(pop % 2 == 0, 1, -1).astype(np.int64)


def rht_matrix():
    """(diag(s) @ H16) * 0.25 as float32 (entries +-0.25, exact in BF16)."""
    return (RHT_SIGNS[:, None] * hadamard16()).astype(np.float32) * F32(0.25)


def rht(x):
    """Random Hadamard transform along the last dim in groups of 16 (N8).

    x: float32 [rows, cols] with cols % 16 == 0.  Products are RN32 (exact for
    normal inputs), the 16-term sum is FP32 sequential in i order starting from
    +0.0, then RNE to BF16 (returned as float32)."""
    x = f32(fpref.as_2d(x))
    rows, cols = x.shape
    assert cols % 16 == 0
    M = rht_matrix()
    g = x.reshape(rows, cols // 16, 16)
    acc = np.zeros((rows, cols // 16, 16), dtype=np.float32)
    with fpref.errstate():
        for i in range(16):
            prod = (g[:, :, i:i + 1] * M[i][None, None, :]).astype(np.float32)
            acc = (acc + prod).astype(np.float32)
    return fpref.bf16_round(acc.reshape(rows, cols))


@dataclass
class Result:
    codes: np.ndarray
    nibbles: np.ndarray
    scales: np.ndarray
    scale_values: np.ndarray
    dequantized: np.ndarray
    tensor_amax: np.float32
    global_encode_scale: np.float32
    global_decode_scale: np.float32
    ideal: np.ndarray
    block_amax: np.ndarray
    payload_input: np.ndarray
    transformed: np.ndarray        # the tensor actually quantized (x, or RHT(x))
    scale_saturated: int = 0
    scale_underflow: int = 0


def global_scales(A, target=448.0):
    with fpref.errstate():
        A = F32(A)
        factor = F32(F32(6.0) * F32(target))
        S_enc = F32(np.minimum(F32(factor / A), FLT_MAX))
        if A == F32(0.0) or S_enc == F32(0.0):
            S_enc = F32(1.0)
        S_dec = F32(F32(1.0) / S_enc)
    return S_enc, S_dec


def quantize(x, *, block=16, two_d=False, target=448.0, amax_ref=None, rounding="rne",
             rbits=None, rht_on=False, dequantize="te-kernel"):
    x64 = fpref.as_2d(x)
    x = x64.astype(np.float32)
    assert np.array_equal(x.astype(np.float64), x64.astype(np.float64), equal_nan=True)
    rows, cols = x.shape
    if rht_on:
        x = rht(x)
    rb, cb = (block, block) if two_d else (1, block)

    with fpref.errstate():
        A = fpref.tensor_amax(x) if amax_ref is None else F32(amax_ref)
        S_enc, S_dec = global_scales(A, target)
        m = F32(S_enc * F32(F32(1.0) / F32(6.0)))

        xp = fpref.pad_to(x, rb, cb)
        bamax = fpref.block_reduce_max(np.abs(xp), rb, cb)
        s_f = np.minimum((bamax * m).astype(np.float32), FLT_MAX).astype(np.float32)
        scodes = fpref.e4m3_te_cast(s_f)
        s_b = scodes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
        enc_b = np.minimum((F32(1.0) / (s_b * S_dec).astype(np.float32)).astype(np.float32),
                           FLT_MAX).astype(np.float32)
        enc = fpref.expand_blocks(enc_b, rb, cb)[:rows, :cols]
        y = (x * enc).astype(np.float32)
        r = None
        if rounding != "rne":
            assert rbits is not None
            r = fpref.as_2d(np.asarray(rbits)).astype(np.int64)
            assert r.shape == (rows, cols)
        nib = fpref.e2m1_quantize(y, mode=rounding, rbits=r)
        q = fpref.e2m1_value_of_code(nib)

        finv = F32(F32(1.0) / F32(F32(6.0) * F32(target)))
        f_b = ((s_b * A).astype(np.float32) * finv).astype(np.float32)
        f = fpref.expand_blocks(f_b, rb, cb)[:rows, :cols]
        deq = (q * f).astype(np.float32)

    return Result(
        codes=fpref.pack_nibbles(nib), nibbles=nib, scales=scodes, scale_values=s_b,
        dequantized=deq, tensor_amax=F32(A), global_encode_scale=S_enc,
        global_decode_scale=S_dec, ideal=s_f, block_amax=bamax, payload_input=y,
        transformed=x,
        scale_saturated=int((s_f > F32(448.0)).sum()),
        scale_underflow=int(((s_f > 0) & (s_b == 0)).sum()))
