"""fp4sim: a bit-exact emulator of FP4 (E2M1) block-scaled formats, recipes and GEMM datapaths.

The same golden model as the ``fp4sim`` command line (docs/cli.md), on arrays in memory::

    import numpy as np, fp4sim
    x = np.random.default_rng(0).standard_normal((64, 256), dtype=np.float32)
    q = fp4sim.quantize(x, "nvfp4")                 # q.codes, q.scales: NumPy arrays; q.tensor_scale
    y = fp4sim.dequantize(q)                        # float32 [64, 256]
    c = fp4sim.gemm(x, x[:32], "nvfp4")             # C = A·Bᵀ through the recipe's datapath
    r = fp4sim.verify_quantize(x, my_codes, my_scales, "nvfp4", layout="swizzled-128x4")
    print(r)                                        # the explained report; r["mismatched_elements"], ...
    t = fp4sim.replay("traces/trace_a.h5", "nvfp4") # fp4sim replay's --json as a dict; t["tensors"]: records

Arrays: anything NumPy can view through ``__array__`` or DLPack (``__dlpack__``, e.g. PyTorch CPU
tensors; bfloat16 ones are viewed as ``ml_dtypes.bfloat16``). C-contiguous float32 tensors are read in place, without a copy; float64 is accepted when
every value is a binary32 value (as the CLI does); other layouts are copied to C order first.

Errors raise :class:`UsageError` (a bad name or option: the CLI's exit 2) or :class:`DataError` (data
that does not fit: exit 3), both ``ValueError`` subclasses, with the CLI's messages in Python's terms
(the keyword, not the flag: ``rounding: expected rne, rna, ..., got 'nearest'``), a value of the wrong
kind too (``recipe: expected a string, got int``, ``cols: -4 is out of range``); an array of a dtype
a call does not take, or an object NumPy cannot read as an array, raises :class:`DTypeError`, both a
``TypeError`` and a ``DataError``. ``TypeError`` on its own: a call Python cannot bind (an unknown keyword
of a function without recipe overrides), a trace that is not a path, a ``recipe_map`` that is not text
or a list of texts, a ``format`` that is neither a name nor a dtype.
"""

from __future__ import annotations

import json as _json
import math as _math
import numbers as _numbers
import os as _os
from typing import Any, Optional

import ml_dtypes as _ml_dtypes
import numpy as _np

from . import _dtypes, _fp4sim, _ml_dtypes_conventions
from ._native import native as _native
from ._fp4sim import DataError, UsageError

__all__ = [
    "DataError",
    "DTypeError",
    "UsageError",
    "Quantized",
    "VerifyReport",
    "formats",
    "recipes",
    "datapaths",
    "convert",
    "decode",
    "quantize",
    "dequantize",
    "gemm",
    "mma",
    "verify_quantize",
    "verify_gemm",
    "scales_to_layout",
    "scales_from_layout",
    "codes_to_order",
    "codes_from_order",
    "AnalysisReport",
    "replay",
    "sweep",
]

__version__ = _fp4sim.__version__  # CMakeLists.txt project()'s VERSION, fp4sim's one version


class DTypeError(DataError, TypeError):
    """An array of a dtype the call does not take: a TypeError, and a DataError as the CLI's exit 3."""


# ---------------------------------------------------------------------------------------------------
# Arrays in


def _as_numpy(x: Any, what: str) -> _np.ndarray:
    """A NumPy view of x: DLPack first (zero-copy for CPU tensors), then the array protocol; values stored
    in the other byte order (``>f4``) are converted to this machine's, as NumPy's own arithmetic would."""
    a = _as_numpy_view(x, what)
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def _as_numpy_view(x: Any, what: str) -> _np.ndarray:
    if isinstance(x, _np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        # PyTorch keeps a negation or conjugation lazy (a bit on the view: torch.complex(a, b).conj().imag)
        # that DLPack does not carry: the bytes exported are the unnegated ones. Resolved first (a copy),
        # the values read are the tensor's.
        for lazy, resolve in (("is_neg", "resolve_neg"), ("is_conj", "resolve_conj")):
            if callable(getattr(x, lazy, None)) and getattr(x, lazy)():
                x = getattr(x, resolve)()
        try:
            return _np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError) as e:
            reason = e
        try:  # NumPy has no bfloat16: a bfloat16 CPU tensor (PyTorch's) is viewed as ml_dtypes.bfloat16
            bits = _native._bfloat16_bits(x, x)
        except (TypeError, RuntimeError, BufferError, ValueError):
            bits = None
        if bits is not None:
            return bits.view(_ml_dtypes.bfloat16)
        raise DataError(f"{what}: cannot view through DLPack ({reason}); give a CPU tensor (.detach().cpu())") from None
    try:
        return _np.asarray(x)
    except (TypeError, ValueError) as e:  # a ragged list, an element NumPy cannot convert
        raise DTypeError(f"{what}: not an array NumPy can read ({e})") from None


def _binary32_value(value: Any, what: str) -> float:
    """A number rounded to the FP32 value a kernel holds; anything else a UsageError naming the keyword."""
    if isinstance(value, (bool, _np.bool_)) or not isinstance(value, _numbers.Real):
        raise UsageError(f"{what}: expected a number, got {type(value).__name__}")
    try:
        return float(_np.float32(float(value)))
    except OverflowError:  # an int beyond a double; a double beyond FP32 rounds to infinity, as a cast does
        raise UsageError(f"{what}: {value} is beyond the range of a double") from None


def _rows_cols(a: _np.ndarray) -> _np.ndarray:
    """A tensor of any rank as [prod(leading axes), last axis]: reshape(-1, last) cannot infer 0 rows."""
    return a.reshape(_math.prod(a.shape[:-1]), a.shape[-1]) if a.ndim > 2 else a


def _float32(x: Any, what: str, ndim: tuple = (1, 2)) -> _np.ndarray:
    a = _dtypes.widen(_as_numpy(x, what))
    if a.ndim not in ndim:
        raise DataError(f"{what}: expected a {' or '.join(f'{n}-D' for n in ndim)} array, got {a.ndim} dimensions")
    if a.dtype == _np.float32:
        return _np.ascontiguousarray(a)  # no copy when already C-contiguous
    if a.dtype == _np.float64:
        return _native._binary32(_np.ascontiguousarray(a), what)
    raise DTypeError(f"{what}: expected float32, float16, bfloat16 or float64 values, got {a.dtype}")


def _float64(x: Any, what: str) -> _np.ndarray:
    a = _dtypes.widen(_as_numpy(x, what))
    if a.dtype not in (_np.float32, _np.float64):
        raise DTypeError(f"{what}: expected float32 or float64 values, got {a.dtype}")
    return _np.ascontiguousarray(a, dtype=_np.float64)


def _bytes(x: Any, what: str) -> _np.ndarray:
    a = _as_numpy(x, what)
    if a.dtype != _np.uint8:
        raise DTypeError(f"{what}: expected uint8 bytes, got {a.dtype}")
    return _np.ascontiguousarray(a)


def _rbits(x: Any, what: str) -> Optional[tuple]:
    """Explicit random bits as given: NumPy's name of their type and the values widened to uint32 (the
    library checks the type, the shape and the range)."""
    if x is None:
        return None
    a = _as_numpy(x, what)
    fits = a.dtype.kind == "u" and a.dtype.itemsize <= 4
    return a.dtype.name, _np.ascontiguousarray(a.astype(_np.uint32) if fits else _np.zeros(a.shape, _np.uint32))


def _words(x: Any, what: str) -> Optional[_np.ndarray]:
    if x is None:
        return None
    a = _as_numpy(x, what)
    if a.dtype.kind not in "ui":
        raise DTypeError(f"{what}: expected unsigned integers (uint8/16/32), got {a.dtype}")
    if a.dtype.kind == "i" or a.dtype.itemsize > 4:
        if a.size and (a.min() < 0 or a.max() > 0xFFFFFFFF):
            raise DataError(f"{what}: values must be integers in [0, 2^32)")
    return _np.ascontiguousarray(a, dtype=_np.uint32)


# ---------------------------------------------------------------------------------------------------
# Results


class Quantized:
    """A block-quantized tensor: the golden model's bytes and the recipe settings that made them.

    ``codes`` uint8 [rows, ceil(cols/2)] (element 2j in the low nibble) and ``scales`` uint8
    [rows, ceil(cols/B)] (1-D blocks) or [ceil(rows/B), ceil(cols/B)] (2-D tiles) are read-only NumPy
    views; ``tensor_scale`` is the FP32 encode scale G (1 without a tensor scale), ``global_decode_scale``
    Gd = RN(1/G), ``tensor_amax`` the reference amax used; ``row_amax`` float32 [rows], each row's amax, which
    made its own G and Gd, under ``amax_scope="row"`` (row-scaled NVFP4), else empty.
    """

    def __init__(self, native: "_fp4sim.QuantizedTensor", shape: Optional[tuple] = None):
        self._native = native
        batched = shape is not None and len(shape) > 2  # leading axes flattened into the rows
        # every axis given, none inferred: a batch of size 0 has no size to infer one from
        scale_rows = -(-shape[-2] // native.block_rows) if batched else 0
        self.codes: _np.ndarray = native.codes.reshape(*shape[:-1], native.codes.shape[-1]) if batched else native.codes
        self.scales: _np.ndarray = (native.scales.reshape(*shape[:-2], scale_rows, native.scales.shape[-1]) if batched
                                    else native.scales)
        self.tensor_scale = _np.float32(native.global_encode_scale)
        self.global_encode_scale = self.tensor_scale
        self.global_decode_scale = _np.float32(native.global_decode_scale)
        self.tensor_amax = _np.float32(native.tensor_amax)
        self.row_amax = _np.array(native.row_amax, dtype=_np.float32)
        self.tensor_scaled = bool(native.tensor_scaled)
        self.target = _np.float32(native.target)
        self.shape = tuple(shape) if shape is not None and len(shape) > 2 else (native.rows, native.cols)
        self.block = (native.block_rows, native.block_cols)
        self.recipe = native.recipe
        self.element_format = native.element_format
        self.scale_format = native.scale_format
        self.rounding = native.rounding
        self.rht = bool(native.rht)
        self.dequantize_order = native.dequantize_order
        self.counts = native.counts

    def dequantize(self) -> _np.ndarray:
        """:func:`dequantize` of this tensor.

        >>> fp4sim.quantize(np.array([0.3, -2.6, 7.0, 1.0], np.float32), "mxfp4").dequantize()
        array([[ 0.5, -3. ,  6. ,  1. ]], dtype=float32)
        """
        return dequantize(self)

    def codes_in(self, nibbles: str) -> _np.ndarray:
        """The codes as a kernel storing them in another nibble order would (low-first, high-first, unpacked).

        >>> q = fp4sim.quantize(np.array([0.5, 1.0, 1.5, 2.0], np.float32), "mxfp4")
        >>> q.codes, q.codes_in("unpacked")
        (array([[ 66, 101]], dtype=uint8), array([[2, 4, 5, 6]], dtype=uint8))
        """
        return codes_to_order(self._native.codes, self._native.rows, self._native.cols, nibbles)

    def scales_as_ml_dtypes(self) -> _np.ndarray:
        """The scales as the ml_dtypes array of their format, the same bytes without a copy: float8_e8m0fnu
        (e8m0: MXFP4), float8_e4m3fn (ue4m3: NVFP4; its codes are E4M3FN's with the sign bit 0) or
        float8_e5m3fnu (ue5m3fn). ``scales`` keeps the raw codes; ue5m3 has no ml_dtypes twin (ValueError).

        >>> s = fp4sim.quantize(np.array([0.3, -2.6, 7.0, 1.0], np.float32), "mxfp4").scales_as_ml_dtypes()
        >>> s.dtype.name, s.astype(np.float32)
        ('float8_e8m0fnu', array([[1.]], dtype=float32))
        """
        fmt = "e4m3" if self.scale_format == "ue4m3" else self.scale_format
        dtype = _dtypes.code_dtype(fmt)
        if dtype is None or dtype.itemsize != 1:
            raise ValueError(f"scales: ml_dtypes has no dtype for {self.scale_format} scales; .scales holds their codes")
        return self.scales.view(dtype)

    def scales_in(self, layout: str) -> _np.ndarray:
        """The scales in a kernel's layout (rowmajor, te-rowrep, swizzled-128x4; docs/layouts.md).

        >>> fp4sim.quantize(np.ones((4, 64), np.float32), "nvfp4").scales_in("swizzled-128x4").shape
        (128, 4)
        """
        return scales_to_layout(self._native.scales, self._native.rows, self._native.cols, self.block[0], self.block[1],
                                layout)

    def __repr__(self) -> str:
        return (f"Quantized(recipe={self.recipe!r}, shape={self.shape}, block={self.block}, "
                f"{self.element_format}/{self.scale_format}, tensor_scale={float(self.tensor_scale)!r})")


class VerifyReport(dict):
    """The JSON report of ``fp4sim verify ... --json`` as a dict; ``str()`` gives the text report.

    ``bit_exact`` is what the CLI's exit status says (for ``verify_gemm(datapath="auto")``: some preset
    explains every output bit for bit).
    """

    def __init__(self, json_text: str, text: str, ok: bool):
        super().__init__(_json.loads(json_text))
        self.text = text
        self.bit_exact = bool(ok)

    def __str__(self) -> str:
        return self.text

    def __bool__(self) -> bool:
        return self.bit_exact


# ---------------------------------------------------------------------------------------------------
# The API


def formats() -> list:
    """Every known number format: the fields of ``fp4sim formats --json`` (min_subnormal None if none).

    >>> e2m1 = next(f for f in fp4sim.formats() if f["name"] == "e2m1")
    >>> e2m1["max_finite"], e2m1["min_subnormal"], e2m1["has_nan"]
    (6.0, 0.5, False)
    """
    return _fp4sim.formats()


def recipes() -> list:
    """The recipe preset names (``fp4sim quantize --help`` lists them under ``--recipe``, with their sources).

    >>> fp4sim.recipes()
    ['ue5m3', 'ue5m3-b32', 'ue5m3-te', 'nvfp4', 'nvfp4-norht', 'nvfp4-4over6', 'mxfp4', 'nvfp4-4over6-mse',
     'nvfp4-4over6-fast', 'mxfp4-rceil', 'mxfp4-ceil', 'mxfp4-even', 'mxfp8', 'mxfp8-rceil', 'mxfp8-e5m2',
     'mxfp8-e5m2-rceil']
    """
    return _fp4sim.recipes()


def datapaths() -> list:
    """The datapath preset names (``fp4sim gemm --list-datapaths``).

    >>> "sm100-mxf4nvf4" in fp4sim.datapaths(), "fp32-seq" in fp4sim.datapaths()
    (True, True)
    """
    return _fp4sim.datapaths()


def convert(x, format, rounding: str = "rne", *, sr_bits: int = 8, seed: int = 0, rbits=None,
            saturate: Optional[bool] = None, specials: str = "hardware"):
    """Element-wise encode (``fp4sim convert``), as ``x.astype(dtype)`` does in ml_dtypes.

    ``format`` is fp4sim's name (``"e2m1"``, ``"E2M1"``), ml_dtypes'/NumPy's (``"float4_e2m1fn"``,
    ``"bfloat16"``), MLIR's (``"f4E2M1FN"``), PyTorch's (``"torch.float8_e4m3fn"``) or the dtype itself
    (``ml_dtypes.float8_e4m3fn``), each meaning what it means there (docs/semantics.md §0.1). ``x``: float32 (read in place and
    encoded by the fast binary32 encoder), float16 or bfloat16 (widened exactly), or float64 (each value
    rounded once); any shape; a scalar gives a scalar. The result has x's shape and, where ml_dtypes or
    NumPy has the format (e2m1, e2m3, e3m2, e4m3, e5m2, ue5m3fn, e8m0, bf16, fp16, fp32), that dtype —
    ``.view(np.uint8)`` gives the codes; other formats give unsigned codes (uint8). Stochastic modes take
    ``rbits`` (one integer per element) or the Philox stream of ``seed``.

    Overflow, Inf, NaN and -0 follow the hardware (``specials="hardware"``: cvt.*.satfinite; ``saturate``
    defaults to True for formats without Inf), TE's Python reference (``"te-python"``), ModelOpt's
    ``_cast_fp4`` (``"modelopt"``: an exact -0 gives code 0, NaN the hardware's), microxcaling's
    (``"microxcaling"``: an exact -0 gives code 0, and under rna/rne the binary32 just below half the
    smallest subnormal rounds up), or ml_dtypes'
    ``astype`` exactly (``"ml_dtypes"``: no saturation where the format has Inf or NaN, NaN keeps its sign,
    +NaN -> -0 in e2m1, e8m0 ties away from zero; docs/semantics.md lists each difference).

    >>> import numpy as np, fp4sim
    >>> y = fp4sim.convert(np.array([0.3, -2.6, 7.0], np.float32), "float4_e2m1fn")
    >>> y.dtype.name, y.astype(np.float32)
    ('float4_e2m1fn', array([ 0.5, -3. ,  6. ], dtype=float32))
    >>> fp4sim.convert(np.array([0.3, -2.6, 7.0], np.float32), "e2m1").view(np.uint8)
    array([ 1, 13,  7], dtype=uint8)
    >>> fp4sim.convert(1.3, "e4m3")
    1.25
    """
    fmt = _dtypes.format_name(format)
    original = _as_numpy(x, "x")
    scalar = original.ndim == 0
    if scalar:
        original = original.reshape(1)
    a = _np.ascontiguousarray(_dtypes.widen(original))  # no copy when float32 and C-contiguous
    if a.dtype not in (_np.float32, _np.float64):
        raise DTypeError(f"x: expected floating-point values (float32, float64, float16 or bfloat16), got {a.dtype}")
    dtype = _dtypes.code_dtype(fmt)
    if isinstance(specials, str) and specials == "ml_dtypes":  # an array would compare element-wise
        if dtype is None:
            raise ValueError(f"specials: 'ml_dtypes' needs a format ml_dtypes has ({', '.join(_dtypes.known_names())}), "
                             f"got {format!r}")
        rounding, saturate = _ml_dtypes_conventions.settings(fmt, rounding, saturate)
        no_code = _ml_dtypes_conventions.inputs_without_code(a, fmt)
        if no_code.any():
            codes = _native.convert(_np.where(no_code, a.dtype.type(1), a), fmt, rounding, sr_bits, seed,
                                    _rbits(rbits, "rbits"), saturate, "hardware")
            codes[no_code] = _ml_dtypes_conventions.codes_without_value(original, a, fmt, dtype, codes, no_code)
        else:
            codes = _native.convert(a, fmt, rounding, sr_bits, seed, _rbits(rbits, "rbits"), saturate, "hardware")
    else:
        codes = _native.convert(a, fmt, rounding, sr_bits, seed, _rbits(rbits, "rbits"), saturate, specials)
    out = codes if dtype is None else codes.view(dtype)
    return out[0] if scalar else out


def decode(codes, format=None) -> _np.ndarray:
    """The exact value of each code, as float32 (every format's values are binary32 values).

    ``codes``: unsigned integers (read in place when uint8/16/32) in ``format``, or an ml_dtypes/NumPy
    array of a format, whose dtype is then the format.

    >>> fp4sim.decode(np.array([1, 13, 7], np.uint8), "e2m1")
    array([ 0.5, -3. ,  6. ], dtype=float32)
    >>> fp4sim.decode(0x7E, "e4m3")
    np.float32(448.0)
    """
    a = _as_numpy(codes, "codes")
    fmt = _dtypes.format_name(a.dtype if format is None else format)
    scalar = a.ndim == 0
    a = _dtypes.as_codes(a.reshape(1) if scalar else a)
    if a.dtype not in (_np.uint8, _np.uint16, _np.uint32):
        a = _words(a, "codes")
    values = _native.decode(_np.ascontiguousarray(a), fmt)
    return values[0] if scalar else values


def quantize(x, recipe: str, role: str = "activation", *, amax_ref: Optional[float] = None, seed: int = 0,
             rbits=None, **overrides) -> Quantized:
    """Block quantization of one tensor (``fp4sim quantize``). ``recipe``: a preset, or a user-defined recipe
    ``"PRESET:KEY=VALUE,..."`` in the keys below (``"mxfp4:scale_rule=rceil,block=16"``; docs/cli.md
    "User-defined recipes"). Recipe overrides as keywords (they override the spec): block,
    two_d, scale_format, element_format, target, tensor_scale ("none", "current", "periodic:D"),
    scale_rule, zero_scale, dequantize_order, rounding, sr_bits, rht.

    ``x``: float32 (read in place), float16/bfloat16 (widened exactly) or float64 holding binary32 values,
    of any rank: leading axes are batch, 1-D blocks run along the last axis (the tensor is quantized as
    [prod(leading), last]), 2-D tiles cover the last two axes (each matrix on its own tiles: its row
    count must be a multiple of the tile). The tensor scale is the whole tensor's.

    >>> x = np.random.default_rng(0).standard_normal((2, 8, 64), dtype=np.float32)
    >>> q = fp4sim.quantize(x, "nvfp4")
    >>> q.codes.shape, q.scales.shape, fp4sim.dequantize(q).shape
    ((2, 8, 32), (2, 8, 4), (2, 8, 64))
    >>> fp4sim.quantize(np.zeros((3, 32, 64), np.float32), "nvfp4", two_d=True).scales.shape
    (3, 2, 4)
    """
    a = _as_numpy(x, "x")
    shape = a.shape
    a = _float32(_rows_cols(a), "x")
    native = _native.quantize(a, recipe, overrides, role, amax_ref, seed, _rbits(rbits, "rbits"))
    if len(shape) > 2 and shape[-2] % native.block_rows:
        # Tiles of the flattened tensor would straddle two matrices.
        raise ValueError(f"x: 2-D tiles of {native.block_rows}x{native.block_cols} over the last two axes need a "
                         f"multiple of {native.block_rows} rows per matrix, got shape {shape}")
    return Quantized(native, shape)


def dequantize(q, scales=None, recipe: Optional[str] = None, *, shape: Optional[tuple] = None, tensor_scale=None,
               tensor_scale_kind: str = "amax", layout: str = "rowmajor", nibbles: str = "low-first",
               role: str = "activation", **overrides) -> _np.ndarray:
    """The value the recipe reconstructs for each element (tensor scale included), float32.

    ``dequantize(q)``: a :class:`Quantized`, in its shape. ``dequantize(codes, scales, recipe, ...)``: a
    kernel's raw bytes — ``codes`` uint8 in ``nibbles`` order (low-first, high-first, unpacked), ``scales``
    uint8 in ``layout`` (rowmajor, te-rowrep, swizzled-128x4), ``tensor_scale`` the FP32 value the kernel
    holds as ``tensor_scale_kind`` ("amax", as TE's kernels hold it; "encode": G; "decode": Gd; the
    te-kernel dequantize order of nvfp4 needs the amax), ``shape`` (rows, cols) when the
    codes do not say it (default: rows = codes.shape[0], cols = 2 * codes.shape[1] packed); recipe
    overrides as for :func:`quantize`.

    >>> x = np.random.default_rng(0).standard_normal((8, 64), dtype=np.float32)
    >>> q = fp4sim.quantize(x, "nvfp4")
    >>> y = fp4sim.dequantize(q.codes_in("high-first"), q.scales_in("swizzled-128x4"), "nvfp4",
    ...                       tensor_scale=q.tensor_amax, layout="swizzled-128x4", nibbles="high-first")
    >>> bool((y == fp4sim.dequantize(q)).all())
    True
    """
    if isinstance(q, Quantized):
        return _native.dequantize(q._native).reshape(q.shape)
    if scales is None or recipe is None:
        if isinstance(q, _fp4sim.QuantizedTensor):
            return _native.dequantize(q)
        raise TypeError("dequantize: give a Quantized, or codes, scales and recipe")
    codes = _bytes(q, "codes")
    if shape is None:
        if codes.ndim != 2:
            raise ValueError(f"shape: needed for {codes.ndim}-D codes (give shape=(rows, cols))")
        shape = (codes.shape[0], codes.shape[1] * (1 if isinstance(nibbles, str) and nibbles == "unpacked" else 2))
    try:
        rows, cols = shape
    except (TypeError, ValueError):
        raise UsageError(f"shape: expected (rows, cols), got {shape!r}") from None
    value = None if tensor_scale is None else _binary32_value(tensor_scale, "tensor_scale")
    return _native.dequantize_raw(codes, _bytes(scales, "scales"), rows, cols, recipe, overrides, role, layout,
                                  nibbles, value, tensor_scale_kind)


def _gemm_args(gemm, datapath, inner, snap, out_dtype, amax_ref_a, amax_ref_b, target_a, target_b, seed):
    return {"gemm": gemm, "datapath": datapath, "inner": inner, "snap": snap, "out_dtype": out_dtype,
            "amax_ref_a": amax_ref_a, "amax_ref_b": amax_ref_b, "target_a": target_a, "target_b": target_b,
            "seed": seed}


def gemm(a, b, recipe: str, gemm: str = "fprop", *, datapath: Optional[str] = None, inner: Optional[str] = None,
         snap: bool = True, out_dtype: str = "f32", amax_ref_a: Optional[float] = None,
         amax_ref_b: Optional[float] = None, target_a: Optional[float] = None, target_b: Optional[float] = None,
         seed: int = 0, rbits_a=None, rbits_b=None, **overrides) -> _np.ndarray:
    """C = A·Bᵀ (A [M, K], B [N, K]) with both operands quantized along K under the recipe's rules for
    that GEMM, accumulated by ``datapath`` (default: the recipe's). float32 [M, N] (``fp4sim gemm``).

    >>> a = np.array([[1.0, 2.0, 3.0, 4.0] * 16], np.float32)    # [1, 64], every value on the FP4 grid
    >>> fp4sim.gemm(a, np.ones((2, 64), np.float32), "mxfp4")
    array([[160., 160.]], dtype=float32)
    >>> x = np.random.default_rng(0).standard_normal((4, 64), dtype=np.float32)
    >>> fp4sim.gemm(x, x[:3], "mxfp4", datapath="sm100-mxf4nvf4").shape
    (4, 3)
    """
    args = _gemm_args(gemm, datapath, inner, snap, out_dtype, amax_ref_a, amax_ref_b, target_a, target_b, seed)
    return _native.gemm(_float32(a, "a", (2,)), _float32(b, "b", (2,)), recipe, overrides, args,
                        _rbits(rbits_a, "rbits_a"), _rbits(rbits_b, "rbits_b"))


def mma(a, b, c=None, *, datapath: str, input_format: Optional[str] = None, a_format: Optional[str] = None,
        b_format: Optional[str] = None) -> _np.ndarray:
    """D = A·B + C (A [M, K], B [K, N], C and D float32 [M, N]) as the modeled tensor core computes it,
    for inputs exactly representable in ``input_format`` (``fp4sim mma``); ``a_format`` and ``b_format``
    give A and B their own formats (e4m3 x e5m2 on ``sm90-fp8``), each defaulting to ``input_format``.

    >>> fp4sim.mma(np.full((2, 16), 0.5), np.full((16, 3), 1.5), np.ones((2, 3)), datapath="sm90-bf16",
    ...            input_format="bf16")
    array([[13., 13., 13.],
           [13., 13., 13.]], dtype=float32)
    """
    cc = None if c is None else _float64(c, "c")
    return _native.mma(_float64(a, "a"), _float64(b, "b"), cc, datapath, input_format, a_format, b_format)


def verify_quantize(x, codes, scales, recipe: str, role: str = "activation", *, layout: str = "rowmajor",
                    nibbles: str = "low-first", tensor_scale=None, tensor_scale_kind: str = "any",
                    amax_ref: Optional[float] = None, seed: int = 0, rbits=None, max_explained: int = 10,
                    **overrides) -> VerifyReport:
    """Your kernel's packed codes and scale bytes against the golden quantizer (``fp4sim verify
    quantize``). ``tensor_scale``: a number is your FP32 tensor scale (compared with G, Gd or the amax,
    see ``tensor_scale_kind``); a string is the recipe's tensor-scale policy override.

    >>> x = np.random.default_rng(0).standard_normal((4, 64), dtype=np.float32)
    >>> q = fp4sim.quantize(x, "nvfp4")
    >>> fp4sim.verify_quantize(x, q.codes, q.scales, "nvfp4").bit_exact
    True
    >>> theirs = q.codes.copy()
    >>> theirs[1, 3] ^= 0x01                                    # one code off by one
    >>> r = fp4sim.verify_quantize(x, theirs, q.scales, "nvfp4")
    >>> r.bit_exact, r["mismatched_elements"], r["mismatches"][0]["col"]
    (False, 1, 6)
    """
    value = None
    if isinstance(tensor_scale, str):
        overrides["tensor_scale"] = tensor_scale
    elif tensor_scale is not None:
        value = _binary32_value(tensor_scale, "tensor_scale")
    json_text, text, ok = _native.verify_quantize(
        _float32(x, "x"), _bytes(codes, "codes"), _bytes(scales, "scales"), recipe, overrides, role, layout, nibbles,
        value, tensor_scale_kind, amax_ref, seed, _rbits(rbits, "rbits"), max_explained)
    return VerifyReport(json_text, text, ok)


def verify_gemm(a, b, c, recipe: str, gemm: str = "fprop", *, datapath: Optional[str] = None,
                inner: Optional[str] = None, snap: bool = True, out_dtype: str = "f32",
                amax_ref_a: Optional[float] = None, amax_ref_b: Optional[float] = None,
                target_a: Optional[float] = None, target_b: Optional[float] = None, seed: int = 0, rbits_a=None,
                rbits_b=None, worst: int = 3, **overrides) -> VerifyReport:
    """Your GEMM output C [M, N] against a golden datapath (``fp4sim verify gemm``); ``datapath="auto"``
    tries every preset and reports which explain your outputs bit for bit, and in ``r["ties"]`` the groups
    of presets with bit-identical outputs, which these inputs cannot tell apart (``fp4sim vectors
    --discriminate`` writes inputs that can).

    >>> a = np.random.default_rng(0).standard_normal((8, 64), dtype=np.float32)
    >>> c = fp4sim.gemm(a, a[:4], "nvfp4")
    >>> fp4sim.verify_gemm(a, a[:4], c, "nvfp4").bit_exact
    True
    >>> c[1, 2] = np.nextafter(c[1, 2], np.float32(np.inf))     # one output one ulp off
    >>> r = fp4sim.verify_gemm(a, a[:4], c, "nvfp4")
    >>> r.bit_exact, r["mismatches"]
    (False, 1)
    """
    args = _gemm_args(gemm, datapath, inner, snap, out_dtype, amax_ref_a, amax_ref_b, target_a, target_b, seed)
    json_text, text, ok = _native.verify_gemm(
        _float32(a, "a", (2,)), _float32(b, "b", (2,)), _float32(c, "c", (2,)), recipe, overrides, args,
        _rbits(rbits_a, "rbits_a"), _rbits(rbits_b, "rbits_b"), worst)
    return VerifyReport(json_text, text, ok)


def scales_to_layout(scales, rows: int, cols: int, block_rows: int, block_cols: int, layout: str) -> _np.ndarray:
    """Row-major block-grid scales of a [rows, cols] tensor -> a kernel's layout (docs/layouts.md).

    >>> q = fp4sim.quantize(np.ones((4, 64), np.float32), "nvfp4")
    >>> fp4sim.scales_to_layout(q.scales, 4, 64, 1, 16, "swizzled-128x4").shape   # padded to 128 x 4 tiles
    (128, 4)
    """
    return _native.scales_to_layout(_bytes(scales, "scales"), rows, cols, block_rows, block_cols, layout)


def scales_from_layout(stored, rows: int, cols: int, block_rows: int, block_cols: int, layout: str) -> _np.ndarray:
    """A kernel's scale bytes -> row-major block-grid scales (the copies of a 2-D tile must agree).

    >>> q = fp4sim.quantize(np.ones((4, 64), np.float32), "nvfp4")
    >>> stored = fp4sim.scales_to_layout(q.scales, 4, 64, 1, 16, "swizzled-128x4")
    >>> bool((fp4sim.scales_from_layout(stored, 4, 64, 1, 16, "swizzled-128x4") == q.scales).all())
    True
    """
    return _native.scales_from_layout(_bytes(stored, "scales"), rows, cols, block_rows, block_cols, layout)


def codes_to_order(codes, rows: int, cols: int, nibbles: str) -> _np.ndarray:
    """fp4sim's low-first packed codes -> low-first, high-first or unpacked (one code a byte).

    >>> fp4sim.codes_to_order(np.array([[0x21, 0x43]], np.uint8), 1, 4, "unpacked")
    array([[1, 2, 3, 4]], dtype=uint8)
    >>> fp4sim.codes_to_order(np.array([[0x21, 0x43]], np.uint8), 1, 4, "high-first")
    array([[18, 52]], dtype=uint8)
    """
    return _native.codes_to_order(_bytes(codes, "codes"), rows, cols, nibbles)


def codes_from_order(stored, rows: int, cols: int, nibbles: str) -> _np.ndarray:
    """Codes stored in a nibble order -> fp4sim's low-first packing.

    >>> [hex(b) for b in fp4sim.codes_from_order(np.array([[1, 2, 3, 4]], np.uint8), 1, 4, "unpacked")[0]]
    ['0x21', '0x43']
    """
    return _native.codes_from_order(_bytes(stored, "codes"), rows, cols, nibbles)


# ---------------------------------------------------------------------------------------------------
# Trace analyses (the library calls of ``fp4sim replay`` and ``fp4sim sweep``)


class AnalysisReport(dict):
    """The JSON report of ``fp4sim replay ... --json`` or ``fp4sim sweep ... --json`` as a dict, the same
    fields under the same names (docs/cli.md); ``str()`` gives the summary table the CLI prints.

    The entries are lists of dicts, one dict per entry (``r["tensors"]``; replay also ``r["gemms"]`` and
    ``r["headroom"]``): what ``pandas.DataFrame(r["tensors"])`` takes as it is, rows of a ragged record
    (a sweep's ``distribution`` only on synthetic input) included. A value the CLI writes as ``null`` is
    None, with its reason under ``<field>_note``; per-block statistics stay a nested dict
    (``block_stats``), which ``pandas.json_normalize`` spreads into ``block_stats.*`` columns.
    """

    def __init__(self, json_text: str, summary: str):
        super().__init__(_json.loads(json_text))
        self.summary = summary

    def __str__(self) -> str:
        return self.summary


def _analysis():
    """The extension's trace analyses, or a clear error where the module was built without them."""
    if not hasattr(_fp4sim, "replay"):
        raise NotImplementedError(
            "fp4sim.replay and fp4sim.sweep read HDF5 traces: this build of the module has no HDF5. Install the "
            "wheel tools/build_wheel.sh builds (HDF5 inside), or install HDF5, CLI11 and cereal (Debian: apt-get "
            "install libhdf5-dev libcli11-dev libcereal-dev) and run pip install . again: it builds them in "
            "when it finds them")
    return _native


def _names(value, what: str) -> str:
    """A CLI list option from a string ("ue5m3,nvfp4"), one value, or any iterable of values."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    try:
        return ",".join(str(v) for v in value)
    except TypeError:
        raise TypeError(f"{what}: expected a string, a value or a list of values, got {type(value).__name__}") from None


def _maps(maps) -> str:
    """A list of recipe maps as --recipe-map's text (one map after another, "; " between)."""
    try:
        return "; ".join(maps)
    except TypeError:
        raise TypeError(f"recipe_map: expected a string or a list of strings, got {type(maps).__name__}") from None


def _unless_empty(text):
    """None (the default) for "", which the argument tables refuse as naming nothing; anything else as given,
    for the keyword check to judge."""
    return None if isinstance(text, str) and not text else text


def _steps(steps) -> Optional[str]:
    """``steps`` as --steps takes it: None selects every captured step; an empty selection ([] or ",") is
    passed on as one, so that it is refused, not read as None."""
    if steps is None:
        return None
    return _names(steps, "steps") or ","


def _trace_file(path) -> str:
    if not isinstance(path, (str, _os.PathLike)):  # os.fspath also takes bytes, and open() a descriptor
        raise TypeError(f"trace: expected a path (str or os.PathLike), got {type(path).__name__}")
    text = _os.fspath(path)
    if not _os.path.exists(text):
        raise FileNotFoundError(2, "no such trace file", text)
    return text


def stats(x, q: Quantized, *, reference=None, chunk_multiple: Optional[int] = None) -> dict:
    """The statistics ``fp4sim replay`` reports for one tensor, for ``x`` and ``q = fp4sim.quantize(x, ...)``:
    a dict with the names and definitions of a replay ``tensors`` entry's figures (docs/replay.md, from
    ``elements`` to ``dynamic_range_log2``, and the nested ``block_stats``), computed by the same library
    call; plain ints and floats, None with a ``<field>_note`` where a figure has no value. ``reference``: the
    values the error is measured against (float64, shape of x; default x itself). The sums run over chunks
    of whole block rows as replay's do; ``chunk_multiple`` is replay's (16, or the lcm of 16 and the 2-D
    tiles of the recipes it replays together; default the lcm of 16 and q's tile rows), with which the
    figures equal replay's bit for bit.

    >>> x = np.random.default_rng(0).standard_normal((4, 64), dtype=np.float32)
    >>> s = fp4sim.stats(x, fp4sim.quantize(x, "nvfp4"))
    >>> s["elements"], s["blocks"], round(s["sqnr_db"], 2)
    (256, 16, 19.97)
    """
    if not isinstance(q, Quantized):
        raise TypeError(f"q: expected what fp4sim.quantize returns, got {type(q).__name__}")
    a = _as_numpy(x, "x")
    a = _float32(_rows_cols(a), "x")
    ref = None if reference is None else _np.ascontiguousarray(_float64(reference, "reference")).reshape(-1)
    if chunk_multiple is None:
        chunk_multiple = _math.lcm(16, q.block[0])
    return _json.loads(_native.stats(q._native, a, ref, chunk_multiple))


def replay(trace, recipes=None, *, recipe_map=None, datapath: str = "recipe", steps=None, layers: str = "",
           seed: int = 0, hold: str = "window", gemms: bool = True, period: int = 50,
           slab_mib: float = 256) -> AnalysisReport:
    """Replays a tensor trace (docs/trace-format.md) through block-scaled recipes: ``fp4sim replay TRACE``
    with its options as keywords (docs/cli.md). ``recipes``, ``steps``: a list or the CLI's comma-separated
    text (``steps="100-200"`` selects the captured steps in a range); ``layers``: a regular expression
    searched in layer names; ``gemms=False`` is ``--no-gemms``. Returns an :class:`AnalysisReport`.
    ``recipes`` defaults to ``"ue5m3,nvfp4,mxfp4"``. ``recipe_map`` (instead of ``recipes``): policies per
    layer and step, ``--recipe-map``'s text or a list of maps, each ``"PATTERN[@STEPS]=RECIPE,..."`` (first
    matching rule wins; ``bf16``: not quantized; docs/replay.md "Recipe maps"); every entry then names its
    ``policy``.

    A missing file raises FileNotFoundError; a file that is not a trace, DataError; an unknown recipe,
    step or option value, UsageError listing the valid ones (both ValueError).

    >>> r = fp4sim.replay("traces/trace_a.h5", ["nvfp4", "mxfp4"], steps=[200], layers="layers.0.mlp.down")
    >>> [(e["recipe"], e["tensor"], round(e["sqnr_db"], 2)) for e in r["tensors"]][:3]
    [('nvfp4', 'x', 22.46), ('mxfp4', 'x', 16.12), ('nvfp4', 'w', 19.06)]
    >>> sorted({e["gemm"] for e in r["gemms"]}), len(r["headroom"])
    (['dgrad', 'fprop', 'wgrad'], 3)
    >>> m = fp4sim.replay("traces/trace_a.h5", recipe_map=["lm_head=bf16,*=nvfp4", "*=nvfp4"], steps=[1],
    ...                   layers="lm_head|layers.0.mlp.down", gemms=False)
    >>> sorted({(e["policy"][:7], e["layer"][-9:], e["recipe"]) for e in m["tensors"]})
    [('*=nvfp4', 'down_proj', 'nvfp4'), ('*=nvfp4', 'lm_head', 'nvfp4'), ('lm_head', 'down_proj', 'nvfp4'), ('lm_head', 'lm_head', 'bf16')]
    """
    native = _analysis()
    if recipes is not None and recipe_map is not None:
        raise UsageError("give recipes or recipe_map, not both")
    maps = None if recipe_map is None else recipe_map if isinstance(recipe_map, str) else _maps(recipe_map)
    json_text, summary = native.replay(_trace_file(trace), dict(
        recipes=None if recipes is None else _names(recipes, "recipes"), recipe_map=maps, datapath=datapath,
        steps=_steps(steps), layers=_unless_empty(layers), seed=seed, hold=hold, gemms=gemms, period=period,
        slab_mib=slab_mib))
    return AnalysisReport(json_text, summary)


def sweep(trace=None, *, synthetic="normal,laplace,student-t:3,lognormal:1,normal+outliers:0.001:100",
          rows: int = 256, cols: int = 4096, role: str = "activation", element_formats="e2m1",
          scale_formats="ue4m3,ue5m3,e8m0", blocks="16,32", tensor_scales="none,current", roundings="rne",
          rho="1", base: str = "ue5m3", steps=None, layers: str = "", recipe_map=None, hold: str = "window",
          seed: int = 0, slab_mib: float = 256, scale_rules=None, block_choices=None) -> AnalysisReport:
    """A grid of element format x scale format x block size x tensor-scale policy x rounding over a trace's
    tensors or, without ``trace``, over seeded synthetic distributions: ``fp4sim sweep`` with its options as
    keywords (each list a Python list or the CLI's comma-separated text; ``scale_rules``, e.g. ``["floor",
    "rceil"]``, and ``block_choices``, e.g. ``["single", "4over6-mae"]``, cross the scale rules and TE's 4over6
    block choice with the other axes; ``base`` may be a user-defined recipe). Returns an
    :class:`AnalysisReport` whose ``tensors`` hold one entry per (input, configuration), ``recipe`` naming
    the configuration; ``skipped`` lists the grid points that are not valid recipes. ``recipe_map`` (trace
    only): one map as :func:`replay` takes, whose ``grid`` rules take each grid point (``"lm_head=bf16,*=grid"``).

    >>> r = fp4sim.sweep(synthetic=["normal", "laplace"], rows=16, cols=256, blocks=[16, 32],
    ...                  scale_formats="ue4m3", tensor_scales="none")
    >>> r["configs"]
    ['e2m1/ue4m3/b16/none/rne', 'e2m1/ue4m3/b32/none/rne']
    >>> [(e["distribution"], e["recipe"][11:14]) for e in r["tensors"]]
    [('normal', 'b16'), ('normal', 'b32'), ('laplace', 'b16'), ('laplace', 'b32')]
    """
    native = _analysis()
    json_text, summary = native.sweep("" if trace is None else _trace_file(trace), dict(
        synthetic=_names(synthetic, "synthetic"), rows=rows, cols=cols, role=role,
        element_formats=_names(element_formats, "element_formats"), scale_formats=_names(scale_formats, "scale_formats"),
        blocks=_names(blocks, "blocks"), tensor_scales=_names(tensor_scales, "tensor_scales"),
        roundings=_names(roundings, "roundings"), rho=_names(rho, "rho"), base=base, steps=_steps(steps),
        layers=_unless_empty(layers), recipe_map=recipe_map, hold=hold, seed=seed, slab_mib=slab_mib,
        scale_rules=None if scale_rules is None else _names(scale_rules, "scale_rules"),
        block_choices=None if block_choices is None else _names(block_choices, "block_choices")))
    return AnalysisReport(json_text, summary)
