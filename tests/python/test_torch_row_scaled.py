"""Row-scaled NVFP4 in fp4sim.torch (TE's row_scaled_activation, docs/torch.md): fprop's A takes one amax, G
and Gd per row and its GEMM one alpha per output row; the weight keeps its tensor amax; dgrad and wgrad run
as TE's backward_override has them. The CPU path against the golden model called through fp4sim (its own
quantize, dequantize and gemm), the CUDA operators against the CPU ones bit for bit.

Skipped as a whole without PyTorch; the GPU tests skip without a CUDA build or device."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")

import fp4sim  # noqa: E402
import fp4sim.torch as ft  # noqa: E402

from test_torch import assert_bits, f32, sample, train_and_check  # noqa: E402

ROW = dict(amax_scope="row", two_d=False)  # TE's row-scaled recipe quantizes 1-D blocks only
# TE 2.17's row-scaled recipes: plain NVFP4 and 4over6 (MAE, bound 256), RHT and SR off as TE requires.
ROW_RECIPES = ["nvfp4-norht", "nvfp4-4over6"]
gpu = pytest.mark.skipif(not ft.cuda_available(), reason="no CUDA build of fp4sim or no CUDA device")


def rows_of_many_binades(rows, cols, seed):
    """Rows whose amaxes span many binades, a zero row among them: one tensor amax would scale most rows far
    from their own."""
    x = sample((rows, cols), seed) * torch.exp2(torch.arange(rows, dtype=torch.float32) % 24 - 12)[:, None]
    x[3] = 0.0
    return x


def golden_dequantized(x, recipe, role, **overrides):
    """fp4sim.quantize then fp4sim.dequantize (the golden model's own calls), rounded to BF16."""
    q = fp4sim.quantize(np.ascontiguousarray(f32(x)), recipe, role=role, **overrides)
    return torch.from_numpy(np.array(fp4sim.dequantize(q))).to(torch.bfloat16)


@pytest.mark.parametrize("recipe", ROW_RECIPES)
def test_cpu_row_scaled_operands_and_fprop_equal_the_golden_model(recipe):
    a, b = rows_of_many_binades(40, 128, 1), sample((24, 128), 2, 3.0)
    qa = ft.quantize(a, recipe, "fprop.a", **ROW)
    assert qa.scalars.shape == (4 + 40,), "a row-scaled operand carries its rows' amaxes after the four scalars"
    assert_bits(qa.scalars[4:], a.abs().amax(1), "row amaxes")
    golden = fp4sim.quantize(f32(a), recipe, role="activation", **ROW)
    assert_bits(qa.codes, torch.from_numpy(np.array(golden.codes)), "codes")
    assert_bits(qa.scales, torch.from_numpy(np.array(golden.scales)), "scales")
    assert_bits(ft.dequantize(qa), torch.from_numpy(np.array(fp4sim.dequantize(golden))), "dequantize")
    qb = ft.quantize(b, recipe, "fprop.b", **ROW)
    assert qb.scalars.shape == (4,), "the weight keeps its tensor amax"
    for datapath in ("sm90-bf16", "exact"):
        c = ft.gemm_quantized(qa, qb, datapath=datapath)
        want = fp4sim.gemm(f32(a), f32(b), recipe, "fprop", datapath=datapath, **ROW)
        assert_bits(c, torch.from_numpy(np.array(want)), f"{recipe} {datapath} fprop")
        tensor_scaled = fp4sim.gemm(f32(a), f32(b), recipe, "fprop", datapath=datapath, two_d=False)
        assert (np.array(want) != np.array(tensor_scaled)).any(), "row scaling should change this product"


def test_row_scope_has_no_quantized_backward():
    with pytest.raises(Exception, match="forward activations"):
        ft.ops.gemm_plan("nvfp4-norht", ft.ops.overrides_text(ROW), "dgrad", "sm90-bf16")
    with pytest.raises(ValueError, match="no quantized backward"):
        ft.Linear(64, 32, recipe="nvfp4-norht", backward="quantized", **ROW)
    with pytest.raises(ValueError, match="transformed basis"):
        ft.Linear(64, 32, recipe="nvfp4", rht=True, backward="dequantized")
    with pytest.raises(ValueError, match="backward: expected one of"):
        ft.Linear(64, 32, recipe="nvfp4", backward="bf16")
    assert ft.Linear(64, 32, recipe="nvfp4-norht", **ROW).backward == "high_precision"  # TE's default for it
    assert ft.Linear(64, 32, recipe="nvfp4").backward == "quantized"


@pytest.mark.parametrize("recipe", ROW_RECIPES)
@pytest.mark.parametrize("backward", ["dequantized", "high_precision"])
def test_cpu_row_scaled_linear_equals_the_golden_model_by_hand(recipe, backward):
    """Y = the golden row-scaled fprop + bias; dX = dY·W' and dW = dYᵀ·X' as BF16 matmuls, with W', X' the
    golden dequantized operands (backward="dequantized") or W and the BF16 input (high_precision)."""
    torch.manual_seed(0)
    layer = ft.Linear(128, 64, recipe=recipe, backward=backward, **ROW)
    for step in (1, 2):
        layer.begin_step(step)
        x = rows_of_many_binades(48, 128, 10 + step).reshape(2, 24, 128).requires_grad_(True)
        dy = sample((2, 24, 64), 20 + step, 1e-3)
        y = layer(x)
        y.backward(dy)
        xb = x.detach().reshape(-1, 128).to(torch.bfloat16)
        dyb = dy.reshape(-1, 64).to(torch.bfloat16)
        gy = fp4sim.gemm(f32(xb), f32(layer.weight), recipe, "fprop", datapath=layer.datapath, **ROW)
        assert_bits(y.reshape(-1, 64), torch.from_numpy(np.array(gy)) + layer.bias.detach(), f"step {step} Y")
        if backward == "dequantized":
            w_used = golden_dequantized(layer.weight, recipe, "weight", two_d=False)
            x_used = golden_dequantized(xb, recipe, "activation", **ROW)
        else:
            w_used, x_used = layer.weight.detach().to(torch.bfloat16), xb
        assert_bits(x.grad.reshape(-1, 128), (dyb @ w_used).float(), f"step {step} dX")
        assert_bits(layer.weight.grad, (dyb.t() @ x_used).float(), f"step {step} dW")
        assert_bits(layer.bias.grad, dyb.float().sum(0), f"step {step} db")
        layer.weight.grad = layer.bias.grad = None


@gpu
@pytest.mark.parametrize("recipe", ROW_RECIPES)
@pytest.mark.parametrize("datapath", ["probe-matched", "sm90-bf16", "exact"])
def test_gpu_row_scaled_ops_equal_cpu(recipe, datapath):
    for m, n, k in [(128, 256, 128), (72, 40, 192), (300, 130, 64)]:
        a, b = rows_of_many_binades(m, k, m), sample((n, k), n, 5.0)
        what = f"{recipe} {datapath} {m}x{n}x{k}"
        qa = [ft.quantize(t, recipe, "fprop.a", **ROW) for t in (a.cuda(), a)]
        qb = [ft.quantize(t, recipe, "fprop.b", **ROW) for t in (b.cuda(), b)]
        for name in ("codes", "scales", "scalars"):
            assert_bits(getattr(qa[0], name), getattr(qa[1], name), f"{what} A {name}")
        assert_bits(ft.dequantize(qa[0]), ft.dequantize(qa[1]), f"{what} A dequantize")
        bias = sample((n,), n + 1, 3.0)
        for out_dtype in ("f32", "bf16"):
            assert_bits(ft.gemm_quantized(qa[0], qb[0], datapath=datapath, out_dtype=out_dtype),
                        ft.gemm_quantized(qa[1], qb[1], datapath=datapath, out_dtype=out_dtype), f"{what} {out_dtype}")
            assert_bits(ft.gemm_quantized(qa[0], qb[0], datapath=datapath, out_dtype=out_dtype, bias=bias.cuda()),
                        ft.gemm_quantized(qa[1], qb[1], datapath=datapath, out_dtype=out_dtype, bias=bias),
                        f"{what} {out_dtype} bias")


@gpu
@pytest.mark.parametrize("recipe", ROW_RECIPES)
def test_gpu_small_llama_trains_row_scaled_equal_to_golden(recipe):
    """TE's RL recipe: row-scaled activations, dequantized backward; every fprop GEMM of the sampled linears
    (operands and output) equal to the golden model."""
    sampled = ["layers.0.q_proj", "layers.0.down_proj", "layers.5.v_proj", "layers.5.gate_proj"]
    checked, losses = train_and_check("cuda", recipe, sampled, convert=dict(backward="dequantized", **ROW))
    print(f"{recipe} row-scaled: {checked} GEMMs equal to the golden model; losses {losses}")
