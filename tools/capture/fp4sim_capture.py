"""Capture tensor traces (fp4sim docs/trace-format.md, version 1) from PyTorch training.

Hooks every selected ``nn.Linear`` and, at the chosen optimizer steps, writes its GEMM operands:

  /step_NNNNNN/<module name>/x    [rows, in_features]   the input, as the GEMM consumed it
  /step_NNNNNN/<module name>/w    [out_features, in_features]
  /step_NNNNNN/<module name>/dy   [rows, out_features]  gradient of the loss w.r.t. the output

Under autocast the operands are cast to the autocast dtype first (as F.linear does), then stored widened
to float32 with ``@orig_dtype`` ("bfloat16"/"float16"), which is lossless. ``rows`` keeps the first N
token rows (or given row indices) of the flattened [batch*seq, features] activations and gradients;
the weight is always stored whole.

Usage::

    from fp4sim_capture import TraceCapture, window

    cap = TraceCapture(model, "trace.h5", steps=window(1, 50) | {200, 2000}, rows=128,
                       layers=r"mlp\\.down_proj|lm_head", model_name="my-llama")
    for step in range(1, n_steps + 1):           # one-based optimizer steps, as the trace format says
        with cap.step(step, lr=sched.get_last_lr()[0]) as s:
            loss = model(batch).loss
            loss.backward()
            s.set(loss=loss.item())             # step-group attributes, any scalars
        opt.step(); opt.zero_grad()
    cap.close()                                  # writes trace.h5 (a temporary until then)

Periodic tensor scaling (docs/design.md, "Replay") is studied faithfully only when every step of a refresh
window is captured: ``window(1, 50)`` is {1, ..., 50}; ``window(151, 50)`` is {151, ..., 200}.

Hooks are attached only during a captured step's forward and backward, so other steps run at full speed.
Needs torch, h5py and numpy.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Callable, Iterable, Optional, Sequence, Union

import h5py
import numpy as np

try:
    import torch
    from torch import nn
except ImportError:  # pragma: no cover - the module is importable for documentation without torch
    torch = None
    nn = None

SCHEMA = "fp4-trace"
SCHEMA_VERSION = 1

__all__ = ["TraceCapture", "window", "SCHEMA", "SCHEMA_VERSION"]


def window(start: int, period: int) -> set:
    """The steps of one refresh window of periodic scaling: {start, ..., start + period - 1}."""
    if start < 1 or period < 1:
        raise ValueError("steps are one-based and the period is >= 1")
    return set(range(start, start + period))


def _dtype_name(dtype) -> str:
    return {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32",
            torch.float64: "float64"}.get(dtype, str(dtype).replace("torch.", ""))


def _autocast_dtype(device_type: str):
    """The dtype F.linear casts to under autocast on this device, or None when autocast is off."""
    try:
        if not torch.is_autocast_enabled(device_type):
            return None
        return torch.get_autocast_dtype(device_type)
    except TypeError:  # torch < 2.4: per-device functions
        if device_type == "cuda" and torch.is_autocast_enabled():
            return torch.get_autocast_gpu_dtype()
        if device_type == "cpu" and torch.is_autocast_cpu_enabled():
            return torch.get_autocast_cpu_dtype()
        return None


class _StepScope:
    def __init__(self, capture: "TraceCapture", step: int):
        self.capture = capture
        self.step = step
        self.attrs = {}

    def set(self, **attrs):
        """Scalar attributes of the step group (loss, lr, grad_norm, tokens_seen, ...)."""
        self.attrs.update(attrs)


class TraceCapture:
    """Writes a v1 trace of the selected nn.Linear layers at the selected steps.

    model       the module whose nn.Linear children are hooked
    path        the trace file; written under ``path + ".tmp.<pid>"`` and renamed by close()
    steps       iterable of one-based steps, or a callable step -> bool
    rows        int: keep the first N token rows of x and dy (None: all); or a sequence of row indices
    layers      regular expression searched in module names, a sequence of names, or None for all
    compression gzip level (0: none); shuffle on when compressing
    """

    def __init__(self, model, path: Union[str, os.PathLike], steps: Union[Iterable[int], Callable[[int], bool]],
                 rows: Union[int, Sequence[int], None] = 128,
                 layers: Union[str, Sequence[str], None] = None, model_name: str = "", notes: str = "",
                 compression: int = 4):
        if torch is None:
            raise ImportError("fp4sim_capture needs torch")
        self.path = os.fspath(path)
        self.tmp = "%s.tmp.%d" % (self.path, os.getpid())
        self._is_step = steps if callable(steps) else (lambda s, _set=frozenset(steps): s in _set)
        self.rows = rows
        self.compression = compression
        if layers is None:
            match = lambda name: True  # noqa: E731
        elif isinstance(layers, str):
            rx = re.compile(layers)
            match = lambda name: rx.search(name) is not None  # noqa: E731
        else:
            wanted = set(layers)
            match = lambda name: name in wanted  # noqa: E731
        self.modules = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear) and match(name)]
        if not self.modules:
            raise ValueError("no nn.Linear module matches the layer selection")
        self.file = h5py.File(self.tmp, "w")
        self.file.attrs["schema"] = SCHEMA
        self.file.attrs["schema_version"] = np.int64(SCHEMA_VERSION)
        if model_name:
            self.file.attrs["model"] = model_name
        self.file.attrs["framework"] = "torch %s" % torch.__version__
        if notes:
            self.file.attrs["notes"] = notes
        self.file.attrs["captured_linears"] = repr([name for name, _ in self.modules])
        self._handles = []
        self._group = None
        self._captured = []
        self._closed = False

    # -- selection ---------------------------------------------------------------------------------------
    def wants(self, step: int) -> bool:
        return step >= 1 and bool(self._is_step(step))

    def _select_rows(self, t2d):
        if self.rows is None:
            return t2d
        if isinstance(self.rows, int):
            return t2d[: self.rows]
        index = torch.as_tensor(list(self.rows), device=t2d.device, dtype=torch.long)
        return t2d.index_select(0, index)

    # -- writing -----------------------------------------------------------------------------------------
    def _write(self, layer: str, name: str, tensor, orig_dtype: str, role: str):
        data = tensor.detach().to(torch.float32).cpu().numpy()
        group = self._group.require_group(layer)
        kwargs = {}
        if self.compression and data.size:
            kwargs = dict(compression="gzip", compression_opts=self.compression, shuffle=True,
                          chunks=(max(1, min(data.shape[0], (1 << 20) // max(1, 4 * data.shape[1]))), data.shape[1]))
        ds = group.create_dataset(name, data=data, dtype="<f4", **kwargs)
        if orig_dtype != "float32":
            ds.attrs["orig_dtype"] = orig_dtype
        ds.attrs["role"] = role

    def _forward_hook(self, layer: str):
        def hook(module, inputs, output):
            x = inputs[0]
            cast = _autocast_dtype(x.device.type)
            w = module.weight
            if cast is not None:
                x = x.to(cast)
                w = w.to(cast)
            x2d = x.reshape(-1, x.shape[-1])
            self._write(layer, "x", self._select_rows(x2d), _dtype_name(x.dtype), "activation")
            self._write(layer, "w", w, _dtype_name(w.dtype), "weight")
        return hook

    def _backward_hook(self, layer: str):
        def hook(module, grad_input, grad_output):
            dy = grad_output[0]
            if dy is None:
                return
            dy2d = dy.reshape(-1, dy.shape[-1])
            self._write(layer, "dy", self._select_rows(dy2d), _dtype_name(dy.dtype), "grad_output")
        return hook

    @contextmanager
    def step(self, step: int, **attrs):
        """Context for one optimizer step's forward and backward; captures only if the step is selected."""
        if self._closed:
            raise RuntimeError("TraceCapture is closed")
        scope = _StepScope(self, step)
        scope.set(**attrs)
        if not self.wants(step):
            yield scope
            return
        name = "step_%06d" % step
        if name in self.file:
            raise ValueError("step %d captured twice" % step)
        self._group = self.file.create_group(name)
        self._group.attrs["step"] = np.int64(step)
        for layer, module in self.modules:
            self._handles.append(module.register_forward_hook(self._forward_hook(layer)))
            self._handles.append(module.register_full_backward_hook(self._backward_hook(layer)))
        try:
            yield scope
        finally:
            for h in self._handles:
                h.remove()
            self._handles.clear()
        for key, value in scope.attrs.items():
            self._group.attrs[key] = value
        missing = [layer for layer, _ in self.modules
                   if layer not in self._group or any(t not in self._group[layer] for t in ("x", "w", "dy"))]
        if missing:
            raise RuntimeError("step %d: no forward/backward seen for %s (did the step run backward?)"
                               % (step, ", ".join(missing)))
        self._captured.append(step)
        self._group = None

    def close(self):
        """Finishes the file and renames it into place; without any captured step nothing is written."""
        if self._closed:
            return
        self._closed = True
        self.file.attrs["capture_steps"] = np.asarray(self._captured, dtype=np.int64)
        self.file.close()
        if not self._captured:
            os.remove(self.tmp)
            raise RuntimeError("no step was captured: a trace holds at least one step")
        os.replace(self.tmp, self.path)

    def abort(self):
        """Closes and removes the temporary file (no partial trace is left)."""
        if not self._closed:
            self._closed = True
            self.file.close()
            if os.path.exists(self.tmp):
                os.remove(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False
