"""The stacks' own quantizers as external oracles (tools/te_oracle.py, tools/torchao_oracle.py,
tools/microxcaling_oracle.py, tools/flashinfer_oracle.py, tools/modelopt_oracle.py; docs/recipes.md "Stack profiles"),
on one seed of their generated inputs.

Runs only where the oracles are set up: TransformerEngine's, torchao's, microxcaling's, FlashInfer's and ModelOpt's
sources in tools/.oracles/ (the
tools' docstrings say how) and a Python with torch ($FP4SIM_ORACLE_PYTHON, else the worktree's .venv-oracle or
.venv-torch); skipped otherwise, saying why.

* Every profile: 0 differing codes and scales (exit 0).
* A wrong pairing (fp4sim's `ceil` for torchao's CEIL, the fast-math error for TE's default 4over6, TE's
  scale order or no scale clamp for torchao's and ModelOpt's NVFP4, OCP's exponent-field floor or the hardware's
  -0 and ties for microxcaling's, TE's input-domain error for FlashInfer's decode-scale one) reports differences
  (exit 1): the tools can fail.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ORACLES = ROOT / "tools" / ".oracles"
FP4SIM = os.environ.get("FP4SIM_BINARY")


def oracle_python():
    candidates = [os.environ.get("FP4SIM_ORACLE_PYTHON"), ROOT / ".venv-oracle" / "bin" / "python",
                  ROOT / ".venv-torch" / "bin" / "python"]
    for c in candidates:
        if c and Path(c).exists() and not subprocess.run([str(c), "-c", "import torch, numpy"],
                                                         capture_output=True).returncode:
            return str(c)
    return None


PYTHON = oracle_python()


def missing(peer_file):
    if not FP4SIM:
        return "FP4SIM_BINARY not set"
    if not (ORACLES / peer_file).exists():
        return f"{ORACLES / peer_file} not checked out"
    if not PYTHON:
        return "no Python with torch and numpy (set FP4SIM_ORACLE_PYTHON)"
    return ""


TE = "TransformerEngine/transformer_engine/pytorch/custom_recipes/reference_nvfp4.py"
AO = "ao/torchao/prototype/mx_formats/mx_tensor.py"
MX = "microxcaling/mx/mx_ops.py"
FI = "flashinfer/tests/test_helpers/utils_fp4.py"
MODELOPT = "modelopt/modelopt/torch/quantization/qtensor/nvfp4_tensor.py"


def run(tool, *args):
    return subprocess.run([PYTHON, str(ROOT / "tools" / tool), "--binary", FP4SIM, "--seeds", "1", *args],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))


def differing(out):
    return [tuple(map(int, m)) for m in re.findall(r"differing codes (\d+) scales (\d+)", out)]


@pytest.mark.skipif(bool(missing(TE)), reason=missing(TE) or "present")
def test_te_profiles_match():
    p = run("te_oracle.py")
    assert p.returncode == 0, p.stdout + p.stderr
    counts = differing(p.stdout)
    assert len(counts) == 33 and all(c == (0, 0) for c in counts), p.stdout


@pytest.mark.skipif(bool(missing(TE)), reason=missing(TE) or "present")
def test_te_oracle_can_fail():
    p = run("te_oracle.py", "--only", "4over6 MAE 256 1-D", "--fp4sim-extra", "--four-over-six-error fast-math")
    assert p.returncode == 1, p.stdout + p.stderr
    assert any(c != (0, 0) for c in differing(p.stdout)), p.stdout


# TE's reference keeps the RHT of a float32 tensor in float32: rounding it to BF16 (fp4sim's default, TE's
# kernels) changes codes and scales.
@pytest.mark.skipif(bool(missing(TE)), reason=missing(TE) or "present")
def test_te_oracle_rht_precision_can_fail():
    p = run("te_oracle.py", "--only", "rht bf16 input TE's signs", "--fp4sim-extra", "--rht-precision float32")
    assert p.returncode == 1, p.stdout + p.stderr
    assert any(c != (0, 0) for c in differing(p.stdout)), p.stdout


@pytest.mark.skipif(bool(missing(AO)), reason=missing(AO) or "present")
def test_torchao_profiles_match():
    p = run("torchao_oracle.py")
    assert p.returncode == 0, p.stdout + p.stderr
    counts = differing(p.stdout)
    assert len(counts) == 22 and all(c == (0, 0) for c in counts), p.stdout
    assert "nvfp4-torchao " in p.stdout and "nvfp4-torchao-two-level" in p.stdout, p.stdout


@pytest.mark.skipif(bool(missing(AO)), reason=missing(AO) or "present")
def test_torchao_oracle_can_fail():
    p = run("torchao_oracle.py", "--rule", "ceil=CEIL")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "CEIL" in p.stdout and any(c[1] for c in differing(p.stdout)), p.stdout


@pytest.mark.skipif(bool(missing(MX)), reason=missing(MX) or "present")
def test_microxcaling_profiles_match():
    p = run("microxcaling_oracle.py")
    assert p.returncode == 0, p.stdout + p.stderr
    counts = differing(p.stdout)
    assert len(counts) == 6 and all(c == (0, 0) for c in counts), p.stdout


@pytest.mark.skipif(bool(missing(MX)), reason=missing(MX) or "present")
@pytest.mark.parametrize("flipped, what", [("scale-rule=floor", 1), ("element-specials=hardware", 0)])
def test_microxcaling_oracle_can_fail(flipped, what):
    p = run("microxcaling_oracle.py", "--rounds", "nearest", "--blocks", "32", "--swap", flipped)
    assert p.returncode == 1, p.stdout + p.stderr
    assert any(c[what] for c in differing(p.stdout)), p.stdout


@pytest.mark.skipif(bool(missing(FI)), reason=missing(FI) or "present")
def test_flashinfer_profiles_match():
    p = run("flashinfer_oracle.py")
    assert p.returncode == 0, p.stdout + p.stderr
    counts = differing(p.stdout)
    assert len(counts) == 18 and all(c == (0, 0) for c in counts), p.stdout


@pytest.mark.skipif(bool(missing(FI)), reason=missing(FI) or "present")
def test_flashinfer_oracle_can_fail():
    p = run("flashinfer_oracle.py", "--only", "4over6 MSE 448 strict", "--swap", "four-over-six-error=input")
    assert p.returncode == 1, p.stdout + p.stderr
    assert any(c != (0, 0) for c in differing(p.stdout)), p.stdout


@pytest.mark.skipif(bool(missing(AO)), reason=missing(AO) or "present")
@pytest.mark.parametrize("swap", ["scale-order=te", "scale-min=0"])
def test_torchao_nvfp4_oracle_can_fail(swap):
    p = run("torchao_oracle.py", "--presets", "mxfp4", "--swap", swap)
    assert p.returncode == 1, p.stdout + p.stderr
    nvfp4 = [line for line in p.stdout.splitlines() if line.startswith("nvfp4-torchao")]
    assert len(nvfp4) == 2 and any(c != (0, 0) for c in differing("\n".join(nvfp4))), p.stdout


@pytest.mark.skipif(bool(missing(MODELOPT)), reason=missing(MODELOPT) or "present")
def test_modelopt_profiles_match():
    p = run("modelopt_oracle.py")
    assert p.returncode == 0, p.stdout + p.stderr
    counts = differing(p.stdout)
    assert len(counts) == 1 and all(c == (0, 0) for c in counts), p.stdout


@pytest.mark.skipif(bool(missing(MODELOPT)), reason=missing(MODELOPT) or "present")
@pytest.mark.parametrize("swap", ["scale-order=te", "scale-min=0", "zero-scale=keep", "element-specials=hardware",
                                  "element-specials=te-python", "nan-amax=ignore"])
def test_modelopt_oracle_can_fail(swap):
    p = run("modelopt_oracle.py", "--swap", swap)
    assert p.returncode == 1, p.stdout + p.stderr
    assert any(c != (0, 0) for c in differing(p.stdout)), p.stdout
