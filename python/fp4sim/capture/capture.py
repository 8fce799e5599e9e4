"""TraceCapture: hooks a model's linear layers (modules.py) and writes their GEMM operands at chosen
optimizer steps as a version-2 trace (trace_file.py, docs/trace-format.md).

Every forward of a hooked layer inside a captured step whose output takes part in the backward is one
call, written to ``/step_NNNNNN/<layer>/call_KKKKKK/{x, w, dy}`` with K the forward's one-based position
among that layer's forwards in the step: gradient accumulation, a module used twice and activation
recompute never collide. A forward under no_grad (an evaluation; torch.utils.checkpoint's recomputation)
is not a call; a forward whose output the loss does not use gets no gradient, is left out and is counted
in the layer's ``@forwards_without_gradient``.

dy of a call is taken by a hook on that call's own output tensor, so each backward meets its forward.
For fp4sim.torch.Linear the module's ``capture`` callback also delivers, per GEMM, the quantized operands
it really used; they are written under ``call_KKKKKK/fp4/`` (verify.py reads them back).
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor, nn

from .modules import Gemm, gemms, kind_of
from .trace_file import TraceFile, call_group_name

__all__ = ["TraceCapture", "window", "rank_path"]


def window(start: int, period: int) -> set:
    """The steps of one refresh window of periodic scaling: {start, ..., start + period - 1}."""
    if start < 1 or period < 1:
        raise ValueError("steps are one-based and the period is >= 1")
    return set(range(start, start + period))


def rank_path(path: str, rank: int) -> str:
    """The file of one rank: "trace.h5" -> "trace.rank00001.h5"."""
    root, ext = os.path.splitext(path)
    return "%s.rank%05d%s" % (root, rank, ext)


def _distributed() -> Optional[tuple]:
    """(rank, world size) under an initialised torch.distributed with more than one rank, else None."""
    d = torch.distributed
    if d.is_available() and d.is_initialized() and d.get_world_size() > 1:
        return d.get_rank(), d.get_world_size()
    return None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _host(t: Tensor, dtype: Optional[torch.dtype] = None) -> np.ndarray:
    """A copy on the host (the layer may update the tensor in place later: a weight gradient is
    accumulated into the tensor the GEMM returned)."""
    return np.array(t.detach().to(dtype or t.dtype).cpu().numpy(), copy=True)


def _float32(t: Tensor) -> np.ndarray:
    return _host(t, torch.float32)


def _first_tensor(output) -> Optional[Tensor]:
    if isinstance(output, Tensor):
        return output
    if isinstance(output, (tuple, list)):
        return next((t for t in output if isinstance(t, Tensor)), None)
    return None


class _Call:
    """One forward of one GEMM site: its operands, and dy once the backward reached it."""

    def __init__(self, module: str, site: str, position: int, gemm: Gemm):
        self.module, self.site, self.position, self.gemm = module, site, position, gemm
        self.x = (_float32(gemm.x), _dtype_name(gemm.x.dtype))
        self.w = (_float32(gemm.w), _dtype_name(gemm.w.dtype))
        self.dy = None
        self.fp4: Dict[str, dict] = {}


def _fp4_record(d: dict) -> dict:
    """What verify needs of one fp4sim.torch.Linear GEMM (its capture callback's dict), on the host."""
    rec = {key: d[key] for key in ("gemm", "recipe", "overrides", "datapath", "seed")}
    rec["c"] = _float32(d["c"])
    for side in ("a", "b"):
        codes, scales, scalars = d["q" + side]
        amax, rbits = d["amax_" + side], d["rbits_" + side]
        rec[side] = {"input": _float32(d[side]), "codes": _host(codes),
                     "scales": _host(scales), "scalars": _host(scalars),
                     "amax_ref": None if amax is None else float(amax.detach().reshape(-1)[0]),
                     "rbits": None if rbits is None else _host(rbits, torch.int64)}
    return rec


class _StepScope:
    def __init__(self, step: int):
        self.step = step
        self.attrs = {}

    def set(self, **attrs):
        """Scalar attributes of the step group (loss, lr, grad_norm, tokens_seen, ...)."""
        self.attrs.update(attrs)


class TraceCapture:
    """Writes a version-2 trace of the selected linear layers at the selected steps.

    model        the module whose linear layers are hooked (modules.py says which kinds)
    path         the trace file (per rank under torch.distributed: ``rank_path``); written under
                 ``path + ".tmp.<pid>"`` and renamed into place by close()
    steps        iterable of one-based steps, or a callable step -> bool
    rows         int: keep the first N token rows of x and dy (None: all); or a sequence of row indices
    layers       regular expression searched in module names, a sequence of names, or None for all
    compression  gzip level (0: none); shuffle on when compressing
    fp4_operands record fp4sim.torch.Linear's quantized operands and GEMM outputs (whole, whatever rows)
    """

    def __init__(self, model: nn.Module, path: Union[str, os.PathLike],
                 steps: Union[Iterable[int], Callable[[int], bool]], rows: Union[int, Sequence[int], None] = 128,
                 layers: Union[str, Sequence[str], None] = None, model_name: str = "", notes: str = "",
                 compression: int = 4, fp4_operands: bool = True):
        self._is_step = steps if callable(steps) else (lambda s, _set=frozenset(steps): s in _set)
        self.rows = rows
        self.fp4_operands = fp4_operands
        if layers is None:
            match = lambda name: True  # noqa: E731
        elif isinstance(layers, str):
            rx = re.compile(layers)
            match = lambda name: rx.search(name) is not None  # noqa: E731
        else:
            wanted = set(layers)
            match = lambda name: name in wanted  # noqa: E731
        self.modules = []
        for name, m in model.named_modules():
            kind = kind_of(m)
            if kind is not None and match(name) and not any(name.startswith(n + ".") for n, _, _ in self.modules):
                self.modules.append((name, m, kind))
        if not self.modules:
            raise ValueError("no linear module (nn.Linear, TransformerEngine Linear/LayerNormLinear/LayerNormMLP, "
                             "fp4sim.torch.Linear) matches the layer selection")
        self.path = os.fspath(path)
        ranks = _distributed()
        root = {"model": model_name, "framework": "torch %s" % torch.__version__, "notes": notes,
                "captured_linears": repr([name for name, _, _ in self.modules])}
        if ranks is not None:
            self.path = rank_path(self.path, ranks[0])
            root.update(rank=np.int64(ranks[0]), world_size=np.int64(ranks[1]))
        self.file = TraceFile(self.path, root, compression)
        self._captured: List[int] = []
        self._closed = False
        self._calls: Dict[str, List[_Call]] = {}
        self._pending_fprop: Dict[str, dict] = {}

    def wants(self, step: int) -> bool:
        return step >= 1 and bool(self._is_step(step))

    def _select_rows(self, t2d: Tensor) -> Tensor:
        if self.rows is None:
            return t2d
        if isinstance(self.rows, int):
            return t2d[: self.rows]
        return t2d.index_select(0, torch.as_tensor(list(self.rows), device=t2d.device, dtype=torch.long))

    # -- hooks ----------------------------------------------------------------------------------------
    def _forward_hook(self, name: str, kind: str):
        def hook(module, inputs, output):
            fprop = self._pending_fprop.pop(name, None)
            out = _first_tensor(output)
            if out is None or not out.requires_grad or not torch.is_grad_enabled():
                return  # no backward will reach this forward
            calls = []
            for g in gemms(kind, module, inputs[0], self._select_rows):
                site = self._calls.setdefault(name + g.suffix, [])
                calls.append(_Call(name, name + g.suffix, len(site) + 1, g))
                site.append(calls[-1])
            if fprop is not None:
                calls[0].fp4["fprop"] = fprop

            def on_grad(grad):
                for c in calls:
                    c.dy = c.gemm.dy_from(grad.detach())
            out.register_hook(on_grad)
        return hook

    def _fp4_callback(self, name: str):
        def callback(d: dict):
            if not self.fp4_operands:
                return
            rec = _fp4_record(d)
            if d["gemm"] == "fprop":
                self._pending_fprop[name] = rec
                return
            # dgrad's A is dy, wgrad's A is dyᵀ (rounded to bf16, as the call's dy): the call it belongs to.
            dy = d["a"] if d["gemm"] == "dgrad" else d["a"].t()
            dy = self._select_rows(dy.detach()).to(torch.bfloat16)
            for c in self._calls.get(name, []):
                if c.dy is not None and d["gemm"] not in c.fp4 and c.dy.shape == dy.shape and torch.equal(c.dy, dy):
                    c.fp4[d["gemm"]] = rec
                    return
        return callback

    # -- steps ----------------------------------------------------------------------------------------
    @contextmanager
    def step(self, step: int, **attrs):
        """Context for one optimizer step's forwards and backwards; captures only if the step is selected."""
        if self._closed:
            raise RuntimeError("TraceCapture is closed")
        scope = _StepScope(step)
        scope.set(**attrs)
        if not self.wants(step):
            yield scope
            return
        if self.file.has_step(step):
            raise ValueError("step %d captured twice" % step)
        handles, callbacks = [], []
        for name, module, kind in self.modules:
            handles.append(module.register_forward_hook(self._forward_hook(name, kind)))
            if kind == "fp4sim.torch.Linear":
                callbacks.append((module, module.capture))
                module.capture = self._fp4_callback(name)
        try:
            yield scope
        finally:
            for h in handles:
                h.remove()
            for module, previous in callbacks:
                module.capture = previous
            calls, self._calls, self._pending_fprop = self._calls, {}, {}
        self._write_step(step, scope.attrs, calls)
        self._captured.append(step)

    def _write_step(self, step: int, attrs: dict, calls: Dict[str, List[_Call]]) -> None:
        seen = {c.module for site in calls.values() for c in site if c.dy is not None}
        missing = sorted({name for name, _, _ in self.modules} - seen)
        if missing:
            raise RuntimeError("step %d: no forward with a backward seen for %s (did the step run backward?)"
                               % (step, ", ".join(missing)))
        g = self.file.step_group(step, attrs)
        for site, site_calls in calls.items():
            layer = g.create_group(site)
            kept = [c for c in site_calls if c.dy is not None]
            layer.attrs["forwards_without_gradient"] = np.int64(len(site_calls) - len(kept))
            for c in kept:
                self._write_call(layer.create_group(call_group_name(c.position)), c)

    def _write_call(self, group, c: _Call) -> None:
        for name, (data, dtype), role in (("x", c.x, "activation"), ("w", c.w, "weight"),
                                          ("dy", (_float32(c.dy), _dtype_name(c.dy.dtype)), "grad_output")):
            self.file.array(group, name, data, role=role, orig_dtype=None if dtype == "float32" else dtype)
        for gemm, rec in c.fp4.items():
            fp4 = group.require_group("fp4")
            out = fp4.create_group(gemm)
            out.attrs.update(recipe=rec["recipe"], overrides=rec["overrides"], datapath=rec["datapath"],
                             seed=np.uint64(rec["seed"]))
            self.file.array(out, "c", rec["c"])
            for side in ("a", "b"):
                q = rec[side]
                og = fp4.create_group("%s.%s" % (gemm, side))
                og.attrs.update(recipe=rec["recipe"], overrides=rec["overrides"], operand="%s.%s" % (gemm, side),
                                seed=np.uint64(rec["seed"]), stream=np.int64(0 if side == "a" else 1),
                                tensor_amax=np.float32(q["scalars"][0]),
                                global_encode_scale=np.float32(q["scalars"][1]),
                                global_decode_scale=np.float32(q["scalars"][2]))
                if q["amax_ref"] is not None:
                    og.attrs["amax_ref"] = np.float32(q["amax_ref"])
                self.file.array(og, "input", q["input"])
                self.file.array(og, "codes", q["codes"])
                self.file.array(og, "scales", q["scales"])
                if q["rbits"] is not None:
                    self.file.array(og, "rbits", q["rbits"].astype(np.uint8 if q["rbits"].max(initial=0) < 256
                                                                   else np.uint16))

    # -- closing --------------------------------------------------------------------------------------
    def close(self):
        """Finishes the file and renames it into place; without any captured step nothing is written."""
        if self._closed:
            return
        self._closed = True
        if not self._captured:
            self.file.abort()
            raise RuntimeError("no step was captured: a trace holds at least one step")
        self.file.commit({"capture_steps": np.asarray(self._captured, dtype=np.int64)})

    def abort(self):
        """Closes and removes the temporary file (no partial trace is left)."""
        if not self._closed:
            self._closed = True
            self.file.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False
