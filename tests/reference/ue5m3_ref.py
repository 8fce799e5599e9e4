"""Independent reference of the UE5M3 paper's block quantizer (portable order).

Source: docs/semantics.md P1.3-P1.5 and P3 (the paper's released portable
reference `formats.py`, its stated numerical reference for tests) and
docs/design.md "Decisions on semantics" / "Clarifications".  Written from those
documents, not from fp4sim's C++.

Operation order (every step one binary32 RNE operation):
    factor = RN32(6 * T)
    G      = min(RN32(factor / amax_ref), FLT_MAX);  G = 1 if amax_ref == 0
    Gd     = RN32(1 / G)
    m      = RN32(G * RN32(1/6))
    u      = RN32(block_amax * m);  u = min(u, scale_max)        (clamp BEFORE RNE)
    s      = RNE_scale(u);  s == 0 -> 1.0 (stored as the code of 1.0: 0x78 for UE5M3)
    ds     = RN32(s * Gd);  mult = RN32(1 / ds)
    y      = RN32(x * mult)
    q      = E2M1(y)  (RNE, or the 8-bit midpoint SR with given r)
    portable dequantize  RN32(q * ds)
    kernel   dequantize  RN32(RN32(q * s) * Gd)
Blocks: 1 x B along the last dimension, or B x B tiles; +0.0 padding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import fpref
from .fpref import F32, FLT_MAX, f32


@dataclass
class Result:
    codes: np.ndarray            # [rows, ceil(cols/2)] uint8, packed
    nibbles: np.ndarray          # [rows, cols] uint8, one code per element
    scales: np.ndarray           # block scale codes (uint8)
    scale_values: np.ndarray     # decoded block scales s (float32, per block)
    dequantized: np.ndarray      # float32 [rows, cols] in the requested order
    dequantized_portable: np.ndarray
    dequantized_kernel: np.ndarray
    tensor_amax: np.float32
    global_encode_scale: np.float32
    global_decode_scale: np.float32
    ideal: np.ndarray            # ideal scale codes u before the clamp (per block)
    block_amax: np.ndarray
    payload_input: np.ndarray    # y (float32 [rows, cols])
    decoded_scale: np.ndarray    # ds per element [rows, cols]
    scale_saturated: int = 0
    scale_underflow: int = 0
    finite: bool = True          # False where the paper's reference would raise (non-finite y)
    extra: dict = field(default_factory=dict)


def global_scales(amax_ref, target):
    with fpref.errstate():
        a = F32(amax_ref)
        factor = F32(F32(6.0) * F32(target))
        if a == F32(0.0):
            G = F32(1.0)
        else:
            G = F32(np.minimum(F32(factor / a), FLT_MAX))
        Gd = F32(F32(1.0) / G)
    return G, Gd


def quantize(x, *, block=16, two_d=False, target=448.0, amax_ref=None, rounding="rne",
             rbits=None, scale_format="ue5m3", dequantize_order="portable"):
    """Quantize a 1-D or 2-D float array (float32 or float64, converted exactly to
    float32 first -- values must be float32-representable)."""
    x64 = fpref.as_2d(x)
    x = x64.astype(np.float32)
    assert np.array_equal(x.astype(np.float64), x64.astype(np.float64), equal_nan=True), \
        "input must be exactly representable in float32"
    rows, cols = x.shape
    rb, cb = (block, block) if two_d else (1, block)
    smax = F32(fpref.SCALE_FORMATS[scale_format][3])

    with fpref.errstate():
        if amax_ref is None:
            amax = fpref.tensor_amax(x)
        else:
            amax = F32(amax_ref)
        G, Gd = global_scales(amax, target)
        r6 = F32(F32(1.0) / F32(6.0))
        m = F32(G * r6)

        xp = fpref.pad_to(x, rb, cb)
        bamax = fpref.block_reduce_max(np.abs(xp), rb, cb)
        u = (bamax * m).astype(np.float32)
        ideal = u.copy()
        u = np.minimum(u, smax).astype(np.float32)
        s = fpref.scale_round_rne(u, scale_format)
        underflow = (ideal > 0) & (s == 0)
        s = np.where(s == F32(0.0), F32(1.0), s).astype(np.float32)
        scodes = fpref.unsigned_code_of_value(s, scale_format)

        ds_b = (s * Gd).astype(np.float32)
        mult_b = (F32(1.0) / ds_b).astype(np.float32)
        ds = fpref.expand_blocks(ds_b, rb, cb)[:rows, :cols]
        mult = fpref.expand_blocks(mult_b, rb, cb)[:rows, :cols]
        s_el = fpref.expand_blocks(s, rb, cb)[:rows, :cols]

        y = (x * mult).astype(np.float32)
        finite = bool(np.isfinite(y).all())
        r = None
        if rounding != "rne":
            assert rbits is not None, "stochastic rounding needs explicit rbits"
            r = fpref.as_2d(np.asarray(rbits)).astype(np.int64)
            assert r.shape == (rows, cols)
        yq = np.where(np.isfinite(y), y, F32(0.0)).astype(np.float32)
        nib = fpref.e2m1_quantize(yq, mode=rounding, rbits=r)
        q = fpref.e2m1_value_of_code(nib)

        deq_portable = (q * ds).astype(np.float32)
        deq_kernel = ((q * s_el).astype(np.float32) * Gd).astype(np.float32)

    deq = deq_portable if dequantize_order == "portable" else deq_kernel
    return Result(
        codes=fpref.pack_nibbles(nib), nibbles=nib, scales=scodes, scale_values=s,
        dequantized=deq, dequantized_portable=deq_portable, dequantized_kernel=deq_kernel,
        tensor_amax=F32(amax), global_encode_scale=G, global_decode_scale=Gd,
        ideal=ideal, block_amax=bamax, payload_input=y, decoded_scale=ds,
        scale_saturated=int((ideal > smax).sum()), scale_underflow=int(underflow.sum()),
        finite=finite)


class PeriodicAmax:
    """Sample-and-hold tensor amax (paper §2, Eqs. 4-5): the reference is refreshed
    at steps 1, 1+D, 1+2D, ... (one-based) and held in between."""

    def __init__(self, period):
        self.period = int(period)
        self.held = None
        self.refreshed_at = None

    def reference(self, step, current_amax):
        if self.held is None or step - self.refreshed_at >= self.period:
            self.held = F32(current_amax)
            self.refreshed_at = step
            return self.held, True
        return self.held, False


def proposition1_unsaturated(block_amax, held_amax, target, scale_max):
    """Paper Proposition 1: block B is unsaturated iff a_B <= U * g / T (exact
    arithmetic; the binary32 evaluation can differ by an ulp near the boundary)."""
    return np.asarray(block_amax, np.float64) * float(target) <= float(scale_max) * float(held_amax)
