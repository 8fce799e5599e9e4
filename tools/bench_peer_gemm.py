#!/usr/bin/env python3
"""fp4sim's probe-matched GEMM beside the UE5M3 paper authors' Triton kernel, in one process (issue 13, item 5).

    python3 tools/bench_peer_gemm.py --peer-gemm PATH/src/ue5m3_fp4/backends/triton/gemm.py [--iters 20]

PATH is a checkout of the authors' public code (github.com/MrHuff/ue5m3-fp4, Apache-2.0); its GEMM module is
loaded from that file as an external peer, never copied into fp4sim. For each shape (M, N, K) the ue5m3
recipe's fprop operands are quantized once by fp4sim (x [M, K] activation, w [N, K] weight); then, timed with
CUDA events after warm-ups:
  * cuBLAS BF16: torch.mm of the bfloat16 inputs (the reference for the ratios);
  * fp4sim: fp4sim.torch.gemm_quantized, probe-matched, from the FP4 codes and scales (the expansion of the
    codes to the encoded operands is included);
  * the authors' issue_rz_bf16_gemm on the same encoded operands (payload x block scale, exact in bfloat16,
    materialised beforehand, so not timed), with the 1/1024 snap, then times alpha.
The two FP4 results are also compared bit for bit: both model the same datapath (BF16 products, an
add.rz.f32 every K = 64, the snap, alpha = RN(RN(A_a A_b) RN(1 / RN(RN(6 T_a) RN(6 T_b))))).
"""
import argparse
import importlib.util

import numpy as np
import torch

import fp4sim
import fp4sim.torch as ft
from fp4sim.torch.ops import operand_info



def load_peer(path):
    spec = importlib.util.spec_from_file_location("peer_ue5m3_gemm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.issue_rz_bf16_gemm


def time_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def encoded(q, block_rows, block_cols):
    """payload x block scale of every element, bfloat16 (exact: <= 6 significant bits, in range)."""
    rows, cols = q.shape
    device = q.codes.device
    element = torch.from_numpy(fp4sim.decode(np.arange(16, dtype=np.uint8), "e2m1").astype(np.float32)).to(device)
    scale = torch.from_numpy(fp4sim.decode(np.arange(256, dtype=np.uint8), "ue5m3").astype(np.float32)).to(device)
    codes = q.codes.long()
    nibbles = torch.stack((codes & 0xF, codes >> 4), dim=-1).reshape(rows, -1)[:, :cols]
    block = scale[q.scales.long()]
    block = block.repeat_interleave(block_rows, dim=0)[:rows].repeat_interleave(block_cols, dim=1)[:, :cols]
    values = element[nibbles] * block
    out = values.to(torch.bfloat16)
    assert torch.equal(out.float(), values), "encoded operand not exact in bfloat16"
    return out


def alpha(amax_a, amax_b, target_a, target_b):
    f = np.float32
    denominator = f(f(6.0) * f(target_a)) * f(f(6.0) * f(target_b))
    return f(f(amax_a) * f(amax_b)) * f(f(1.0) / f(denominator))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-gemm", required=True, help="the authors' src/ue5m3_fp4/backends/triton/gemm.py")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--shapes", default="8192x8192x8192,8192x8192x2048,8192x2048x8192",
                        help="MxNxK list: 8192^3, and a 1B model's linears at 8192 tokens (2048 -> 8192, 8192 -> 2048)")
    args = parser.parse_args()
    if not ft.cuda_available():
        raise SystemExit("bench_peer_gemm: needs fp4sim built with its CUDA kernels and a GPU")
    peer = load_peer(args.peer_gemm)
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}; ue5m3 fprop, probe-matched; {args.iters} iterations after 3 warm-ups")
    print(f"{'M x N x K':<18}{'cuBLAS ms':>10}{'fp4sim ms':>11}{'% cuBLAS':>10}{'authors ms':>12}{'% cuBLAS':>10}"
          f"{'fp4sim/authors':>16}{'differing outputs':>19}")
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        qa = ft.quantize(x, "ue5m3", "fprop.a")
        qb = ft.quantize(w, "ue5m3", "fprop.b")
        a_info = operand_info("ue5m3", "", "fprop.a")
        b_info = operand_info("ue5m3", "", "fprop.b")
        ea = encoded(qa, a_info["block_rows"], a_info["block_cols"])
        eb_t = encoded(qb, b_info["block_rows"], b_info["block_cols"]).t().contiguous()  # [K, N]
        scale = float(alpha(qa.scalars[0].item(), qb.scalars[0].item(), a_info["target"], b_info["target"]))

        cublas = time_ms(lambda: torch.mm(x, w.t()), args.iters)
        ours = time_ms(lambda: ft.gemm_quantized(qa, qb, datapath="probe-matched"), args.iters)
        theirs = time_ms(lambda: peer(ea, eb_t, snap_to_1_over_1024=True) * scale, args.iters)

        c_ours = ft.gemm_quantized(qa, qb, datapath="probe-matched")
        c_theirs = peer(ea, eb_t, snap_to_1_over_1024=True) * torch.tensor(scale, dtype=torch.float32, device="cuda")
        differing = int((c_ours.view(torch.int32) != c_theirs.view(torch.int32)).sum().item())
        print(f"{shape:<18}{cublas:>10.3f}{ours:>11.3f}{100 * cublas / ours:>9.1f}%{theirs:>12.3f}"
              f"{100 * cublas / theirs:>9.1f}%{theirs / ours:>15.2f}x{differing:>12} of {m * n}")


if __name__ == "__main__":
    main()
