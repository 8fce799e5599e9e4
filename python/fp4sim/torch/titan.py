"""fp4sim.torch in torchtitan: a model converter named "fp4sim" (torchtitan's ModelConverter protocol of the
0.2 releases, torchtitan/protocols/model_converter.py: `__init__(job_config, parallel_dims)`, `convert(model)`,
`post_optimizer_hook(model)`, registered by name and chosen with `--model.converters`).

    torchrun ... -m torchtitan.train --job.config_file llama3_debug.toml \\
        --job.custom_config_module fp4sim.torch.titan --model.converters fp4sim \\
        --fp4sim.recipe ue5m3 --fp4sim.exclude output

Importing this module registers the converter; `--job.custom_config_module fp4sim.torch.titan` imports it and
adds the `[fp4sim]` section of the job config (FP4Sim below; without it the converter takes FP4Sim's
defaults). The converter replaces every nn.Linear but the excluded ones by fp4sim.torch.Linear
(fp4sim.torch.convert) on the meta device, before parallelization, and keeps their step clock: step 1 is
declared at conversion, and the post-optimizer hook declares the next step, one above the layers' own
(which a checkpoint restores), so gradient-accumulation microbatches share their step and a resumed run
goes on from the checkpoint's. Needs torchtitan (not a dependency of fp4sim)."""

# No `from __future__ import annotations`: torchtitan's config parser (tyro) resolves the [fp4sim] section's
# annotations in the merged JobConfig's namespace, where FP4Sim is no name.
from dataclasses import dataclass, field
from typing import List, Optional, Union

from torch import nn
from torchtitan.protocols.model_converter import register_model_converter

from .convert import convert
from .linear import Linear, begin_step

NAME = "fp4sim"


@dataclass
class FP4Sim:
    recipe: str = "ue5m3"
    """The fp4sim recipe of the converted linears (fp4sim recipes --list)"""

    exclude: List[str] = field(default_factory=lambda: ["output"])
    """Linears left in high precision: fnmatch patterns of a qualified name or its last component
    (torchtitan's Llama names its vocabulary projection "output")"""

    datapath: Optional[str] = None
    """The GEMMs' datapath (default: the recipe's when the GPU has it, else sm90-bf16)"""

    period: Optional[int] = None
    """The sample-and-hold period of the tensor amaxes in steps (default: the recipe's)"""

    seed: int = 0
    """The seed of the stochastic-rounding bits"""


@dataclass
class JobConfig:
    """The job config's extension (--job.custom_config_module fp4sim.torch.titan): an [fp4sim] section."""

    fp4sim: FP4Sim = field(default_factory=FP4Sim)


class FP4SimConverter:
    """torchtitan's model converter for fp4sim.torch (see the module's documentation)."""

    def __init__(self, job_config, parallel_dims):
        self.config: FP4Sim = getattr(job_config, "fp4sim", None) or FP4Sim()

    def convert(self, model: nn.Module) -> None:
        c = self.config
        kwargs = {"datapath": c.datapath, "seed": c.seed}
        if c.period is not None:
            kwargs["period"] = c.period
        convert(model, recipe=c.recipe, exclude=c.exclude, **kwargs)
        begin_step(model, 1)

    def post_optimizer_hook(self, model: Union[nn.Module, List[nn.Module]]) -> None:
        parts = model if isinstance(model, list) else [model]
        steps = [m.step for part in parts for m in part.modules() if isinstance(m, Linear) and m.step is not None]
        if steps:
            for part in parts:
                begin_step(part, max(steps) + 1)


register_model_converter(FP4SimConverter, NAME)
