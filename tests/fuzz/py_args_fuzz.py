"""Fuzzes the Python argument layer (docs/fuzzing.md): atheris (libFuzzer for Python) turns each input into
one call of a public fp4sim function with fuzzed positional and keyword arguments: names from the
function's own, the recipe overrides' and random text; values of every Python kind a user may pass
(numbers at the edges of C++'s integer types, NaN and infinities, names, long and control-character
strings, lists, dicts, objects whose conversions raise) and arrays of every dtype, byte order, rank,
shape (empty ones too) and memory layout. The call must end in a result or an exception of fp4sim's own
(UsageError, DataError and its DTypeError), or a TypeError/ValueError that fp4sim's Python code raises
itself or that Python raises binding the call (an unknown keyword of a function without **overrides);
each message one that names no C++ type and is no signature dump. Anything else is a finding: another exception (a
nanobind signature dump "incompatible function arguments", MemoryError, OverflowError, a bare C++
exception text), a crash, an input past libFuzzer's -timeout, or memory: the address space is limited to
what the module needs plus LIMIT_MIB, so a size taken from an argument and allocated before it is
checked (dequantize's shape=(8, 2**28)) raises MemoryError, a finding.

Run by tools/fuzz.sh with the release build's module on PYTHONPATH: python3 py_args_fuzz.py [libFuzzer options]
Coverage guides the fuzzer through fp4sim's Python code (instrumented by atheris); the extension itself is
the release build, not instrumented: its checks are exercised, not steered towards.
"""

import linecache
import os
import pathlib
import resource
import sys

import atheris

with atheris.instrument_imports(include=["fp4sim"]):
    import fp4sim

import ml_dtypes
import numpy as np

LIMIT_MIB = 1024  # beyond what the module, NumPy and the interpreter hold after the first calls

TRACE = str(pathlib.Path(__file__).resolve().parent / "corpus" / "trace_read" / "contiguous.h5")

# Every function that takes a user's arguments, its positional parameters (each drawn as its kind, or as
# any value) and its keywords (drawn with the recipe overrides and random names).
OVERRIDES = ["block", "two_d", "scale_format", "element_format", "target", "tensor_scale", "scale_rule",
             "zero_scale", "dequantize_order", "rounding", "sr_bits", "rht", "block_choice", "amax_scope"]
GEMM_KEYWORDS = ["datapath", "inner", "snap", "out_dtype", "amax_ref_a", "amax_ref_b", "target_a", "target_b",
                 "seed", "rbits_a", "rbits_b"]
FUNCTIONS = [
    ("convert", ["array", "format"], ["rounding", "sr_bits", "seed", "rbits", "saturate", "specials"]),
    ("decode", ["codes"], ["format"]),
    ("quantize", ["array", "recipe"], ["role", "amax_ref", "seed", "rbits"] + OVERRIDES),
    ("dequantize", ["codes", "codes", "recipe"], ["shape", "tensor_scale", "tensor_scale_kind", "layout", "nibbles",
                                                  "role"] + OVERRIDES),
    ("dequantize_quantized", [], []),
    ("gemm", ["matrix", "matrix", "recipe"], ["gemm"] + GEMM_KEYWORDS + OVERRIDES),
    ("mma", ["matrix", "matrix"], ["c", "datapath", "input_format", "a_format", "b_format"]),
    ("verify_quantize", ["array", "codes", "codes", "recipe"],
     ["role", "layout", "nibbles", "tensor_scale", "tensor_scale_kind", "amax_ref", "seed", "rbits",
      "max_explained"] + OVERRIDES),
    ("verify_gemm", ["matrix", "matrix", "matrix", "recipe"], ["gemm", "worst"] + GEMM_KEYWORDS + OVERRIDES),
    ("scales_to_layout", ["codes", "int", "int", "int", "int", "layout"], []),
    ("scales_from_layout", ["codes", "int", "int", "int", "int", "layout"], []),
    ("codes_to_order", ["codes", "int", "int", "nibbles"], []),
    ("codes_from_order", ["codes", "int", "int", "nibbles"], []),
    ("stats", ["array", "quantized"], ["reference", "chunk_multiple"]),
    ("replay", ["trace"], ["recipes", "recipe_map", "datapath", "steps", "layers", "seed", "hold", "gemms", "period",
                           "slab_mib"]),
    ("sweep", [], ["trace", "synthetic", "role", "element_formats", "scale_formats", "blocks", "tensor_scales",
                   "roundings", "rho", "base", "steps", "layers", "recipe_map", "hold", "seed", "slab_mib",
                   "scale_rules", "block_choices"]),
]

NAMES = (fp4sim.recipes() + [f["name"] for f in fp4sim.formats()] + fp4sim.datapaths() + [
    "activation", "weight", "grad_output", "fprop", "dgrad", "wgrad", "rne", "rna", "rtz", "stochastic", "sr",
    "rowmajor", "te-rowrep", "swizzled-128x4", "low-first", "high-first", "unpacked", "amax", "encode", "decode",
    "any", "none", "current", "periodic:50", "periodic:0", "hardware", "te-python", "ml_dtypes", "auto", "recipe",
    "f32", "bf16", "fp16", "window", "previous", "float4_e2m1fn", "torch.float8_e4m3fn", "f4E2M1FN", "bfloat16",
    "normal", "laplace", "student-t:3", "lognormal:1", "normal+outliers:0.001:100", "1-3", "1,2", ",", " ", ".*",
    "a+", "(a|", "*=nvfp4", "lm_head=bf16,*=nvfp4", "*=grid", "=", "16", "32", "1e300", "-1", "nan", "inf",
    "-h", "--help", "--version", "", "\x00", "\n", "é", "nvfp4\x00x", "a" * 5000, "9" * 400,
    "mxfp4:scale_rule=rceil,block=16", "nvfp4:two_d=false,rht=true", "mxfp4:", "mxfp4:block", "nvfp4,block=16",
    "nvfp4:block=16,block=32", "floor,rceil", "single,4over6-mae"])

SMALL_DIMS = [0, 1, 2, 3, 4, 8, 16, 32, 64, 128]
DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, ">f4", ">f8", np.uint8, np.uint16, np.uint32,
          np.uint64, np.int8, np.int32, np.int64, np.bool_, np.complex64, object, "V4", "U2", "S3",
          ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu, [("a", "<f4")], "M8[s]"]


class ObjectsOwnError(RuntimeError):
    """What Raises raises: passed on to the caller as it is, as Python's own functions do."""


class Raises:
    """An object whose every conversion raises (a user's tensor-like object gone wrong)."""

    def _no(self, *args):
        raise ObjectsOwnError("conversion refused")

    __float__ = __int__ = __index__ = __len__ = __iter__ = __array__ = __dlpack__ = __fspath__ = __str__ = _no


class Shaped:
    """An object with the array protocol returning what it likes."""

    def __init__(self, value):
        self.value = value

    def __array__(self, dtype=None, copy=None):
        return self.value


def draw_array(fdp, kind):
    ndim = {"matrix": 2}.get(kind, fdp.ConsumeIntInRange(0, 4))
    shape = []
    for _ in range(ndim):
        shape.append(fdp.PickValueInList(SMALL_DIMS))
    while np.prod(shape, dtype=np.int64) > 4096:
        shape[shape.index(max(shape))] //= 2
    dtype = np.dtype(np.uint8 if kind == "codes" and fdp.ConsumeBool() else
                     np.float32 if kind in ("array", "matrix") and fdp.ConsumeBool() else fdp.PickValueInList(DTYPES))
    count = int(np.prod(shape, dtype=np.int64))
    if dtype.kind in "fcV" or dtype.itemsize in (1, 2, 4, 8) and dtype.kind in "uib":
        raw = fdp.ConsumeBytes(count * dtype.itemsize)
        raw += bytes(count * dtype.itemsize - len(raw))
        if dtype.kind == "f" and fdp.ConsumeBool():  # ordinary values rather than random bit patterns
            a = np.linspace(-8, 8, count).astype(dtype).reshape(shape)
        else:
            a = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if dtype.kind == "b":
            a = a.astype(bool)
    else:
        a = np.zeros(shape, dtype=dtype)
    layout = fdp.ConsumeIntInRange(0, 4)
    if layout == 1 and a.ndim >= 2:
        a = np.asfortranarray(a)
    elif layout == 2 and a.ndim >= 1:
        a = np.repeat(a, 2, axis=-1)[..., ::2]  # strided view, same shape
    elif layout == 3 and a.ndim >= 1:
        a = a[..., ::-1]
    elif layout == 4:
        a.flags.writeable = False
    return a


def draw_value(fdp, kind="any"):
    if kind in ("array", "matrix", "codes") and fdp.ConsumeIntInRange(0, 7):
        return draw_array(fdp, kind)
    if kind in ("recipe", "format", "layout", "nibbles") and fdp.ConsumeIntInRange(0, 3):
        return fdp.PickValueInList(NAMES)
    if kind == "int" and fdp.ConsumeIntInRange(0, 3):
        return fdp.PickValueInList(SMALL_DIMS)
    if kind == "trace" and fdp.ConsumeIntInRange(0, 3):
        return TRACE
    if kind == "quantized" and fdp.ConsumeIntInRange(0, 3):
        return fp4sim.quantize(np.linspace(-1, 1, 4 * 64, dtype=np.float32).reshape(4, 64),
                               fdp.PickValueInList(["nvfp4", "mxfp4", "ue5m3"]))
    choice = fdp.ConsumeIntInRange(0, 14)
    if choice == 0:
        return fdp.PickValueInList([0, 1, -1, 2, 16, 32, 2**31 - 1, 2**31, -2**31 - 1, 2**32, 2**53 + 1, 2**63 - 1,
                                    2**63, -2**63 - 1, 2**64, 10**30, -10**400])
    if choice == 1:
        return fdp.ConsumeInt(8)
    if choice == 2:
        return fdp.PickValueInList([0.0, -0.0, 0.5, 1.5, -3.0, 448.0, 6e4, float("nan"), float("inf"),
                                    float("-inf"), 1e300, -1e300, 5e-324, 1e-45, 2e13, 2.0**64])
    if choice == 3:
        return fdp.ConsumeRegularFloat()
    if choice == 4:
        return fdp.PickValueInList([True, False, None, 1j, b"nvfp4", bytearray(b"\xff"), Raises(), object(),
                                    np.float32(2), np.int64(-1), np.uint64(2**64 - 1), np.float64("nan"),
                                    np.bool_(True), np.str_("nvfp4"), pathlib.Path(TRACE),
                                    pathlib.Path("/nonexistent/t.h5"), pathlib.Path("/"), ...])
    if choice == 5:
        return fdp.PickValueInList(NAMES)
    if choice == 6:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 24))
    if choice == 7:
        return [draw_value(fdp, "int") for _ in range(fdp.ConsumeIntInRange(0, 3))]
    if choice == 8:
        return tuple(fdp.PickValueInList([8, 2**28, 2**31, 2**32 + 64, 2**62, -64, 0, 64, 1.5, "8"])
                     for _ in range(fdp.ConsumeIntInRange(0, 3)))
    if choice == 9:
        return {fdp.PickValueInList(OVERRIDES + ["help", "json", ""]): draw_value(fdp)
                for _ in range(fdp.ConsumeIntInRange(0, 2))}
    if choice == 10:
        return [fdp.PickValueInList(NAMES) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    if choice == 11:
        return Shaped(draw_value(fdp, "array"))
    if choice == 12:
        return draw_array(fdp, "array")
    if choice == 13:
        return range(fdp.ConsumeIntInRange(0, 3))
    return set()


def draw_call(fdp):
    name, positional, keywords = fdp.PickValueInList(FUNCTIONS)
    args = [draw_value(fdp, kind) for kind in positional[:len(positional) - fdp.ConsumeIntInRange(0, 1)]]
    kwargs = {}
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        pick = fdp.ConsumeIntInRange(0, 9)
        key = (fdp.PickValueInList(keywords) if pick < 7 and keywords else
               fdp.PickValueInList(OVERRIDES) if pick < 9 else fdp.ConsumeUnicode(8) or "x")
        kwargs[key] = draw_value(fdp)
    if name == "sweep":
        # A sweep's size is the caller's to choose (rows x cols per grid point): kept small here, so that
        # an input costs milliseconds; the values at the edges of the types stay.
        for key in ("rows", "cols"):
            kwargs[key] = fdp.PickValueInList([0, 1, 16, 32, 64, -1, 2**63, 2**64, 1.5, "16", None, float("nan")])
        kwargs.setdefault("synthetic", "normal")
    if name == "dequantize_quantized":
        return fp4sim.dequantize, [fp4sim.quantize(np.ones((2, 32), np.float32), "mxfp4")], {}
    return getattr(fp4sim, name), args, kwargs


BINDING = ("unexpected keyword argument", "required positional argument", "required keyword-only argument", "got multiple values",
           "positional argument", "positional arguments but")
FOREIGN = ("incompatible function arguments", "Invoked with", "std::", "bad_alloc", "bad_cast", "basic_string",
           "nanobind", "vector::", "stoi", "stod", "out_of_range", "what():")


def raised_by_fp4sim(e):
    """Whether e was raised by a `raise` statement of fp4sim's own Python code, or by Python binding the
    arguments of the call (no frame below the caller's)."""
    tb = e.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    if len(frames) == 1:
        return any(b in str(e) for b in BINDING)
    last = frames[-1]
    path = last.tb_frame.f_code.co_filename
    if "fp4sim" not in path.split(os.sep):
        return False
    return linecache.getline(path, last.tb_lineno).strip().startswith("raise ")


def accepted(e):
    if isinstance(e, ObjectsOwnError):
        return True
    text = str(e)
    if not text or any(f in text for f in FOREIGN):
        return False
    if isinstance(e, (fp4sim.UsageError, fp4sim.DataError)):
        return True
    if type(e) in (TypeError, ValueError, FileNotFoundError, NotImplementedError):
        return raised_by_fp4sim(e)
    return False


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    function, args, kwargs = draw_call(fdp)
    try:
        function(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - every exception is judged
        if not accepted(e):
            raise AssertionError("%s(%s) raised %s: %s" % (
                function.__name__, ", ".join([describe(a) for a in args] +
                                             ["%s=%s" % (k, describe(v)) for k, v in kwargs.items()]),
                type(e).__name__, e)) from e


def describe(v):
    if isinstance(v, np.ndarray):
        return "array(shape=%s, dtype=%s, C=%s)" % (v.shape, v.dtype.str, v.flags.c_contiguous)
    text = repr(v)
    return text if len(text) < 80 else text[:77] + "..."


def limit_memory():
    """The address space now plus LIMIT_MIB: an allocation sized from an argument fails instead of
    succeeding slowly (after a warm-up, so that the module's own lazy allocations are inside)."""
    fp4sim.gemm(np.ones((4, 64), np.float32), np.ones((4, 64), np.float32), "nvfp4")
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
    limit = vm + LIMIT_MIB * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


if __name__ == "__main__":
    limit_memory()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
