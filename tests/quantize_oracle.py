"""The harness of quantize_oracle_test.py: the fp4sim binary, the presets' reference settings, running
`fp4sim quantize` on a tensor and comparing its file with the independent references (tests/reference/) bit
for bit, the round-trip error bound, and the input families the tests draw from."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from reference import fpref, mxfp4_ref, nvfp4_ref, ue5m3_ref  # noqa: E402
from reference.fpref import F32  # noqa: E402


def _find_binary():
    cands = [os.environ.get("FP4SIM_BINARY"), os.path.join(os.path.dirname(HERE), "build", "fp4sim")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


BIN = _find_binary()


def _has_quantize():
    if BIN is None:
        return False
    p = subprocess.run([BIN, "quantize", "--help"], capture_output=True, text=True)
    return p.returncode == 0


COUNTS = collections.Counter()


# ---------------------------------------------------------------------------
# Presets as the brief and docs/design.md define them (not read from fp4sim)
# ---------------------------------------------------------------------------

PRESETS = {
    "ue5m3":       dict(kind="ue5m3", B=16, T=448.0, sr="sr-fast-f32", policy="periodic", deq="portable"),
    "ue5m3-b32":   dict(kind="ue5m3", B=32, T=448.0, sr="sr-fast-f32", policy="periodic", deq="portable"),
    "ue5m3-te":    dict(kind="ue5m3", B=16, T=448.0, sr="sr-fast-f32", policy="current", deq="portable"),
    "nvfp4":       dict(kind="nvfp4", B=16, T=448.0, sr="sr-fastest", policy="current", deq="te_kernel"),
    "nvfp4-norht": dict(kind="nvfp4", B=16, T=448.0, sr="sr-fastest", policy="current", deq="te_kernel"),
    "mxfp4":       dict(kind="mxfp4", B=32, T=None, sr=None, policy="none", deq=None),
}
SCALE_FORMAT = {"ue5m3": "ue5m3", "nvfp4": "ue4m3", "mxfp4": "e8m0"}


def role_settings(recipe, role):
    p = PRESETS[recipe]
    if p["kind"] == "mxfp4":
        return False, "rne"
    if role == "weight":
        return True, "rne"
    if role == "grad_output":
        return False, p["sr"]
    return False, "rne"


def f32_arg(v):
    """A decimal string that parses (as float or double) to exactly this float32."""
    return repr(float(np.float32(v)))


# ---------------------------------------------------------------------------
# Running fp4sim and the references
# ---------------------------------------------------------------------------

def run_quantize(tmp_path, x, recipe, *, role=None, amax_ref=None, rbits=None, extra=(), tag="q",
                 env_extra=None):
    xin = tmp_path / f"{tag}_x.npy"
    out = tmp_path / f"{tag}.h5"
    np.save(xin, x)
    cmd = [BIN, "quantize", "--recipe", recipe, "--in", str(xin), "--out", str(out)]
    if role:
        cmd += ["--role", role]
    if amax_ref is not None:
        cmd += ["--amax-ref", f32_arg(amax_ref)]
    if rbits is not None:
        rin = tmp_path / f"{tag}_r.npy"
        np.save(rin, np.asarray(rbits, np.uint8))
        cmd += ["--rbits", str(rin)]
    cmd += list(extra)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")     # small tensors: thread start-up dominates
    env.update(env_extra or {})
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    res = None
    if p.returncode == 0:
        with h5py.File(out, "r") as f:
            res = {k: f[k][()] for k in ("codes", "scales", "dequantized")}
            res["attrs"] = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    return p, res, cmd


def reference(recipe, role, x, *, amax_ref=None, rbits=None, rht=False, rounding=None,
              two_d=None, block=None, target=None, scale_format=None, deq=None, tensor_scale=None):
    p = PRESETS[recipe]
    td, rnd = role_settings(recipe, role)
    two_d = td if two_d is None else two_d
    rnd = rounding or rnd
    B = block or p["B"]
    if p["kind"] == "ue5m3":
        T = target or p["T"]
        amax = amax_ref
        if tensor_scale == "none":
            raise NotImplementedError
        if rht:
            x = nvfp4_ref.rht(x)
        return ue5m3_ref.quantize(x, block=B, two_d=two_d, target=T, amax_ref=amax, rounding=rnd,
                                  rbits=rbits, scale_format=scale_format or "ue5m3",
                                  dequantize_order=deq or p["deq"])
    if p["kind"] == "nvfp4":
        return nvfp4_ref.quantize(x, block=B, two_d=two_d, target=target or p["T"], amax_ref=amax_ref,
                                  rounding=rnd, rbits=rbits, rht_on=rht)
    return mxfp4_ref.quantize(x, block=B, rounding=rnd, rbits=rbits)


def _fmt_mismatch(x, want, got, what, limit=6):
    lines = []
    bad = np.argwhere(~want)
    for idx in bad[:limit]:
        lines.append(f"  {what}{tuple(int(i) for i in idx)}: {got[0][tuple(idx)]} != {got[1][tuple(idx)]}")
    return "\n".join(lines)


def compare(x, ref, res, cmd, *, check_deq=True, elem_mask=None, block_mask=None, what=""):
    """Bit-for-bit comparison; the failure message names the failing elements with
    their input, payload, expected vs actual codes in hex and the block scales."""
    x2 = fpref.as_2d(np.asarray(x, np.float32))
    rows, cols = x2.shape
    got_n = fpref.unpack_nibbles(res["codes"], cols)
    want_n = ref.nibbles
    problems = []
    if res["codes"].shape != ref.codes.shape:
        problems.append(f"codes shape {res['codes'].shape} != {ref.codes.shape}")
    if res["scales"].shape != ref.scales.shape:
        problems.append(f"scales shape {res['scales'].shape} != {ref.scales.shape}")
    if problems:
        pytest.fail(f"{what}: " + "; ".join(problems) + f"\ncmd: {' '.join(cmd)}")
    ok_el = got_n == want_n
    if elem_mask is not None:
        ok_el |= ~elem_mask
    # the padding nibble of an odd column count must be 0
    pad_ok = True
    if cols % 2:
        pad_ok = bool((res["codes"][:, -1] >> 4 == 0).all())
    ok_sc = res["scales"] == ref.scales
    if block_mask is not None:
        ok_sc |= ~block_mask
    deq = np.asarray(res["dequantized"], np.float32).reshape(rows, cols)
    ok_dq = fpref.same_bits_f32(deq, ref.dequantized) if check_deq else np.ones_like(ok_el)
    if elem_mask is not None:
        ok_dq |= ~elem_mask
    if ok_el.all() and ok_sc.all() and ok_dq.all() and pad_ok:
        return
    msg = [f"{what}: {int((~ok_el).sum())} code, {int((~ok_sc).sum())} scale, "
           f"{int((~ok_dq).sum())} dequantized mismatches (pad nibble ok: {pad_ok})",
           f"cmd: {' '.join(cmd)}"]
    for (i, j) in np.argwhere(~(ok_el & ok_dq))[:8]:
        y = ref.payload_input[i, j]
        msg.append(f"  x[{i},{j}] = {x2[i, j]!r} ({np.float32(x2[i, j]).view(np.uint32):#010x}), "
                   f"y_ref = {y!r} ({np.float32(y).view(np.uint32):#010x}): code want {int(want_n[i, j]):#x} "
                   f"got {int(got_n[i, j]):#x}; dequantized want {ref.dequantized[i, j]!r} "
                   f"({np.float32(ref.dequantized[i, j]).view(np.uint32):#010x}) got {deq[i, j]!r} "
                   f"({np.float32(deq[i, j]).view(np.uint32):#010x})")
    for (i, j) in np.argwhere(~ok_sc)[:8]:
        extra = ""
        if hasattr(ref, "ideal"):
            extra = f", ideal u = {ref.ideal[i, j]!r} ({np.float32(ref.ideal[i, j]).view(np.uint32):#010x})"
        msg.append(f"  scale[{i},{j}]: want {int(ref.scales[i, j]):#04x} got {int(res['scales'][i, j]):#04x}"
                   f", block amax {ref.block_amax[i, j]!r}{extra}")
    pytest.fail("\n".join(msg))


def check_attrs(recipe, role, ref, res, *, rounding=None, two_d=None, block=None, rht=False,
                amax_ref=None, target=None, scale_format=None, deq=None, finite=True):
    a = res["attrs"]
    p = PRESETS[recipe]
    td, rnd = role_settings(recipe, role)
    two_d = td if two_d is None else two_d
    B = block or p["B"]
    want = {
        "recipe": recipe,
        "element_format": "e2m1",
        "scale_format": scale_format or SCALE_FORMAT[p["kind"]],
        "block_rows": B if two_d else 1,
        "block_cols": B,
        "rounding": rounding or rnd,
        "role": role,
        "rht": int(bool(rht)),
    }
    if p["kind"] != "mxfp4":
        want["dequantize_order"] = deq or p["deq"]
        want["target"] = F32(target or p["T"])
        if finite or p["kind"] == "nvfp4":
            want["tensor_amax"] = ref.tensor_amax
            want["global_encode_scale"] = ref.global_encode_scale
            want["global_decode_scale"] = ref.global_decode_scale
    else:
        want["global_encode_scale"] = F32(1.0)
        want["global_decode_scale"] = F32(1.0)
    bad = []
    for k, v in want.items():
        if k not in a:
            bad.append(f"missing attribute {k}")
            continue
        g = a[k]
        if isinstance(v, (np.floating, float)) and not isinstance(v, str):
            if not fpref.same_bits_f32(np.float32(g), np.float32(v)):
                bad.append(f"{k}: want {v!r} got {g!r}")
        elif isinstance(v, int):
            if int(g) != v:
                bad.append(f"{k}: want {v} got {g}")
        elif str(g) != str(v):
            bad.append(f"{k}: want {v!r} got {g!r}")
    pol = str(a.get("tensor_scale_policy", ""))
    if not pol.startswith(p["policy"]):
        bad.append(f"tensor_scale_policy: want {p['policy']}[:D] got {pol!r}")
    if finite and p["kind"] != "mxfp4":
        for k, v in (("scale_saturated", ref.scale_saturated), ("scale_underflow", ref.scale_underflow)):
            if k in a and int(a[k]) != v:
                bad.append(f"{k}: want {v} got {a[k]}")
    assert not bad, "; ".join(bad)


def run_case(tmp_path, recipe, role, x, *, amax_ref=None, rbits=None, rht=False, extra=(),
             count_as=None, env_extra=None, **kw):
    """One CLI call compared with the reference; returns (ref, res)."""
    ref = reference(recipe, role, x, amax_ref=amax_ref, rbits=rbits, rht=rht, **kw)
    args = list(extra) + (["--rht"] if rht else [])
    p, res, cmd = run_quantize(tmp_path, x, recipe, role=role, amax_ref=amax_ref, rbits=rbits, extra=args,
                               env_extra=env_extra)
    assert p.returncode == 0, f"rc={p.returncode}: {p.stderr}\ncmd: {' '.join(cmd)}"
    COUNTS[count_as or recipe] += 1
    compare(x, ref, res, cmd, what=f"{recipe}/{role}")
    check_attrs(recipe, role, ref, res, rht=rht, amax_ref=amax_ref,
                **{k: v for k, v in kw.items() if k in ("rounding", "two_d", "block", "target",
                                                       "scale_format", "deq")})
    return ref, res


# ---------------------------------------------------------------------------
# Input generators
# ---------------------------------------------------------------------------

SHAPES = [(1, 16), (4, 64), (3, 37), (17, 33), (33, 47), (64, 64), (50,), (16, 16), (2, 96)]


def random_inputs(seed, kinds=("normal", "laplace", "spread", "sparse")):
    rng = np.random.default_rng(seed)
    out = []
    for kind in kinds:
        for k, shape in enumerate(SHAPES):
            if kind == "normal":
                scale = 10.0 ** rng.choice([-30, -12, -5, -2, 0, 1, 4, 12, 30])
                x = rng.standard_normal(shape) * scale
            elif kind == "laplace":
                x = rng.laplace(size=shape) * 2.0 ** rng.integers(-90, 90)
            elif kind == "spread":
                # every 16 columns a different binade: blocks far below the tensor amax
                x = rng.standard_normal(shape)
                x2 = fpref.as_2d(x)
                for c0 in range(0, x2.shape[1], 16):
                    x2[:, c0:c0 + 16] *= 2.0 ** rng.integers(-60, 20)
                x = x2.reshape(shape)
            else:
                x = rng.standard_normal(shape) * (rng.random(shape) < 0.2)
                x2 = fpref.as_2d(x)
                x2[:, :16] = 0.0            # a zero block
                x = x2.reshape(shape)
            out.append((f"{kind}{k}-{'x'.join(map(str, shape))}", x.astype(np.float32)))
    return out


E2M1_TIES = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)
E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


def e2m1_tie_tensor(rng, k, js, B, rows=2, two_d=False):
    """Tensor whose blocks have power-of-two scales 2^j (under G = 2^k) so every
    element maps exactly onto an E2M1 midpoint or grid value: block amax 6*2^(j-k)."""
    nb = len(js)
    if two_d:
        x = np.zeros((B, B * nb), np.float32)
        for b, j in enumerate(js):
            vals = np.concatenate([E2M1_TIES, -E2M1_TIES, E2M1_GRID, -E2M1_GRID])
            tile = rng.choice(vals, size=(B, B)).astype(np.float32)
            tile[0, 0] = 6.0
            x[:, b * B:(b + 1) * B] = tile * np.float32(2.0 ** (j - k))
        return x
    x = np.zeros((rows, B * nb), np.float32)
    for b, j in enumerate(js):
        vals = np.concatenate([E2M1_TIES, -E2M1_TIES, E2M1_GRID[1:], [-0.0, 0.0]])
        blk = rng.choice(vals, size=(rows, B)).astype(np.float32)
        blk[:, 0] = -6.0
        x[:, b * B:(b + 1) * B] = blk * np.float32(2.0 ** (j - k))
    return x


def scale_midpoints(fmt):
    """Midpoints of the scale grid (exact in float32) and a few boundary values."""
    eb, mb, bias, mx = fpref.SCALE_FORMATS[fmt]
    grid = fpref.unsigned_value_of_code(np.arange(0, 256 if fmt == "ue5m3" else 0x7F), fmt)
    grid = grid[grid <= mx].astype(np.float64)
    mids = (grid[:-1] + grid[1:]) / 2
    # the max, the tie just above it (clamped before RNE), the next binade
    step = 2.0 ** (np.floor(np.log2(mx)) - mb)          # one ulp at the max
    extra = [mx, mx + step / 2, mx + step, 2.0 ** np.ceil(np.log2(mx)) * 2]
    return np.concatenate([mids, extra]).astype(np.float32)


def scale_tie_tensor(fmt, k, B, mids, rows=1):
    """Blocks whose ideal scale u = RN32(amax_b * RN32(2^k * RN32(1/6))) is exactly a
    scale-grid midpoint: amax_b = 6 * M * 2^-k (exact, few significant bits)."""
    x = np.zeros((rows, B * len(mids)), np.float32)
    for b, M in enumerate(mids):
        a = np.float32(6.0 * float(M) * 2.0 ** -k)
        assert float(a) == 6.0 * float(M) * 2.0 ** -k
        x[:, b * B] = a
        x[:, b * B + 1:(b + 1) * B] = a * np.float32(0.37)
    return x


# ---------------------------------------------------------------------------
# Round-trip error bounds
# ---------------------------------------------------------------------------

BOUND_C = {"rne": 1.0625 / 6.0, "sr": 2.0 * 1.0625 / 6.0, "pow2": 0.5}
BOUND_WORST = collections.defaultdict(float)


def check_error_bound(recipe, role, x, ref, res, name):
    """|x^ - x| <= c * amax_b for every element of a block whose scale is a normal number
    of the scale format and did not saturate (c = 1.0625/6 RNE, twice that with SR, 1/2
    for MXFP4's floor rule; docs/recipes.md derives them)."""
    p = PRESETS[recipe]
    two_d, rnd = role_settings(recipe, role)
    x2 = fpref.as_2d(x).astype(np.float64)
    rows, cols = x2.shape
    deq = np.asarray(res["dequantized"], np.float64).reshape(rows, cols)
    rb, cb = (p["B"], p["B"]) if two_d else (1, p["B"])
    bam = fpref.expand_blocks(ref.block_amax, rb, cb)[:rows, :cols].astype(np.float64)
    if p["kind"] == "mxfp4":
        c = BOUND_C["pow2"]
        ok_block = ref.block_amax >= 2.0 ** -125      # e - 2 not clamped at -127
    else:
        c = BOUND_C["rne" if rnd == "rne" else "sr"]
        min_normal = 2.0 ** -14 if p["kind"] == "ue5m3" else 2.0 ** -6
        # the ideal scale is normal (a repaired 1.0 after underflow does not count)
        ok_block = (ref.ideal >= min_normal) & (ref.scale_values >= min_normal)
        ok_block &= ref.ideal <= (61440.0 if p["kind"] == "ue5m3" else 448.0)
    ok_block = ok_block & (ref.block_amax > 0)
    ok = fpref.expand_blocks(ok_block, rb, cb)[:rows, :cols]
    err = np.abs(deq - x2)
    lim = c * bam * (1 + 2.0 ** -18) + 2.0 ** -149
    assert (err[ok] <= lim[ok]).all(), (
        f"{recipe}/{role} {name}: round-trip error {float((err[ok] / bam[ok]).max())} * amax_b > {c}")
    if ok.any():
        key = f"{recipe}/{rnd}"
        BOUND_WORST[key] = max(BOUND_WORST[key], float((err[ok] / bam[ok]).max()))
