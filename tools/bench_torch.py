#!/usr/bin/env python3
"""fp4sim.torch.Linear forward + backward against BF16 nn.Linear, in one process on one GPU (issue 13, item 5).

    python3 tools/bench_torch.py [--tokens 8192] [--in-features 4096] [--out-features 16384] [--iters 20]

Both layers get the same input (bfloat16, requires grad) and the same output gradient; one iteration is
forward, backward of (y * dy).sum(), and the step counter advanced (fp4sim.torch.begin_step), timed with CUDA
events around `iters` iterations after 3 warm-up ones. The BF16 baseline is nn.Linear with bfloat16
parameters (cuBLAS). Prints milliseconds per iteration and the ratio fp4sim / BF16 for each recipe.
"""
import argparse

import torch

import fp4sim.torch as ft


def time_iterations(layer, x, dy, iters, advance):
    def one(step):
        if advance:
            ft.begin_step(layer, step)
        y = layer(x)
        y.backward(dy)

    for step in range(1, 4):  # fp4sim.torch counts steps from 1
        one(step)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for step in range(4, 4 + iters):
        one(step)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--in-features", type=int, default=4096)
    parser.add_argument("--out-features", type=int, default=16384)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--recipes", default="ue5m3,nvfp4,mxfp4")
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
    for recipe in args.recipes.split(","):
        layer = ft.Linear(args.in_features, args.out_features, device="cuda", recipe=recipe, name="bench")
        ms = time_iterations(layer, x, dy, args.iters, advance=True)
        print(f"{'ft.Linear ' + recipe + ' (' + layer.datapath + ')':<28}{ms:>10.3f}{ms / baseline:>10.2f}")


if __name__ == "__main__":
    main()
