#!/usr/bin/env python3
"""One training step of the trace-A model: BF16, fp4sim.torch (ue5m3) and the UE5M3 paper authors' Triton
path, in one process on one GPU (issue 13, item 5).

    python3 tools/bench_peer_train.py --peer-root .peer [--tokens 16384] [--seq 1024] [--iters 20]
    python3 tools/bench_peer_train.py --peer-root .peer --config d2048      # d 2048, 16 heads, FFN 8192
    python3 tools/bench_peer_train.py --device cpu --tokens 128 --seq 64 --modes bf16,fp4sim --iters 2

--peer-root is a directory holding the authors' package `ue5m3_fp4` (the `src/` of github.com/MrHuff/ue5m3-fp4,
Apache-2.0): it is put on sys.path and imported as an external peer, never part of fp4sim.

The model is tools/small_llama.py (trace A: d 384, 6 layers of 6 heads, SwiGLU 1024, byte vocabulary), built
three times from the same seed, every linear but lm_head converted:
  * bf16: no conversion (nn.Linear under autocast, cuBLAS);
  * fp4sim: fp4sim.torch.convert(model, recipe="ue5m3"), as tools/train.py does;
  * authors: ue5m3_fp4.nn.convert_linear_modules(model, recipe=UE5M3Recipe.proposed(), backend="triton",
    selector=exclude_lm_head) — their probe-matched path: Triton quantizer and K=64 issue-RZ Triton GEMM for
    fprop, dgrad and wgrad. Their layer takes BF16 activations only, so a forward pre-hook casts its input to
    the autocast dtype, which is what autocast does for nn.Linear.
A step is what tools/train.py does: begin_step (each library's tensor-scale clock), forward under
autocast(bfloat16), cross-entropy, backward, AdamW step, zero_grad. The batches (text bytes of the
repository's docs) are on the device before timing. After `--warmup` steps (Triton compilation, and the
step-1 amax sample of both FP4 paths, whose period is 50), `--iters` steps are timed with a CUDA event pair
each (wall clock on CPU); the median and the mean are reported. Output: one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from small_llama import SmallLlama, byte_batches  # noqa: E402
from train import corpus  # noqa: E402

CONFIGS = {"trace-a": dict(d=384, layers=6, heads=6, ffn=1024),
           "d2048": dict(d=2048, layers=6, heads=16, ffn=8192)}
MODES = ("bf16", "fp4sim", "authors")


def load_peer(root: str, prog: str = "bench_peer_train"):
    """The authors' package from `root` (a directory holding ue5m3_fp4/); exit 2 with one line (`prog: ...`)
    if absent."""
    if not os.path.isfile(os.path.join(root, "ue5m3_fp4", "nn", "convert.py")):
        print(f"{prog}: no ue5m3_fp4 package under --peer-root {root!r} (expected "
              f"{os.path.join(root, 'ue5m3_fp4', 'nn', 'convert.py')}): put the src/ of "
              "github.com/MrHuff/ue5m3-fp4 there", file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, os.path.abspath(root))
    import ue5m3_fp4
    from ue5m3_fp4.nn import convert_linear_modules, exclude_lm_head
    from ue5m3_fp4.recipe import UE5M3Recipe
    from ue5m3_fp4.scaling.training import TrainingScaleState
    return ue5m3_fp4, convert_linear_modules, exclude_lm_head, UE5M3Recipe, TrainingScaleState


def cast_input_to_autocast_dtype(module, args):
    """Forward pre-hook: the input as autocast would hand it to nn.Linear (the authors' layer takes BF16)."""
    x = args[0]
    if torch.is_autocast_enabled(x.device.type):
        return (x.to(torch.get_autocast_dtype(x.device.type)),) + tuple(args[1:])
    return None


def build(mode: str, config: dict, device: str, seed: int, peer, peer_backend: str):
    """The model of `mode` and the function that starts a step on it (its tensor-scale clock)."""
    torch.manual_seed(seed)
    model = SmallLlama(d=config["d"], layers=config["layers"], heads=config["heads"],
                       ffn=config["ffn"]).to(device)
    if mode == "bf16":
        return model, (lambda step: None), "cuBLAS" if device.startswith("cuda") else "cpu"
    if mode == "fp4sim":
        import fp4sim.torch as ft
        ft.convert(model, recipe="ue5m3", exclude=["lm_head"], seed=seed)
        return model, (lambda step: ft.begin_step(model, step)), model.layers[0].q_proj.datapath
    _, convert_linear_modules, exclude_lm_head, recipe_class, state_class = peer
    recipe = recipe_class.proposed()
    state = state_class(recipe)
    records = convert_linear_modules(model, recipe=recipe, scale_state=state, backend=peer_backend,
                                     selector=exclude_lm_head)
    for record in records:
        model.get_submodule(record.module_name).register_forward_pre_hook(cast_input_to_autocast_dtype)
    return model, state.begin_step, model.layers[0].q_proj.backend.value


def run(mode: str, args, config: dict, batches) -> dict:
    device = args.device
    cuda = device.startswith("cuda")
    model, begin_step, path = build(mode, config, device, args.seed, args.peer, args.peer_backend)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    def step(n: int):
        begin_step(n)
        x, y = batches[(n - 1) % len(batches)]
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for n in range(1, args.warmup + 1):
        step(n)
    times = []
    if cuda:
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(args.iters)]
        for i, (start, end) in enumerate(events):
            start.record()
            loss = step(args.warmup + 1 + i)
            end.record()
        torch.cuda.synchronize()
        times = [start.elapsed_time(end) for start, end in events]
    else:
        for i in range(args.iters):
            t0 = time.perf_counter()
            loss = step(args.warmup + 1 + i)
            times.append(1e3 * (time.perf_counter() - t0))
    result = {"path": path, "median_ms": statistics.median(times), "mean_ms": statistics.fmean(times),
              "min_ms": min(times), "max_ms": max(times), "last_loss": float(loss.detach())}
    if cuda:
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    del model, opt
    if cuda:
        torch.cuda.empty_cache()
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--peer-root", default=".peer", help="directory holding the authors' ue5m3_fp4 package")
    p.add_argument("--peer-backend", default="triton",
                   help="the authors' linear backend: triton (their probe-matched CUDA path; default) or "
                        "portable (their CPU reference, for a smoke test of the plumbing)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ",".join(MODES))
    p.add_argument("--config", default="trace-a", choices=sorted(CONFIGS))
    p.add_argument("--layers", type=int, default=None, help="override the configuration's layer count")
    p.add_argument("--tokens", type=int, default=16384, help="tokens per step (batch x seq)")
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda")
    args = p.parse_args(argv)

    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        p.error(f"--modes: expected a subset of {','.join(MODES)}, got {args.modes!r}")
    if args.seq < 1 or args.tokens < args.seq or args.tokens % args.seq:
        p.error(f"--tokens {args.tokens} must be a positive multiple of --seq {args.seq}")
    if args.tokens % 64:
        p.error(f"--tokens {args.tokens}: the probe-matched datapath needs a multiple of 64 (wgrad's K)")
    if args.warmup < 1 or args.iters < 1:
        p.error("--warmup and --iters must be >= 1")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu for a smoke test)")
    if "authors" in modes and args.peer_backend == "triton" and not args.device.startswith("cuda"):
        p.error("the authors' triton backend runs on CUDA only; on CPU use --peer-backend portable "
                "or leave authors out of --modes")
    if "fp4sim" in modes and args.device.startswith("cuda"):
        import fp4sim.torch as ft
        if not ft.cuda_available():
            p.error("fp4sim was built without its CUDA kernels: build it with tools/device_torch.sh")
    args.peer = load_peer(args.peer_root) if "authors" in modes else None

    config = dict(CONFIGS[args.config])
    if args.layers is not None:
        config["layers"] = args.layers
    batch = args.tokens // args.seq
    generator = torch.Generator().manual_seed(args.seed)
    stream = byte_batches(corpus(None), batch, args.seq, generator)
    batches = [tuple(t.to(args.device) for t in next(stream)) for _ in range(min(args.warmup + args.iters, 8))]

    results = {mode: run(mode, args, config, batches) for mode in modes}
    ratios = {}
    for a, b in (("fp4sim", "bf16"), ("authors", "bf16"), ("authors", "fp4sim")):
        if a in results and b in results:
            ratios[f"{a}/{b}"] = results[a]["median_ms"] / results[b]["median_ms"]
    report = {
        "bench": "peer_train",
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "model": {"config": args.config, **config, "vocab": 256},
        "tokens_per_step": args.tokens, "batch": batch, "seq": args.seq,
        "warmup": args.warmup, "iters": args.iters,
        "peer": (os.path.dirname(os.path.dirname(args.peer[0].__file__)) if args.peer else None),
        "peer_backend": args.peer_backend if args.peer else None,
        "results": results,
        "ratios_of_median": ratios,
    }
    if "authors/fp4sim" in ratios:
        report["fp4sim_faster_than_authors"] = ratios["authors/fp4sim"] > 1.0
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
