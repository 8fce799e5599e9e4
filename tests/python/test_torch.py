"""fp4sim.torch (docs/torch.md): the CPU path against the golden model composed by hand, and on a GPU every
operator's CUDA result against its CPU result, bit for bit, up to training a small Llama model.

Skipped as a whole without PyTorch (ctest reports it skipped); without a CUDA build or device only the GPU
tests skip."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")

import fp4sim  # noqa: E402
import fp4sim.torch as ft  # noqa: E402
from fp4sim.torch.linear import philox_seed  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from small_llama import SmallLlama, byte_batches  # noqa: E402

RECIPES = ["ue5m3", "ue5m3-b32", "ue5m3-te", "nvfp4", "nvfp4-norht", "mxfp4"]
# TE 2.17's 4over6 (MAE and MSE at bound 256, the fast-math error path), which the GPU quantizer serves too: its
# GEMMs are NVFP4's, so the GPU tests cover them; the CPU tests would compare the golden model with itself.
GPU_RECIPES = RECIPES + ["nvfp4-4over6", "nvfp4-4over6-mse", "nvfp4-4over6-fast"]
OPERANDS = [f"{g}.{s}" for g in ("fprop", "dgrad", "wgrad") for s in ("a", "b")]
GEMMS = ["fprop", "dgrad", "wgrad"]
gpu = pytest.mark.skipif(not ft.cuda_available(), reason="no CUDA build of fp4sim or no CUDA device")


def bits(t):
    """The bit patterns of a tensor (NaN payloads and -0 compared, as bit for bit means)."""
    t = t.detach().cpu()
    if t.dtype == torch.float32:
        return t.view(torch.int32)
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16)
    return t


def assert_bits(ours, ref, what):
    a, b = bits(ours), bits(ref)
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} != {tuple(b.shape)}"
    bad = int((a != b).sum())
    assert bad == 0, f"{what}: {bad} of {a.numel()} differ"


def sample(shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(torch.float32)


def f32(t):
    return t.detach().to(torch.float32).cpu().numpy()


# ---------------------------------------------------------------------------------------------------
# CPU path


@pytest.mark.parametrize("recipe", RECIPES)
def test_cpu_ops_compose_to_the_golden_gemm(recipe):
    """quantize -> gemm_quantized on CPU equals fp4sim.gemm (the golden model's whole GEMM), and dequantize
    equals fp4sim.dequantize: the operands rebuilt from bytes and scalars are the golden ones."""
    a, b = sample((64, 128), 1), sample((80, 128), 2, 3.0)
    for gemm in GEMMS:
        dp = ft.ops.default_datapath(recipe)
        qa = ft.quantize(a, recipe, f"{gemm}.a", seed=7)
        qb = ft.quantize(b, recipe, f"{gemm}.b", seed=7)
        c = ft.gemm_quantized(qa, qb)
        ref = fp4sim.gemm(f32(a), f32(b), recipe, gemm, datapath=dp, seed=7)
        assert_bits(c, torch.from_numpy(ref), f"{recipe} {gemm}")
        assert_bits(ft.gemm(a, b, recipe, gemm, seed=7), torch.from_numpy(ref), f"{recipe} {gemm} whole")
        gq = fp4sim.quantize(f32(a), recipe, f"{gemm}.a", seed=7)
        assert_bits(ft.dequantize(qa), torch.from_numpy(fp4sim.dequantize(gq)), f"{recipe} {gemm}.a dequantize")


def test_cpu_held_amax_and_rbits_reach_the_golden_model():
    x = sample((32, 64), 3)
    held = torch.tensor([10.0])
    q = ft.quantize(x, "ue5m3", "dgrad.a", amax=held, seed=5)
    g = fp4sim.quantize(f32(x), "ue5m3", "dgrad.a", amax_ref=10.0, seed=5)
    assert_bits(q.codes, torch.from_numpy(np.array(g.codes)), "codes")
    assert float(q.scalars[0]) == 10.0 and float(q.scalars[1]) == float(g.tensor_scale)
    r = torch.randint(0, 256, x.shape, dtype=torch.int32, generator=torch.Generator().manual_seed(0))
    q = ft.quantize(x, "ue5m3", "dgrad.a", rbits=r)
    g = fp4sim.quantize(f32(x), "ue5m3", "dgrad.a", rbits=r.numpy().astype(np.uint8))
    assert_bits(q.codes, torch.from_numpy(np.array(g.codes)), "codes with explicit bits")
    with pytest.raises(ValueError):
        ft.quantize(x, "ue5m3", "fprop.a", rbits=r)  # an RNE operand takes no random bits


def test_philox_key_is_pinned():
    # The SR key of docs/torch.md: the first 8 bytes (little-endian) of BLAKE2b-64 of
    # "fp4sim.torch/<seed>/<module>/<gemm>/<step>", top bit cleared. A run is replayable only while it holds.
    import hashlib
    d = hashlib.blake2b(b"fp4sim.torch/0/layers.0.q_proj/dgrad/1", digest_size=8).digest()
    assert philox_seed(0, "layers.0.q_proj", "dgrad", 1) == int.from_bytes(d, "little") & (2**63 - 1)
    assert philox_seed(0, "layers.0.q_proj", "dgrad", 1) == 890282198297139595
    assert philox_seed(42, "", "wgrad", 7) == 2835373926617080224


def golden_linear(layer, x, dy, step, amax):
    """Y, dX, dW of the fp4sim Linear by hand: fp4sim.gemm per GEMM with the layer's keys and held amaxes."""
    xb = f32(x.reshape(-1, x.shape[-1]).to(torch.bfloat16))
    w = f32(layer.weight)
    dyb = f32(dy.reshape(-1, dy.shape[-1]).to(torch.bfloat16))
    kw = dict(datapath=layer.datapath)

    def run(gemm, a, b, amax_a, amax_b):
        ra = None if amax_a is None else float(amax_a)
        rb = None if amax_b is None else float(amax_b)
        info_a = ft.ops.operand_info(layer.recipe, layer.overrides, f"{gemm}.a")
        info_b = ft.ops.operand_info(layer.recipe, layer.overrides, f"{gemm}.b")
        if not layer.periodic or info_a["rht"]:
            ra = None
        if not layer.periodic or info_b["rht"]:
            rb = None
        return fp4sim.gemm(np.ascontiguousarray(a), np.ascontiguousarray(b), layer.recipe, gemm,
                           seed=philox_seed(layer.seed, layer.name, gemm, step), amax_ref_a=ra, amax_ref_b=rb, **kw)

    y = run("fprop", xb, w, amax["activation"], amax["weight"]) + f32(layer.bias)[None, :]
    dx = run("dgrad", dyb, w.T, amax["grad_output"], amax["weight"])
    dw = run("wgrad", dyb.T, xb.T, amax["grad_output"], amax["activation"])
    return y, dx, dw, dyb.sum(0)


@pytest.mark.parametrize("recipe", ["ue5m3", "ue5m3-te", "nvfp4", "mxfp4"])
def test_cpu_linear_equals_golden_model_by_hand(recipe):
    torch.manual_seed(0)
    layer = ft.Linear(128, 64, recipe=recipe, name="blk.proj", seed=3, period=2)
    held = {}
    for step in (1, 2, 3):
        layer.begin_step(step)
        x = sample((2, 32, 128), 10 + step).requires_grad_(True)
        dy = sample((2, 32, 64), 20 + step, 1e-3)
        y = layer(x)
        y.backward(dy)
        if step != 2:  # period 2: sampled at steps 1 and 3, held at step 2
            held = {"activation": x.detach().to(torch.bfloat16).float().abs().max(),
                    "weight": layer.weight.detach().abs().max(),
                    "grad_output": dy.to(torch.bfloat16).float().abs().max()}
        gy, gdx, gdw, gdb = golden_linear(layer, x, dy, step, held)
        assert_bits(y.reshape(-1, 64), torch.from_numpy(gy), f"{recipe} step {step} Y")
        assert_bits(x.grad.reshape(-1, 128), torch.from_numpy(gdx), f"{recipe} step {step} dX")
        assert_bits(layer.weight.grad, torch.from_numpy(gdw), f"{recipe} step {step} dW")
        assert_bits(layer.bias.grad, torch.from_numpy(gdb), f"{recipe} step {step} db")
        layer.weight.grad = layer.bias.grad = None


def test_linear_under_bf16_autocast_returns_bf16():
    layer = ft.Linear(64, 64, recipe="mxfp4")
    x = sample((64, 64), 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    assert y.dtype == torch.bfloat16
    assert layer(x).dtype == torch.float32


def test_caller_supplied_rbits_are_used():
    g = torch.Generator().manual_seed(1)
    seen = []

    def rbits(shape, device):
        seen.append(shape)
        return torch.randint(0, 256, shape, dtype=torch.int32, generator=g)

    layer = ft.Linear(64, 64, recipe="ue5m3", rbits=rbits)
    x = sample((64, 64), 1).requires_grad_(True)
    layer(x).backward(sample((64, 64), 2))
    assert seen == [(64, 64), (64, 64)]  # dgrad's dY, then wgrad's dYᵀ: the SR operands only


def test_convert_replaces_exactly_the_plain_linears():
    class MyLinear(nn_linear()):
        pass

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Sequential(torch.nn.Linear(64, 64), MyLinear(64, 64)),
                                torch.nn.Embedding(4, 64))
    model.add_module("lm_head", torch.nn.Linear(64, 8))
    w0 = model[0].weight
    ft.convert(model, recipe="nvfp4", exclude=["lm_head"])
    assert isinstance(model[0], ft.Linear) and model[0].weight is w0 and model[0].name == "0"
    assert isinstance(model[2][0], ft.Linear) and model[2][0].name == "2.0"
    assert type(model[2][1]) is MyLinear and type(model.lm_head) is torch.nn.Linear
    assert type(model[3]) is torch.nn.Embedding
    assert model[0].recipe == "nvfp4"


def nn_linear():
    return torch.nn.Linear


def test_state_dict_round_trips_with_nn_linear():
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 16, bias=False))
    sd = {k: v.clone() for k, v in plain.state_dict().items()}
    converted = ft.convert(plain, recipe="ue5m3")
    clock = ["0._extra_state", "1._extra_state"]  # the step clock and held amaxes (test_torch_dropin.py)
    assert sorted(converted.state_dict().keys()) == sorted(list(sd.keys()) + clock)
    fresh = ft.convert(torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 16, bias=False)))
    fresh.load_state_dict(sd)  # strict: nn.Linear's checkpoint loads, the clock starting afresh
    back = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 16, bias=False))
    assert back.load_state_dict(fresh.state_dict(), strict=False).unexpected_keys == clock
    for k in sd:
        assert_bits(back.state_dict()[k], sd[k], k)


def test_fake_ops_give_shapes_for_compile():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(48, 96)
        codes, scales, scalars = torch.ops.fp4sim.quantize(x, ft.ops.quantize_plan("ue5m3", "", "fprop.b"), 0, None,
                                                           None)
        assert codes.shape == (48, 48) and scales.shape == (3, 6) and scalars.shape == (4,)
        plan = ft.ops.gemm_plan("nvfp4", "", "fprop", "sm90-bf16")
        c = torch.ops.fp4sim.gemm(x, x, plan.gemm, 0, None, None, None, None, "bf16")
        assert c.shape == (48, 48) and c.dtype == torch.bfloat16


def test_ops_compile_into_one_graph():
    a, b = sample((64, 128), 1), sample((32, 128), 2)
    fn = lambda a_, b_: ft.gemm(a_, b_, "nvfp4", "wgrad", seed=1) * 2  # noqa: E731
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)  # fullgraph: a graph break fails
    assert_bits(compiled(a, b), fn(a, b), "compiled")


# The extension's calls that take a recipe, overrides or an operand by name: none may run in a step.
_NAMED_CALLS = ("quantize", "gemm", "operand_info", "dequantize_raw", "quantize_plan", "gemm_plan")


def test_linear_resolves_its_plans_once_and_a_step_parses_no_name(monkeypatch):
    from fp4sim import _fp4sim
    with pytest.raises(fp4sim.UsageError, match="blok"):  # at construction, not at the first forward
        ft.Linear(64, 32, recipe="nvfp4", blok=32)
    with pytest.raises(fp4sim.UsageError, match="datapath"):
        ft.convert(torch.nn.Sequential(torch.nn.Linear(64, 32)), recipe="nvfp4", datapath="fp33-seq")
    layer = ft.Linear(64, 32, recipe="nvfp4", name="p", block=32)
    calls = []
    for name in _NAMED_CALLS:
        real = getattr(_fp4sim, name)
        monkeypatch.setattr(_fp4sim, name,
                            lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    x = sample((16, 64), 4).requires_grad_(True)
    for step in (1, 2):
        layer.begin_step(step)
        layer(x).backward(sample((16, 32), 5))
    assert calls == [] and x.grad is not None and layer.weight.grad is not None


def test_plans_stay_out_of_checkpoints_and_are_resolved_again_when_unpickled():
    import pickle
    model = ft.convert(torch.nn.Sequential(torch.nn.Linear(64, 32)), recipe="nvfp4", block=32)
    layer = model[0]
    extra = model.state_dict()["0._extra_state"]
    assert set(extra) == {"step", "forwards", "sampled_at", "held"}  # the clock; no handle, no plan
    assert all(isinstance(v, torch.Tensor) for k, v in model.state_dict().items() if k != "0._extra_state")
    state = layer.__getstate__()
    assert "_plans" not in state and state["overrides"] == '{"block": 32}'
    again = pickle.loads(pickle.dumps(layer))
    assert again._plans == layer._plans  # this process: the same settings, the same handles
    x = sample((16, 64), 6)
    assert_bits(again(x), layer(x), "unpickled layer")


# ---------------------------------------------------------------------------------------------------
# GPU: CUDA results against the CPU results (the golden model)


def both(fn, *tensors):
    """fn on CUDA copies and on CPU copies of the tensors (None kept)."""
    cuda = fn(*[None if t is None else t.cuda() for t in tensors])
    cpu = fn(*[None if t is None else t.cpu() for t in tensors])
    return cuda, cpu


@gpu
@pytest.mark.parametrize("recipe", GPU_RECIPES)
def test_gpu_quantize_and_dequantize_equal_cpu(recipe):
    shapes = [(128, 256), (96, 160), (17, 48)]
    for rows, cols in shapes:
        x = sample((rows, cols), rows + cols)
        x[0, :5] = torch.tensor([0.0, -0.0, 1e-30, -7e4, 3e-3])
        for operand in OPERANDS:
            info = ft.ops.operand_info(recipe, "{}", operand)
            if info["rht"] and cols % 16:
                continue
            sr = info["rounding"] != "rne"
            r = torch.randint(0, 256, (rows, cols), dtype=torch.int32) if sr else None
            for amax in (None, torch.tensor([2.5])):
                for rb in ((None, r) if sr else (None,)):
                    what = f"{recipe} {operand} {rows}x{cols} amax={amax} rbits={rb is not None}"
                    qg, qc = both(lambda x_, a_, r_: ft.quantize(x_, recipe, operand, seed=11, amax=a_, rbits=r_),
                                  x, amax, rb)
                    for name in ("codes", "scales", "scalars"):
                        assert_bits(getattr(qg, name), getattr(qc, name), f"{what} {name}")
                    assert_bits(ft.dequantize(qg), ft.dequantize(qc), f"{what} dequantize")


@gpu
@pytest.mark.parametrize("recipe", GPU_RECIPES)
def test_gpu_quantize_reads_bf16_as_its_widening(recipe):
    """A BF16 tensor, read by the kernels where it lies, quantizes as its float32 widening does on the CPU."""
    for rows, cols in [(64, 256), (33, 80)]:
        x = sample((rows, cols), 7 * rows + cols, 3.0).to(torch.bfloat16)
        x[0, :4] = torch.tensor([0.0, -0.0, 1e-30, -7e4])
        for operand in OPERANDS:
            if ft.ops.operand_info(recipe, "{}", operand)["rht"] and cols % 16:
                continue
            for amax in (None, torch.tensor([2.5])):
                what = f"{recipe} {operand} bf16 {rows}x{cols} amax={amax}"
                qg, qc = both(lambda x_, a_: ft.quantize(x_, recipe, operand, seed=5, amax=a_), x, amax)
                for name in ("codes", "scales", "scalars"):
                    assert_bits(getattr(qg, name), getattr(qc, name), f"{what} {name}")


@gpu
def test_gpu_transpose_equals_cpu():
    for dtype in (torch.bfloat16, torch.float32):
        for rows, cols in [(1, 1), (3, 130), (64, 64), (129, 67), (1000, 257)]:
            x = sample((rows, cols), rows * cols).to(dtype)
            assert_bits(torch.ops.fp4sim.transpose(x.cuda()), x.t().contiguous(), f"{dtype} {rows}x{cols}")


@gpu
@pytest.mark.parametrize("recipe", GPU_RECIPES)
@pytest.mark.parametrize("datapath", ["probe-matched", "sm90-bf16", "exact"])
def test_gpu_gemms_equal_cpu(recipe, datapath):
    for m, n, k in [(128, 256, 128), (72, 40, 192), (300, 130, 64)]:
        a, b = sample((m, k), m), sample((n, k), n, 5.0)
        for gemm in GEMMS:
            for out_dtype in ("f32", "bf16"):
                what = f"{recipe} {datapath} {gemm} {m}x{n}x{k} {out_dtype}"
                cg, cc = both(lambda a_, b_: ft.gemm(a_, b_, recipe, gemm, datapath=datapath, seed=3,
                                                     out_dtype=out_dtype), a, b)
                assert_bits(cg, cc, what)
                qa, qb = (ft.quantize(t, recipe, f"{gemm}.{s}", seed=3) for t, s in ((a.cuda(), "a"), (b.cuda(), "b")))
                assert_bits(ft.gemm_quantized(qa, qb, datapath=datapath, out_dtype=out_dtype), cc, what + " quantized")
                bias = sample((n,), n + 1, 3.0)
                qa_c, qb_c = (ft.quantize(t, recipe, f"{gemm}.{s}", seed=3) for t, s in ((a, "a"), (b, "b")))
                assert_bits(ft.gemm_quantized(qa, qb, datapath=datapath, out_dtype=out_dtype, bias=bias.cuda()),
                            ft.gemm_quantized(qa_c, qb_c, datapath=datapath, out_dtype=out_dtype, bias=bias),
                            what + " bias")


@gpu
@pytest.mark.parametrize("recipe", ["ue5m3", "nvfp4"])
def test_gpu_linear_epilogue_equals_the_captured_path(recipe):
    """The fused epilogue (bias and BF16 rounding inside the GEMM) gives the bits of the path a capture hook
    takes (float32 C, then the bias added and the output rounded by torch): output and every gradient."""
    x0 = torch.randn(256, 192, generator=torch.Generator().manual_seed(1)).to("cuda", torch.bfloat16)
    dy = torch.randn(256, 320, generator=torch.Generator().manual_seed(2)).to("cuda", torch.bfloat16)
    results = []
    for hook in (None, lambda record: None):
        torch.manual_seed(0)
        layer = ft.Linear(192, 320, device="cuda", recipe=recipe, name="l")
        layer.capture = hook
        x = x0.clone().requires_grad_(True)
        y = layer(x)
        y.backward(dy)
        results.append((y, x.grad, layer.weight.grad, layer.bias.grad))
    for got, want, name in zip(*results, ("y", "dx", "dw", "db")):
        assert_bits(got, want, f"{recipe} {name}")


@gpu
def test_gpu_ops_capture_in_a_cuda_graph():
    a, b = sample((256, 384), 1).cuda(), sample((512, 384), 2).cuda()
    held = torch.tensor([4.0], device="cuda")
    run = lambda: ft.gemm(a, b, "ue5m3", "dgrad", seed=9, amax_a=held)  # noqa: E731
    eager = run()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run()  # warm-up on a side stream, as torch.cuda.graphs asks
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run()
    graph.replay()
    torch.cuda.synchronize()
    assert_bits(captured, eager, "graph replay")


def check_records(records):
    """Every captured quantized operand and GEMM output against the CPU (golden) operators."""
    checked = 0
    for r in records:
        for side in ("a", "b"):
            x, amax, rb, q = r[side], r[f"amax_{side}"], r[f"rbits_{side}"], r[f"q{side}"]
            plan = ft.ops.quantize_plan(r["recipe"], r["overrides"], f"{r['gemm']}.{side}")
            ref = torch.ops.fp4sim.quantize(x, plan, r["seed"], amax, rb)
            for got, want, name in zip(q, ref, ("codes", "scales", "scalars")):
                assert_bits(got, want, f"{r['module']} {r['gemm']}.{side} step {r['step']} {name}")
        plan = ft.ops.gemm_plan(r["recipe"], r["overrides"], r["gemm"], r["datapath"])
        ref_c = torch.ops.fp4sim.gemm(r["a"], r["b"], plan.gemm, r["seed"], r["amax_a"], r["amax_b"], r["rbits_a"],
                                      r["rbits_b"], "f32")
        assert_bits(r["c"], ref_c, f"{r['module']} {r['gemm']} step {r['step']} C")
        checked += 1
    return checked


def train_and_check(device, recipe, sampled, steps=3, batch=4, seq=64, convert=None, **model_kwargs):
    """Train SmallLlama(**model_kwargs) on `device` for `steps` steps under `recipe` (and ft.convert's
    `convert` keywords), capturing every FP4 GEMM of the `sampled` linears (None: all), and check each against
    the CPU operators. Returns (checked, losses)."""
    torch.manual_seed(0)
    model = ft.convert(SmallLlama(**model_kwargs).to(device), recipe=recipe, exclude=["lm_head"], **(convert or {}))
    linears = {n for n, m in model.named_modules() if isinstance(m, ft.Linear)}
    sampled = linears if sampled is None else set(sampled)
    assert sampled <= linears
    records = []

    def keep(r):  # copies: on the CPU, .cpu() would alias the weight the optimizer then updates
        records.append({k: (v.detach().cpu().clone() if isinstance(v, torch.Tensor) else
                            tuple(t.detach().cpu().clone() for t in v) if isinstance(v, tuple) else v)
                        for k, v in r.items()})

    for name, m in model.named_modules():
        if name in sampled:
            m.capture = keep
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    text = open(__file__, "rb").read() * 4
    batches = byte_batches(text, batch=batch, seq=seq, generator=torch.Generator().manual_seed(0))
    losses = []
    for step in range(1, steps + 1):
        ft.begin_step(model, step)
        x, y = next(batches)
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = model(x.to(device))
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), y.to(device).reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert all(np.isfinite(losses)), losses
    checked = check_records(records)
    fp4_gemms = 3 if next(m for m in model.modules() if isinstance(m, ft.Linear)).backward == "quantized" else 1
    assert checked == len(sampled) * fp4_gemms * steps
    return checked, losses


def test_cpu_training_harness_checks_every_sampled_gemm():
    # The harness of the GPU training test on a tiny model on the CPU (where it compares the golden model
    # with itself): every sampled linear yields its three GEMMs per step, and the checks run.
    checked, _ = train_and_check("cpu", "ue5m3", None, steps=2, batch=2, seq=32, d=64, layers=1, heads=1, ffn=128)
    assert checked == 7 * 3 * 2


@gpu
@pytest.mark.parametrize("recipe", ["ue5m3", "nvfp4", "mxfp4", "nvfp4-4over6"])
def test_gpu_small_llama_trains_equal_to_golden(recipe):
    sampled = None if os.environ.get("FP4SIM_TORCH_CHECK") == "all" else \
        ["layers.0.q_proj", "layers.0.down_proj", "layers.5.v_proj", "layers.5.gate_proj"]
    checked, losses = train_and_check("cuda", recipe, sampled)
    print(f"{recipe}: {checked} GEMMs and {2 * checked} quantized operands equal to the golden model; "
          f"losses {losses}")
