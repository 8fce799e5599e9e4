"""fp4sim.torch: bit-exact emulated FP4 training in PyTorch (docs/torch.md).

Custom operators registered with ``torch.library`` (``torch.ops.fp4sim.*``: quantize, dequantize,
gemm_quantized, gemm) on CUDA tensors launch fp4sim's GPU kernels on the current stream, without host
synchronisation; on CPU tensors they run the golden model, which is the reference the CUDA results are
compared against bit for bit. :class:`Linear` is a drop-in ``nn.Linear`` whose three GEMMs run a recipe;
:func:`convert` swaps it into a model::

    import fp4sim.torch as ft
    model = ft.convert(model, recipe="ue5m3", exclude=["lm_head"])
    for step, batch in enumerate(loader, start=1):
        ft.begin_step(model, step)
        ...

Importing this module needs PyTorch (``pip install -r requirements-torch.txt``); the rest of fp4sim
does not. Without a CUDA build or device, the CPU path works and :func:`cuda_available` is False.
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as _e:  # pragma: no cover - exercised by the test without torch
    raise ImportError(
        "fp4sim.torch needs PyTorch, which is not installed (pip install -r requirements-torch.txt); "
        "the rest of fp4sim works without it") from _e

from .ops import cuda_available, dequantize, gemm, gemm_quantized, quantize, QuantizedOperand
from .linear import Linear, begin_step
from .convert import convert

__all__ = ["cuda_available", "quantize", "dequantize", "gemm_quantized", "gemm", "QuantizedOperand", "Linear",
           "begin_step", "convert"]
