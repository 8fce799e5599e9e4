"""fp4sim.torch under torch.compile: a whole (tiny) Llama model with ft.Linear compiled with fullgraph=True
(a graph break fails) trains a refresh step and a hold step of the periodic amaxes on the CPU with its
logits, every gradient and every held amax bit for bit equal to the same model run eagerly.

Skipped without PyTorch (ctest reports it skipped)."""

import copy
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")

import fp4sim.torch as ft  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from small_llama import SmallLlama, byte_batches  # noqa: E402


def bits(t):
    return t.detach().view({torch.float32: torch.int32, torch.bfloat16: torch.int16}[t.dtype])


def test_compiled_small_llama_equals_eager():
    torch.manual_seed(0)
    eager = ft.convert(SmallLlama(d=64, layers=1, heads=1, ffn=128), recipe="ue5m3", exclude=["lm_head"],
                       period=2, seed=3)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    opts = {id(m): torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (eager, model)}
    batches = byte_batches(open(__file__, "rb").read() * 4, batch=2, seq=32,
                           generator=torch.Generator().manual_seed(0))
    for step in (1, 2):  # period 2: every held amax sampled at step 1 (in the compiled backward for dY), held at 2
        x, y = next(batches)
        results = []
        for module, run in ((eager, eager), (model, compiled)):
            ft.begin_step(module, step)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = run(x)
            torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1)).backward()
            results.append((logits, {n: p.grad.clone() for n, p in module.named_parameters()},
                            {n: b.clone() for n, b in module.named_buffers()}))
            opts[id(module)].step()
            opts[id(module)].zero_grad(set_to_none=True)
        (l0, g0, h0), (l1, g1, h1) = results
        assert torch.equal(bits(l0), bits(l1)), f"step {step}: logits"
        assert g0.keys() == g1.keys() and len(g0) == 12
        for name in g0:
            assert torch.equal(bits(g0[name]), bits(g1[name])), f"step {step}: grad of {name}"
        assert h0.keys() == h1.keys() and len(h0) == 7 * 3
        for name in h0:
            assert float(h0[name]) > 0, f"step {step}: {name} never sampled"
            assert torch.equal(bits(h0[name]), bits(h1[name])), f"step {step}: {name}"
