"""fp4sim.torch under FSDP2 (torch.distributed.fsdp.fully_shard): two CPU processes (gloo) each train a tiny
Llama converted with ft.convert twice in lock step, once sharded with fully_shard (every block, then the
root) and once under DistributedDataParallel, on the same batches, and the test checks that sharding changes
nothing:

(a) every loss, every held amax and every parameter of the FSDP2 model equals the DDP model's, bit for bit,
    on both ranks: the weight is quantized from the all-gathered FP32 master (its held amax is the full
    weight's), the held amaxes are MAX-reduced over the ranks, and the gradients reach the same average;
(b) the logits of the first step, on each rank, equal those rows of one process run on the global batch
    (both ranks' sequences): the forward of the data-parallel run is the one-process forward. (The backward
    is not: each rank draws its own stochastic-rounding bits, and dW is two GEMMs over half the tokens each,
    summed by the reduction, not one GEMM over all of them — docs/torch.md.)

Skipped without PyTorch (ctest reports it skipped)."""

import copy
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")

import fp4sim.torch as ft  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from small_llama import SmallLlama, byte_batches  # noqa: E402

WORLD = 2
STEPS = 2
PERIOD = 2  # held amaxes sampled at step 1, held at 2
ROLES = ("activation", "weight", "grad_output")


def tiny_model():
    torch.manual_seed(0)
    return ft.convert(SmallLlama(d=64, layers=2, heads=1, ffn=128), recipe="ue5m3", exclude=["lm_head"],
                      period=PERIOD, seed=5)


def batches(rank):
    text = open(__file__, "rb").read() * 2
    return byte_batches(text, batch=2, seq=32, generator=torch.Generator().manual_seed(100 + rank))


def held(model):
    return {n: torch.cat([getattr(m, f"held_{r}").detach().clone() for r in ROLES])
            for n, m in model.named_modules() if isinstance(m, ft.Linear)}


def full(t):
    """A parameter's whole value: an FSDP2 shard all-gathered (a collective: every rank calls it in turn)."""
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().clone()


def _worker(rank: int, rendezvous: str, out_dir: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    torch.distributed.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=WORLD)
    # The CPU mesh named: without one, fully_shard takes the machine's accelerator type (cuda on a GPU host).
    mesh = init_device_mesh("cpu", (WORLD,))
    torch.set_num_threads(1)
    sharded = tiny_model()
    replicated = copy.deepcopy(sharded)
    for block in sharded.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(sharded, mesh=mesh)
    ddp = torch.nn.parallel.DistributedDataParallel(replicated)
    runs = {"fsdp": (sharded, sharded), "ddp": (replicated, ddp)}
    opts = {k: torch.optim.AdamW(run.parameters(), lr=1e-2) for k, (_, run) in runs.items()}
    data = batches(rank)
    out = {k: {"loss": [], "held": []} for k in runs}
    for step in range(1, STEPS + 1):
        x, y = next(data)
        for kind, (model, run) in runs.items():
            ft.begin_step(model, step)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = run(x)
            if step == 1:
                out[kind]["logits"] = logits.detach().clone()
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
            loss.backward()
            opts[kind].step()
            opts[kind].zero_grad(set_to_none=True)
            out[kind]["loss"].append(loss.detach())
            out[kind]["held"].append(held(model))
    for kind, (model, _) in runs.items():
        out[kind]["params"] = {n: full(p) for n, p in model.named_parameters()}
    torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp")
    # spawn, not fork: a forked child cannot use CUDA or autograd's threads once this process has (other
    # tests in the same pytest run on a GPU host do), whatever it costs in imports.
    torch.multiprocessing.start_processes(_worker, args=(str(out / "rendezvous"), str(out)), nprocs=WORLD,
                                          join=True, start_method="spawn")
    return [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]


def bits(t):
    return t.view({torch.float32: torch.int32, torch.bfloat16: torch.int16}[t.dtype])


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def test_fsdp2_trains_bit_for_bit_as_ddp(ranks):
    for rank, r in enumerate(ranks):
        f, d = r["fsdp"], r["ddp"]
        for step in range(STEPS):
            assert same(f["loss"][step], d["loss"][step]), f"rank {rank} step {step + 1} loss"
            assert f["held"][step].keys() == d["held"][step].keys() and len(f["held"][step]) == 2 * 7
            for name, h in f["held"][step].items():
                assert same(h, d["held"][step][name]), f"rank {rank} step {step + 1} {name} held amaxes"
                assert same(h, ranks[1 - rank]["fsdp"]["held"][step][name]), f"{name}: ranks differ"
        assert f["params"].keys() == d["params"].keys()
        for name, p in f["params"].items():
            assert same(p, d["params"][name]), f"rank {rank} {name}"
    assert not same(ranks[0]["fsdp"]["loss"][0], ranks[1]["fsdp"]["loss"][0])  # the ranks saw other data
    fresh = dict(tiny_model().named_parameters())
    assert any(not same(p, fresh[n].detach()) for n, p in ranks[0]["fsdp"]["params"].items())  # and trained


def test_first_forward_equals_one_process_on_the_global_batch(ranks):
    model = tiny_model()
    ft.begin_step(model, 1)
    x = torch.cat([next(batches(rank))[0] for rank in range(WORLD)])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x)
    for rank in range(WORLD):
        assert same(ranks[rank]["fsdp"]["logits"], logits[2 * rank:2 * rank + 2]), f"rank {rank}"
