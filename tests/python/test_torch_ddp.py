"""fp4sim.torch under DistributedDataParallel: two CPU processes (gloo) train a tiny Llama model with
ft.convert, each on its own batches, and the test checks what data parallelism must keep:

(a) each rank draws its own stochastic-rounding stream (the rank is part of the Philox key);
(b) the held (periodic) tensor amaxes are the same on every rank: the MAX over the ranks' samples;
(c) the parameters stay identical on every rank;
(d) every GEMM of a sampled step of rank 1 equals the golden model (fp4sim's numpy quantize and gemm)
    given rank 1's operands, held amaxes and Philox seed.

Skipped without PyTorch (ctest reports it skipped). The same checks run on two GPUs (NCCL) where there are
two and a CUDA build; they have not run yet (no machine with two GPUs was available)."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")

import fp4sim  # noqa: E402
import fp4sim.torch as ft  # noqa: E402
from fp4sim.torch.linear import philox_seed  # noqa: E402

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
from small_llama import SmallLlama, byte_batches  # noqa: E402

WORLD = 2
STEPS = 4
PERIOD = 2  # held amaxes sampled at steps 1 and 3, held at 2 and 4
SAMPLED_STEP = 2  # a hold step: rank 1's GEMMs of it are checked against the golden model
RECIPE = "ue5m3"  # periodic amaxes, SR on dY (dgrad.a, wgrad.a)


def _plain(v):
    """A capture record's value, detached and copied to the CPU (tuples of tensors kept as tuples)."""
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().clone()
    if isinstance(v, tuple):
        return tuple(_plain(t) for t in v)
    return v


def _worker(rank: int, device: str, rendezvous: str, out_dir: str) -> None:
    """One rank of the data-parallel run on `device` (cpu: gloo; cuda: GPU `rank`, NCCL): trains, and saves
    what the parent checks (on the CPU)."""
    if device == "cuda":
        device = f"cuda:{rank}"
        torch.cuda.set_device(device)
    torch.distributed.init_process_group("gloo" if device == "cpu" else "nccl", init_method=f"file://{rendezvous}",
                                         rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = ft.convert(SmallLlama(d=64, layers=1, heads=1, ffn=128).to(device), recipe=RECIPE,
                       exclude=["lm_head"], period=PERIOD, seed=5)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, ft.Linear)}
    records = []
    for layer in linears.values():
        layer.capture = lambda r: records.append({k: _plain(v) for k, v in r.items()})
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=None if device == "cpu" else [device])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    text = open(__file__, "rb").read() * 2
    batches = byte_batches(text, batch=2, seq=32, generator=torch.Generator().manual_seed(100 + rank))
    held = []
    for step in range(1, STEPS + 1):
        ft.begin_step(model, step)
        x, y = (t.to(device) for t in next(batches))
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
            logits = ddp(x)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        held.append({n: {role: _plain(getattr(m, f"held_{role}")) for role in ("activation", "weight", "grad_output")}
                     for n, m in linears.items()})
    torch.save({"records": records, "held": held, "params": {k: _plain(v) for k, v in model.state_dict().items()}},
               os.path.join(out_dir, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()


def _two_gpus() -> bool:
    return ft.cuda_available() and torch.cuda.device_count() >= WORLD


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not _two_gpus(), reason="needs a CUDA build of fp4sim and two CUDA devices"))])
def ranks(request, tmp_path_factory):
    """Runs the two ranks once per device kind; returns each rank's saved results."""
    out = tmp_path_factory.mktemp("ddp")
    # spawn, not fork: a forked child cannot use CUDA or autograd's threads once this process has (other
    # tests in the same pytest run on a GPU host do), whatever it costs in imports.
    torch.multiprocessing.start_processes(_worker, args=(request.param, str(out / "rendezvous"), str(out)),
                                          nprocs=WORLD, join=True, start_method="spawn")
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


def _by_key(records):
    return {(r["module"], r["gemm"], r["step"]): r for r in records}


def test_each_rank_draws_its_own_sr_stream(ranks):
    recs = [_by_key(r["records"]) for r in ranks]
    assert recs[0].keys() == recs[1].keys() and len(recs[0]) == 7 * 3 * STEPS
    for (module, gemm, step), r0 in recs[0].items():
        for rank in range(WORLD):
            assert recs[rank][module, gemm, step]["seed"] == philox_seed(5, module, gemm, step, rank)
        assert r0["seed"] != recs[1][module, gemm, step]["seed"]
    # The key of docs/torch.md: ".../<step>/rank<r>" under several processes; a run of one process keeps
    # the key without the rank (test_torch.py pins it).
    assert philox_seed(0, "layers.0.q_proj", "dgrad", 1) == 890282198297139595
    assert philox_seed(0, "layers.0.q_proj", "dgrad", 1, 1) == 5842326701175051067  # BLAKE2b-64 of ".../1/rank1"
    assert philox_seed(0, "layers.0.q_proj", "dgrad", 1, 0) != philox_seed(0, "layers.0.q_proj", "dgrad", 1)


def test_held_amaxes_are_the_max_over_ranks(ranks):
    recs = [_by_key(r["records"]) for r in ranks]
    differ = 0
    for step in range(1, STEPS + 1):
        h0, h1 = ranks[0]["held"][step - 1], ranks[1]["held"][step - 1]
        assert h0.keys() == h1.keys()
        for module in h0:
            assert set(h0[module]) == {"activation", "weight", "grad_output"}
            for role in h0[module]:
                assert torch.equal(h0[module][role], h1[module][role]), f"{module} {role} step {step}"
            sampled = step - (step - 1) % PERIOD
            # The local samples of the refresh step: X (fprop.a) and dY (dgrad.a) as each rank passed them.
            for role, gemm in (("activation", "fprop"), ("grad_output", "dgrad")):
                local = [float(recs[r][module, gemm, sampled]["a"].abs().max()) for r in range(WORLD)]
                assert float(h0[module][role]) == max(local), f"{module} {role} step {step}: {local}"
                differ += local[0] != local[1]
    assert differ > 0  # the ranks saw different data, so the all-reduce had something to do


def test_parameters_stay_identical_across_ranks(ranks):
    p0, p1 = ranks[0]["params"], ranks[1]["params"]
    assert p0.keys() == p1.keys()
    for k in p0:
        if k.endswith("._extra_state"):  # an ft.Linear's clock and held amaxes: the same on both ranks too
            c0, c1 = p0[k], p1[k]
            last_sample = STEPS - (STEPS - 1) % PERIOD
            assert len(c0["held"]) == 3 and (c0["step"], c0["sampled_at"]) == (c1["step"], c1["sampled_at"]) \
                == (STEPS, {role: last_sample for role in c0["held"]}), k
            for role, h in c0["held"].items():
                assert torch.equal(h.view(torch.int32), c1["held"][role].view(torch.int32)), f"{k} {role}"
            continue
        assert torch.equal(p0[k].view(torch.int32), p1[k].view(torch.int32)), k
    torch.manual_seed(0)
    fresh = SmallLlama(d=64, layers=1, heads=1, ffn=128)
    assert any(not torch.equal(p0[k], v) for k, v in fresh.state_dict().items())  # and they did train


def test_rank1_gemms_equal_the_golden_model(ranks):
    records = [r for r in ranks[1]["records"] if r["step"] == SAMPLED_STEP]
    assert len(records) == 7 * 3
    sr_checked = 0
    for r in records:
        what = f"rank 1 {r['module']} {r['gemm']} step {r['step']}"
        assert r["seed"] == philox_seed(5, r["module"], r["gemm"], r["step"], 1), what
        amax = {}
        for side in ("a", "b"):
            x = r[side].float().numpy()  # X and dY arrive in BF16: widened exactly
            held = r[f"amax_{side}"]
            amax[side] = None if held is None else float(held.reshape(-1)[0])
            g = fp4sim.quantize(x, RECIPE, f"{r['gemm']}.{side}", amax_ref=amax[side], seed=r["seed"])
            codes, scales, scalars = r[f"q{side}"]
            assert np.array_equal(codes.numpy(), np.asarray(g.codes)), f"{what} {side} codes"
            assert np.array_equal(scales.numpy(), np.asarray(g.scales)), f"{what} {side} scales"
            assert float(scalars[0]) == float(g.tensor_amax), f"{what} {side} amax"
            sr_checked += ft.ops.operand_info(RECIPE, "", f"{r['gemm']}.{side}")["rounding"] != "rne"
        c = fp4sim.gemm(r["a"].float().numpy(), r["b"].float().numpy(), RECIPE, r["gemm"], datapath=r["datapath"], seed=r["seed"],
                        amax_ref_a=amax["a"], amax_ref_b=amax["b"])
        assert np.array_equal(r["c"].numpy().view(np.int32), c.view(np.int32)), what
    assert sr_checked == 7 * 2  # dgrad.a and wgrad.a of each linear: the rank's own bits were checked
