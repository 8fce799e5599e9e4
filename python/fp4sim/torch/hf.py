"""fp4sim.torch with Hugging Face transformers' Trainer: the callback that keeps the layers' step clock.

    trainer = Trainer(model=ft.convert(model, recipe="ue5m3", exclude=["lm_head"]), args=args, ...,
                      callbacks=[BeginStep()])

Needs transformers (not a dependency of fp4sim)."""

from __future__ import annotations

from transformers import TrainerCallback

from .linear import begin_step


class BeginStep(TrainerCallback):
    """Declares each optimizer step to the model's fp4sim Linears (ft.begin_step) before its forward: the
    Trainer's global step + 1, so the clock of the held amaxes and the stochastic-rounding key follow the
    optimizer, microbatches of gradient accumulation sharing their step, and a resumed run goes on from
    the checkpoint's step."""

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        begin_step(model, state.global_step + 1)
