"""Tests of tools/capture (pytest). Skipped without torch; run on the GPU machine, which has it.

    python3 -m pytest tools/capture/test_capture.py
Set FP4SIM_BINARY to an fp4sim executable to also replay the captured trace.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
h5py = pytest.importorskip("h5py")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp4sim_capture import TraceCapture, window  # noqa: E402
from torch import nn  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 48)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(48, 16)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def train(path, device, steps, capture_steps, rows=8, autocast=False, layers=None):
    torch.manual_seed(0)
    net = Net().to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(4, 5, 32, device=device)  # [batch, seq, features]: 20 token rows
    target = torch.randn(4, 5, 16, device=device)
    seen = {}
    with TraceCapture(net, path, steps=capture_steps, rows=rows, layers=layers, model_name="net") as cap:
        for step in range(1, steps + 1):
            with cap.step(step, lr=0.1) as s:
                with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
                    out = net(x)
                    loss = ((out.float() - target) ** 2).mean()
                out.retain_grad()
                loss.backward()
                s.set(loss=float(loss.detach()))
                seen[step] = dict(x=x.reshape(-1, 32).detach().clone(), w2=net.fc2.weight.detach().clone(),
                                  dy=out.grad.reshape(-1, 16).detach().clone())
            opt.step()
            opt.zero_grad()
    return net, seen


@pytest.mark.parametrize("device", DEVICES)
def test_layout_follows_trace_format_v1(tmp_path, device):
    path = str(tmp_path / "t.h5")
    _, seen = train(path, device, steps=5, capture_steps={1, 2, 5}, rows=8)
    with h5py.File(path, "r") as f:
        assert f.attrs["schema"] == "fp4-trace"
        assert int(f.attrs["schema_version"]) == 1
        assert sorted(k for k in f if k.startswith("step_")) == ["step_000001", "step_000002", "step_000005"]
        for name in ("step_000001", "step_000002", "step_000005"):
            g = f[name]
            assert int(g.attrs["step"]) == int(name[5:])
            assert "loss" in g.attrs
            assert set(g) == {"fc1", "fc2"}
            for layer, (inp, out) in {"fc1": (32, 48), "fc2": (48, 16)}.items():
                x, w, dy = g[layer]["x"], g[layer]["w"], g[layer]["dy"]
                assert x.shape == (8, inp) and w.shape == (out, inp) and dy.shape == (8, out)
                assert x.dtype == np.float32 and w.dtype == np.float32 and dy.dtype == np.float32
                assert x.attrs["role"] == "activation" and w.attrs["role"] == "weight"
                assert dy.attrs["role"] == "grad_output"
                # docs/trace-format.md shape rules
                assert x.shape[1] == w.shape[1] and dy.shape[1] == w.shape[0] and x.shape[0] == dy.shape[0]
        # Values: the first 8 token rows of fc1's input, fc2's weight, fc2's output gradient.
        np.testing.assert_array_equal(f["step_000002/fc1/x"][...], seen[2]["x"][:8].cpu().numpy())
        np.testing.assert_array_equal(f["step_000002/fc2/w"][...], seen[2]["w2"].cpu().numpy())
        np.testing.assert_allclose(f["step_000005/fc2/dy"][...], seen[5]["dy"][:8].cpu().numpy(), rtol=1e-6)
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_stores_bf16_operands_widened(tmp_path, device):
    path = str(tmp_path / "bf16.h5")
    train(path, device, steps=1, capture_steps={1}, rows=None, autocast=True)
    with h5py.File(path, "r") as f:
        for t in ("x", "w", "dy"):
            ds = f["step_000001/fc1/" + t]
            assert ds.attrs["orig_dtype"] == "bfloat16"
            v = ds[...]
            # every value exactly representable in bf16: the low 16 bits of the float32 pattern are zero
            assert not np.any(v.view(np.uint32) & 0xFFFF)
        assert f["step_000001/fc1/x"].shape == (20, 32)


def test_row_indices_layers_and_windows(tmp_path):
    path = str(tmp_path / "sel.h5")
    _, seen = train(path, "cpu", steps=4, capture_steps=window(2, 3), rows=[0, 7, 19], layers=r"fc2")
    with h5py.File(path, "r") as f:
        assert sorted(k for k in f if k.startswith("step_")) == ["step_000002", "step_000003", "step_000004"]
        assert set(f["step_000003"]) == {"fc2"}
        assert list(f.attrs["capture_steps"]) == [2, 3, 4]
        np.testing.assert_allclose(f["step_000003/fc2/dy"][...], seen[3]["dy"][[0, 7, 19]].numpy(), rtol=1e-6)


def test_failure_leaves_no_file(tmp_path):
    path = str(tmp_path / "fail.h5")
    net = Net()
    with pytest.raises(RuntimeError):
        with TraceCapture(net, path, steps={1}) as cap:
            with cap.step(1):
                raise RuntimeError("training crashed")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError):
        TraceCapture(net, path, steps={1}, layers="nothing_matches")


def _fp4sim():
    exe = os.environ.get("FP4SIM_BINARY")
    if exe and os.path.exists(exe):
        return exe
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for build in ("build", "build-replay"):
        candidate = os.path.join(root, build, "fp4sim")
        if os.path.exists(candidate):
            return candidate
    return None


def test_fp4sim_replays_the_capture(tmp_path):
    exe = _fp4sim()
    if exe is None:
        pytest.skip("no fp4sim binary (set FP4SIM_BINARY)")
    path = str(tmp_path / "r.h5")
    train(path, "cpu", steps=3, capture_steps={1, 2, 3}, rows=16)
    out = str(tmp_path / "r.json")
    subprocess.run([exe, "replay", path, "--datapath", "f64", "--json", out, "-q"], check=True)
    import json
    with open(out) as fh:
        doc = json.load(fh)
    assert len(doc["tensors"]) == 3 * 2 * 3 * 3  # steps x layers x tensors x recipes
