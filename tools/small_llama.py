"""A small Llama-style language model of trace A's shape (d 384, 6 layers, byte vocabulary): RMSNorm,
rotary attention (6 heads of 64, causal SDPA), SwiGLU MLP (1024), untied lm_head, no biases. Used by
tools/train.py and tests/python/test_torch.py; every linear's K (384, 1024, tokens) is a multiple of 64, as
the probe-matched datapath needs."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotary(x, base: float = 10000.0):
    """Rotary position embedding of x [batch, heads, seq, head_dim] (halves rotated)."""
    seq, dim = x.shape[-2], x.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim)
    angles = torch.outer(torch.arange(seq, device=x.device, dtype=torch.float32), inv)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., : dim // 2], x[..., dim // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.attn_norm = RMSNorm(d)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.mlp_norm = RMSNorm(d)
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, h):
        b, s, d = h.shape
        x = self.attn_norm(h)
        q, k, v = (p(x).view(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        a = F.scaled_dot_product_attention(rotary(q), rotary(k), v, is_causal=True)
        h = h + self.o_proj(a.transpose(1, 2).reshape(b, s, d))
        x = self.mlp_norm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class SmallLlama(nn.Module):
    def __init__(self, vocab: int = 256, d: int = 384, layers: int = 6, heads: int = 6, ffn: int = 1024):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.norm(h))


def byte_batches(text: bytes, batch: int, seq: int, generator: torch.Generator):
    """Endless random windows of `text` as (inputs, targets) byte tensors [batch, seq]."""
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    while True:
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=generator)
        window = torch.stack([data[s: s + seq + 1] for s in starts.tolist()])
        yield window[:, :-1], window[:, 1:]
