"""fp4sim.capture (docs/trace-format.md, version 2): the layout it writes, several forwards per step,
TransformerEngine-structured modules, one file per rank, fp4sim.torch.Linear's quantized operands checked
by `fp4sim verify`, and its traces replayed by `fp4sim replay`.

TransformerEngine is not installable here: its modules are stood in for by classes of the same names,
parameter names and forward math (TELinear, TELayerNormLinear, TELayerNormMLP below). Skipped as a whole
without PyTorch or h5py (ctest reports it skipped); the replay and verify tests need FP4SIM_BINARY."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="fp4sim.capture tests need PyTorch and h5py (not installed)")
h5py = pytest.importorskip("h5py", reason="fp4sim.capture tests need PyTorch and h5py (not installed)")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import fp4sim.torch as ft  # noqa: E402
from fp4sim.capture import TraceCapture, rank_path, verify, window  # noqa: E402


def fp4sim_binary():
    exe = os.environ.get("FP4SIM_BINARY")
    if not exe or not os.path.exists(exe):
        pytest.skip("no fp4sim binary (set FP4SIM_BINARY)")
    return exe


def replay(path, tmp_path):
    out = str(tmp_path / "replay.json")
    r = subprocess.run([fp4sim_binary(), "replay", path, "--datapath", "f64", "--json", out, "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(out) as fh:
        return json.load(fh)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 48)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(48, 16)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def train(path, steps, capture_steps, rows=8, autocast=False, layers=None, micro=1):
    """SGD on Net; `micro` forwards and backwards per step (gradient accumulation). Returns, per step, the
    input, fc2's weight and the output gradient of each micro-batch."""
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(micro, 4, 5, 32)  # [micro, batch, seq, features]: 20 token rows a micro-batch
    target = torch.randn(micro, 4, 5, 16)
    seen = {}
    with TraceCapture(net, path, steps=capture_steps, rows=rows, layers=layers, model_name="net") as cap:
        for step in range(1, steps + 1):
            seen[step] = []
            with cap.step(step, lr=0.1) as s:
                for m in range(micro):
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                        out = net(x[m])
                        loss = ((out.float() - target[m]) ** 2).mean()
                    out.retain_grad()
                    loss.backward()
                    seen[step].append(dict(x=x[m].reshape(-1, 32).clone(), w2=net.fc2.weight.detach().clone(),
                                           dy=out.grad.reshape(-1, 16).clone()))
                s.set(loss=float(loss.detach()))
            opt.step()
            opt.zero_grad()
    return seen


def test_layout_follows_trace_format_v2(tmp_path):
    path = str(tmp_path / "t.h5")
    seen = train(path, steps=5, capture_steps={1, 2, 5}, rows=8)
    with h5py.File(path, "r") as f:
        assert f.attrs["schema"] == "fp4-trace" and int(f.attrs["schema_version"]) == 2
        assert sorted(k for k in f if k.startswith("step_")) == ["step_000001", "step_000002", "step_000005"]
        for name in ("step_000001", "step_000002", "step_000005"):
            g = f[name]
            assert int(g.attrs["step"]) == int(name[5:]) and "loss" in g.attrs
            assert set(g) == {"fc1", "fc2"}
            for layer, (inp, out) in {"fc1": (32, 48), "fc2": (48, 16)}.items():
                assert set(g[layer]) == {"call_000001"}
                assert int(g[layer].attrs["forwards_without_gradient"]) == 0
                c = g[layer]["call_000001"]
                x, w, dy = c["x"], c["w"], c["dy"]
                assert x.shape == (8, inp) and w.shape == (out, inp) and dy.shape == (8, out)
                assert x.dtype == w.dtype == dy.dtype == np.float32
                assert (x.attrs["role"], w.attrs["role"], dy.attrs["role"]) == ("activation", "weight", "grad_output")
        np.testing.assert_array_equal(f["step_000002/fc1/call_000001/x"][...], seen[2][0]["x"][:8].numpy())
        np.testing.assert_array_equal(f["step_000002/fc2/call_000001/w"][...], seen[2][0]["w2"].numpy())
        np.testing.assert_array_equal(f["step_000005/fc2/call_000001/dy"][...], seen[5][0]["dy"][:8].numpy())
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]


def test_autocast_stores_bf16_operands_widened(tmp_path):
    path = str(tmp_path / "bf16.h5")
    train(path, steps=1, capture_steps={1}, rows=None, autocast=True)
    with h5py.File(path, "r") as f:
        for t in ("x", "w", "dy"):
            ds = f["step_000001/fc1/call_000001/" + t]
            assert ds.attrs["orig_dtype"] == "bfloat16"
            assert not np.any(ds[...].view(np.uint32) & 0xFFFF)  # bf16 values: low 16 bits zero
        assert f["step_000001/fc1/call_000001/x"].shape == (20, 32)


def test_row_indices_layers_and_windows(tmp_path):
    path = str(tmp_path / "sel.h5")
    seen = train(path, steps=4, capture_steps=window(2, 3), rows=[0, 7, 19], layers=r"fc2")
    with h5py.File(path, "r") as f:
        assert sorted(k for k in f if k.startswith("step_")) == ["step_000002", "step_000003", "step_000004"]
        assert set(f["step_000003"]) == {"fc2"}
        assert list(f.attrs["capture_steps"]) == [2, 3, 4]
        np.testing.assert_array_equal(f["step_000003/fc2/call_000001/dy"][...], seen[3][0]["dy"][[0, 7, 19]].numpy())


def test_failure_leaves_no_file(tmp_path):
    path = str(tmp_path / "fail.h5")
    net = Net()
    with pytest.raises(RuntimeError, match="training crashed"):
        with TraceCapture(net, path, steps={1}) as cap:
            with cap.step(1):
                raise RuntimeError("training crashed")
    with pytest.raises(RuntimeError, match="did the step run backward"):
        with TraceCapture(net, path, steps={1}) as cap:
            with cap.step(1):
                net(torch.randn(2, 32))
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="no linear module"):
        TraceCapture(net, path, steps={1}, layers="nothing_matches")


def test_gradient_accumulation_records_each_forward_and_replays(tmp_path):
    path = str(tmp_path / "accum.h5")
    seen = train(path, steps=2, capture_steps={1, 2}, rows=None, micro=3)
    with h5py.File(path, "r") as f:
        for step in (1, 2):
            g = f["step_%06d/fc2" % step]
            assert set(g) == {"call_000001", "call_000002", "call_000003"}
            for m in range(3):
                c = g["call_%06d" % (m + 1)]
                np.testing.assert_array_equal(f["step_%06d/fc1/call_%06d/x" % (step, m + 1)][...], seen[step][m]["x"].numpy())
                np.testing.assert_array_equal(c["dy"][...], seen[step][m]["dy"].numpy())
    doc = replay(path, tmp_path)
    layers = {t["layer"] for t in doc["tensors"]}
    assert layers == {"%s/call_%06d" % (l, m) for l in ("fc1", "fc2") for m in (1, 2, 3)}


def test_shared_module_and_activation_recompute(tmp_path):
    """A module used twice in one forward gives two calls, each with its own dy; a checkpointed forward's
    recomputation is not a third call; a forward the loss does not use gets no gradient and is counted."""
    torch.manual_seed(1)
    shared, head = nn.Linear(16, 16), nn.Linear(16, 8)
    model = nn.ModuleDict({"shared": shared, "head": head})
    x = torch.randn(6, 16)
    path = str(tmp_path / "shared.h5")
    with TraceCapture(model, path, steps={1}, rows=None) as cap:
        with cap.step(1):
            h1 = shared(x)
            h1.retain_grad()
            h2 = torch.utils.checkpoint.checkpoint(shared, torch.tanh(h1), use_reentrant=False)
            h2.retain_grad()
            shared(x * 2)  # unused by the loss
            head(h2).square().sum().backward()
    with h5py.File(path, "r") as f:
        g = f["step_000001/shared"]
        assert set(g) == {"call_000001", "call_000002"}
        assert int(g.attrs["forwards_without_gradient"]) == 1
        np.testing.assert_array_equal(g["call_000001/x"][...], x.numpy())
        np.testing.assert_array_equal(g["call_000002/x"][...], torch.tanh(h1).detach().numpy())
        np.testing.assert_array_equal(g["call_000001/dy"][...], h1.grad.numpy())
        np.testing.assert_array_equal(g["call_000002/dy"][...], h2.grad.numpy())


# -- TransformerEngine-structured modules: TE's class names, parameter names and forward math ---------------
class Linear(nn.Module):  # transformer_engine.pytorch.Linear
    def __init__(self, in_features, out_features):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class LayerNormLinear(nn.Module):  # transformer_engine.pytorch.LayerNormLinear(normalization="RMSNorm")
    def __init__(self, in_features, out_features, eps=1e-5):
        super().__init__()
        self.eps, self.normalization, self.zero_centered_gamma = eps, "RMSNorm", True
        self.layer_norm_weight = nn.Parameter(0.1 * torch.randn(in_features))
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x):
        self.ln_out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1 + self.layer_norm_weight)
        self.ln_out.retain_grad()
        return F.linear(self.ln_out, self.weight, self.bias), self.ln_out  # return_layernorm_output=True


class LayerNormMLP(nn.Module):  # transformer_engine.pytorch.LayerNormMLP(activation="swiglu")
    def __init__(self, hidden, ffn, eps=1e-5):
        super().__init__()
        self.eps, self.normalization, self.activation = eps, "LayerNorm", "swiglu"
        self.layer_norm_weight = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.layer_norm_bias = nn.Parameter(0.1 * torch.randn(hidden))
        self.fc1_weight = nn.Parameter(torch.randn(2 * ffn, hidden) / hidden ** 0.5)
        self.fc1_bias = nn.Parameter(0.1 * torch.randn(2 * ffn))
        self.fc2_weight = nn.Parameter(torch.randn(hidden, ffn) / ffn ** 0.5)
        self.fc2_bias = nn.Parameter(torch.zeros(hidden))

    def forward(self, x):
        ln = F.layer_norm(x, (x.shape[-1],), self.layer_norm_weight, self.layer_norm_bias, self.eps)
        self.h = F.linear(ln, self.fc1_weight, self.fc1_bias)
        self.h.retain_grad()
        a, b = self.h.chunk(2, dim=-1)
        self.act = F.silu(a) * b
        return F.linear(self.act, self.fc2_weight, self.fc2_bias)


class TEBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = LayerNormLinear(32, 32)
        self.proj = Linear(32, 32)
        self.mlp = LayerNormMLP(32, 64)

    def forward(self, x):
        h = x + self.proj(self.qkv(x)[0])
        return h + self.mlp(h)


def test_transformer_engine_structured_modules(tmp_path):
    torch.manual_seed(2)
    block = TEBlock()
    x = torch.randn(2, 16, 32)
    path = str(tmp_path / "te.h5")
    with TraceCapture(block, path, steps={1}, rows=None) as cap:
        with cap.step(1):
            out = block(x)
            out.retain_grad()
            block.mlp.h  # noqa: B018 - the intermediates the stand-ins keep for this test
            out.square().mean().backward()
    with h5py.File(path, "r") as f:
        g = f["step_000001"]
        assert set(g) == {"qkv", "proj", "mlp.fc1", "mlp.fc2"}
        qkv, fc1, fc2 = g["qkv/call_000001"], g["mlp.fc1/call_000001"], g["mlp.fc2/call_000001"]
        # LayerNormLinear: its GEMM's x is the normalised input (RMSNorm, zero-centred gamma)
        np.testing.assert_allclose(qkv["x"][...], block.qkv.ln_out.detach().reshape(-1, 32).numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(qkv["w"][...], block.qkv.weight.detach().numpy())
        # LayerNormMLP: fc1 and fc2, fc1's dy recomputed from fc2's
        assert fc1["x"].shape == (32, 32) and fc1["w"].shape == (128, 32) and fc1["dy"].shape == (32, 128)
        assert fc2["x"].shape == (32, 64) and fc2["w"].shape == (32, 64) and fc2["dy"].shape == (32, 32)
        np.testing.assert_allclose(fc2["x"][...], block.mlp.act.detach().reshape(-1, 64).numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(fc2["dy"][...], out.grad.reshape(-1, 32).numpy())
        np.testing.assert_allclose(fc1["dy"][...], block.mlp.h.grad.reshape(-1, 128).numpy(), rtol=1e-5, atol=1e-9)
    doc = replay(path, tmp_path)
    assert {t["layer"] for t in doc["tensors"]} == {"qkv/call_000001", "proj/call_000001", "mlp.fc1/call_000001",
                                                   "mlp.fc2/call_000001"}


# -- fp4sim.torch.Linear: the quantized operands it used, checked by fp4sim verify -------------------------
def capture_fp4(path, recipe, micro=2, device="cpu"):
    torch.manual_seed(3)
    net = ft.convert(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64)), recipe=recipe).to(device)
    x = torch.randn(micro, 64, 64, device=device)
    with TraceCapture(net, path, steps={1}, rows=32) as cap:
        ft.begin_step(net, 1)
        with cap.step(1):
            for m in range(micro):
                net(x[m]).square().mean().backward()


@pytest.mark.parametrize("recipe", ["nvfp4", "ue5m3"])
def test_fp4_operands_verify_bit_exact(tmp_path, recipe):
    """The CPU path is the golden model, so every recorded operand and GEMM output verifies with 0 mismatches."""
    exe = fp4sim_binary()
    path = str(tmp_path / "fp4.h5")
    capture_fp4(path, recipe)
    with h5py.File(path, "r") as f:
        fp4 = f["step_000001/2/call_000002/fp4"]
        assert set(fp4) == {g + s for g in ("fprop", "dgrad", "wgrad") for s in ("", ".a", ".b")}
        assert fp4["fprop.a/input"].shape == (64, 64)  # whole, whatever rows x holds
        assert f["step_000001/2/call_000002/x"].attrs["orig_dtype"] == "bfloat16"
        assert "dgrad" not in f["step_000001/0/call_000001/fp4"]  # the first layer's input needs no gradient
    results = verify(path, str(tmp_path / "npy"), fp4sim=exe)
    gemm_checks = [c for c, _ in results if c.argv[2] == "gemm"]
    assert len(gemm_checks) == 2 * (3 + 2)  # two calls of a layer with dgrad and one without
    assert len(results) > len(gemm_checks)
    for c, r in results:
        assert r.returncode == 0, (c.what, r.stdout, r.stderr)


@pytest.mark.skipif(not ft.cuda_available(), reason="no CUDA build of fp4sim or no CUDA device")
@pytest.mark.parametrize("recipe", ["nvfp4", "ue5m3", "mxfp4"])
def test_fp4_operands_of_the_gpu_kernels_verify_bit_exact(tmp_path, recipe):
    """On a GPU the recorded bytes are the CUDA kernels' own: verify judges them against the golden model."""
    exe = fp4sim_binary()
    path = str(tmp_path / "gpu.h5")
    capture_fp4(path, recipe, device="cuda")
    results = verify(path, str(tmp_path / "npy"), fp4sim=exe)
    assert len(results) > 10
    for c, r in results:
        assert r.returncode == 0, (c.what, r.stdout, r.stderr)


def test_fp4_verify_names_a_corrupted_code(tmp_path):
    exe = fp4sim_binary()
    path = str(tmp_path / "bad.h5")
    capture_fp4(path, "nvfp4", micro=1)
    with h5py.File(path, "r+") as f:
        codes = f["step_000001/2/call_000001/fp4/fprop.a/codes"]
        v = codes[...]
        v[3, 5] ^= 0x01
        codes[...] = v
    results = verify(path, str(tmp_path / "npy"), fp4sim=exe)
    failed = [(c, r) for c, r in results if r.returncode != 0]
    assert [c.what for c, _ in failed] == ["step_000001/2/call_000001 fprop.a"]
    assert failed[0][1].returncode == 4
    assert "1 element" in failed[0][1].stderr
    assert "element [3, 10]" in failed[0][1].stdout  # byte 5 of row 3: its low nibble is element 10
    r = subprocess.run([sys.executable, "-m", "fp4sim.capture.verify", path, "--fp4sim", exe],
                       capture_output=True, text=True)
    assert r.returncode == 4, r.stderr
    assert "MISMATCH  step_000001/2/call_000001 fprop.a" in r.stdout
    assert "%d of %d checks bit-exact" % (len(results) - 1, len(results)) in r.stdout


# -- torch.distributed: one file per rank ---------------------------------------------------------------
# Two gloo ranks forked from a fresh interpreter (a fork after torch ran parallel work can deadlock, and
# spawning imports everything again per rank: tens of seconds on a loaded machine).
RANKS = """
import sys, torch
from torch import nn
from fp4sim.capture import TraceCapture

def rank_main(rank, world, init, path):
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    net = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(32, 48), nn.ReLU(), nn.Linear(48, 16)))
    x = torch.full((4, 32), float(rank))
    with TraceCapture(net, path, steps={1}, rows=None) as cap:
        with cap.step(1):
            net(x).square().mean().backward()
    torch.distributed.destroy_process_group()

torch.multiprocessing.start_processes(rank_main, args=(2, sys.argv[1], sys.argv[2]), nprocs=2, start_method="fork")
"""


def test_one_file_per_rank(tmp_path):
    path = str(tmp_path / "dist.h5")
    subprocess.run([sys.executable, "-c", RANKS, "file://" + str(tmp_path / "init"), path], check=True, timeout=120)
    assert sorted(p for p in os.listdir(tmp_path) if p.endswith(".h5")) == ["dist.rank00000.h5", "dist.rank00001.h5"]
    for rank in (0, 1):
        with h5py.File(rank_path(path, rank), "r") as f:
            assert int(f.attrs["rank"]) == rank and int(f.attrs["world_size"]) == 2
            np.testing.assert_array_equal(f["step_000001/module.0/call_000001/x"][...], np.full((4, 32), rank, np.float32))


def test_import_without_torch_is_a_clear_error():
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    from fp4sim.capture import TraceCapture\nexcept ImportError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "fp4sim.capture needs PyTorch and h5py" in r.stdout and "torch" in r.stdout
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['torch'] = None; import fp4sim; print('ok')"],
                       capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "ok"
