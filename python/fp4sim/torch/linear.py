"""fp4sim.torch.Linear: nn.Linear whose three GEMMs run an FP4 recipe (docs/torch.md).

fprop  Y  = X·Wᵀ   A = X [tokens, in]       (fprop.a)   B = W [out, in]   (fprop.b)
dgrad  dX = dY·W   A = dY [tokens, out]     (dgrad.a)   B = Wᵀ [in, out]  (dgrad.b)
wgrad  dW = dYᵀ·X  A = dYᵀ [out, tokens]    (wgrad.a)   B = Xᵀ [in, tokens] (wgrad.b)

Each operand is quantized with exactly the spec of ``fp4sim gemm --gemm <gemm>`` (its blocks, rounding,
RHT and target) and multiplied through one datapath; X enters as BF16 (and is saved so), dY is rounded to
BF16, W is the FP32 master. Tensor scaling per module and role: under a periodic recipe (ue5m3: D = 50)
the amax of activation, weight and grad_output is sampled at a step and held for D steps (the tensor as
passed, before any transpose; one dY sample serves dgrad and wgrad); under current scaling, and for an
operand that takes the RHT, the quantizer measures the current amax itself. Stochastic-rounding integers
come from fp4sim's Philox stream with a seed derived from (seed, module name, GEMM, step and, under
torch.distributed with several processes, the rank), or from the caller's ``rbits(shape, device)``.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Dict, Optional

import torch
from torch import Tensor, nn

from .ops import default_datapath, operand_info, overrides_text

_ROLES = ("activation", "weight", "grad_output")
# Which held reference each GEMM operand takes under periodic scaling.
_REFERENCE = {"fprop.a": "activation", "fprop.b": "weight", "dgrad.a": "grad_output", "dgrad.b": "weight",
              "wgrad.a": "grad_output", "wgrad.b": "activation"}


@torch.compiler.assume_constant_result  # a function of its arguments: a constant in a compiled graph
def philox_seed(seed: int, module: str, gemm: str, step: int, rank: Optional[int] = None) -> int:
    """The Philox seed of one GEMM of one module at one step (63 bits: a torch int64), and of one rank of a
    data-parallel run (None: a run of one process). Operand A draws stream 0 of it and operand B stream 1,
    as ``fp4sim gemm --seed`` does."""
    key = f"fp4sim.torch/{seed}/{module}/{gemm}/{step}" + ("" if rank is None else f"/rank{rank}")
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def data_parallel_rank() -> Optional[int]:
    """This process's rank in the default torch.distributed group when that group has several processes,
    else None. Ranks see different data, so each draws its own stochastic-rounding bits; a run of one
    process keeps the key it had before ranks were part of it."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist.get_rank()
    return None


def _tensor_amax(t: Tensor) -> Tensor:
    amax = t.detach().abs().amax().to(torch.float32).reshape(1)
    if torch.distributed.is_available() and torch.distributed.is_initialized() \
            and torch.distributed.get_world_size() > 1:
        torch.distributed.all_reduce(amax, op=torch.distributed.ReduceOp.MAX)
    return amax


class Linear(nn.Linear):
    """Drop-in nn.Linear (same parameters and state_dict) whose forward and backward run `recipe`.

    recipe / overrides: an fp4sim recipe preset and its keyword overrides (block=32, ...). datapath: the
    golden datapath of the three GEMMs (default: the recipe's when the GPU has it, else sm90-bf16).
    period: the sample-and-hold period D (default: the recipe's; 1 = sample every step). seed / name: the
    key of the Philox bits; rbits: None, or a callable (shape, device) -> integer tensor of SR bits.
    capture: None, or a callable that receives a dict per GEMM (its inputs, settings, quantized operands
    and output) — for checking against the golden model and for writing traces.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 recipe: str = "ue5m3", datapath: Optional[str] = None, period: Optional[int] = None,
                 seed: int = 0, name: str = "", rbits: Optional[Callable] = None, **overrides):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.recipe = recipe
        self.overrides = overrides_text(overrides)
        info = operand_info(recipe, self.overrides, "activation")
        self.datapath = datapath or default_datapath(recipe, self.overrides)
        self.periodic = info["tensor_scale"] == "periodic"
        # Per GEMM operand, read once here: a compiled forward finds plain constants, not a native call.
        infos = {operand: operand_info(recipe, self.overrides, operand) for operand in _REFERENCE}
        self._takes_rht = {operand: i["rht"] for operand, i in infos.items()}
        self._rounds_sr = {operand: i["rounding"] != "rne" for operand, i in infos.items()}
        self.period = period if period is not None else info["period"]
        if self.period < 1:
            raise ValueError(f"period: expected >= 1, got {self.period}")
        self.seed = seed
        self.name = name
        self.rbits = rbits
        self.capture: Optional[Callable[[dict], None]] = None
        self.step: Optional[int] = None
        self._forwards = 0
        self._sampled_at: Dict[str, int] = {}
        if self.periodic:
            self._make_held(self.weight.device)

    def _make_held(self, device) -> None:
        # The held amaxes are buffers, written in place (the grad_output one in the backward), so that a
        # compiled model carries them from step to step as a graph's mutated inputs; not in the state_dict.
        for role in _ROLES:
            self.register_buffer(f"held_{role}", torch.zeros(1, dtype=torch.float32, device=device),
                                 persistent=False)

    @classmethod
    def from_linear(cls, linear: nn.Linear, **kwargs) -> "Linear":
        """An fp4sim Linear sharing `linear`'s Parameter objects (optimizer state and ties survive)."""
        with torch.device("meta"):
            new = cls(linear.in_features, linear.out_features, linear.bias is not None, **kwargs)
        new.weight = linear.weight
        new.bias = linear.bias
        if new.periodic:
            new._make_held(linear.weight.device)
        new.train(linear.training)
        return new

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, recipe={self.recipe}, datapath={self.datapath}, "
                f"scaling={'periodic:%d' % self.period if self.periodic else 'current'}")

    def begin_step(self, step: int) -> None:
        """Declare the optimizer step about to run (int >= 1, increasing): the clock of the held amaxes and
        part of the SR key. Without it the module counts its forward calls."""
        if not isinstance(step, int) or step < 1 or (self.step is not None and step <= self.step):
            raise ValueError(f"begin_step: expected an int >= 1 above the last step ({self.step}), got {step!r}")
        self.step = step

    def refreshes(self, role: str, step: int) -> bool:
        """Whether `role`'s held amax is sampled afresh at `step` (recorded as sampled there), else held."""
        last = self._sampled_at.get(role)
        if last is None or step - last >= self.period:
            self._sampled_at[role] = step
            return True
        return False

    def held_amax(self, role: str, sample: Optional[Tensor]) -> Tensor:
        """The held amax of `role`: on a refresh, the amax of `sample`, written into the buffer; else (sample
        None) a copy of the value held, which a later refresh leaves alone."""
        held = getattr(self, f"held_{role}")
        if sample is None:
            return held.clone()
        amax = _tensor_amax(sample)
        held.copy_(amax)
        return amax

    def amax_for(self, operand: str, references: Dict[str, Tensor]) -> Optional[Tensor]:
        """The held amax operand `<gemm>.a|b` is quantized with, or None for the current amax."""
        if not self.periodic or self._takes_rht[operand]:
            return None
        return references[_REFERENCE[operand]]

    def run_gemm(self, gemm: str, a: Tensor, b: Tensor, step: int, references: Dict[str, Tensor],
                 bias: Optional[Tensor] = None, out_dtype: torch.dtype = torch.float32) -> Tensor:
        """C = A·Bᵀ (+ bias in binary32, then rounded to out_dtype) of one of the layer's GEMMs: both operands
        quantized, then multiplied. The GPU adds the bias and rounds in the GEMM's epilogue; with a capture
        hook the float32 C is formed first (for the record) and the same two steps follow in torch, which
        gives the same bits."""
        seed = philox_seed(self.seed, self.name, gemm, step, data_parallel_rank())
        quantized, settings = [], []
        for side, x in (("a", a), ("b", b)):
            operand = f"{gemm}.{side}"
            amax = self.amax_for(operand, references)
            bits = None
            if self.rbits is not None and self._rounds_sr[operand]:
                bits = self.rbits(tuple(x.shape), x.device)
            quantized.append(torch.ops.fp4sim.quantize(x, self.recipe, operand, self.overrides, seed, amax, bits))
            settings.append((amax, bits))
        out = "bf16" if out_dtype == torch.bfloat16 else "f32"
        if self.capture is None:
            c = torch.ops.fp4sim.gemm_quantized(*quantized[0], *quantized[1], a.shape[1], self.recipe, gemm,
                                                self.datapath, True, self.overrides, out, bias)
            return c.to(out_dtype)
        c = torch.ops.fp4sim.gemm_quantized(*quantized[0], *quantized[1], a.shape[1], self.recipe, gemm,
                                            self.datapath, True, self.overrides, "f32")
        self.capture({"module": self.name, "gemm": gemm, "step": step, "recipe": self.recipe,
                      "overrides": self.overrides, "datapath": self.datapath, "seed": seed, "a": a, "b": b,
                      "amax_a": settings[0][0], "amax_b": settings[1][0], "rbits_a": settings[0][1],
                      "rbits_b": settings[1][1], "qa": quantized[0], "qb": quantized[1], "c": c})
        if bias is not None:
            c = c + bias.detach().to(torch.float32)
        return c.to(out_dtype)

    def forward(self, x: Tensor) -> Tensor:
        if self.step is None:
            self._forwards += 1
        step = self.step if self.step is not None else self._forwards
        if torch.is_autocast_enabled(x.device.type):
            out_dtype = torch.get_autocast_dtype(x.device.type)
        else:
            out_dtype = x.dtype
        amax_x = amax_w = None
        refresh_dy = False
        if self.periodic:  # sampled here, outside the autograd.Function, whose forward has no side effects
            amax_x = self.held_amax("activation", x.detach().to(torch.bfloat16)  # the BF16 input, as saved
                                    if self.refreshes("activation", step) else None)
            amax_w = self.held_amax("weight", self.weight.detach() if self.refreshes("weight", step) else None)
            refresh_dy = self.refreshes("grad_output", step)
        return _LinearFunction.apply(x, self.weight, self.bias, self, step, out_dtype, amax_x, amax_w, refresh_dy)


class _LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor], layer: Linear, step: int,
                out_dtype: torch.dtype, amax_x: Optional[Tensor], amax_w: Optional[Tensor],
                refresh_dy: bool) -> Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).to(torch.bfloat16)  # the layer's input is BF16, and saved so
        w = weight.detach().to(torch.float32)
        refs = {"activation": amax_x, "weight": amax_w} if layer.periodic else {}
        with torch.autocast(x.device.type, enabled=False):
            y = layer.run_gemm("fprop", x2, w, step, refs, bias, out_dtype)
        ctx.save_for_backward(x2, weight)
        ctx.layer, ctx.step, ctx.refs, ctx.x_shape, ctx.x_dtype = layer, step, refs, shape, x.dtype
        ctx.has_bias, ctx.refresh_dy = bias is not None, refresh_dy
        return y.reshape(*shape[:-1], y.shape[-1])

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        x2, weight = ctx.saved_tensors
        layer, step, refs = ctx.layer, ctx.step, dict(ctx.refs)
        # dY rounded to BF16 and kept so: the quantizers read BF16 where it lies, and the wgrad transposes
        # move half the bytes of float32 ones.
        dy = grad_out.reshape(-1, grad_out.shape[-1]).to(torch.bfloat16)
        if layer.periodic:
            refs["grad_output"] = layer.held_amax("grad_output", dy if ctx.refresh_dy else None)
        dx = dw = db = None
        with torch.autocast(dy.device.type, enabled=False):
            if ctx.needs_input_grad[0]:
                wt = torch.ops.fp4sim.transpose(weight.detach().to(torch.float32))
                dx = layer.run_gemm("dgrad", dy, wt, step, refs, out_dtype=ctx.x_dtype).reshape(ctx.x_shape)
            if ctx.needs_input_grad[1]:
                dw = layer.run_gemm("wgrad", torch.ops.fp4sim.transpose(dy), torch.ops.fp4sim.transpose(x2), step,
                                    refs, out_dtype=weight.dtype)
            if ctx.has_bias and ctx.needs_input_grad[2]:
                db = dy.sum(0, dtype=torch.float32)
        return dx, dw, db, None, None, None, None, None, None


def begin_step(model: nn.Module, step: int) -> None:
    """begin_step(step) on every fp4sim Linear of `model` (call once per optimizer step, before the forward)."""
    for m in model.modules():
        if isinstance(m, Linear):
            m.begin_step(step)
