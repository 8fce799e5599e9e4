"""Shared binary32 and minifloat helpers for the independent recipe references.

Written from the sources (docs/semantics.md P1, docs/semantics.md §7 G1-G4),
not from fp4sim's C++.  Every arithmetic step is an explicit numpy float32
operation: one IEEE binary32 rounding (nearest-even) per operation, no FMA,
no flush-to-zero (numpy never enables FTZ/DAZ).

Element and scale rounding follow the UE5M3 paper's `_round_finite_float` /
`_round_magnitudes` rule: exponent from frexp (never from a float log2),
significand lifted to an integer grid with ldexp (exact), RNE on the integer
part, saturate at the format's max finite value.
"""

from __future__ import annotations

import numpy as np
import ml_dtypes

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)

# E2M1 magnitudes by code 0..7; bit 3 is the sign (docs/semantics.md G2).
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


def f32(x):
    """Convert to float32 exactly as a binary32 constant / array."""
    return np.asarray(x, dtype=np.float32)


def errstate():
    return np.errstate(all="ignore")


# ---------------------------------------------------------------------------
# Generic finite rounding (paper §1.3 `_round_finite_float`)
# ---------------------------------------------------------------------------

def _lift(mag, precision, bias, has_subnormals=True):
    """Return (lower, delta, qexp) with mag = (lower + delta) * 2**qexp exactly.

    mag: non-negative finite float32 array (zeros allowed)."""
    mag = f32(mag)
    nonzero = mag != 0
    safe = np.where(nonzero, mag, F32(1.0)).astype(np.float32)
    _, e = np.frexp(safe)                  # safe = m * 2**e, m in [0.5, 1)
    vexp = e.astype(np.int64) - 1          # floor(log2(safe)), exactly
    if has_subnormals:
        vexp = np.maximum(vexp, 1 - bias)
    qexp = vexp - precision + 1
    sig = np.ldexp(safe, (-qexp).astype(np.int32))   # exact: result >= 1, fits float32
    assert sig.dtype == np.float32
    lower = np.floor(sig)
    delta = (sig - lower).astype(np.float32)          # exact (Sterbenz / same binade)
    lower = np.where(nonzero, lower, F32(0.0)).astype(np.float32)
    delta = np.where(nonzero, delta, F32(0.0)).astype(np.float32)
    return lower, delta, qexp


def _finish(lower, away, qexp, max_finite):
    sig = (lower + away.astype(np.float32)).astype(np.float32)
    val = np.ldexp(sig.astype(np.float64), qexp.astype(np.int32))  # exact in float64
    val = np.minimum(val, float(max_finite))
    out = val.astype(np.float32)
    assert np.array_equal(out.astype(np.float64), val), "rounded value not representable"
    return out


def round_magnitude(mag, *, precision, bias, max_finite, mode="rne", rbits=None,
                    has_subnormals=True):
    """Round finite non-negative float32 magnitudes to a minifloat value set.

    mode: 'rne'          ties to even on the significand
          'sr-fast-f32'  8-bit midpoint rule evaluated as the paper's reference does:
                         RN32(delta + RN32((2r+1) * 2**-9)) >= 1 (one FP32 addition)
          'sr-fast'      exact 8-bit midpoint rule: delta + (2r+1)/512 >= 1 exactly
          'sr-fastest'   TE / gfloat StochasticFastest: floor(256*delta) + r >= 256
    Values above max_finite saturate to max_finite."""
    mag = f32(mag)
    with errstate():
        lower, delta, qexp = _lift(mag, precision, bias, has_subnormals)
        if mode == "rne":
            odd = (lower.astype(np.int64) & 1) == 1
            away = (delta > F32(0.5)) | ((delta == F32(0.5)) & odd)
        else:
            r = np.asarray(rbits).astype(np.int64)
            assert r.shape == mag.shape
            assert ((r >= 0) & (r <= 255)).all()
            if mode == "sr-fast-f32":
                mid = ((2 * r + 1).astype(np.float32) * F32(2.0 ** -9)).astype(np.float32)
                s = (delta + mid).astype(np.float32)        # one binary32 RNE addition
                away = s >= F32(1.0)
            elif mode == "sr-fast":
                # exact: 512*delta + 2r + 1 >= 512  <=>  floor(512*delta) >= 511 - 2r
                d512 = np.floor(delta.astype(np.float64) * 512.0).astype(np.int64)
                away = d512 + 2 * r + 1 >= 512
            elif mode == "sr-fastest":
                d256 = np.floor(delta.astype(np.float64) * 256.0).astype(np.int64)
                away = d256 + r >= 256
            else:
                raise ValueError(mode)
            away = away & (mag != 0)
        return _finish(lower, away, qexp, max_finite)


# ---------------------------------------------------------------------------
# E2M1 (docs/semantics.md G2-G4)
# ---------------------------------------------------------------------------

def e2m1_code_of_value(v):
    """Code of an E2M1 grid value (signbit honoured: -0.0 -> 0x8)."""
    v = f32(v)
    mag = np.abs(v)
    idx = np.searchsorted(E2M1_VALUES, mag)
    assert np.all(idx < 8) and np.all(E2M1_VALUES[np.minimum(idx, 7)] == mag), "not an E2M1 value"
    return (idx | (np.signbit(v).astype(np.int64) << 3)).astype(np.uint8)


def e2m1_value_of_code(c):
    c = np.asarray(c).astype(np.int64)
    mag = E2M1_VALUES[c & 7]
    return np.where((c & 8) != 0, -mag, mag).astype(np.float32)


def e2m1_quantize(y, mode="rne", rbits=None):
    """E2M1 code of each float32 y (G3 for 'rne', G4 for 'sr-fastest', the paper's
    8-bit midpoint rule for 'sr-fast' / 'sr-fast-f32').

    NaN -> 0x7 (+6, hardware satfinite); +-Inf -> +-6; sign kept for zero and
    for values that round to zero; saturate at 6."""
    y = f32(y)
    nan = np.isnan(y)
    neg = np.signbit(y) & ~nan
    mag = np.abs(y)
    inf = np.isinf(mag)
    finite_mag = np.where(nan | inf, F32(0.0), mag).astype(np.float32)
    if rbits is not None:
        rbits = np.asarray(rbits)
    q = round_magnitude(finite_mag, precision=2, bias=1, max_finite=6.0, mode=mode, rbits=rbits)
    q = np.where(nan | inf, F32(6.0), q).astype(np.float32)
    q = np.where(neg, -q, q).astype(np.float32)
    return e2m1_code_of_value(q)


def pack_nibbles(codes):
    """[rows, cols] nibble codes -> [rows, ceil(cols/2)] bytes; element 2j in the low
    nibble, the padding nibble of an odd column count is 0 (docs/design.md)."""
    codes = np.asarray(codes, dtype=np.uint8)
    rows, cols = codes.shape
    if cols % 2:
        codes = np.concatenate([codes, np.zeros((rows, 1), np.uint8)], axis=1)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def unpack_nibbles(packed, cols):
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    out[:, 0::2] = packed & 0xF
    out[:, 1::2] = packed >> 4
    return out[:, :cols]


# ---------------------------------------------------------------------------
# Scale formats
# ---------------------------------------------------------------------------

SCALE_FORMATS = {
    # name: (exponent bits, mantissa bits, bias, max finite)
    "ue5m3": (5, 3, 15, 61440.0),      # the paper's UE5M3 (top exponent reserved)
    "ue4m3": (4, 3, 7, 448.0),         # E4M3FN with the sign bit always 0
}


def scale_round_rne(u, fmt):
    """RNE of non-negative finite float32 u to the scale format, saturating."""
    eb, mb, bias, mx = SCALE_FORMATS[fmt]
    return round_magnitude(u, precision=mb + 1, bias=bias, max_finite=mx, mode="rne")


def e4m3_te_cast(v):
    """TE's Python: clamp to [-448, 448] then cast to float8_e4m3fn (ml_dtypes, RNE,
    subnormals).  Returns the uint8 codes."""
    v = f32(v)
    c = np.clip(v, F32(-448.0), F32(448.0)).astype(np.float32)
    return c.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def unsigned_code_of_value(v, fmt):
    """Code of a non-negative value on the scale format's grid."""
    eb, mb, bias, mx = SCALE_FORMATS[fmt]
    v = np.asarray(v, dtype=np.float64)
    assert np.all(v >= 0) and np.all(v <= mx)
    out = np.zeros(v.shape, dtype=np.int64)
    nz = v > 0
    m, e = np.frexp(np.where(nz, v, 1.0))
    E = e - 1 + bias                          # biased exponent if normal
    sub = E < 1
    frac_norm = (m * 2.0 - 1.0) * (1 << mb)
    frac_sub = v / 2.0 ** (1 - bias - mb)
    frac = np.where(sub, frac_sub, frac_norm)
    Ef = np.where(sub, 0, E)
    assert np.all(frac[nz] == np.floor(frac[nz])), "value not on the scale grid"
    out = np.where(nz, (Ef << mb) | frac.astype(np.int64), 0)
    return out.astype(np.uint8)


def unsigned_value_of_code(c, fmt):
    eb, mb, bias, mx = SCALE_FORMATS[fmt]
    c = np.asarray(c).astype(np.int64)
    E = c >> mb
    M = c & ((1 << mb) - 1)
    val = np.where(E == 0, M * 2.0 ** (1 - bias - mb), (1.0 + M / (1 << mb)) * 2.0 ** (E - bias))
    return val.astype(np.float32)


def bf16_round(x):
    """RNE of float32 to bfloat16, returned as float32."""
    return f32(x).astype(ml_dtypes.bfloat16).astype(np.float32)


# ---------------------------------------------------------------------------
# Block helpers
# ---------------------------------------------------------------------------

def as_2d(x):
    x = np.asarray(x)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    assert x.ndim == 2
    return x


def pad_to(x, rb, cb):
    rows, cols = x.shape
    pr = -(-rows // rb) * rb
    pc = -(-cols // cb) * cb
    out = np.zeros((pr, pc), dtype=x.dtype)       # +0.0 padding (docs/design.md)
    out[:rows, :cols] = x
    return out


def block_reduce_max(mag, rb, cb):
    """Max over [rb, cb] tiles of an already padded array (NaN-ignoring: NaN -> 0).

    Matches fmaxf(acc, |x|) starting from 0, which ignores NaN operands."""
    pr, pc = mag.shape
    m = np.where(np.isnan(mag), F32(0.0), mag).astype(np.float32)
    return m.reshape(pr // rb, rb, pc // cb, cb).max(axis=(1, 3)).astype(np.float32)


def block_any(mask, rb, cb):
    pr, pc = mask.shape
    return mask.reshape(pr // rb, rb, pc // cb, cb).any(axis=(1, 3))


def expand_blocks(v, rb, cb):
    return np.repeat(np.repeat(v, rb, axis=0), cb, axis=1)


def tensor_amax(x):
    """max |x| over the tensor, NaN-ignoring (fmaxf semantics), from +0."""
    a = np.abs(f32(x))
    a = np.where(np.isnan(a), F32(0.0), a)
    return F32(a.max()) if a.size else F32(0.0)


def same_bits_f32(a, b):
    """Bitwise float32 equality, treating any two NaNs as equal."""
    a = f32(a)
    b = f32(b)
    if a.shape != b.shape:
        return np.zeros(np.broadcast(a, b).shape if a.size == b.size else (1,), bool)
    eq = a.view(np.uint32) == b.view(np.uint32)
    return eq | (np.isnan(a) & np.isnan(b))
