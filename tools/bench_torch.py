#!/usr/bin/env python3
"""fp4sim.torch.Linear forward + backward against BF16 nn.Linear, in one process on one GPU (issue 13, item 5).

    python3 tools/bench_torch.py [--tokens 8192] [--in-features 4096] [--out-features 16384] [--iters 20]

Both layers get the same input (bfloat16, requires grad) and the same output gradient; one iteration is
forward, backward of (y * dy).sum(), and the step counter advanced (fp4sim.torch.begin_step), timed with CUDA
events around `iters` iterations after 3 warm-up ones. The BF16 baseline is nn.Linear with bfloat16
parameters (cuBLAS). Prints milliseconds per iteration and the ratio fp4sim / BF16 for each recipe.
--profile adds, per layer, the GPU time of each kernel and operator per iteration (torch.profiler), the
breakdown that says where the time beyond the three GEMMs goes.
"""
import argparse

import torch

import fp4sim.torch as ft


def time_iterations(layer, x, dy, iters, advance, first=1):
    def one(step):
        if advance:
            ft.begin_step(layer, step)
        y = layer(x)
        y.backward(dy)

    for step in range(first, first + 3):  # fp4sim.torch counts steps from 1
        one(step)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for step in range(first + 3, first + 3 + iters):
        one(step)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def profile_iterations(layer, x, dy, iters, advance):
    """The GPU time per iteration of each kernel, largest first (torch.profiler over `iters` iterations)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        time_iterations(layer, x, dy, iters, advance, first=1000)
    rows = [(e.device_time_total / 1000 / (iters + 3), e.count // (iters + 3), e.key)
            for e in prof.key_averages() if e.device_time_total > 0]
    for ms, count, name in sorted(rows, reverse=True)[:25]:
        print(f"    {ms:8.3f} ms  x{count:<3d} {name[:100]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--in-features", type=int, default=4096)
    parser.add_argument("--out-features", type=int, default=16384)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--recipes", default="ue5m3,nvfp4,mxfp4")
    parser.add_argument("--profile", action="store_true", help="print each layer's GPU time per kernel")
    args = parser.parse_args()
    if not ft.cuda_available():
        raise SystemExit("bench_torch: needs fp4sim built with its CUDA kernels and a GPU")

    torch.manual_seed(0)
    x = torch.randn(args.tokens, args.in_features, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(args.tokens, args.out_features, device="cuda", dtype=torch.bfloat16)
    bf16 = torch.nn.Linear(args.in_features, args.out_features, device="cuda", dtype=torch.bfloat16)
    baseline = time_iterations(bf16, x, dy, args.iters, advance=False)
    print(f"shape: tokens {args.tokens}, {args.in_features} -> {args.out_features}; {torch.cuda.get_device_name()}")
    print(f"{'layer':<28}{'ms/iter':>10}{'vs BF16':>10}")
    print(f"{'nn.Linear bf16 (cuBLAS)':<28}{baseline:>10.3f}{1.0:>10.2f}")
    if args.profile:
        profile_iterations(bf16, x, dy, 5, advance=False)
    for recipe in args.recipes.split(","):
        layer = ft.Linear(args.in_features, args.out_features, device="cuda", recipe=recipe, name="bench")
        ms = time_iterations(layer, x, dy, args.iters, advance=True)
        print(f"{'ft.Linear ' + recipe + ' (' + layer.datapath + ')':<28}{ms:>10.3f}{ms / baseline:>10.2f}")
        if args.profile:
            profile_iterations(layer, x, dy, 5, advance=True)


if __name__ == "__main__":
    main()
