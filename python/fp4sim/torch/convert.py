"""fp4sim.torch.convert: swap a model's nn.Linear modules for fp4sim.torch.Linear."""

from __future__ import annotations

import fnmatch
from typing import Iterable

from torch import nn

from .linear import Linear


def _excluded(name: str, patterns: Iterable[str]) -> bool:
    last = name.rsplit(".", 1)[-1]
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(last, p) for p in patterns)


def convert(model: nn.Module, recipe: str = "ue5m3", exclude: Iterable[str] = (), **kwargs) -> nn.Module:
    """Replace, in place, every module that is exactly nn.Linear (not a subclass) by an fp4sim Linear
    sharing its parameters, except those whose qualified name or last name component matches a pattern of
    `exclude` (fnmatch: "lm_head", "layers.0.*"). kwargs go to Linear (datapath, period, seed, rbits,
    recipe overrides); each module's name (its key for the SR bits) is its qualified name. Returns model."""
    exclude = list(exclude)
    chosen = [(name, m) for name, m in model.named_modules()
              if type(m) is nn.Linear and name and not _excluded(name, exclude)]
    for name, m in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, Linear.from_linear(m, recipe=recipe, name=name, **kwargs))
    return model
