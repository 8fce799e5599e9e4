"""fp4sim.torch.Linear as a drop-in for nn.Linear (docs/torch.md, "Linear"): under torch.autocast its
boundary is nn.Linear's (Y in autocast's dtype, dX computed in autocast's dtype and widened by the cast's
backward), so a converted model trains exactly as it does with its inputs cast to BF16 by hand; the K rule of
the probe-matched datapath is refused in one line before any GEMM runs; and a checkpoint (state_dict with
the clock and the held amaxes) resumes bit for bit.

Skipped without PyTorch (ctest reports it skipped); the CUDA variants skip without a CUDA build or device."""

import copy
import io
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")

import fp4sim.torch as ft  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from small_llama import SmallLlama, byte_batches  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not ft.cuda_available(), reason="no CUDA build of fp4sim or no CUDA device"))]


def bits(t):
    t = t.detach().cpu()
    return t.view({torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[t.dtype])


def same(a, b):
    return a.dtype == b.dtype and torch.equal(bits(a), bits(b))


def in_bf16(t):
    """Whether every element of t is a BF16 value (t was rounded to BF16 at some point)."""
    return torch.equal(bits(t.to(torch.bfloat16).to(t.dtype)), bits(t))


def sample(shape, seed, device, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(device)


def run(layer, x, dy, autocast=True):
    """Y, dX, dW and db of one forward and backward of a fresh copy of `layer` (so every run is its step 1, with
    the same stochastic-rounding bits) on x (a leaf copy), under BF16 autocast."""
    layer = copy.deepcopy(layer)
    x = x.detach().clone().requires_grad_(True)
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=autocast):
        y = layer(x)
    y.backward(dy.to(y.dtype))
    return y.detach(), x.grad, layer.weight.grad, layer.bias.grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_autocast_boundary_is_nn_linears(device, x_dtype):
    torch.manual_seed(0)
    plain = torch.nn.Linear(128, 128).to(device)
    layer = ft.Linear.from_linear(copy.deepcopy(plain), recipe="ue5m3", name="proj", period=1)
    x = sample((2, 64, 128), 1, device).to(x_dtype)
    dy = sample((2, 64, 128), 2, device, 1e-3).to(torch.bfloat16)
    ny, ndx, ndw, ndb = run(plain, x, dy)
    y, dx, dw, db = run(layer, x, dy)
    # The dtypes at the boundary are nn.Linear's: Y in autocast's, every gradient in its tensor's.
    assert (y.dtype, dx.dtype, dw.dtype, db.dtype) == (ny.dtype, ndx.dtype, ndw.dtype, ndb.dtype) \
        == (torch.bfloat16, x_dtype, torch.float32, torch.float32)
    # The rounding point of dX is nn.Linear's: computed in BF16, then widened by the cast's backward.
    assert in_bf16(ndx) and in_bf16(dx)
    # Exactly what autocast's cast gives: the layer run on X cast to BF16 by hand (the hook a user of the
    # paper's layer writes), its dX widened to X's dtype; dW and db (FP32, the recipe's) the same bits.
    hy, hdx, hdw, hdb = run(layer, x.to(torch.bfloat16), dy)
    assert same(y, hy) and same(dx, hdx.to(x_dtype)) and same(dw, hdw) and same(db, hdb)
    if x_dtype == torch.float32:
        # Not vacuous: without autocast the float32 dX of the same GEMM is not rounded to BF16.
        _, udx, udw, _ = run(layer, x, dy.float(), autocast=False)
        assert not in_bf16(udx) and same(udx.to(torch.bfloat16).float(), dx) and same(udw, dw)


def tiny_llama(device):
    torch.manual_seed(0)
    return ft.convert(SmallLlama(d=64, layers=1, heads=1, ffn=128).to(device), recipe="ue5m3",
                      exclude=["lm_head"], period=2, seed=3)


def train(model, steps, batches, device, opt=None):
    """Trains `steps` (a range of step numbers) under BF16 autocast; returns the losses and the optimizer."""
    opt = opt or torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in steps:
        ft.begin_step(model, step)
        x, y = (t.to(device) for t in next(batches))
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    return losses, opt


def batches_of(seed):
    return byte_batches(open(__file__, "rb").read() * 4, batch=2, seq=32, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("device", DEVICES)
def test_converted_model_trains_as_with_inputs_cast_by_hand(device):
    """RMSNorm hands q/k/v/gate/up float32 (as in HF Llama): ft.convert alone trains bit for bit as the same
    model whose every ft.Linear input is cast to BF16 by a hook (how the paper's layer is fed)."""
    alone = tiny_llama(device)
    hooked = copy.deepcopy(alone)
    fed = []
    for m in hooked.modules():
        if isinstance(m, ft.Linear):
            m.register_forward_pre_hook(lambda mod, args: (fed.append(args[0].dtype), (args[0].to(torch.bfloat16),))[1])
    la, _ = train(alone, range(1, 3), batches_of(0), device)  # period 2: sampled at step 1, held at 2
    lh, _ = train(hooked, range(1, 3), batches_of(0), device)
    assert torch.float32 in fed  # the hook had something to cast
    assert all(same(a, b) for a, b in zip(la, lh)), (la, lh)
    sa, sh = alone.state_dict(), hooked.state_dict()
    for k, v in sa.items():
        if isinstance(v, torch.Tensor):
            assert same(v, sh[k]), k


def test_token_count_the_datapath_cannot_take_is_refused_in_one_line():
    layer = ft.Linear(64, 64, recipe="ue5m3", name="blk.q_proj")
    x = sample((2, 50, 64), 1, "cpu").requires_grad_(True)  # 100 tokens: wgrad's K
    with pytest.raises(ValueError) as e:
        layer(x)
    text = str(e.value)
    assert "\n" not in text and "blk.q_proj" in text and "multiple of 64" in text and "is 100" in text
    assert float(layer.held_activation) == 0 and not layer._sampled_at  # refused before anything ran
    with torch.no_grad():  # no backward, so no wgrad: 100 tokens are fine for inference
        assert layer(x).shape == (2, 50, 64)
    layer.weight.requires_grad_(False)  # a frozen weight has no wgrad either: dX alone is computed
    layer(x).sum().backward()
    assert x.grad.shape == x.shape and layer.weight.grad is None
    layer.weight.requires_grad_(True)
    x.grad = None
    with pytest.raises(ValueError, match="out_features.* is 32"):
        ft.Linear(64, 32, recipe="ue5m3")(x)
    with pytest.raises(ValueError, match="in_features.* is 96"):
        ft.Linear(96, 64, recipe="ue5m3")(sample((64, 96), 2, "cpu"))
    # A datapath that takes any K trains on them.
    ft.Linear(64, 64, recipe="ue5m3", datapath="sm90-bf16")(x).sum().backward()
    assert x.grad.shape == x.shape


def test_zero_tokens_would_move_the_stochastic_rounding_bits():
    """Why the K rule is refused rather than padded (docs/torch.md): wgrad's dYᵀ [out, tokens] with zero tokens
    appended draws other Philox bits for every row but the first, so its real elements round otherwise."""
    dyt = sample((8, 64), 3, "cpu", 1e-3).to(torch.bfloat16)
    padded = torch.cat([dyt, torch.zeros_like(dyt)], dim=1)
    held = dyt.float().abs().amax().reshape(1)  # the same tensor scale for both (zeros leave the amax alone)
    q = ft.quantize(dyt, "ue5m3", "wgrad.a", seed=9, amax=held)
    qp = ft.quantize(padded, "ue5m3", "wgrad.a", seed=9, amax=held)
    assert ft.ops.operand_info("ue5m3", "", "wgrad.a")["rounding"] != "rne"
    real = qp.codes[:, :32]  # the 64 real elements of each row, two a byte
    assert torch.equal(real[0], q.codes[0]) and torch.equal(qp.scales[:, :4], q.scales)
    assert all(not torch.equal(real[r], q.codes[r]) for r in range(1, 8))


@pytest.mark.parametrize("device", DEVICES)
def test_checkpoint_resumes_bit_for_bit(device):
    straight = tiny_llama(device)
    batches = batches_of(1)
    _, opt = train(straight, range(1, 2), batches, device)  # held amaxes sampled at step 1
    saved = io.BytesIO()
    torch.save({"model": straight.state_dict(), "opt": opt.state_dict()}, saved)
    rest = [next(batches) for _ in range(2)]
    want, _ = train(straight, range(2, 4), iter(rest), device, opt)  # step 2 holds, step 3 samples afresh

    def resumed(checkpoint):
        model = ft.convert(SmallLlama(d=64, layers=1, heads=1, ffn=128).to(device), recipe="ue5m3",
                           exclude=["lm_head"], period=2, seed=3)
        model.load_state_dict(checkpoint["model"])
        o = torch.optim.AdamW(model.parameters(), lr=1e-2)
        o.load_state_dict(checkpoint["opt"])
        return model, o

    saved.seek(0)
    checkpoint = torch.load(saved, weights_only=True)
    assert all(checkpoint["model"][f"layers.0.{p}._extra_state"]["step"] == 1 for p in ("q_proj", "down_proj"))
    model, o = resumed(checkpoint)
    got, _ = train(model, range(2, 4), iter(rest), device, o)
    assert all(same(a, b) for a, b in zip(got, want)), (got, want)
    for k, v in straight.state_dict().items():
        if isinstance(v, torch.Tensor):
            assert same(v, model.state_dict()[k]), k
    # Not vacuous: the same checkpoint without the clock (as nn.Linear's) loads, samples afresh at step 2,
    # and so differs from the straight run there.
    plain = {k: v for k, v in checkpoint["model"].items() if not k.endswith("._extra_state")}
    model, o = resumed({"model": plain, "opt": checkpoint["opt"]})
    got, _ = train(model, range(2, 3), iter(rest), device, o)
    assert not same(got[0], want[0])
