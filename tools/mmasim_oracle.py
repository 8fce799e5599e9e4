#!/usr/bin/env python3
"""MMA-Sim as an external oracle for fp4sim's tensor-core rows (issue 25; docs/datapaths.md §8.2).

MMA-Sim (microsoft/MMA-Sim, arXiv 2511.10909; Python + torch) is not part of fp4sim: check it out into the
git-ignored tools/.oracles/MMA-Sim and run this script with a Python that has torch (docs/datapaths.md §8.2
says how). For every row both models have, random and adversarial cases (fp4sim's H200 corner families,
tests/data/tensorcore_corners) go through MMA-Sim's own instruction classes, one case per call; MMA-Sim's
outputs are written as a measurement folder in the vendored format and `fp4sim datapath identify --json`
says which lines the row does not reproduce. Each difference is then attributed to one documented rule by
rerunning MMA-Sim with fp4sim's rule patched in, rule after rule (O8 zeros out of E_max, O3 the E_max
floor, O9 the sign of an underflowing zero, O11 a subnormal fp16 C at its leading bit; on the AMD rows A1,
the bits of a NaN); a line that still differs with every rule applied is unexplained. Exit 1 when any line
is unexplained.

  .venv-oracle/bin/python tools/mmasim_oracle.py [--cases N] [--rows sm90-bf16,...] [--fp4sim build/fp4sim]
"""
import argparse
import gzip
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORNERS = ROOT / "tests" / "data" / "tensorcore_corners" / "H200"

# Where each rule came from (docs/datapaths.md §6.3): what decided it for the Hopper rows, and that it is an
# assumption (fp4sim's choice, the same as on Hopper) everywhere else.
RULES = {
    "O8 zeros out of E_max": "H200 probe 11 and §7.4 (MMA-Sim gives a zero operand or C exponent -126)",
    "O3 E_max floor": "H200 probe 9d and §7.4 floor-ties; Khattak-Mikaitis min_exp_limit (MMA-Sim has none)",
    "O9 signed underflow": "fp4sim's IEEE assumption on non-Hopper rows (MMA-Sim and the H200 give +0)",
    "O11 subnormal C at its leading bit": "fp4sim's assumption on non-Hopper f16 accumulators (MMA-Sim and the H200: -14)",
    "A1 canonical NaN": "fp4sim's assumption on the CDNA3 rows, 0x7FC00000 (MMA-Sim's AMD NaN handling is a TODO: "
                        "its NaN bits are the host's float64 arithmetic)",
}


# ---------------------------------------------------------------------------------------------------
# The shared rows: fp4sim row, MMA-Sim class and arguments, measurement folder name, and the fp4sim
# rules MMA-Sim lacks on that row (E_max floor, whether zero results keep the sign, C at its leading bit).
class Row:
    def __init__(self, row, cls, arch, qualifier, folder, floor, signed_zero=False, c_leading=False, corners=None,
                 scale=None, amd=False):
        self.row, self.cls, self.arch, self.qualifier, self.folder = row, cls, arch, qualifier, folder
        self.floor, self.signed_zero, self.c_leading, self.corners, self.scale = (floor, signed_zero, c_leading,
                                                                                  corners, scale)
        self.amd = amd  # fp4sim's CDNA3 rows follow MMA-Sim's own zero, floor and sign rules: only A1 applies
        tokens = folder.split("_")
        elements = [t for t in tokens[1:-1] if t in FORMATS or t == "tf32"]
        self.a_fmt, self.b_fmt, self.acc = elements[0], elements[-1], tokens[-1]


def shared_rows():
    rows = []
    add = rows.append
    add(Row("sm70", "mma", "Volta", "m8n8k4.f32.f16.f16.f32", "mma-volta-k4_f16_f32", None, signed_zero=True))
    for t, corners in (("bf16", "mma_sync_bf16_f32"), ("f16", "mma_sync_f16_f32")):
        add(Row("sm80", "mma", "Ampere", f"m16n8k16.f32.{t}.{t}.f32", f"mma-ampere-k16_{t}_f32", -132,
                signed_zero=True, corners=corners))
    add(Row("sm80-tf32", "mma", "Ampere", "m16n8k8.f32.tf32.tf32.f32", "mma-ampere-k8_tf32_f32", -132,
            signed_zero=True, corners="mma_sync_tf32_f32"))
    for t, corners in (("bf16", "wgmma_bf16_f32"), ("f16", "wgmma_f16_f32")):
        add(Row("sm90-bf16", "wgmma", "Hopper", f"m64n8k16.f32.{t}.{t}", f"wgmma-k16_{t}_f32", -133, corners=corners))
    add(Row("sm90-f16acc", "wgmma", "Hopper", "m64n8k16.f16.f16.f16", "wgmma-k16_f16_f16", -21, corners="wgmma_f16_f16"))
    add(Row("sm90-tf32", "wgmma", "Hopper", "m64n8k8.f32.tf32.tf32", "wgmma-k8_tf32_f32", -133, corners="wgmma_tf32_f32"))
    for a, b in (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")):
        add(Row("sm90-fp8", "wgmma", "Hopper", f"m64n8k32.f32.{a}.{b}", f"wgmma-k32_{a}_{b}_f32", -133,
                corners=f"wgmma_{a}_{b}_f32"))
        add(Row("sm90-fp8-f16acc", "wgmma", "Hopper", f"m64n8k32.f16.{a}.{b}", f"wgmma-k32_{a}_{b}_f16", -21,
                corners=f"wgmma_{a}_{b}_f16"))
    for t, corners in (("bf16", "wgmma_bf16_f32"), ("f16", "wgmma_f16_f32")):
        add(Row("sm100-f16", "tcgen05mma", "Blackwell", f"m64n8k16.f32.{t}.{t}", f"tcgen05-kind-f16_{t}_f32", -133,
                signed_zero=True, corners=corners))
    add(Row("sm100-f16acc", "tcgen05mma", "Blackwell", "m64n8k16.f16.f16.f16", "tcgen05-kind-f16_f16_f16", -21,
            signed_zero=True, c_leading=True, corners="wgmma_f16_f16"))
    add(Row("sm100-tf32", "tcgen05mma", "Blackwell", "m64n8k8.f32.tf32.tf32", "tcgen05-kind-tf32_tf32_f32", -133,
            signed_zero=True, corners="wgmma_tf32_f32"))
    for a, b in (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")):
        add(Row("sm100-f8f6f4", "tcgen05mma", "Blackwell", f"m64n8k32.f32.{a}.{b}", f"tcgen05-kind-f8f6f4_{a}_{b}_f32",
                -133, signed_zero=True, corners=f"wgmma_{a}_{b}_f32"))
        add(Row("sm100-f8f6f4-f16acc", "tcgen05mma", "Blackwell", f"m64n8k32.f16.{a}.{b}",
                f"tcgen05-kind-f8f6f4_{a}_{b}_f16", -21, signed_zero=True, c_leading=True, corners=f"wgmma_{a}_{b}_f16"))
    for a, b in (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")):
        add(Row("sm100-mxf8f6f4", "tcgen05mma_block_scale", "Blackwell", f"m128n8k32.block32.f32.{a}.{b}.ue8m0",
                f"tcgen05-mxf8f6f4_{a}_{b}_ue8m0_block32_f32", -133, signed_zero=True, scale=("ue8m0", 32)))
    for scale, block in (("ue8m0", 32), ("ue8m0", 16), ("ue4m3", 16)):
        add(Row("sm100-mxf4nvf4", "tcgen05mma_block_scale", "Blackwell", f"m128n8k64.block{block}.f32.e2m1.e2m1.{scale}",
                f"tcgen05-mxf4nvf4_e2m1_{scale}_block{block}_f32", None, signed_zero=True, scale=(scale, block)))
    for t, corners in (("bf16", "mma_sync_bf16_f32"), ("f16", "mma_sync_f16_f32")):
        add(Row("cdna3-bf16", "mfma", "CDNA3", f"f32_16x16x16_{t}", f"mfma-cdna3-k16_{t}_f32", None, corners=corners,
                amd=True))
    add(Row("cdna3-xf32", "mfma", "CDNA3", "f32_16x16x8_xf32", "mfma-cdna3-k8_tf32_f32", None,
            corners="mma_sync_tf32_f32", amd=True))
    for a, b in (("fp8", "fp8"), ("bf8", "bf8"), ("fp8", "bf8"), ("bf8", "fp8")):
        add(Row("cdna3-fp8", "mfma", "CDNA3", f"f32_16x16x32_{a}_{b}", f"mfma-cdna3-k32_{a}_{b}_f32", None, amd=True))
    return rows


# ---------------------------------------------------------------------------------------------------
# Cases: element values as FP32 bit patterns (exact in the format; tf32: the 32-bit register), C as FP32 bits.
FORMATS = {  # name: (exponent bits, mantissa bits, ml_dtypes-free decoding by bits)
    "bf16": (8, 7), "f16": (5, 10), "e4m3": (4, 3), "e5m2": (5, 2), "e2m1": (2, 1),
    "fp8": (4, 3), "bf8": (5, 2),  # AMD CDNA3's FNUZ types: bias one above, no Inf, the -0 code 0x80 a NaN
}
FNUZ = ("fp8", "bf8")
NO_INF = ("e4m3", "e2m1") + FNUZ  # the top exponent field holds numbers


def decode(fmt, code):
    """A code of `fmt` as float (IEEE-like; e4m3fn without Inf, its 0x7F/0xFF NaN; FNUZ)."""
    e, m = FORMATS[fmt]
    bias = (1 << (e - 1)) - 1 + (fmt in FNUZ)
    sign = -1.0 if code >> (e + m) & 1 else 1.0
    field, frac = code >> m & ((1 << e) - 1), code & ((1 << m) - 1)
    if (fmt == "e4m3" and field == 15 and frac == 7) or (fmt in FNUZ and code == 1 << (e + m)):
        return float("nan")
    if fmt not in NO_INF and field == (1 << e) - 1:
        return sign * float("inf") if frac == 0 else float("nan")
    if field == 0:
        return sign * frac * 2.0 ** (1 - bias - m)
    return sign * (1 + frac / (1 << m)) * 2.0 ** (field - bias)


def f32_bits(x):
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def random_code(rng, fmt, centre, spread):
    e, m = FORMATS[fmt]
    top = (1 << e) - 1
    u = rng.random()
    if u < 0.06:
        field = 0
        frac = 0
    elif u < 0.09:
        field, frac = 0, int(rng.integers(1, 1 << m))
    elif u < 0.095 and fmt not in ("e2m1",) + FNUZ:
        field, frac = top, int(rng.integers(0, 1 << m))
    else:
        field = int(np.clip(centre + rng.integers(-spread, spread + 1), 1, top if fmt in NO_INF else top - 1))
        frac = int(rng.integers(0, 1 << m))
    sign = int(rng.integers(0, 2)) if field or frac or fmt not in FNUZ else 0  # an FNUZ -0 would be its NaN
    return sign << (e + m) | field << m | frac


def random_tf32_register(rng, centre, spread):
    u = rng.random()
    if u < 0.06:
        return int(rng.integers(0, 2)) << 31
    if u < 0.08:  # NaN or Inf with payload bits above and below the tf32 cut
        return int(rng.integers(0, 2)) << 31 | 0x7F800000 | int(rng.integers(0, 1 << 23))
    if u < 0.11:
        return int(rng.integers(0, 2)) << 31 | int(rng.integers(1, 1 << 23))
    field = int(np.clip(centre + rng.integers(-spread, spread + 1), 1, 254))
    return int(rng.integers(0, 2)) << 31 | field << 23 | int(rng.integers(0, 1 << 23))


def element_tokens(rng, fmt, k, centre, spread):
    if fmt == "tf32":
        return [random_tf32_register(rng, centre, spread) for _ in range(k)]
    return [f32_bits(decode(fmt, random_code(rng, fmt, centre, spread))) for _ in range(k)]


def random_cases(rng, row, n, k):
    """Random cases with a per-case exponent centre and spread, zeros, subnormals, specials, cancelling pairs."""
    a_fmt, b_fmt, acc = row.a_fmt, row.b_fmt, row.acc
    cases = []
    for _ in range(n):
        e_a, _ = FORMATS.get(a_fmt, (8, 0))
        bias = (1 << (e_a - 1)) - 1 if a_fmt != "tf32" else 127
        centre = int(rng.integers(1, 2 * bias + 1)) if rng.random() < 0.5 else bias + int(rng.integers(-3, 4))
        spread = int(rng.choice([1, 3, 8, 30]))
        a = element_tokens(rng, a_fmt, k, centre, spread)
        b = element_tokens(rng, b_fmt, k, (bias if b_fmt == a_fmt else (1 << (FORMATS.get(b_fmt, (8, 0))[0] - 1)) - 1), spread)
        if rng.random() < 0.3 and k >= 2:  # exact cancellation of the first product
            j = int(rng.integers(1, k))
            a[j], b[j] = a[0] ^ 0x80000000, b[0]
        if acc == "f16":
            c = f32_bits(decode("f16", random_code(rng, "f16", 15 + int(rng.integers(-14, 15)), 6)))
        else:
            u = rng.random()
            c = 0 if u < 0.15 else (int(rng.integers(0, 2)) << 31 | int(rng.integers(1, 1 << 23))) if u < 0.2 else \
                int(rng.integers(0, 2)) << 31 | int(np.clip(127 + 2 * (centre - bias) + rng.integers(-30, 31), 1, 254)) << 23 \
                | int(rng.integers(0, 1 << 23))
        cases.append((a, b, c))
    return cases


def random_mx_scaled(rng, row, n):
    """kind::mxf8f6f4: random cases of the row's element formats with one UE8M0 pair per 32 elements over the
    whole scale range (0xFF, a NaN, now and then), C as for the other f32 rows."""
    cases = []
    for a, b, c in random_cases(rng, row, n, 32):
        draw = lambda: 0xFF if rng.random() < 0.01 else int(np.clip(127 + rng.integers(-140, 141), 0, 254))
        cases.append((a, b, c, [draw()], [draw()]))
    return cases


def random_block_scaled(rng, row, n):
    """E2M1 elements and scale codes over the whole scale range; in 40 % of the cases a scale block's sub-blocks sum
    to exactly zero under the largest scales while the others sit far below (issue 25 item 5), in 30 % C = 0."""
    scale, block = row.scale
    cases = []
    for _ in range(n):
        a = [f32_bits(decode("e2m1", int(rng.integers(0, 16)))) for _ in range(64)]
        b = [f32_bits(decode("e2m1", int(rng.integers(0, 16)))) for _ in range(64)]
        blocks = 64 // block
        if scale == "ue8m0":
            centre = 127 + int(rng.integers(-60, 61))
            sa = [0xFF if rng.random() < 0.003 else int(np.clip(centre + rng.integers(-30, 31), 0, 254)) for _ in range(blocks)]
            sb = [0xFF if rng.random() < 0.003 else int(np.clip(centre + rng.integers(-30, 31), 0, 254)) for _ in range(blocks)]
            top = 254
        else:  # the sign bit set now and then (ignored), 0x7F a NaN
            draw = lambda: (0x7F if rng.random() < 0.003 else int(rng.integers(0, 0x7F))) | (0x80 if rng.random() < 0.05 else 0)
            sa = [draw() for _ in range(blocks)]
            sb = [draw() for _ in range(blocks)]
            top = 0x7E
        if rng.random() < 0.4:
            s = block * int(rng.integers(0, blocks))  # a whole scale block of zero sub-block sums
            for i in range(s, s + block):
                a[i], b[i] = f32_bits(1.0), f32_bits(1.0 if i % 2 else -1.0)
            sa[s // block] = sb[s // block] = top - int(rng.integers(0, 8))
        u = rng.random()
        c = 0 if u < 0.3 else int(rng.integers(0, 2)) << 31 | int(rng.integers(60, 200)) << 23 | int(rng.integers(0, 1 << 23))
        cases.append((a, b, c, sa, sb))
    return cases


def corner_cases(folder, k):
    """fp4sim's H200 corner inputs (a, b, c) for an instruction of the same formats and K."""
    d = CORNERS / folder
    lines = {}
    for name in "abc":
        with gzip.open(d / f"{name}.txt.gz", "rt") as f:
            lines[name] = f.read().split("\n")[:-1]
    out = []
    for a, b, c in zip(lines["a"], lines["b"], lines["c"]):
        av, bv = [int(t, 16) for t in a.split()], [int(t, 16) for t in b.split()]
        if len(av) == k:
            out.append((av, bv, int(c, 2)))
    return out


# ---------------------------------------------------------------------------------------------------
# MMA-Sim, with fp4sim's rules patched in one after the other.
class Oracle:
    def __init__(self, mmasim_dir):
        sys.path.insert(0, str(mmasim_dir))
        import torch
        from mmasim.simulator import amd, arithmetic, nv_ptx

        self.torch, self.arithmetic, self.nv_ptx, self.amd = torch, arithmetic, nv_ptx, amd
        self.originals = (arithmetic.fused_sum, arithmetic.fused_dot_add, nv_ptx.nv_fused_dot_add,
                          nv_ptx.nv_fused_dot_add_with_block_scale)
        self.instances = {}
        self.canonical_nan = False

    def patch(self, row, active):
        """MMA-Sim with fp4sim's rules `active` (indices into RULES) for `row`; the empty set: MMA-Sim as it is."""
        torch, ar, ptx = self.torch, self.arithmetic, self.nv_ptx
        fused_sum, fused_dot_add, nv_fused_dot_add, nv_block_scale = self.originals
        ar.fused_sum, ar.fused_dot_add, ptx.nv_fused_dot_add, ptx.nv_fused_dot_add_with_block_scale = self.originals
        self.canonical_nan = 4 in active
        if 0 in active or 1 in active:
            floor = row.floor if 1 in active else None
            zeros_out = 0 in active

            def patched_sum(significands, exponents, n_fractional_bits):
                pairs = [(s, e) for s, e in zip(significands, exponents) if s != 0 or not zeros_out]
                # fused_sum aligns on the largest exponent it is given: a zero addend at the floor raises it.
                if floor is not None:
                    pairs.append((0.0, floor))
                if not pairs:
                    return 0.0, floor if floor is not None else -126
                return fused_sum([s for s, _ in pairs], [e for _, e in pairs], n_fractional_bits)

            ar.fused_sum = patched_sum
        if 3 in active:
            def patched_dot_add(a, b, c, *args):
                return fused_dot_add(a, b, c.float() if c.dtype == torch.float16 else c, *args)

            ar.fused_dot_add = patched_dot_add
        if 2 in active:
            # The sign of the truncated sum that the instruction's one fused_sum call returned: a negative one
            # that rounds to zero gives -0 (fp4sim's signed_underflow), where MMA-Sim's int arithmetic gives +0.
            last = {}
            summing = ar.fused_sum

            def recording_sum(*args):
                result = summing(*args)
                last["sum"] = result[0]
                return result

            ar.fused_sum = recording_sum

            def signed(function):
                def wrapped(*args, **kwargs):
                    last["sum"] = 0.0
                    out = function(*args, **kwargs)
                    return -out if out.item() == 0 and last["sum"] < 0 else out

                return wrapped

            ptx.nv_fused_dot_add = signed(nv_fused_dot_add)
            ptx.nv_fused_dot_add_with_block_scale = signed(nv_block_scale)

    def instance(self, row):
        key = (row.cls, row.arch, row.qualifier)
        if key not in self.instances:
            module = self.amd if row.amd else self.nv_ptx
            inst = getattr(module, row.cls)(row.arch, row.qualifier)
            inst.m = inst.n = 1  # one case per call: the arithmetic does not depend on the tile
            self.instances[key] = inst
        return self.instances[key]

    def run(self, row, case):
        torch = self.torch
        inst = self.instance(row)

        def tensor(tokens, dtype, shape):
            values = torch.tensor(np.array(tokens, dtype=np.uint32).view(np.float32).copy())
            return values.to(dtype).reshape(shape) if dtype != torch.float32 else values.reshape(shape)

        if row.scale and inst.packing == 1:  # kind::mxf8f6f4: one element per byte, one scale pair
            a, b, c, sa, sb = case
            k = inst.k
            C = tensor([c], inst.c_type, (1, 1))
            S_A = torch.tensor(sa, dtype=torch.uint8).view(inst.s_type).reshape(1, 1)
            S_B = torch.tensor(sb, dtype=torch.uint8).view(inst.s_type).reshape(1, 1)
            d = inst(tensor(a, inst.a_type, (1, k)), tensor(b, inst.b_type, (k, 1)), C, S_A, S_B)
        elif row.scale:
            a, b, c, sa, sb = case
            magnitude = {decode("e2m1", i): i for i in range(8)}

            def nibble(token):  # MMA-Sim's packing: element 2i in the low nibble of byte i
                v = float(np.uint32(token).view(np.float32))
                return magnitude[abs(v)] | (8 if np.signbit(v) else 0)

            pack = lambda t: [nibble(t[2 * i]) | nibble(t[2 * i + 1]) << 4 for i in range(32)]
            A = torch.tensor(pack(a), dtype=torch.uint8).reshape(1, 32)
            B = torch.tensor(pack(b), dtype=torch.uint8).reshape(32, 1)
            C = torch.tensor(np.array([c], dtype=np.uint32).view(np.float32).copy()).reshape(1, 1)
            S_A = torch.tensor(sa, dtype=torch.uint8).view(inst.s_type).reshape(1, -1)
            S_B = torch.tensor(sb, dtype=torch.uint8).view(inst.s_type).reshape(-1, 1)
            d = inst(A, B, C, S_A, S_B)
        else:
            a, b, c = case
            k = inst.k
            C = tensor([c], inst.c_type, (1, 1))  # an fp16 C is exact in float32, so .to() is exact
            d = inst(tensor(a, inst.a_type, (1, k)), tensor(b, inst.b_type, (k, 1)), C)
        if d.dtype == torch.float16:
            h = int(d.view(torch.int16).item()) & 0xFFFF
            return widen_f16(h)
        bits = int(d.view(torch.int32).item()) & 0xFFFFFFFF
        if self.canonical_nan and bits & 0x7FFFFFFF > 0x7F800000:
            return 0x7FC00000
        return bits


def widen_f16(h):
    """fp16 bits -> FP32 bits exactly (a NaN keeps its payload, as the vendored files write it)."""
    sign, field, frac = h >> 15, h >> 10 & 0x1F, h & 0x3FF
    if field == 0x1F:
        return sign << 31 | 0x7F800000 | frac << 13
    return f32_bits(decode("f16", h))


def write_folder(path, row, cases, outputs):
    path.mkdir(parents=True)
    with open(path / "a.txt", "w") as fa, open(path / "b.txt", "w") as fb, open(path / "c.txt", "w") as fc, \
            open(path / "d.txt", "w") as fd:
        for case, d in zip(cases, outputs):
            fa.write(" ".join(f"{t:08x}" for t in case[0]) + "\n")
            fb.write(" ".join(f"{t:08x}" for t in case[1]) + "\n")
            fc.write(f"{case[2]:032b}\n")
            fd.write(f"{d:032b}\n")
    if row.scale:
        with open(path / "sa.txt", "w") as fsa, open(path / "sb.txt", "w") as fsb:
            for case in cases:
                fsa.write(" ".join(f"{t:02x}" for t in case[3]) + "\n")
                fsb.write(" ".join(f"{t:02x}" for t in case[4]) + "\n")


def differing(fp4sim, folder, row):
    out = subprocess.run([str(fp4sim), "datapath", "identify", "--json", str(folder)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"fp4sim datapath identify {folder}: {out.stderr.strip()}")
    for fit in json.loads(out.stdout)[0]["rows"]:
        if fit["row"] == row.row:
            return set(fit["differing_lines"])
    raise SystemExit(f"{folder}: fp4sim does not offer {row.row} for these formats")


def applicable_rules(row, skip=()):
    """The indices into RULES of the rules fp4sim has and MMA-Sim lacks on this row (less those skipped)."""
    if row.amd:
        return [r for r in [4] if list(RULES)[r].split()[0] not in skip]
    rules = [0]
    if row.floor is not None:
        rules.append(1)
    if row.signed_zero:
        rules.append(2)
    if row.c_leading:
        rules.append(3)
    return [r for r in rules if list(RULES)[r].split()[0] not in skip]


def compare(oracle, fp4sim, work, row, cases, skip=()):
    """The lines where `row` and MMA-Sim differ, attributed rule by rule: the lines a rule's patch makes
    agree are that rule's; with every rule applied, every line is run again and what differs is unexplained.
    Returns (differ, {rule: lines}, unexplained lines)."""
    names = list(RULES)
    rules = applicable_rules(row, skip)

    def differ_on(active, subset, stage):
        oracle.patch(row, active)
        outs = [oracle.run(row, cases[i]) for i in subset]
        folder = work / stage / row.folder
        if folder.exists():
            shutil.rmtree(folder)
        write_folder(folder, row, [cases[i] for i in subset], outs)
        return {subset[i] for i in differing(fp4sim, folder, row)}

    everything = list(range(len(cases)))
    remaining = differ_on(set(), everything, "mmasim")
    total = len(remaining)
    attributed = {}
    for n in range(1, len(rules) + 1):
        last = n == len(rules)
        if not remaining and not last:
            continue
        now = differ_on(set(rules[:n]), everything if last else sorted(remaining), f"rules{n}")
        attributed[names[rules[n - 1]]] = len(remaining - now)
        remaining = now
    oracle.patch(row, set())
    return total, attributed, remaining


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mmasim", default=str(ROOT / "tools" / ".oracles" / "MMA-Sim"), help="MMA-Sim checkout")
    p.add_argument("--fp4sim", default=str(ROOT / "build" / "fp4sim"), help="the fp4sim binary")
    p.add_argument("--cases", type=int, default=2000, help="random cases per row and pairing (default 2000)")
    p.add_argument("--corners", type=int, default=-1,
                   help="H200 corner cases per row, evenly spaced over the families (default all; 0: none)")
    p.add_argument("--rows", default="", help="comma-separated fp4sim rows (default: every shared row)")
    p.add_argument("--seed", type=int, default=25)
    p.add_argument("--skip-rule", action="append", default=[], metavar="O8|O3|O9|O11|A1",
                   help="do not patch this rule into MMA-Sim (its differences then count as unexplained)")
    p.add_argument("--work", default="", help="keep the measurement folders here (default: a temporary folder)")
    args = p.parse_args(argv)
    oracle = Oracle(pathlib.Path(args.mmasim))
    rng = np.random.default_rng(args.seed)
    wanted = set(filter(None, args.rows.split(",")))
    rows = [r for r in shared_rows() if not wanted or r.row in wanted]
    if wanted - {r.row for r in rows}:
        raise SystemExit(f"not a shared row: {', '.join(sorted(wanted - {r.row for r in rows}))}")
    unexplained_total = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(args.work or tmp)
        print(f"{'row':16} {'MMA-Sim instruction':58} {'cases':>6} {'differ':>6}  attributed                      unexplained")
        for row in rows:
            if row.scale and row.scale[1] == 32 and "mxf8f6f4" in row.folder:
                cases = random_mx_scaled(rng, row, args.cases)
            elif row.scale:
                cases = random_block_scaled(rng, row, args.cases)
            else:
                k = oracle.instance(row).k
                cases = random_cases(rng, row, args.cases, k)
                if row.corners and args.corners != 0:
                    corner = corner_cases(row.corners, k)
                    if 0 <= args.corners < len(corner):  # evenly spaced, so that every family is sampled
                        corner = [corner[i * len(corner) // args.corners] for i in range(args.corners)]
                    cases += corner
            total, attributed, unexplained = compare(oracle, pathlib.Path(args.fp4sim), work, row, cases,
                                                     args.skip_rule)
            unexplained_total += len(unexplained)
            rules = ", ".join(f"{name.split()[0]} {n}" for name, n in attributed.items() if n)
            print(f"{row.row:16} {row.cls + ' ' + row.qualifier:58} {len(cases):6} {total:6}  {rules or '-':31} "
                  f"{len(unexplained)}" + (f" (lines {sorted(unexplained)[:5]})" if unexplained else ""), flush=True)
    print("rules: " + "; ".join(f"{k}: {v}" for k, v in RULES.items()))
    print(f"unexplained differences: {unexplained_total}")
    return 1 if unexplained_total else 0


if __name__ == "__main__":
    sys.exit(main())
