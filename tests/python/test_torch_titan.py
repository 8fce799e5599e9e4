"""fp4sim.torch.titan: torchtitan's model converter "fp4sim" (docs/torch.md, "torchtitan"). The job config's
[fp4sim] section (torchtitan's own ConfigManager, with --job.custom_config_module) picks the recipe; the
converter swaps the linears through torchtitan's converter container; the post-optimizer hook, registered on
the optimizer as torchtitan's trainer does, keeps the layers' step clock over microbatches and a resumed
checkpoint.

Skipped without PyTorch or torchtitan (a 0.2 release: its ModelConverter protocol; ctest reports it skipped)."""

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")
pytest.importorskip("torchtitan.protocols.model_converter", reason="fp4sim.torch tests need torchtitan 0.2 "
                    "(its protocols/model_converter.py), which is not installed")

import fp4sim.torch as ft  # noqa: E402
from fp4sim.torch import titan  # noqa: E402
from torchtitan.config import ConfigManager  # noqa: E402
from torchtitan.protocols.model_converter import build_model_converters  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from small_llama import SmallLlama, byte_batches  # noqa: E402

ARGS = ["--job.custom_config_module", "fp4sim.torch.titan", "--model.converters", "fp4sim",
        "--fp4sim.recipe", "ue5m3", "--fp4sim.exclude", "lm_head", "--fp4sim.period", "2", "--fp4sim.seed", "7"]


def converted(args=ARGS):
    job_config = ConfigManager().parse_args(args)
    converters = build_model_converters(job_config, None)  # parallel_dims: unused by the converter
    torch.manual_seed(0)
    with torch.device("meta"):  # as torchtitan builds and converts, before to_empty and init_weights
        model = SmallLlama(d=64, layers=1, heads=1, ffn=128)
    converters.convert(model)
    model.to_empty(device="cpu")
    torch.manual_seed(0)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.05)
    return job_config, converters, model


def linears(model):
    return {n: m for n, m in model.named_modules() if isinstance(m, ft.Linear)}


def test_the_job_configs_section_picks_the_conversion():
    job_config, converters, model = converted()
    assert job_config.fp4sim.recipe == "ue5m3" and job_config.fp4sim.exclude == ["lm_head"]
    assert [type(c) for c in converters.converters] == [titan.FP4SimConverter]
    layers = linears(model)
    assert len(layers) == 7 and type(model.lm_head) is torch.nn.Linear
    for name, m in layers.items():
        assert (m.recipe, m.period, m.seed, m.name, m.step) == ("ue5m3", 2, 7, name, 1), name


def test_without_the_section_the_defaults_apply():
    _, converters, model = converted(["--model.converters", "fp4sim"])
    assert converters.converters[0].config == titan.FP4Sim()
    # the default exclusion is torchtitan's name of the vocabulary projection, "output": lm_head is converted
    assert isinstance(model.lm_head, ft.Linear) and model.lm_head.recipe == "ue5m3"


def test_post_optimizer_hook_keeps_the_step_clock():
    _, converters, model = converted()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.register_step_post_hook(lambda *args, **kwargs: converters.post_optimizer_hook([model]))
    stream = byte_batches(open(__file__, "rb").read(), 1, 64, torch.Generator().manual_seed(0))
    for _ in range(2):  # two microbatches of gradient accumulation share step 1
        x, y = next(stream)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1)).backward()
    for name, m in linears(model).items():
        assert m.step == 1 and m._sampled_at == {"activation": 1, "weight": 1, "grad_output": 1}, name
        assert m.weight.grad is not None, name
    for step in (1, 2):  # step 2 without a forward: only the hook's clock is looked at
        opt.step()
        opt.zero_grad()
        assert {m.step for m in linears(model).values()} == {step + 1}  # declared by the hook for the next step

    # a resumed run goes on from the checkpoint's clock, not from the converter's step 1
    state = model.state_dict()
    _, converters, resumed = converted()
    resumed.load_state_dict(state)
    converters.post_optimizer_hook(resumed)
    assert {m.step for m in linears(resumed).values()} == {4}
