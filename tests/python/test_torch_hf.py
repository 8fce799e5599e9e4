"""fp4sim.torch in Hugging Face transformers: a tiny LlamaForCausalLM converted with ft.convert trains
through transformers' Trainer (CPU, BF16 autocast) with fp4sim.torch.hf.BeginStep keeping the step clock;
tools/train.py --model hf trains one beside its BF16 twin.

Skipped without PyTorch or transformers (requirements-torch-test.txt pins both; ctest reports it skipped)."""

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="fp4sim.torch tests need PyTorch (not installed)")
transformers = pytest.importorskip("transformers", reason="fp4sim.torch tests need transformers (not installed)")

import fp4sim.torch as ft  # noqa: E402
from fp4sim.torch.hf import BeginStep  # noqa: E402

STEPS = 2
SEQ = 32  # 2 sequences a step: 64 tokens, the probe-matched datapath's K multiple


class ByteWindows(torch.utils.data.Dataset):
    def __init__(self, text: bytes, count: int):
        data = torch.tensor(list(text), dtype=torch.long)
        g = torch.Generator().manual_seed(0)
        self.starts = torch.randint(0, len(data) - SEQ, (count,), generator=g).tolist()
        self.data = data

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, i):
        window = self.data[self.starts[i]:self.starts[i] + SEQ]
        return {"input_ids": window, "labels": window}


def test_tiny_llama_trains_through_trainer(tmp_path):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=SEQ)
    model = ft.convert(transformers.LlamaForCausalLM(config), recipe="ue5m3", exclude=["lm_head"], period=2, seed=1)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, ft.Linear)}
    assert len(linears) == 7 and "model.layers.0.self_attn.q_proj" in linears
    before = {n: m.weight.detach().clone() for n, m in linears.items()}
    args = transformers.TrainingArguments(output_dir=str(tmp_path), max_steps=STEPS, per_device_train_batch_size=2,
                                          gradient_accumulation_steps=2, learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to=[],
                                          use_cpu=True, bf16=True, dataloader_num_workers=0, seed=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=ByteWindows(open(__file__, "rb").read(), 64),
                                   callbacks=[BeginStep()])
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert len(losses) == STEPS and all(0 < v < 10 for v in losses), trainer.state.log_history
    for name, m in linears.items():
        assert m.step == STEPS, name  # the clock followed the optimizer, not the 2 microbatches of a step
        assert m._sampled_at == {"activation": 1, "weight": 1, "grad_output": 1}, name  # period 2: held at 2
        assert all(float(getattr(m, f"held_{role}")) > 0 for role in ("activation", "weight", "grad_output")), name
        assert not torch.equal(m.weight.detach(), before[name]), name  # and it trained


def test_train_py_trains_the_tiny_hf_llama_beside_bf16(capsys):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import train
    assert train.main(["--model", "hf", "--recipe", "ue5m3", "--compare-bf16", "--steps", "2", "--every", "1",
                       "--batch", "1", "--seq", "64", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "recipe ue5m3" in out and "recipe bf16" in out, out
    table = out[out.index("loss bf16"):].splitlines()[1:3]
    assert [int(line.split()[0]) for line in table] == [1, 2], out
    assert all(0 < float(v) < 10 for line in table for v in line.split()[1:3]), out
    assert "last loss ue5m3" in out, out
