"""Which modules are linear layers, and the GEMM operands (x, w, dy) each forward of one of them uses.

* ``torch.nn.Linear`` and its subclasses (torchao's Float8Linear / MXLinear, fp4sim.torch.Linear): x is
  the input as the GEMM consumed it (cast to the autocast dtype, as F.linear does), w the weight, dy the
  gradient w.r.t. the output. A weight held as a tensor subclass with ``dequantize()`` (torchao's
  quantized weights) is recorded dequantized.
* fp4sim.torch.Linear: x and dy rounded to bfloat16 and w the float32 master, as its three GEMMs take
  them (docs/torch.md); its quantized operands come through its ``capture`` callback (capture.py).
* TransformerEngine's ``Linear``: as nn.Linear. ``LayerNormLinear``: x is the normalised input
  (LayerNorm or RMSNorm of ``layer_norm_weight``/``layer_norm_bias``, ``eps``, ``zero_centered_gamma``).
  ``LayerNormMLP``: two GEMMs, ``<name>.fc1`` (normalised input, ``fc1_weight``) and ``<name>.fc2``
  (the activation of fc1's output, ``fc2_weight``); fc1's dy is not visible outside TE's fused autograd
  function, so it is recomputed from fc2's dy: dy1 = act'(h)·(dy2·w2), in float32 from the recorded
  operands (TE computes it in its own precision; the recomputation is the high-precision value).
  These are recognised by class name and parameters, since they do not derive from nn.Linear.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class Gemm(NamedTuple):
    """One GEMM of one forward: its trace layer suffix, x [tokens, in] and w [out, in] as consumed, and
    dy_from(grad of the module output, rows) -> dy [tokens, out]."""
    suffix: str
    x: Tensor
    w: Tensor
    dy_from: Callable[[Tensor], Tensor]


def autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    """The dtype F.linear casts to under autocast on this device, or None when autocast is off."""
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def _class_names(module: nn.Module) -> set:
    return {c.__name__ for c in type(module).__mro__}


def _has_weights(module: nn.Module, *names: str) -> bool:
    """Every one of `names` is a 2-D tensor attribute of `module` (a weight [out, in])."""
    return all(isinstance(getattr(module, n, None), Tensor) and getattr(module, n).dim() == 2 for n in names)


def is_fp4sim_linear(module: nn.Module) -> bool:
    try:
        from ..torch import Linear as FtLinear
    except ImportError:  # pragma: no cover - fp4sim.torch imports wherever torch does
        return False
    return isinstance(module, FtLinear)


def kind_of(module: nn.Module) -> Optional[str]:
    """The kind of linear layer `module` is ("linear", "fp4sim.torch.Linear", "te.LayerNormLinear",
    "te.LayerNormMLP"), or None."""
    if is_fp4sim_linear(module):
        return "fp4sim.torch.Linear"
    if isinstance(module, nn.Linear):
        return "linear"
    names = _class_names(module)
    if "LayerNormMLP" in names and hasattr(module, "layer_norm_weight") and _has_weights(module, "fc1_weight", "fc2_weight"):
        return "te.LayerNormMLP"
    if "LayerNormLinear" in names and _has_weights(module, "weight") and hasattr(module, "layer_norm_weight"):
        return "te.LayerNormLinear"
    if "Linear" in names and _has_weights(module, "weight"):
        return "linear"
    return None


def _weight(w: Tensor) -> Tensor:
    """The weight as a plain tensor: a tensor subclass with dequantize() (torchao's quantized weights, even
    wrapped in a Parameter) dequantized."""
    if type(w) not in (torch.Tensor, nn.Parameter) and hasattr(w, "dequantize"):
        w = w.dequantize()
    return w.detach()


def _rows2d(t: Tensor) -> Tensor:
    return t.reshape(-1, t.shape[-1])


def _normalised(module: nn.Module, x: Tensor) -> Tensor:
    """TE's LayerNorm / RMSNorm of the input, computed in float32."""
    gamma = module.layer_norm_weight.detach().float()
    if getattr(module, "zero_centered_gamma", False):
        gamma = gamma + 1
    eps = float(getattr(module, "eps", 1e-5))
    xf = x.float()
    if getattr(module, "normalization", "LayerNorm") == "RMSNorm":
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * gamma
    beta = getattr(module, "layer_norm_bias", None)
    return F.layer_norm(xf, (xf.shape[-1],), gamma, None if beta is None else beta.detach().float(), eps)


def _gelu_tanh(t: Tensor) -> Tensor:
    return F.gelu(t, approximate="tanh")


def _gated(act: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    def f(t: Tensor) -> Tensor:
        a, b = t.chunk(2, dim=-1)
        return act(a) * b
    return f


# TransformerEngine's activation names (LayerNormMLP(activation=...)); gated ones halve fc1's output.
TE_ACTIVATIONS = {
    "gelu": _gelu_tanh, "relu": F.relu, "silu": F.silu, "qgelu": lambda t: t * torch.sigmoid(1.702 * t),
    "srelu": lambda t: F.relu(t) ** 2, "geglu": _gated(_gelu_tanh), "reglu": _gated(F.relu),
    "swiglu": _gated(F.silu),
}


def gemms(kind: str, module: nn.Module, inp: Tensor, select: Callable[[Tensor], Tensor]) -> List[Gemm]:
    """The GEMMs of one forward of `module` on input `inp`, token rows chosen by `select`."""
    cast = autocast_dtype(inp.device.type)
    if kind == "fp4sim.torch.Linear":
        x = select(_rows2d(inp)).detach().to(torch.bfloat16)
        w = module.weight.detach().to(torch.float32)
        return [Gemm("", x, w, lambda dy: select(_rows2d(dy)).to(torch.bfloat16))]
    if kind == "linear":
        x = select(_rows2d(inp)).detach()
        w = _weight(module.weight)
        if cast is not None:
            x, w = x.to(cast), w.to(cast)
        return [Gemm("", x, w, lambda dy: select(_rows2d(dy)))]
    dtype = cast or inp.dtype
    x = _normalised(module, select(_rows2d(inp)).detach()).to(dtype)
    if kind == "te.LayerNormLinear":
        return [Gemm("", x, _weight(module.weight).to(dtype), lambda dy: select(_rows2d(dy)))]
    # te.LayerNormMLP
    activation = getattr(module, "activation", "gelu")
    if activation not in TE_ACTIVATIONS:
        raise ValueError("LayerNormMLP activation %r: known are %s" % (activation, ", ".join(sorted(TE_ACTIVATIONS))))
    act = TE_ACTIVATIONS[activation]
    w1, w2 = _weight(module.fc1_weight).to(dtype), _weight(module.fc2_weight).to(dtype)
    b1 = getattr(module, "fc1_bias", None)
    h = F.linear(x, w1, None if b1 is None else b1.detach().to(dtype))
    x2 = act(h.float()).to(dtype)

    def dy1_from(dy: Tensor) -> Tensor:
        dy2 = select(_rows2d(dy))
        with torch.enable_grad():
            hf = h.detach().float().requires_grad_()
            (dh,) = torch.autograd.grad(act(hf), hf, dy2.float() @ w2.float())
        return dh.to(dy2.dtype)

    return [Gemm(".fc1", x, w1, dy1_from), Gemm(".fc2", x2, w2, lambda dy: select(_rows2d(dy)))]
