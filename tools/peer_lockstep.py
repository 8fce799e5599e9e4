#!/usr/bin/env python3
"""fp4sim.torch against the UE5M3 paper authors' layer, trained in lock step (issue 24): two copies of one
model, every linear but lm_head converted, one by `ft.convert(model, recipe="ue5m3", exclude=["lm_head"],
rbits=...)` alone (no hook), the other by the authors' `convert_linear_modules(..., backend="triton",
selector=exclude_lm_head)`; after every step the loss, every held tensor amax (and the step it was sampled
at), every gradient and every parameter must be equal bit for bit.

    python3 tools/peer_lockstep.py                          # 100 steps on the GPU (CUDA build of fp4sim)
    python3 tools/peer_lockstep.py --peer-root .peer --steps 150 --model small-llama --width 384 --layers 6 \
        --heads 6 --ffn 1024 --batch 16 --seq 1024          # the trace-A model (tools/small_llama.py defaults)
    python3 tools/peer_lockstep.py --control --device cpu --steps 2 --batch 1 --seq 64 --width 64 --ffn 128
                                                            # the harness alone: fp4sim against fp4sim

The peer is the authors' public package `ue5m3_fp4` (the src/ of github.com/MrHuff/ue5m3-fp4, Apache-2.0),
put on sys.path from --peer-root (default: $FP4SIM_PEER_ROOT, else tools/.oracles/ue5m3-fp4/src, whose
SOURCE beside it names the commit); it is run as an external peer, never part of fp4sim.

The model: an HF `LlamaForCausalLM` of a tiny config (eager attention) when transformers imports, else
tools/small_llama.py (--model picks; both hand q, k, v, gate and up the float32 output of their RMSNorm under
autocast, the case of issue 24: the output counts the linears that received float32 at step 1). A step:
each library's step clock (ft.begin_step / TrainingScaleState.begin_step), forward under
autocast(bfloat16) (SDPA on its math backend, which is deterministic), float32 cross-entropy, backward,
AdamW. The authors' layer takes BF16 activations only, so a forward pre-hook casts its input to the
autocast dtype (what autocast does for nn.Linear); fp4sim's layer has none.

Stochastic rounding: the authors' Triton quantizer draws its bits itself (backends/triton/quantization.py,
_resolve_random_bits): for each stochastically rounded GEMM operand, `torch.randint(0, 256, operand.shape,
dtype=torch.int32, device=operand.device)` from the device's default generator (they pass no generator),
operand A's draw before B's; in their proposed recipe only dY rounds stochastically, so each layer's
backward draws dgrad's dY [tokens, out], then wgrad's dYᵀ [out, tokens]. fp4sim's `rbits` callable is that
same call (`authors_rbits`), which ft.Linear makes for the same operands in the same order. The device's
RNG state is saved before one model's forward and backward and restored before the other's, so both
consume one stream; the two states after them must be equal too (the same number of bits drawn).

Output: one JSON line (model, steps run, tensors compared, differing elements of the first differing tensor,
the peer commit, and that difference: step, tensor, first index, both bit patterns and values); a
difference is also described on stderr. Exit 0 when everything was equal, 1 at the first difference
(the run stops there), 2 for usage (no peer, no CUDA, fp4sim built without its kernels, no Triton).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import sys

import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_peer_train import cast_input_to_autocast_dtype, load_peer  # noqa: E402
from small_llama import SmallLlama, byte_batches  # noqa: E402
from train import corpus  # noqa: E402

PROG = "peer_lockstep"
DEFAULT_PEER_ROOT = os.path.join(os.path.dirname(HERE), "tools", ".oracles", "ue5m3-fp4", "src")
# The authors' TrainingScaleState role of each fp4sim.torch held amax.
AUTHORS_ROLE = {"activation": "activation", "weight": "weight", "grad_output": "upstream_gradient"}


def authors_rbits(shape, device):
    """The stochastic-rounding bits the authors' Triton quantizer draws for an operand of `shape`."""
    return torch.randint(0, 256, shape, dtype=torch.int32, device=device)


def build_model(a) -> tuple[torch.nn.Module, str]:
    """The model of the command line from --seed, and its description."""
    torch.manual_seed(a.seed)
    if a.model == "hf":
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(vocab_size=256, hidden_size=a.width, intermediate_size=a.ffn,
                             num_hidden_layers=a.layers, num_attention_heads=a.heads,
                             num_key_value_heads=a.kv_heads, max_position_embeddings=a.seq,
                             tie_word_embeddings=False, use_cache=False)
        config._attn_implementation = "eager"  # matmul and softmax: deterministic, unlike SDPA's fused backwards
        model, kind = LlamaForCausalLM(config), "transformers.LlamaForCausalLM"
    else:
        model, kind = SmallLlama(d=a.width, layers=a.layers, heads=a.heads, ffn=a.ffn), "tools/small_llama.py"
    description = (f"{kind} (width {a.width}, {a.layers} layers, {a.heads} heads"
                   + (f", {a.kv_heads} kv heads" if a.model == "hf" else "") + f", ffn {a.ffn}, vocab 256)")
    return model.to(a.device), description


class Side:
    """One of the two models in training: its converted linears, optimizer, step clock and held amaxes."""

    def __init__(self, name: str, model: torch.nn.Module, linears: list, begin_step, held, hf: bool):
        self.name, self.model, self.linears, self.hf = name, model, linears, hf
        self.begin_step, self.held = begin_step, held
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)

    def forward_backward(self, step: int, x, y) -> torch.Tensor:
        self.begin_step(step)
        with torch.autocast(x.device.type, dtype=torch.bfloat16), sdpa_kernel(SDPBackend.MATH):
            logits = self.model(input_ids=x).logits if self.hf else self.model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        return loss.detach()

    def optimizer_step(self) -> None:
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def fp4sim_side(name: str, model: torch.nn.Module, hf: bool, **convert_kwargs) -> Side:
    import fp4sim.torch as ft
    ft.convert(model, recipe="ue5m3", exclude=["lm_head"], rbits=authors_rbits, **convert_kwargs)

    def held():
        out = {}
        for module, m in model.named_modules():
            if isinstance(m, ft.Linear):
                state = m.get_extra_state()
                for role, value in state["held"].items():
                    out[(module, role)] = (value.reshape(1), state["sampled_at"].get(role))
        return out
    linears = sorted(m.name for m in model.modules() if isinstance(m, ft.Linear))
    return Side(name, model, linears, lambda step: ft.begin_step(model, step), held, hf)


def authors_side(model: torch.nn.Module, peer, hf: bool) -> Side:
    _, convert_linear_modules, exclude_lm_head, recipe_class, state_class = peer
    recipe = recipe_class.proposed()
    state = state_class(recipe)
    records = convert_linear_modules(model, recipe=recipe, scale_state=state, backend="triton",
                                     selector=exclude_lm_head)
    for record in records:
        model.get_submodule(record.module_name).register_forward_pre_hook(cast_input_to_autocast_dtype)
    fp4sim_role = {v: k for k, v in AUTHORS_ROLE.items()}

    def held():
        return {(e["module_name"], fp4sim_role.get(e["role"], e["role"])):
                (torch.tensor([e["reference_amax"]], dtype=torch.float32), e["last_refresh_step"])
                for e in state.report()["entries"]}
    return Side("authors", model, sorted(r.module_name for r in records), state.begin_step, held, hf)


def bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().cpu()
    return t.view({8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[t.element_size()])


def difference(step: int, what: str, a: torch.Tensor, b: torch.Tensor, names) -> dict | None:
    """None when a and b are equal bit for bit, else where they first differ."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return {"step": step, "tensor": what, "reason": f"{names[0]} {a.dtype} {tuple(a.shape)}, "
                f"{names[1]} {b.dtype} {tuple(b.shape)}", "differing": max(a.numel(), b.numel())}
    ba, bb = bits(a), bits(b)
    differ = ba != bb
    count = int(differ.sum())
    if count == 0:
        return None
    flat = int(differ.reshape(-1).nonzero()[0])
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape)] if a.dim() else []
    width = 2 * a.element_size()
    va, vb = ba.reshape(-1)[flat].item(), bb.reshape(-1)[flat].item()
    mask = (1 << (8 * a.element_size())) - 1
    return {"step": step, "tensor": what, "index": index, "dtype": str(a.dtype).removeprefix("torch."),
            names[0]: f"0x{va & mask:0{width}x}", names[1]: f"0x{vb & mask:0{width}x}",
            f"{names[0]}_value": float(a.detach().reshape(-1)[flat]),
            f"{names[1]}_value": float(b.detach().reshape(-1)[flat]),
            "differing": count, "elements": a.numel()}


class Comparison:
    """Compares the two sides' tensors in a fixed order and keeps the first difference."""

    def __init__(self, names):
        self.names, self.compared, self.first = names, 0, None

    def tensor(self, step: int, what: str, a: torch.Tensor, b: torch.Tensor) -> bool:
        self.compared += 1
        self.first = difference(step, what, a, b, self.names)
        return self.first is None

    def fact(self, step: int, what: str, a, b) -> bool:
        """A non-tensor fact both sides must share (a key set, a refresh step)."""
        if a != b:
            self.first = {"step": step, "tensor": what, self.names[0]: repr(a), self.names[1]: repr(b), "differing": 1}
        return self.first is None

    def step(self, step: int, one: Side, two: Side, loss_one, loss_two) -> bool:
        if not self.tensor(step, "loss", loss_one, loss_two):
            return False
        held_one, held_two = one.held(), two.held()
        if not self.fact(step, "held amax keys (module, role)", sorted(held_one), sorted(held_two)):
            return False
        for key in sorted(held_one):
            (v1, s1), (v2, s2) = held_one[key], held_two[key]
            if not (self.fact(step, f"{key[0]} {key[1]} amax sampled at step", s1, s2)
                    and self.tensor(step, f"{key[0]} held {key[1]} amax", v1, v2)):
                return False
        return self.parameters(step, one, two, "grad")

    def parameters(self, step: int, one: Side, two: Side, what: str) -> bool:
        p1, p2 = dict(one.model.named_parameters()), dict(two.model.named_parameters())
        if not self.fact(step, "parameter names", sorted(p1), sorted(p2)):
            return False
        for name in reversed(p1):  # the backward's order: the first difference named is the one nearest the loss
            a, b = (p1[name], p2[name]) if what == "param" else (p1[name].grad, p2[name].grad)
            if (a is None) != (b is None):
                return self.fact(step, f"{what} {name} present", a is not None, b is not None)
            if a is not None and not self.tensor(step, f"{what} {name}", a, b):
                return False
        return True


def float32_inputs(side: Side):
    """The list of converted linears that receive a float32 input, filled by hooks until they are removed."""
    import fp4sim.torch as ft
    seen = []

    def record(module, args):
        if args[0].dtype == torch.float32:
            seen.append(module.name)
    hooks = [m.register_forward_pre_hook(record) for m in side.model.modules() if isinstance(m, ft.Linear)]
    return seen, hooks


def peer_commit(root: str):
    source = os.path.join(os.path.dirname(os.path.abspath(root)), "SOURCE")
    if os.path.isfile(source):
        for line in open(source):
            if line.startswith("commit:"):
                return line.split(":", 1)[1].strip()
    return None


def lockstep(a, convert_kwargs=None) -> dict:
    """Trains the two sides for a.steps steps, stopping at the first difference; returns the report."""
    convert_kwargs = convert_kwargs or {}
    base, description = build_model(a)
    hf = a.model == "hf"
    one = fp4sim_side("fp4sim", copy.deepcopy(base), hf, **convert_kwargs)
    if a.control:
        two = fp4sim_side("control", base, hf)
    else:
        two = authors_side(base, a.peer, hf)
    compare = Comparison((one.name, two.name))
    seen, hooks = float32_inputs(one)
    cuda = a.device.startswith("cuda")
    get_rng, set_rng = (torch.cuda.get_rng_state, torch.cuda.set_rng_state) if cuda else \
        (torch.get_rng_state, torch.set_rng_state)
    stream = byte_batches(corpus(None), a.batch, a.seq, torch.Generator().manual_seed(a.seed))
    done = 0
    ok = compare.fact(0, "converted linears", one.linears, two.linears)
    for step in range(1, a.steps + 1) if ok else ():
        x, y = (t.to(a.device) for t in next(stream))
        rng = get_rng()
        loss_one = one.forward_backward(step, x, y)
        rng_one = get_rng()
        set_rng(rng)
        loss_two = two.forward_backward(step, x, y)
        done = step
        for h in hooks:
            h.remove()
        hooks = []
        if not (compare.tensor(step, "RNG state after forward and backward (the bits drawn)", rng_one, get_rng())
                and compare.step(step, one, two, loss_one, loss_two)):
            break
        one.optimizer_step()
        two.optimizer_step()
        if not compare.parameters(step, one, two, "param"):
            break
    first = compare.first
    return {"tool": PROG, "model": description, "peer": f"{two.name} (--control)" if a.control else "authors (triton)",
            "peer_commit": None if a.control else peer_commit(a.peer_root), "device": a.device,
            "steps": done, "steps_requested": a.steps, "tokens_per_step": a.batch * a.seq,
            "linears": len(one.linears), "float32_inputs_at_step_1": len(set(seen)),
            "tensors_compared": compare.compared, "differing": first["differing"] if first else 0,
            "first_difference": first}


def parse(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--model", choices=("auto", "hf", "small-llama"), default="auto",
                   help="auto: the HF Llama when transformers imports, else tools/small_llama.py")
    p.add_argument("--peer-root", default=os.environ.get("FP4SIM_PEER_ROOT") or DEFAULT_PEER_ROOT,
                   help="directory holding the authors' ue5m3_fp4 package")
    p.add_argument("--control", action="store_true",
                   help="train fp4sim against a second fp4sim copy (no peer): the harness's own determinism")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2, help="--model hf: key/value heads (grouped-query attention)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.steps < 1 or a.batch < 1 or a.seq < 1 or a.layers < 1 or a.heads < 1 or a.kv_heads < 1:
        p.error("--steps, --batch, --seq, --layers, --heads and --kv-heads must be >= 1")
    has_transformers = importlib.util.find_spec("transformers") is not None
    if a.model == "auto":
        a.model = "hf" if has_transformers else "small-llama"
    elif a.model == "hf" and not has_transformers:
        p.error("--model hf: transformers is not installed (pip install -r requirements-torch-test.txt)")
    if a.model != "hf":
        a.kv_heads = a.heads
    if a.width % a.heads or a.heads % a.kv_heads:
        p.error(f"--width {a.width} must be a multiple of --heads {a.heads}, and --heads of --kv-heads {a.kv_heads}")
    kv_width = a.width // a.heads * a.kv_heads
    for what, k in (("--width", a.width), ("--ffn", a.ffn), ("tokens (--batch x --seq)", a.batch * a.seq),
                    ("the key/value width (--width / --heads x --kv-heads)", kv_width)):
        if k % 64:
            p.error(f"{what} is {k}: the probe-matched datapath needs every GEMM's K a multiple of 64")
    cuda = a.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        p.error(f"--device {a.device}: no CUDA device here (the authors' layer runs on CUDA only; "
                "--control --device cpu checks the harness alone)")
    if not cuda and not a.control:
        p.error(f"--device {a.device}: the authors' Triton layer runs on CUDA only (or use --control)")
    import fp4sim.torch as ft
    if cuda and not ft.cuda_available():
        p.error("fp4sim was built without its CUDA kernels: build it with tools/device_torch.sh")
    a.peer = None
    if not a.control:
        a.peer = load_peer(a.peer_root, PROG)
        from ue5m3_fp4.backends.triton import triton_available
        if not triton_available():
            p.error("the authors' Triton backend is unavailable (pip install triton, a CUDA device)")
    return a


def main(argv=None) -> int:
    a = parse(argv)
    report = lockstep(a)
    print(json.dumps(report))
    first = report["first_difference"]
    if first:
        print(f"{PROG}: step {first['step']}: {first['tensor']} differs: " + json.dumps(first), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
