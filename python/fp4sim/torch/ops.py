"""The fp4sim custom operators (``torch.ops.fp4sim.*``).

Every operator has two implementations that must agree bit for bit: on CPU tensors the golden model (the
same calls as ``fp4sim.quantize`` / ``fp4sim.gemm``), on CUDA tensors fp4sim's GPU kernels, launched on the
current stream with outputs and workspaces allocated here by torch and the tensor scalars (amax, G, Gd,
alpha) kept on the device, so nothing waits for the host and the calls can be captured in a CUDA graph
(call :func:`cuda_available` once before capturing: it settles a one-time probe of the GPU). Fake
implementations give torch.compile the output shapes.

A quantized operand is three tensors: ``codes`` uint8 [rows, ceil(cols/2)] (element 2j in the low
nibble), ``scales`` uint8 (the block grid, row-major) and ``scalars`` float32 [4] = (tensor amax used, G,
Gd, RN(G·RN(1/6))), followed by each row's amax for a row-scaled operand (``amax_scope="row"``: float32
[4 + rows]). Which operand it is — a role (activation, weight, grad_output) or operand A / B of a
GEMM ("fprop.a", "wgrad.b", ...) — decides its blocks, rounding, RHT and target exactly as the CLI does.

The operators name their settings by a plan: an int handle from :func:`quantize_plan` (a recipe, its
overrides and one operand) or :func:`gemm_plan` (a recipe, its overrides, one GEMM and its datapath),
resolved once per process by the extension and cached here, so that no recipe, override, operand or
datapath name is parsed per call. A handle is process-local: store the settings, never the handle.
"""

from __future__ import annotations

import functools
import json
from typing import NamedTuple, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from .. import _fp4sim

# The GPU's GEMM kernels by the golden datapath each one equals (the binding's kernel table, present in every
# build): name, datapath, k_multiple, workspace_k_align.
GPU_KERNELS = {row["datapath"]: dict(row) for row in _fp4sim.gpu_kernels()}
# The datapath of the general-purpose kernel, bf16-tc (the sm90-bf16 chain).
_BF16_TC_DATAPATH = next(d for d, row in GPU_KERNELS.items() if row["name"] == "bf16-tc")


def _has_cuda_build() -> bool:
    return hasattr(_fp4sim, "cuda_quantize")


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    """True when this build has the CUDA kernels and a device can run them."""
    return _has_cuda_build() and torch.cuda.is_available() and bool(_fp4sim.cuda_available())


def _overrides(text: str) -> dict:
    return json.loads(text) if text else {}


def overrides_text(overrides: dict) -> str:
    """Recipe overrides as the operators take them (canonical: sorted keys, no Nones; "" for none, which
    torch.compile traces without calling the JSON encoder)."""
    kept = {k: v for k, v in sorted(overrides.items()) if v is not None}
    return json.dumps(kept) if kept else ""


@torch.compiler.assume_constant_result  # a function of its arguments: a constant in a compiled graph
@functools.lru_cache(maxsize=None)
def quantize_plan(recipe: str, overrides: str, operand: str) -> int:
    """The plan handle of operand `operand` (a role, or "<gemm>.a" / "<gemm>.b") of the recipe with its
    overrides (overrides_text): what torch.ops.fp4sim.quantize and dequantize take. A bad recipe, override
    or operand is a UsageError naming it, here rather than at the first operator call."""
    return _fp4sim.quantize_plan(recipe, _overrides(overrides), operand)


class GemmPlan(NamedTuple):
    """The plan handles of one GEMM: the GEMM's own (torch.ops.fp4sim.gemm_quantized and gemm take it) and
    those of its operands A and B (quantize_plan of "<gemm>.a" and "<gemm>.b")."""
    gemm: int
    a: int
    b: int


@functools.lru_cache(maxsize=None)
def gemm_plan(recipe: str, overrides: str, gemm: str, datapath: str, snap: bool = True) -> GemmPlan:
    """The plan of GEMM `gemm` (fprop, dgrad, wgrad) of the recipe through `datapath` ("" : the recipe's)."""
    handle = _fp4sim.gemm_plan(recipe, _overrides(overrides), gemm, datapath, snap)
    info = plan_info(handle)
    return GemmPlan(handle, info["a"], info["b"])


@functools.lru_cache(maxsize=None)
def plan_info(plan: int) -> dict:
    """What a plan resolved to (_fp4sim.plan_info): an operand's blocks, rounding, RHT, target, tensor scaling
    and sr_bits; a GEMM's datapath, snap and GPU kernel row (k_multiple, workspace_k_align)."""
    return dict(_fp4sim.plan_info(plan))


@torch.compiler.assume_constant_result
def _gemm_handle(recipe: str, overrides: str, gemm: str, datapath: str, snap: bool) -> int:
    return gemm_plan(recipe, overrides, gemm, datapath, snap).gemm


def operand_info(recipe: str, overrides: str, role: str) -> dict:
    """Blocks, rounding, RHT, target and tensor-scale policy of one operand (no data)."""
    return plan_info(quantize_plan(recipe, overrides, role))


@torch.compiler.assume_constant_result  # a function of its string arguments: a constant in a compiled graph
def default_datapath(recipe: str, overrides: str = "") -> str:
    """The recipe's datapath when the GPU has a kernel for it (probe-matched for ue5m3*), else sm90-bf16
    (the bf16-tc kernel): the same choice on CPU and GPU, so both compute the same thing."""
    dp = operand_info(recipe, overrides, "activation")["datapath"]
    return dp if dp in GPU_KERNELS else _BF16_TC_DATAPATH


def _grid(plan: int, rows: int, cols: int) -> Tuple[Tuple[int, int], Tuple[int, int], int]:
    """The shapes of an operand's codes and scales, and its number of scalars."""
    info = plan_info(plan)
    br, bc = info["block_rows"], info["block_cols"]
    return (rows, (cols + 1) // 2), (-(-rows // br), -(-cols // bc)), 4 + (rows if info["row_scaled"] else 0)


def _check_2d(x: Tensor, what: str) -> None:
    if x.dim() != 2:
        raise ValueError(f"{what}: expected a 2-D tensor, got {x.dim()} dimensions")


def _aligned(t: Tensor) -> Tensor:
    """Contiguous and 16-byte aligned (the kernels use vector loads and stores)."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _stream(t: Tensor) -> int:
    return torch.cuda.current_stream(t.device).cuda_stream


def _require_cuda() -> None:
    if not cuda_available():
        raise RuntimeError("fp4sim: CUDA tensors need the package built with FP4SIM_CUDA=ON and a CUDA device "
                           "that runs its kernels (sm_90)")


# ---------------------------------------------------------------------------------------------------
# The golden model on CPU tensors


def _numpy_f32(x: Tensor) -> np.ndarray:
    # A copy: a numpy view would mark the caller's storage not resizable, and FSDP2 frees an all-gathered
    # weight by resizing its storage to 0.
    return _copy_numpy(x, torch.float32)


def _copy_numpy(x: Tensor, dtype: torch.dtype) -> np.ndarray:
    return x.detach().to(dtype, memory_format=torch.contiguous_format, copy=True).numpy()


def _rbits_cpu(r: Optional[Tensor], sr_bits: int, what: str) -> Optional[tuple]:
    """Caller-supplied integers (any integer dtype, e.g. torch.randint(0, 256, shape, dtype=torch.int32)) as
    the golden model takes them: uint8 for sr_bits <= 8, else uint32."""
    if r is None:
        return None
    v = _copy_numpy(r, torch.int64)
    if v.size and (v.min() < 0 or v.max() >= (1 << sr_bits)):
        raise ValueError(f"{what}: random integers must lie in [0, 2^{sr_bits})")
    if sr_bits <= 8:
        return "uint8", v.astype(np.uint32)
    return "uint32", v.astype(np.uint32)


def _scalars(q) -> Tensor:
    g = np.float32(q.global_encode_scale)
    tensor = torch.tensor([q.tensor_amax, g, q.global_decode_scale, g * (np.float32(1) / np.float32(6))],
                          dtype=torch.float32)
    return torch.cat([tensor, torch.tensor(q.row_amax, dtype=torch.float32)])


def _native_operand(codes: Tensor, scales: Tensor, scalars: Tensor, rows: int, cols: int, plan: int):
    s = scalars.detach().cpu().numpy()
    return _fp4sim.plan_quantized(plan, codes.detach().cpu().contiguous().numpy(),
                                  scales.detach().cpu().contiguous().numpy(), rows, cols, float(s[0]), float(s[1]),
                                  float(s[2]), s[4:].tolist())


def _amax_ref(amax: Optional[Tensor]) -> Optional[float]:
    return None if amax is None else float(amax.detach().reshape(-1)[0])


def _quantize_cpu(x, plan, seed, amax, rbits):
    q = _fp4sim.plan_quantize(plan, _numpy_f32(x), _amax_ref(amax), seed,
                              _rbits_cpu(rbits, plan_info(plan)["sr_bits"], "rbits"))
    return torch.from_numpy(np.array(q.codes)), torch.from_numpy(np.array(q.scales)), _scalars(q)


def _bf16_out(out_dtype: str) -> bool:
    if out_dtype not in ("f32", "bf16"):
        raise ValueError(f"out_dtype: expected f32 or bf16, got {out_dtype!r}")
    return out_dtype == "bf16"


def _as_out(c: Tensor, out_dtype: str) -> Tensor:
    # RNE; the golden model already rounded every output to a BF16 value
    return c.to(torch.bfloat16) if _bf16_out(out_dtype) else c


def _bias(bias: Tensor, n: int) -> Tensor:
    """A GEMM's bias as the epilogue takes it: float32 [N], contiguous."""
    if bias.dim() != 1 or bias.shape[0] != n:
        raise ValueError(f"bias: expected a 1-D tensor of {n} values, got shape {tuple(bias.shape)}")
    return bias.detach().to(torch.float32).contiguous()


# ---------------------------------------------------------------------------------------------------
# The GPU kernels on CUDA tensors


def _quantize_cuda(x, plan, seed, amax, rbits):
    _require_cuda()
    # A BF16 tensor is read as it lies (the kernels widen it exactly); anything else as float32.
    xin = _aligned(x.detach() if x.dtype == torch.bfloat16 else x.detach().to(torch.float32))
    rows, cols = xin.shape
    codes_shape, scales_shape, n_scalars = _grid(plan, rows, cols)
    codes = torch.empty(codes_shape, dtype=torch.uint8, device=x.device)
    scales = torch.empty(scales_shape, dtype=torch.uint8, device=x.device)
    scalars = torch.empty(n_scalars, dtype=torch.float32, device=x.device)
    held = None if amax is None else amax.detach().to(device=x.device, dtype=torch.float32).reshape(-1).contiguous()
    bits = None
    if rbits is not None:
        if tuple(rbits.shape) != (rows, cols):
            raise ValueError(f"rbits: shape {tuple(rbits.shape)}, the operand is {(rows, cols)}")
        bits = rbits.detach().to(device=x.device, dtype=torch.int32).contiguous()  # read as uint32
    with torch.cuda.device(x.device):
        _fp4sim.cuda_quantize(plan, xin.data_ptr(), xin.dtype == torch.bfloat16, rows, cols, seed,
                              0 if held is None else held.data_ptr(), 0 if bits is None else bits.data_ptr(),
                              codes.data_ptr(), scales.data_ptr(), scalars.data_ptr(), _stream(x))
    return codes, scales, scalars


def _gemm_quantized_cuda(a_codes, a_scales, a_scalars, b_codes, b_scales, b_scalars, k, plan, out_dtype, bias=None):
    _require_cuda()
    bf16_out = _bf16_out(out_dtype)
    dev = a_codes.device
    m, n = a_codes.shape[0], b_codes.shape[0]
    a_codes, a_scales, b_codes, b_scales = (_aligned(t) for t in (a_codes, a_scales, b_codes, b_scales))
    a_scalars, b_scalars = a_scalars.contiguous(), b_scalars.contiguous()
    # One alpha, or one per row of a row-scaled A.
    alpha = torch.empty(m if plan_info(plan_info(plan)["a"])["row_scaled"] else 1, dtype=torch.float32, device=dev)
    c = torch.empty((m, n), dtype=torch.bfloat16 if bf16_out else torch.float32, device=dev)
    if bias is not None:
        bias = _bias(bias, n).to(dev)
    # The kernel's BF16 workspaces, [M, Kp] and [N, Kp] with Kp = K rounded up to its alignment; none for a
    # kernel that reads codes and scales itself, or a datapath without a kernel (cuda_gemm refuses it).
    align = plan_info(plan)["workspace_k_align"]
    kp = -(-k // align) * align if align else 0
    ea = torch.empty((m, kp), dtype=torch.int16, device=dev) if align else None
    eb = torch.empty((n, kp), dtype=torch.int16, device=dev) if align else None
    with torch.cuda.device(dev):
        _fp4sim.cuda_gemm(plan, a_codes.data_ptr(), a_scales.data_ptr(), a_scalars.data_ptr(), m, b_codes.data_ptr(),
                          b_scales.data_ptr(), b_scalars.data_ptr(), n, k, alpha.data_ptr(),
                          0 if ea is None else ea.data_ptr(), 0 if eb is None else eb.data_ptr(),
                          0 if bias is None else bias.data_ptr(), bf16_out, c.data_ptr(), _stream(c))
    return c


# ---------------------------------------------------------------------------------------------------
# The operators


@torch.library.custom_op("fp4sim::quantize", mutates_args=(), device_types="cpu")
def _quantize_op(x: Tensor, plan: int, seed: int, amax: Optional[Tensor],
                 rbits: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    _check_2d(x, "x")
    return _quantize_cpu(x, plan, seed, amax, rbits)


@_quantize_op.register_kernel("cuda")
def _(x, plan, seed, amax, rbits):
    _check_2d(x, "x")
    return _quantize_cuda(x, plan, seed, amax, rbits)


@_quantize_op.register_fake
def _(x, plan, seed, amax, rbits):
    codes_shape, scales_shape, n_scalars = _grid(plan, x.shape[0], x.shape[1])
    return (x.new_empty(codes_shape, dtype=torch.uint8), x.new_empty(scales_shape, dtype=torch.uint8),
            x.new_empty(n_scalars, dtype=torch.float32))


@torch.library.custom_op("fp4sim::dequantize", mutates_args=(), device_types="cpu")
def _dequantize_op(codes: Tensor, scales: Tensor, scalars: Tensor, rows: int, cols: int, plan: int) -> Tensor:
    q = _native_operand(codes, scales, scalars, rows, cols, plan)
    return torch.from_numpy(np.array(_fp4sim.dequantize(q)))


@_dequantize_op.register_kernel("cuda")
def _(codes, scales, scalars, rows, cols, plan):
    _require_cuda()
    out = torch.empty((rows, cols), dtype=torch.float32, device=codes.device)
    codes, scales, scalars = _aligned(codes), _aligned(scales), scalars.contiguous()
    with torch.cuda.device(codes.device):
        _fp4sim.cuda_dequantize(plan, codes.data_ptr(), scales.data_ptr(), scalars.data_ptr(), rows, cols,
                                out.data_ptr(), _stream(out))
    return out


@_dequantize_op.register_fake
def _(codes, scales, scalars, rows, cols, plan):
    return codes.new_empty((rows, cols), dtype=torch.float32)


@torch.library.custom_op("fp4sim::gemm_quantized", mutates_args=(), device_types="cpu")
def _gemm_quantized_op(a_codes: Tensor, a_scales: Tensor, a_scalars: Tensor, b_codes: Tensor, b_scales: Tensor,
                       b_scalars: Tensor, k: int, plan: int, out_dtype: str, bias: Optional[Tensor] = None) -> Tensor:
    # With a bias: C in binary32, + bias in binary32, then out_dtype (what the GPU's epilogue does).
    m, n = a_codes.shape[0], b_codes.shape[0]
    info = plan_info(plan)
    qa = _native_operand(a_codes, a_scales, a_scalars, m, k, info["a"])
    qb = _native_operand(b_codes, b_scales, b_scalars, n, k, info["b"])
    c = torch.from_numpy(np.array(_fp4sim.plan_gemm_quantized(plan, qa, qb, bias is None and _bf16_out(out_dtype))))
    if bias is not None:
        c = c + _bias(bias, n).cpu()
    return _as_out(c, out_dtype)


_gemm_quantized_op.register_kernel("cuda")(_gemm_quantized_cuda)


@_gemm_quantized_op.register_fake
def _(a_codes, a_scales, a_scalars, b_codes, b_scales, b_scalars, k, plan, out_dtype, bias=None):
    dtype = torch.bfloat16 if out_dtype == "bf16" else torch.float32
    return a_codes.new_empty((a_codes.shape[0], b_codes.shape[0]), dtype=dtype)


@torch.library.custom_op("fp4sim::gemm", mutates_args=(), device_types="cpu")
def _gemm_op(a: Tensor, b: Tensor, plan: int, seed: int, amax_a: Optional[Tensor], amax_b: Optional[Tensor],
             rbits_a: Optional[Tensor], rbits_b: Optional[Tensor], out_dtype: str) -> Tensor:
    # The golden model's whole GEMM in one call (fp4sim.gemm): quantize both operands, multiply, alpha.
    _check_2d(a, "a")
    _check_2d(b, "b")
    info = plan_info(plan)
    sr_bits = plan_info(info["a"])["sr_bits"]
    c = _fp4sim.plan_gemm(plan, _numpy_f32(a), _numpy_f32(b), seed, _amax_ref(amax_a), _amax_ref(amax_b),
                          _rbits_cpu(rbits_a, sr_bits, "rbits_a"), _rbits_cpu(rbits_b, sr_bits, "rbits_b"),
                          _bf16_out(out_dtype))
    return _as_out(torch.from_numpy(np.array(c)), out_dtype)


@_gemm_op.register_kernel("cuda")
def _(a, b, plan, seed, amax_a, amax_b, rbits_a, rbits_b, out_dtype):
    _check_2d(a, "a")
    _check_2d(b, "b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"gemm: A is {tuple(a.shape)} and B is {tuple(b.shape)}: C = A·Bᵀ needs the same K")
    info = plan_info(plan)
    qa = _quantize_cuda(a, info["a"], seed, amax_a, rbits_a)
    qb = _quantize_cuda(b, info["b"], seed, amax_b, rbits_b)
    return _gemm_quantized_cuda(*qa, *qb, a.shape[1], plan, out_dtype)


@_gemm_op.register_fake
def _(a, b, plan, seed, amax_a, amax_b, rbits_a, rbits_b, out_dtype):
    dtype = torch.bfloat16 if out_dtype == "bf16" else torch.float32
    return a.new_empty((a.shape[0], b.shape[0]), dtype=dtype)


@torch.library.custom_op("fp4sim::transpose", mutates_args=(), device_types="cpu")
def _transpose_op(x: Tensor) -> Tensor:
    # The contiguous transpose of a 2-D tensor: the wgrad operands (dYᵀ, Xᵀ) and dgrad's Wᵀ. On the GPU a
    # tiled kernel (torch's copy of a transposed view moves BF16 at a fraction of the bandwidth).
    _check_2d(x, "x")
    return x.t().contiguous()


@_transpose_op.register_kernel("cuda")
def _(x):
    _check_2d(x, "x")
    if x.element_size() not in (2, 4):
        return x.t().contiguous()
    _require_cuda()
    x = _aligned(x)
    out = torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device)
    with torch.cuda.device(x.device):
        _fp4sim.cuda_transpose(x.data_ptr(), x.shape[0], x.shape[1], x.element_size(), out.data_ptr(), _stream(x))
    return out


@_transpose_op.register_fake
def _(x):
    return x.new_empty((x.shape[1], x.shape[0]))


# ---------------------------------------------------------------------------------------------------
# Python entry points


class QuantizedOperand(NamedTuple):
    """One quantized operand: the operator's three tensors and what made them."""
    codes: Tensor
    scales: Tensor
    scalars: Tensor
    shape: Tuple[int, int]
    recipe: str
    role: str
    overrides: str


def quantize(x: Tensor, recipe: str, role: str = "activation", *, seed: int = 0, amax: Optional[Tensor] = None,
             rbits: Optional[Tensor] = None, **overrides) -> QuantizedOperand:
    """Block-quantize a 2-D tensor (float32 or bfloat16) as operand `role` of the recipe. amax: a held tensor
    amax (a one-element float32 tensor on x's device); None measures the current amax. rbits: caller-supplied
    stochastic-rounding integers, one per element; None draws them from Philox(seed) (docs/random-bits.md)."""
    ov = overrides_text(overrides)
    codes, scales, scalars = torch.ops.fp4sim.quantize(x, quantize_plan(recipe, ov, role), seed, amax, rbits)
    return QuantizedOperand(codes, scales, scalars, (x.shape[0], x.shape[1]), recipe, role, ov)


def dequantize(q: QuantizedOperand) -> Tensor:
    """The recipe's reconstruction of every element, float32 [rows, cols]."""
    return torch.ops.fp4sim.dequantize(q.codes, q.scales, q.scalars, q.shape[0], q.shape[1],
                                       quantize_plan(q.recipe, q.overrides, q.role))


def gemm_quantized(a: QuantizedOperand, b: QuantizedOperand, *, datapath: Optional[str] = None, snap: bool = True,
                   out_dtype: str = "f32", bias: Optional[Tensor] = None) -> Tensor:
    """C = A·Bᵀ of operands quantized as "<gemm>.a" and "<gemm>.b" of one recipe, through `datapath`
    (default: default_datapath(recipe)); float32, or bfloat16 with out_dtype="bf16". bias: None, or [N]
    values added to C in binary32 before the output rounding (as F.linear adds a bias to a float32 C); the
    GPU does both in the GEMM's epilogue."""
    gemm_a, side_a = a.role.split(".") if "." in a.role else (None, None)
    gemm_b, side_b = b.role.split(".") if "." in b.role else (None, None)
    if gemm_a is None or gemm_a != gemm_b or (side_a, side_b) != ("a", "b") or a.recipe != b.recipe \
            or a.overrides != b.overrides:
        raise ValueError(f"gemm_quantized: operands must be <gemm>.a and <gemm>.b of one recipe, got "
                         f"{a.recipe}:{a.role} and {b.recipe}:{b.role}")
    plan = _gemm_handle(a.recipe, a.overrides, gemm_a, datapath or default_datapath(a.recipe, a.overrides), snap)
    return torch.ops.fp4sim.gemm_quantized(a.codes, a.scales, a.scalars, b.codes, b.scales, b.scalars, a.shape[1],
                                           plan, out_dtype, bias)


def gemm(a: Tensor, b: Tensor, recipe: str, gemm: str = "fprop", *, datapath: Optional[str] = None,
         snap: bool = True, seed: int = 0, amax_a: Optional[Tensor] = None, amax_b: Optional[Tensor] = None,
         rbits_a: Optional[Tensor] = None, rbits_b: Optional[Tensor] = None, out_dtype: str = "f32",
         **overrides) -> Tensor:
    """The whole FP4 GEMM C = A·Bᵀ from float32/bfloat16 A [M, K] and B [N, K]: both quantized under the
    recipe's rules for `gemm` (fprop, dgrad, wgrad), multiplied through `datapath`, times alpha."""
    ov = overrides_text(overrides)
    plan = _gemm_handle(recipe, ov, gemm, datapath or default_datapath(recipe, ov), snap)
    return torch.ops.fp4sim.gemm(a, b, plan, seed, amax_a, amax_b, rbits_a, rbits_b, out_dtype)
