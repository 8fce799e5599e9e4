"""fp4sim.torch.Linear: nn.Linear whose three GEMMs run an FP4 recipe (docs/torch.md).

fprop  Y  = X·Wᵀ   A = X [tokens, in]       (fprop.a)   B = W [out, in]   (fprop.b)
dgrad  dX = dY·W   A = dY [tokens, out]     (dgrad.a)   B = Wᵀ [in, out]  (dgrad.b)
wgrad  dW = dYᵀ·X  A = dYᵀ [out, tokens]    (wgrad.a)   B = Xᵀ [in, tokens] (wgrad.b)

Each operand is quantized with exactly the spec of ``fp4sim gemm --gemm <gemm>`` (its blocks, rounding,
RHT and target) and multiplied through one datapath; X enters as BF16 (and is saved so), dY is rounded to
BF16, W is the FP32 master. ``backward`` (TE's ``backward_override``) may keep dgrad and wgrad out of FP4:
"dequantized" multiplies dY by the forward's dequantized operands, DQ(Q(W)) and DQ(Q(X)) rounded to BF16,
"high_precision" by W and X themselves, both as BF16 matmuls; a row-scaled recipe (amax_scope="row", TE's
row_scaled_activation) has no quantized backward. Tensor scaling per module and role: under a periodic recipe (ue5m3: D = 50)
the amax of activation, weight and grad_output is sampled at a step and held for D steps (the tensor as
passed, before any transpose; one dY sample serves dgrad and wgrad); under current scaling, and for an
operand that takes the RHT, the quantizer measures the current amax itself. Stochastic-rounding integers
come from fp4sim's Philox stream with a seed derived from (seed, module name, GEMM, step and, under
torch.distributed with several processes, the rank), or from the caller's ``rbits(shape, device)``.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import Tensor, nn

from .ops import _BF16_TC_DATAPATH, GemmPlan, default_datapath, gemm_plan, operand_info, overrides_text, plan_info

_ROLES = ("activation", "weight", "grad_output")
_GEMMS = ("fprop", "dgrad", "wgrad")
_BACKWARDS = ("quantized", "dequantized", "high_precision")
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
    """Drop-in nn.Linear (same parameters; the state_dict adds the clock) whose forward and backward run `recipe`.

    recipe / overrides: an fp4sim recipe preset and its keyword overrides (block=32, ...). datapath: the
    golden datapath of the three GEMMs (default: the recipe's when the GPU has it, else sm90-bf16).
    period: the sample-and-hold period D (default: the recipe's; 1 = sample every step). seed / name: the
    key of the Philox bits; rbits: None, or a callable (shape, device) -> integer tensor of SR bits.
    backward: "quantized" (dgrad and wgrad in FP4, the default), "dequantized" or "high_precision" (BF16
    matmuls of dY with the forward's dequantized operands, or with W and X; TE's backward_override; the
    default, and required, for a row-scaled recipe).
    capture: None, or a callable that receives a dict per GEMM (its inputs, settings, quantized operands
    and output) — for checking against the golden model and for writing traces.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 recipe: str = "ue5m3", datapath: Optional[str] = None, period: Optional[int] = None,
                 seed: int = 0, name: str = "", rbits: Optional[Callable] = None, backward: Optional[str] = None,
                 **overrides):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.recipe = recipe
        self.overrides = overrides_text(overrides)
        info = operand_info(recipe, self.overrides, "activation")
        self.backward = backward or ("high_precision" if info["row_scaled"] else "quantized")
        if self.backward not in _BACKWARDS:
            raise ValueError(f"backward: expected one of {', '.join(_BACKWARDS)}, got {self.backward!r}")
        if info["row_scaled"] and self.backward == "quantized":
            raise ValueError("backward='quantized': a row-scaled recipe (amax_scope='row') scales the forward "
                             "activations only and has no quantized backward (as TE); use 'dequantized' or "
                             "'high_precision'")
        self.datapath = datapath or default_datapath(recipe, self.overrides)
        self.periodic = info["tensor_scale"] == "periodic"
        self._resolve_plans()
        if self.backward == "dequantized" and (self._takes_rht["fprop.a"] or self._takes_rht["fprop.b"]):
            raise ValueError("backward='dequantized': an fprop operand takes the RHT, so its dequantized values "
                             "lie in the transformed basis, not X's or W's; use 'high_precision'")
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

    def _resolve_plans(self) -> None:
        # The three GEMMs' plan handles and what the forward needs of them, resolved once here (a bad
        # override or datapath fails now): the operators take the handles, and a compiled forward finds
        # plain constants, not a native call.
        gemms = _GEMMS if self.backward == "quantized" else ("fprop",)
        self._plans: Dict[str, GemmPlan] = {g: gemm_plan(self.recipe, self.overrides, g, self.datapath) for g in gemms}
        self._k_multiple = plan_info(self._plans["fprop"].gemm)["k_multiple"]
        infos = {f"{g}.{side}": plan_info(getattr(p, side)) for g, p in self._plans.items() for side in "ab"}
        self._takes_rht = {operand: i["rht"] for operand, i in infos.items()}
        self._rounds_sr = {operand: i["rounding"] != "rne" for operand, i in infos.items()}

    def __getstate__(self) -> dict:
        # Plan handles are process-local: a pickled layer keeps its settings and resolves them again when loaded.
        state = super().__getstate__()
        state.pop("_plans", None)
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._resolve_plans()

    def _make_held(self, device) -> None:
        # The held amaxes are buffers, written in place (the grad_output one in the backward), so that a
        # compiled model carries them from step to step as a graph's mutated inputs; the state_dict has them
        # in the extra state, beside the clock they belong to.
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

    def get_extra_state(self) -> dict:
        """The clock and the held amaxes (the state_dict's `<name>._extra_state`), so that a checkpoint resumes
        bit for bit: the step declared last, the forward count, the step each role was last sampled at and,
        under periodic scaling, the held values."""
        held = {role: getattr(self, f"held_{role}").detach().clone() for role in _ROLES} if self.periodic else {}
        return {"step": self.step, "forwards": self._forwards, "sampled_at": dict(self._sampled_at), "held": held}

    def set_extra_state(self, state: dict) -> None:
        if bool(state["held"]) != self.periodic:
            saved = "periodic" if state["held"] else "current"
            raise ValueError(f"fp4sim.torch.Linear {self.name or '(unnamed)'}: the checkpoint's tensor scaling is "
                             f"{saved}, this layer's (recipe {self.recipe}) is not")
        self.step, self._forwards, self._sampled_at = state["step"], state["forwards"], dict(state["sampled_at"])
        for role, value in state["held"].items():
            getattr(self, f"held_{role}").copy_(value)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        key = prefix + "_extra_state"
        if key not in state_dict:  # a plain nn.Linear's checkpoint loads too, and the clock starts afresh
            if key in missing_keys:
                missing_keys.remove(key)
            self.step, self._forwards, self._sampled_at = None, 0, {}

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, recipe={self.recipe}, datapath={self.datapath}, "
                f"scaling={'periodic:%d' % self.period if self.periodic else 'current'}, backward={self.backward}")

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
                 bias: Optional[Tensor] = None, out_dtype: torch.dtype = torch.float32) -> Tuple[Tensor, list]:
        """C = A·Bᵀ (+ bias in binary32, then rounded to out_dtype) of one of the layer's GEMMs, and its two
        quantized operands (codes, scales, scalars): both operands quantized, then multiplied. The GPU adds the bias and rounds in the GEMM's epilogue; with a capture
        hook the float32 C is formed first (for the record) and the same two steps follow in torch, which
        gives the same bits."""
        seed = philox_seed(self.seed, self.name, gemm, step, data_parallel_rank())
        plan = self._plans[gemm]
        quantized, settings = [], []
        for side, x, operand_plan in (("a", a, plan.a), ("b", b, plan.b)):
            operand = f"{gemm}.{side}"
            amax = self.amax_for(operand, references)
            bits = None
            if self.rbits is not None and self._rounds_sr[operand]:
                bits = self.rbits(tuple(x.shape), x.device)
            quantized.append(torch.ops.fp4sim.quantize(x, operand_plan, seed, amax, bits))
            settings.append((amax, bits))
        out = "bf16" if out_dtype == torch.bfloat16 else "f32"
        if self.capture is None:
            c = torch.ops.fp4sim.gemm_quantized(*quantized[0], *quantized[1], a.shape[1], plan.gemm, out, bias)
            return c.to(out_dtype), quantized
        c = torch.ops.fp4sim.gemm_quantized(*quantized[0], *quantized[1], a.shape[1], plan.gemm, "f32")
        self.capture({"module": self.name, "gemm": gemm, "step": step, "recipe": self.recipe,
                      "overrides": self.overrides, "datapath": self.datapath, "seed": seed, "a": a, "b": b,
                      "amax_a": settings[0][0], "amax_b": settings[1][0], "rbits_a": settings[0][1],
                      "rbits_b": settings[1][1], "qa": quantized[0], "qb": quantized[1], "c": c})
        if bias is not None:
            c = c + bias.detach().to(torch.float32)
        return c.to(out_dtype), quantized

    def dequantized(self, operand: str, q: tuple, shape: Tuple[int, int]) -> Tensor:
        """The BF16 values of quantized operand `<gemm>.a|b` (TE's rowwise-dequantized source of a
        dequantized backward: DQ in binary32, rounded to nearest even)."""
        gemm, side = operand.split(".")
        plan = getattr(self._plans[gemm], side)
        return torch.ops.fp4sim.dequantize(*q, shape[0], shape[1], plan).to(torch.bfloat16)

    def check_k(self, x: Tensor) -> None:
        """Refuses, in one line before any GEMM runs, a call whose GEMMs the datapath cannot take: every K a
        multiple of its k_multiple (probe-matched: 64): in, out where dX will be computed, the tokens where dW
        will (so inference, or a frozen weight, takes any token count).
        Tokens are not padded to the multiple: zero tokens would move the Philox bits of every row of dYᵀ but
        the first (an element's draw is indexed by its row-major position) and change the shape a caller's
        rbits draws, so the stochastic rounding would no longer be that of the layer's own operands."""
        m = self._k_multiple
        if m == 1:
            return
        tokens = x.numel() // x.shape[-1] if x.shape[-1] else 0
        grad = torch.is_grad_enabled() and self.backward == "quantized"  # else dgrad and wgrad are BF16 matmuls
        ks = [("in_features (fprop's K)", self.in_features)]
        if grad and x.requires_grad:
            ks.append(("out_features (dgrad's K)", self.out_features))
        if grad and self.weight.requires_grad:
            ks.append(("tokens, the product of X's leading dimensions (wgrad's K)", tokens))
        for what, k in ks:
            if k % m:
                raise ValueError(f"fp4sim.torch.Linear {self.name or '(unnamed)'}: the {self.datapath} datapath "
                                 f"(recipe {self.recipe}) needs every GEMM's K a multiple of {m}; {what} is {k}: "
                                 f"use a multiple of {m} or datapath='{_BF16_TC_DATAPATH}'")

    def forward(self, x: Tensor) -> Tensor:
        self.check_k(x)
        if self.step is None:
            self._forwards += 1
        step = self.step if self.step is not None else self._forwards
        out_dtype, dx_dtype = _boundary_dtypes(x)
        amax_x = amax_w = None
        refresh_dy = False
        if self.periodic:  # sampled here, outside the autograd.Function, whose forward has no side effects
            amax_x = self.held_amax("activation", x.detach().to(torch.bfloat16)  # the BF16 input, as saved
                                    if self.refreshes("activation", step) else None)
            amax_w = self.held_amax("weight", self.weight.detach() if self.refreshes("weight", step) else None)
            refresh_dy = self.refreshes("grad_output", step)
        return _LinearFunction.apply(x, self.weight, self.bias, self, step, out_dtype, dx_dtype, amax_x, amax_w,
                                     refresh_dy)


def _boundary_dtypes(x: Tensor):
    """The dtypes of Y and of dX as the dgrad GEMM rounds it, before the cast to X's dtype: those of nn.Linear
    under the autocast that is on. Autocast casts a floating X other than float64 to its dtype (at::autocast's
    is_eligible), so nn.Linear's dX is computed in that dtype and widened to X's by the cast's backward; Y is
    in autocast's dtype. Without autocast both are X's dtype."""
    if not torch.is_autocast_enabled(x.device.type):
        return x.dtype, x.dtype
    cast = torch.get_autocast_dtype(x.device.type)
    return cast, (cast if x.is_floating_point() and x.dtype != torch.float64 else x.dtype)


class _LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor], layer: Linear, step: int,
                out_dtype: torch.dtype, dx_dtype: torch.dtype, amax_x: Optional[Tensor], amax_w: Optional[Tensor],
                refresh_dy: bool) -> Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).to(torch.bfloat16)  # the layer's input is BF16, and saved so
        w = weight.detach().to(torch.float32)
        refs = {"activation": amax_x, "weight": amax_w} if layer.periodic else {}
        with torch.autocast(x.device.type, enabled=False):
            y, (qx, qw) = layer.run_gemm("fprop", x2, w, step, refs, bias, out_dtype)
        if layer.backward == "dequantized":  # the quantized forward operands, dequantized when needed
            ctx.save_for_backward(*qx, *qw)
            ctx.x2_shape, ctx.w_shape = tuple(x2.shape), tuple(w.shape)
        else:
            ctx.save_for_backward(x2, weight)
        ctx.layer, ctx.step, ctx.refs, ctx.x_shape = layer, step, refs, shape
        ctx.x_dtype, ctx.dx_dtype = x.dtype, dx_dtype
        ctx.has_bias, ctx.refresh_dy = bias is not None, refresh_dy
        return y.reshape(*shape[:-1], y.shape[-1])

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        layer, step, refs = ctx.layer, ctx.step, dict(ctx.refs)
        # dY rounded to BF16 and kept so: the quantizers read BF16 where it lies, and the wgrad transposes
        # move half the bytes of float32 ones.
        dy = grad_out.reshape(-1, grad_out.shape[-1]).to(torch.bfloat16)
        if layer.backward != "quantized":
            return _LinearFunction.backward_unquantized(ctx, dy)
        x2, weight = ctx.saved_tensors
        if layer.periodic:
            refs["grad_output"] = layer.held_amax("grad_output", dy if ctx.refresh_dy else None)
        dx = dw = db = None
        with torch.autocast(dy.device.type, enabled=False):
            if ctx.needs_input_grad[0]:
                wt = torch.ops.fp4sim.transpose(weight.detach().to(torch.float32))
                dx, _ = layer.run_gemm("dgrad", dy, wt, step, refs, out_dtype=ctx.dx_dtype)
                dx = dx.to(ctx.x_dtype).reshape(ctx.x_shape)  # autocast's cast backward: widened, or none
            if ctx.needs_input_grad[1]:
                dw, _ = layer.run_gemm("wgrad", torch.ops.fp4sim.transpose(dy), torch.ops.fp4sim.transpose(x2),
                                       step, refs, out_dtype=weight.dtype)
            if ctx.has_bias and ctx.needs_input_grad[2]:
                db = dy.sum(0, dtype=torch.float32)
        return dx, dw, db, None, None, None, None, None, None, None

    @staticmethod
    def backward_unquantized(ctx, dy: Tensor):
        # dgrad and wgrad as BF16 matmuls (TE's backward_override): dY with the forward's dequantized operands,
        # or with W and X as they are.
        layer = ctx.layer
        if layer.backward == "dequantized":
            saved = ctx.saved_tensors
            x_bf16 = layer.dequantized("fprop.a", saved[:3], ctx.x2_shape)
            w_bf16 = layer.dequantized("fprop.b", saved[3:], ctx.w_shape)
            weight_dtype = layer.weight.dtype
        else:
            x_bf16, weight = ctx.saved_tensors
            w_bf16, weight_dtype = weight.detach().to(torch.bfloat16), weight.dtype
        dx = dw = db = None
        with torch.autocast(dy.device.type, enabled=False):
            if ctx.needs_input_grad[0]:
                dx = (dy @ w_bf16).to(ctx.dx_dtype).to(ctx.x_dtype).reshape(ctx.x_shape)
            if ctx.needs_input_grad[1]:
                dw = (dy.t() @ x_bf16).to(weight_dtype)
            if ctx.has_bias and ctx.needs_input_grad[2]:
                db = dy.sum(0, dtype=torch.float32)
        return dx, dw, db, None, None, None, None, None, None, None


def begin_step(model: nn.Module, step: int) -> None:
    """begin_step(step) on every fp4sim Linear of `model` (call once per optimizer step, before the forward)."""
    for m in model.modules():
        if isinstance(m, Linear):
            m.begin_step(step)
