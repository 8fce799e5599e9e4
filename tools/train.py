#!/usr/bin/env python3
"""Train a causal language model under an fp4sim recipe with fp4sim.torch, printing the loss and the step
time: the small Llama-style model (tools/small_llama.py: trace A's shape, d 384, 6 layers, bytes) or, with
--model hf, a Hugging Face transformers model (requirements-torch-test.txt) built from a config (a tiny
Llama by default, or any config.json of a causal LM: its weights are initialised, not downloaded).

    python3 tools/train.py --recipe ue5m3 --steps 300                # on the GPU (CUDA build of fp4sim)
    python3 tools/train.py --recipe bf16 --steps 300                 # the same model in plain BF16
    python3 tools/train.py --recipe ue5m3 --steps 300 --compare-bf16 # both, same start and batches, side by side
    python3 tools/train.py --model hf --hf-config config.json --recipe nvfp4
                                                                     # an HF model (pip install transformers)
    python3 tools/train.py --recipe ue5m3 --trace run.h5 --trace-steps 1-50,200
                                                                     # and capture a trace for fp4sim replay
    torchrun --nproc_per_node 2 tools/train.py --recipe ue5m3 --batch 8
                                                                     # data parallel (DDP): 2 ranks of 8

Under torchrun every rank trains DistributedDataParallel(model) on its own --batch sequences (the global
batch is --batch x ranks) drawn with its own data seed; the process group is NCCL on CUDA, gloo on the CPU,
each rank on GPU LOCAL_RANK. fp4sim.torch keys each rank's stochastic-rounding bits by its rank and
all-reduces the held tensor amaxes (MAX), so the ranks' weights stay identical. Rank 0 prints the loss
averaged over the ranks; --trace writes one trace per rank (run.rank00001.h5).

Text: the repository's docs/*.md and README.md as bytes (or --text FILE; an HF config's vocabulary must
have the 256 bytes). Every linear but lm_head is converted; under autocast(bfloat16). Tokens per step
(batch x seq) must be a multiple of 64 for the probe-matched datapath (the ue5m3 recipes), and so must an
HF config's hidden and intermediate sizes. --compare-bf16 trains the same initial model on the same
batches a second time in plain BF16 and prints the two loss curves and step times together."""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from small_llama import SmallLlama, byte_batches  # noqa: E402


def steps_of(text: str) -> set:
    """"1-50,200" -> {1, ..., 50, 200}."""
    out = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def corpus(path: str | None) -> bytes:
    if path:
        return open(path, "rb").read()
    root = os.path.dirname(HERE)
    files = sorted(glob.glob(os.path.join(root, "docs", "*.md"))) + [os.path.join(root, "README.md")]
    return b"\n".join(open(f, "rb").read() for f in files)


# The HF model of --model hf without --hf-config: a Llama as small as small_llama's tiny test shapes.
TINY_LLAMA = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096)


def build_model(a) -> torch.nn.Module:
    """The model of the command line, initialised from --seed (the same on every rank and in every run)."""
    torch.manual_seed(a.seed)
    if a.model == "small-llama":
        return SmallLlama(d=a.width, layers=a.layers, heads=a.heads, ffn=a.ffn).to(a.device)
    import json

    from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig
    if a.hf_config:
        spec = json.load(open(a.hf_config))
        config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    else:
        config = LlamaConfig(**TINY_LLAMA)
    hf = AutoModelForCausalLM.from_config(config).to(a.device)

    class Logits(torch.nn.Module):  # the logits alone, as SmallLlama returns them
        def __init__(self):
            super().__init__()
            self.hf = hf

        def forward(self, tokens):
            return self.hf(input_ids=tokens).logits

    return Logits()


def train(a, recipe: str, rank: int, world: int, say, trace) -> list:
    """Trains the command line's model from its initial weights under `recipe` (bf16: not converted), printing
    every --every steps; returns (step, loss averaged over the ranks, ms per step) of each printed step."""
    model = build_model(a)  # the same initial weights on every rank and in every run
    if recipe != "bf16":
        import fp4sim.torch as ft
        ft.convert(model, recipe=recipe, exclude=["lm_head"], datapath=a.datapath, period=a.period, seed=a.seed,
                   backward=a.backward)
    run = model
    if world > 1:
        run = torch.nn.parallel.DistributedDataParallel(model, device_ids=[a.device] if a.device.startswith("cuda")
                                                        else None)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    data_seed = a.seed + 1_000_003 * rank  # each rank its own windows; rank 0 those of a one-process run
    batches = byte_batches(corpus(a.text), a.batch, a.seq, torch.Generator().manual_seed(data_seed))
    cap = None
    if trace:
        from fp4sim.capture import TraceCapture
        # One file per rank under torch.distributed (fp4sim.capture names it run.rank00001.h5). The quantized
        # operands are recorded whole (every row), so they are left out here: a few steps' worth is what
        # fp4sim verify needs (fp4_operands=True for those).
        cap = TraceCapture(model, trace, steps=steps_of(a.trace_steps), rows=128, model_name=a.model,
                           notes=f"tools/train.py --recipe {recipe}" + (f", rank {rank} of {world}" if world > 1
                                                                        else ""), fp4_operands=False)

    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    say(f"recipe {recipe}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
        f"{a.batch}x{a.seq} tokens per step" + (f" on each of {world} ranks" if world > 1 else "") +
        f" on {a.device.split(':')[0]}")
    curve = []
    sync()
    t0 = time.perf_counter()
    for step in range(1, a.steps + 1):
        if recipe != "bf16":
            ft.begin_step(model, step)
        x, y = next(batches)
        x, y = x.to(a.device), y.to(a.device)
        with cap.step(step) if cap is not None else contextlib.nullcontext() as scope:
            with torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16):
                logits = run(x)
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
            loss.backward()
            if scope is not None and cap.wants(step):
                scope.set(loss=float(loss))
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % a.every == 0 or step == a.steps:
            sync()
            t1 = time.perf_counter()
            n = a.every if step % a.every == 0 else step % a.every
            shown = loss.detach().clone()
            if world > 1:
                torch.distributed.all_reduce(shown)
                shown /= world
            curve.append((step, shown.item(), 1e3 * (t1 - t0) / n))
            say(f"step {step:5d}  loss {curve[-1][1]:.4f}  {curve[-1][2]:.1f} ms/step", flush=True)
            t0 = time.perf_counter()
    if cap is not None:
        cap.close()
        print(f"wrote {cap.path}; replay it with: fp4sim replay {cap.path}")
    return curve


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", default="ue5m3",
                   help="an fp4sim recipe (a preset, a stack profile or a spec PRESET:KEY=VALUE,...), or bf16 for no "
                        "conversion")
    p.add_argument("--backward", choices=["quantized", "dequantized", "high_precision"], default=None,
                   help="TE's backward_override (default: quantized; high_precision for a row-scaled recipe)")
    p.add_argument("--compare-bf16", action="store_true", help="then train the same start in BF16, side by side")
    p.add_argument("--model", choices=["small-llama", "hf"], default="small-llama")
    p.add_argument("--hf-config", default=None, help="--model hf: a config.json (default: a tiny Llama)")
    p.add_argument("--datapath", default=None, help="GEMM datapath (default: the recipe's if the GPU has it)")
    p.add_argument("--period", type=int, default=None, help="sample-and-hold period D (default: the recipe's)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16, help="sequences per step (per rank under torchrun)")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--width", type=int, default=384, help="small-llama's width d (the trace's: 384)")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--ffn", type=int, default=1024, help="SwiGLU hidden width")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--text", default=None, help="training text (default: the repository's docs)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--every", type=int, default=10, help="print every N steps")
    p.add_argument("--trace", default=None, help="write an fp4sim trace (fp4sim.capture) here")
    p.add_argument("--trace-steps", default="1-50", help="steps to capture, e.g. 1-50,200")
    a = p.parse_args(argv)

    rank, world = 0, 1
    if "LOCAL_RANK" in os.environ:  # started by torchrun: one process per rank
        if a.device.startswith("cuda"):
            a.device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
            torch.cuda.set_device(a.device)
        torch.distributed.init_process_group("nccl" if a.device.startswith("cuda") else "gloo")
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    say = print if rank == 0 else (lambda *args, **kwargs: None)

    curves = {a.recipe: train(a, a.recipe, rank, world, say, a.trace)}
    if a.compare_bf16 and a.recipe != "bf16":
        curves["bf16"] = train(a, "bf16", rank, world, say, None)
        say(f"{'step':>5}  {'loss ' + a.recipe:>14}  {'loss bf16':>10}  {'ms/step':>9}  {'bf16':>7}")
        for (step, loss, ms), (_, loss16, ms16) in zip(*curves.values()):
            say(f"{step:5d}  {loss:14.4f}  {loss16:10.4f}  {ms:9.1f}  {ms16:7.1f}")
        (_, last, _), (_, last16, _) = curves[a.recipe][-1], curves["bf16"][-1]
        say(f"last loss {a.recipe} {last:.4f}, bf16 {last16:.4f} ({last - last16:+.4f})")
    if world > 1:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
