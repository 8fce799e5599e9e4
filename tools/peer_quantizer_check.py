#!/usr/bin/env python3
"""The UE5M3 paper authors' Triton quantizer against fp4sim's CPU golden model, bit for bit, on a machine
without a GPU (issue 13, item 5: the peer in tools/bench_peer_train.py and tools/bench_peer_gemm.py).

    TRITON_INTERPRET=1 python3 tools/peer_quantizer_check.py --peer-root .peer

--peer-root holds the authors' package ue5m3_fp4 (the src/ of github.com/MrHuff/ue5m3-fp4, Apache-2.0), imported
as an external peer. Their kernel `_fake_quantize_operands_kernel` runs in Triton's interpreter on CPU tensors,
with one substitution: the interpreter has no CUDA libdevice, so `div_rn` and `mul_rn` become float32 `/` and
`*`, which round to nearest as those do (its tl.log2 is NumPy's, exact where the GPU's lg2.approx may not be).
Each operand the authors' linear quantizes is compared in the encoded domain (E2M1 payload x UE5M3 block
scale, as their GEMM consumes it) with fp4sim.torch.quantize of the same role, on random bfloat16 data at
several magnitudes, with the current amax and with a held amax below it (saturating blocks):
  fprop.a  X, 1x16 blocks, RNE            fprop.b  W, 16x16 tiles, RNE
  dgrad.a  dY, 1x16 blocks, SR            wgrad.a  dYᵀ, 1x16 blocks, SR      wgrad.b  Xᵀ, 1x16 blocks, RNE
SR takes the same integers on both sides (torch.randint(0, 256), one per element, as the authors draw them).
Prints one line per case; exit 1 if any element differs, 2 if the peer or fp4sim is missing.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402,F401  (the interpreter wants tl in the globals of jit functions)
from triton.language.extra.cuda import libdevice  # noqa: E402


@triton.jit
def div_rn(x, y):
    return x / y


@triton.jit
def mul_rn(x, y):
    return x * y


def load_peer(root: str):
    if not os.path.isfile(os.path.join(root, "ue5m3_fp4", "backends", "triton", "quantization.py")):
        print(f"peer_quantizer_check: no ue5m3_fp4 package under --peer-root {root!r}", file=sys.stderr)
        sys.exit(2)
    if os.environ["TRITON_INTERPRET"] != "1":
        print("peer_quantizer_check: needs TRITON_INTERPRET=1 (it runs the kernel on CPU)", file=sys.stderr)
        sys.exit(2)
    libdevice.div_rn = div_rn
    libdevice.mul_rn = mul_rn
    sys.path.insert(0, os.path.abspath(root))
    from ue5m3_fp4.backends.triton import quantization
    return quantization


def authors_encoded(quantization, a, b, *, amax_a, amax_b, bits_a, two_dimensional_b):
    """The authors' kernel on logical GEMM operands A [M, K] and B [K, N]: payload x block scale."""
    m, k = a.shape
    n = b.shape[1]
    out_a, out_b = torch.empty_like(a), torch.empty_like(b)
    unused = torch.zeros(1, dtype=torch.int32)
    grid = (max(triton.cdiv(m, 64), triton.cdiv(n, 64)), triton.cdiv(k, 16))
    quantization._fake_quantize_operands_kernel[grid](
        a, out_a, b, out_b, amax_a.reshape(1), amax_b.reshape(1), bits_a if bits_a is not None else unused, unused,
        m, n, k, a.stride(0), a.stride(1), out_a.stride(0), out_a.stride(1), b.stride(0), b.stride(1),
        out_b.stride(0), out_b.stride(1), 448.0, 448.0,
        rounding_a=quantization._rounding_constant(quantization.RoundingMode.STOCHASTIC_8BIT_MIDPOINT
                                                   if bits_a is not None else quantization.RoundingMode.TIES_TO_EVEN),
        rounding_b=quantization._rounding_constant(quantization.RoundingMode.TIES_TO_EVEN),
        stochastic_a=bits_a is not None, stochastic_b=False, two_dimensional_b=two_dimensional_b,
        decoded_output=False, BLOCK_M=64, BLOCK_N=64, BLOCK_K=16)
    return out_a, out_b


class Encoder:
    """fp4sim.torch.quantize of one role, expanded to payload x block scale (float32, exact)."""

    def __init__(self):
        import fp4sim
        import fp4sim.torch as ft
        from fp4sim.torch.ops import operand_info
        self.ft, self.operand_info = ft, operand_info
        self.element = torch.from_numpy(fp4sim.decode(np.arange(16, dtype=np.uint8), "e2m1").astype(np.float32))
        self.scale = torch.from_numpy(fp4sim.decode(np.arange(256, dtype=np.uint8), "ue5m3").astype(np.float32))

    def __call__(self, x, role, amax, bits=None):
        q = self.ft.quantize(x, "ue5m3", role, amax=amax.reshape(1), rbits=bits)
        info = self.operand_info("ue5m3", "", role)
        rows, cols = q.shape
        codes = q.codes.long()
        nibbles = torch.stack((codes & 0xF, codes >> 4), dim=-1).reshape(rows, -1)[:, :cols]
        block = self.scale[q.scales.long()].repeat_interleave(info["block_rows"], 0)[:rows]
        block = block.repeat_interleave(info["block_cols"], 1)[:, :cols]
        return self.element[nibbles] * block


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--peer-root", default=".peer")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--in-features", type=int, default=128)
    p.add_argument("--out-features", type=int, default=192)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if min(a.tokens, a.in_features, a.out_features) < 64 or (a.tokens | a.in_features | a.out_features) % 64:
        p.error("--tokens, --in-features and --out-features must be positive multiples of 64")
    quantization = load_peer(a.peer_root)
    try:
        encode = Encoder()
    except ImportError as e:
        print(f"peer_quantizer_check: fp4sim.torch is not importable ({e})", file=sys.stderr)
        return 2

    g = torch.Generator().manual_seed(a.seed)
    total = differing = 0
    for magnitude in (1.0, 1e-3, 60.0):
        x = (torch.randn(a.tokens, a.in_features, generator=g) * magnitude).bfloat16().float()
        w = (torch.randn(a.out_features, a.in_features, generator=g) * 0.02).bfloat16().float()
        dy = (torch.randn(a.tokens, a.out_features, generator=g) * magnitude * 1e-2).bfloat16().float()
        for held in (1.0, 0.5):  # the current amax, then a held one at half of it (blocks saturate)
            ax, aw, ady = (t.abs().amax() * held for t in (x, w, dy))
            bits = torch.randint(0, 256, dy.shape, dtype=torch.int32, generator=g)
            bits_t = torch.randint(0, 256, (a.out_features, a.tokens), dtype=torch.int32, generator=g)
            # fprop: A = X, B = Wᵀ [in, out] with 16x16 tiles (their forward passes W transposed)
            fa, fb = authors_encoded(quantization, x, w.t().contiguous(), amax_a=ax, amax_b=aw, bits_a=None,
                                     two_dimensional_b=True)
            # dgrad: A = dY (SR), B = W [out, in]; wgrad: A = dYᵀ (SR), B = X [tokens, in]
            da, _ = authors_encoded(quantization, dy, w.contiguous(), amax_a=ady, amax_b=aw, bits_a=bits,
                                    two_dimensional_b=True)
            wa, wb = authors_encoded(quantization, dy.t().contiguous(), x, amax_a=ady, amax_b=ax,
                                     bits_a=bits_t, two_dimensional_b=False)
            cases = [("fprop.a", fa, encode(x, "fprop.a", ax)),
                     ("fprop.b", fb, encode(w, "fprop.b", aw).t()),
                     ("dgrad.a", da, encode(dy, "dgrad.a", ady, bits)),
                     ("wgrad.a", wa, encode(dy.t().contiguous(), "wgrad.a", ady, bits_t)),
                     ("wgrad.b", wb, encode(x.t().contiguous(), "wgrad.b", ax).t())]
            for role, theirs, ours in cases:
                bad = int((theirs != ours).sum())
                total += theirs.numel()
                differing += bad
                print(f"magnitude {magnitude:g}, amax x{held:g}: {role} {bad} of {theirs.numel()} differ")
    print(f"peer_quantizer_check: {differing} of {total} elements differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
