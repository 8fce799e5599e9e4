#!/usr/bin/env python3
"""Train a tiny MLP language model for a few steps with fp4sim.capture and replay the trace with fp4sim.

    PYTHONPATH=build/python python3 tools/capture/example.py --out /tmp/example_trace.h5 [--device cuda] [--bf16]
    ./build/fp4sim replay /tmp/example_trace.h5 --hold previous

Captures every step of the first refresh window (1..D, here D = 4 for brevity) and step 10, the first
64 token rows of x and dy, all nn.Linear layers; each step accumulates gradients over two micro-batches,
so each layer has two call groups per step (docs/trace-format.md).
"""
import argparse
import sys

import torch
from torch import nn

from fp4sim.capture import TraceCapture, window


class TinyLM(nn.Module):
    def __init__(self, vocab=256, d=128, ff=256, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(d), nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d)) for _ in range(layers))
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        h = self.embed(tokens)
        for b in self.blocks:
            h = h + b(h)
        return self.head(h)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="example_trace.h5")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--bf16", action="store_true", help="train under bf16 autocast")
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args(argv)
    torch.manual_seed(1)
    model = TinyLM().to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.randint(0, 256, (16, 65), device=a.device)
    with TraceCapture(model, a.out, steps=window(1, 4) | {10}, rows=64, model_name="tiny-mlp-lm",
                      notes="tools/capture/example.py") as cap:
        for step in range(1, a.steps + 1):
            with cap.step(step, lr=3e-3) as s:
                for micro in data.chunk(2):  # gradient accumulation: two forwards and backwards per step
                    with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.bf16):
                        logits = model(micro[:, :-1])
                        loss = nn.functional.cross_entropy(logits.float().reshape(-1, 256), micro[:, 1:].reshape(-1))
                    (loss / 2).backward()
                s.set(loss=float(loss.item()))
            opt.step()
            opt.zero_grad(set_to_none=True)
    print("wrote %s (steps 1-4 and 10); replay it with: fp4sim replay %s --hold previous" % (a.out, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
