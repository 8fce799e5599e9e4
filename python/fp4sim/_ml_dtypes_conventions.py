"""``fp4sim.convert(..., specials="ml_dtypes")``: the results ``x.astype(dtype)`` gives in ml_dtypes 0.7.0
(NumPy for float16), where they differ from fp4sim's hardware convention (docs/semantics.md, "ml_dtypes"):

* saturation: ml_dtypes saturates only formats without Inf and NaN (e2m1, e2m3, e3m2); e4m3, e8m0 and
  ue5m3fn overflow to NaN, e5m2/bf16/fp16 to Inf (fp4sim saturates every format without Inf by default);
* NaN in: e2m1/e2m3/e3m2 give the zero of the opposite sign (+NaN -> -0); e4m3 the NaN with the input's
  sign, e8m0/ue5m3fn their NaN; e5m2 and bf16 the quiet NaN with the input's sign (0x7E, 0x7FC0);
  float16 and float32 NumPy's own cast (payload kept); an input already of the target's dtype is returned as it is
  (fp4sim: the canonical positive NaN, or +max finite for formats without NaN);
* e8m0: zero and negative inputs give NaN (fp4sim: an error) and ties round away from zero (rna; fp4sim:
  to the even code); ue5m3fn: negative inputs give NaN.

Every finite and infinite input is then encoded by fp4sim itself; tests/python/test_ml_dtypes.py checks
the whole result against ml_dtypes on every float16 and bfloat16 value.
"""

from __future__ import annotations

import numpy as np

from . import _fp4sim

_QUIET_NAN = {"e5m2": 0x7E, "bf16": 0x7FC0}


def _info(fmt: str) -> dict:
    for f in _fp4sim.formats():
        if f["name"] == fmt:
            return f
    raise ValueError(f"format: specials='ml_dtypes' needs a format ml_dtypes has, got {fmt!r}")


def settings(fmt: str, rounding: str, saturate):
    """The rounding and saturation ml_dtypes' astype uses for this format (explicit choices kept)."""
    info = _info(fmt)
    if saturate is None:
        saturate = not (info["has_nan"] or info["has_inf"])
    if fmt == "e8m0" and isinstance(rounding, str) and rounding == "rne":
        rounding = "rna"
    return rounding, saturate


def inputs_without_code(a: np.ndarray, fmt: str) -> np.ndarray:
    """Where ml_dtypes gives NaN (or, without NaN, a zero) rather than a rounded value."""
    info = _info(fmt)
    mask = np.isnan(a)
    if not info["signed"]:
        mask |= a < 0
    if fmt == "e8m0":
        mask |= a == 0
    return mask


def codes_without_value(original: np.ndarray, a: np.ndarray, fmt: str, dtype: np.dtype, codes: np.ndarray,
                        mask: np.ndarray) -> np.ndarray:
    """ml_dtypes' codes for the masked inputs: `original` as given, `a` its binary32/binary64 values."""
    info = _info(fmt)
    x = a[mask]
    negative = np.signbit(x)
    sign = np.asarray(1 << (info["bits"] - 1), codes.dtype) if info["signed"] else codes.dtype.type(0)
    if original.dtype == dtype:
        return original[mask].view(codes.dtype)
    if fmt in ("fp16", "fp32"):  # NumPy's own types: NumPy's cast
        return original[mask].astype(dtype).view(codes.dtype)
    if not info["has_nan"]:  # +NaN -> -0, -NaN -> +0
        return np.where(negative, codes.dtype.type(0), sign).astype(codes.dtype)
    nan = _QUIET_NAN.get(fmt, (1 << (info["bits"] - (1 if info["signed"] else 0))) - 1)
    out = np.full(x.shape, nan, codes.dtype)
    if info["signed"]:
        out[negative & np.isnan(x)] |= sign
    return out
