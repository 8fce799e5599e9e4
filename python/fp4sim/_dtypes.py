"""Formats as NumPy users name them: ml_dtypes' and NumPy's dtype names (or the dtypes themselves)
beside fp4sim's, the ml_dtypes/NumPy dtype that holds each format's codes, and floating-point inputs
viewed as binary32.

Only formats whose every code ml_dtypes (or NumPy) decodes to the same value have a dtype here
(tests/python/test_dtypes.py proves it code by code); the others (ue4m3, ue5m3, eXmY descriptors)
come back as unsigned integer codes.
"""

from __future__ import annotations

from typing import Any, Optional

import ml_dtypes
import numpy as np

from . import _fp4sim
from ._native import native as _native

# fp4sim's format name -> the dtype of its codes. The package pins ml_dtypes 0.7.0; an older ml_dtypes
# already installed (a machine's own, e.g. beside JAX) may lack some of these dtypes, and a format whose
# dtype it lacks comes back as unsigned codes, as formats without a dtype do.
_ML_DTYPES_OF_FORMAT = {
    "e2m1": "float4_e2m1fn",
    "e2m3": "float6_e2m3fn",
    "e3m2": "float6_e3m2fn",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "ue5m3fn": "float8_e5m3fnu",
    "e8m0": "float8_e8m0fnu",
    "bf16": "bfloat16",
}
_DTYPE_OF_FORMAT = {name: np.dtype(getattr(ml_dtypes, dtype))
                    for name, dtype in _ML_DTYPES_OF_FORMAT.items() if hasattr(ml_dtypes, dtype)}
_DTYPE_OF_FORMAT.update({"fp16": np.dtype(np.float16), "fp32": np.dtype(np.float32)})
# Every other spelling a NumPy user may write -> fp4sim's name.
_ALIASES = {dtype.name: name for name, dtype in _DTYPE_OF_FORMAT.items()}
_ALIASES.update({"half": "fp16", "single": "fp32", "float": "fp32"})

# Input dtypes whose values widen to binary32 exactly.
_BINARY16 = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def format_name(format: Any, what: str = "format") -> str:
    """fp4sim's name of a format given as any name the library's parser reads (fp4sim's, ml_dtypes',
    MLIR's or PyTorch's: ``"e2m1"``, ``"float4_e2m1fn"``, ``"f4E2M1FN"``), in any case (``"E2M1"``), or
    as the dtype (``ml_dtypes.float4_e2m1fn``, ``np.float16``)."""
    if isinstance(format, str):
        text = format.strip()
        try:
            return _native.canonical_format(text, what)
        except _fp4sim.UsageError as error:
            if text.lower() == text:
                raise
            try:
                return _native.canonical_format(text.lower(), what)
            except _fp4sim.UsageError:
                raise error from None
    try:
        dtype = np.dtype(format)
    except (TypeError, ValueError):  # ValueError: a dict or list NumPy reads as a malformed structured dtype
        raise TypeError(f"{what}: expected a format name or a dtype, got {type(format).__name__}") from None
    if dtype.kind not in "fV":  # NumPy's floating-point dtypes, and ml_dtypes' (kind V)
        raise ValueError(f"{what}: {dtype.name} is not a format fp4sim models (known dtypes: "
                         f"{', '.join(sorted(_ALIASES))})")
    return _native.canonical_format(dtype.name, what)


def code_dtype(format: str) -> Optional[np.dtype]:
    """The ml_dtypes/NumPy dtype whose bytes are this format's codes, or None."""
    return _DTYPE_OF_FORMAT.get(format)


def known_names() -> list:
    """The ml_dtypes/NumPy names accepted beside fp4sim's."""
    return sorted(_ALIASES)


def as_codes(codes: np.ndarray) -> np.ndarray:
    """An ml_dtypes/NumPy float array of a format viewed as its unsigned integer codes (no copy)."""
    if codes.dtype.name in _ALIASES or codes.dtype.kind == "V":  # ml_dtypes' floats are kind V
        return codes.view(f"u{codes.dtype.itemsize}")
    return codes


def widen(a: np.ndarray) -> np.ndarray:
    """float16 and bfloat16 arrays as float32 (exact); other arrays unchanged."""
    return a.astype(np.float32) if a.dtype in _BINARY16 else a
