#!/usr/bin/env python3
"""The per-call cost of fp4sim.torch's operators around the work, on the CPU (issue 21, item 2).

    PYTHONPATH=build/python python3 tools/bench_torch_overhead.py [--calls 2000] [--repeats 5]

Prints, for the fp4sim build on PYTHONPATH:
  * the calls into fp4sim._fp4sim that take a recipe, overrides or an operand by name, per step of a small
    ft.Linear (forward and backward: three GEMMs), counted by wrapping those entry points;
  * microseconds per call of torch.ops.fp4sim.quantize on one 16-element block (the golden model's work is
    negligible there, so this is the Python, dispatcher and binding overhead of one operator call), and of
    the binding alone, by name (_fp4sim.quantize) and by plan (_fp4sim.plan_quantize) when the build has plans;
  * milliseconds per step of that Linear (64 -> 64, 64 tokens, nvfp4).
Times are CPU time of this process (one torch thread; wall time on a shared machine measures the neighbours),
the best of `repeats` runs of `calls` calls. Builds from before plans (operators taking strings) are
measured too, so one command on two builds gives the before / after.
"""
import argparse
import time

import torch

import fp4sim.torch as ft
from fp4sim import _fp4sim

# Every entry point of either build that takes a recipe, overrides or an operand by name (before plans, the
# CUDA launches did too; the Linear here runs on the CPU).
NAMED = ("quantize", "quantized", "gemm", "gemm_quantized", "operand_info", "dequantize_raw", "quantize_plan",
         "gemm_plan")
RECIPE, ROLE = "nvfp4", "fprop.a"


def has_plans() -> bool:
    return hasattr(ft.ops, "quantize_plan")


def best_us(fn, calls, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, time.process_time() - start)
    return best / calls * 1e6


def quantize_op(x):
    if has_plans():
        plan = ft.ops.quantize_plan(RECIPE, "", ROLE)
        return lambda: torch.ops.fp4sim.quantize(x, plan, 0, None, None)
    return lambda: torch.ops.fp4sim.quantize(x, RECIPE, ROLE, "", 0, None, None)


def linear_step(layer, x, dy, step):
    layer.begin_step(step)
    layer(x).backward(dy)


def named_calls_per_step(layer, x, dy):
    counts = {}
    saved = {}
    for name in NAMED:
        if hasattr(_fp4sim, name):
            saved[name] = real = getattr(_fp4sim, name)
            setattr(_fp4sim, name, lambda *a, _r=real, _n=name, **k: counts.__setitem__(_n, counts.get(_n, 0) + 1)
                    or _r(*a, **k))
    try:
        linear_step(layer, x, dy, 2)
    finally:
        for name, real in saved.items():
            setattr(_fp4sim, name, real)
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = ft.Linear(64, 64, recipe=RECIPE, name="bench")
    x, dy = torch.randn(64, 64, requires_grad=True), torch.randn(64, 64)
    linear_step(layer, x, dy, 1)
    counts = named_calls_per_step(layer, x, dy)
    print(f"build: {'plans' if has_plans() else 'names'} ({_fp4sim.__file__})")
    print(f"named binding calls per Linear step: {sum(counts.values())} {dict(sorted(counts.items()))}")
    block = torch.randn(1, 16)
    print(f"torch.ops.fp4sim.quantize, one block: {best_us(quantize_op(block), args.calls, args.repeats):.1f} us/call")
    xn = block.numpy()
    by_name = lambda: _fp4sim.quantize(xn, RECIPE, {}, ROLE, None, 0, None)  # noqa: E731
    print(f"  binding alone, by name:  {best_us(by_name, args.calls, args.repeats):.1f} us/call")
    if has_plans():
        plan = _fp4sim.quantize_plan(RECIPE, {}, ROLE)
        by_plan = lambda: _fp4sim.plan_quantize(plan, xn, None, 0, None)  # noqa: E731
        print(f"  binding alone, by plan:  {best_us(by_plan, args.calls, args.repeats):.1f} us/call")
    steps = iter(range(3, 10**9))
    step_ms = best_us(lambda: linear_step(layer, x, dy, next(steps)), max(args.calls // 100, 5), args.repeats) / 1e3
    print(f"Linear 64->64, 64 tokens, forward + backward: {step_ms:.2f} ms/step")


if __name__ == "__main__":
    main()
