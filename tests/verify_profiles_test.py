"""`fp4sim verify quantize --profile auto|NAME` from the command line (docs/cli.md): which stack made these bytes,
its exit codes (0 when a profile reproduces every byte, 4 when none does, 2 for a usage error) and its JSON.
The ranking itself is tested in verify_profiles_test.cpp.

The binary: $FP4SIM_BINARY (ctest sets it).
"""

import json
import os
import subprocess

import numpy as np
import pytest

FP4SIM = os.environ.get("FP4SIM_BINARY")
pytestmark = pytest.mark.skipif(not FP4SIM or not os.path.exists(FP4SIM), reason="FP4SIM_BINARY not built")


def run(*args):
    return subprocess.run([FP4SIM, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def made(tmp_path):
    """Bytes as the kernel behind `recipe` stores them: (x, codes, scales) paths."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((32, 128)) * np.exp2(rng.integers(-6, 6, (32, 1)))).astype(np.float32)
    np.save(tmp_path / "x.npy", x)

    def make(recipe):
        p = run("quantize", "--recipe", recipe, "--in", tmp_path / "x.npy", "--codes", tmp_path / "c.npy",
                "--scales", tmp_path / "s.npy")
        assert p.returncode == 0, p.stderr
        return tmp_path / "x.npy", tmp_path / "c.npy", tmp_path / "s.npy"

    return make


def verify(x, c, s, *extra):
    return run("verify", "quantize", "--in", x, "--codes", c, "--scales", s, *extra)


@pytest.mark.parametrize("recipe", ["nvfp4-4over6-mse", "mxfp4-ceil", "mxfp8-e5m2-rceil"])
def test_auto_names_the_stack_that_made_the_bytes(made, recipe):
    x, c, s = made(recipe)
    p = verify(x, c, s, "--profile", "auto")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "which reproduces every code and scale" in p.stdout, p.stdout
    doc = json.loads(verify(x, c, s, "--profile", "auto", "--json").stdout)
    # The recipe itself, or a profile whose bytes are identical to its on this tensor (reported as a tie).
    assert doc["best"] == recipe or any(recipe in g and doc["best"] in g for g in doc["ties"]), doc["ties"]


def test_a_planted_scale_is_the_first_divergent_block_and_exit_4(made):
    x, c, s = made("nvfp4")
    scales = np.load(s)
    scales[3, 5] ^= 0x01
    np.save(s, scales)
    p = verify(x, c, s, "--profile", "auto")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "best: nvfp4" in p.stdout and "first divergent: scale of block [3, 5]" in p.stdout, p.stdout
    assert "no stack profile reproduces every byte" in p.stderr


def test_json_ranks_every_profile(made):
    p = verify(*made("mxfp4-rceil"), "--profile", "auto", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["bit_exact"] and doc["best_report"]["bit_exact"]
    first = doc["profiles"][0]
    assert first["matching_blocks"] == first["blocks"] and first["profile"] == doc["best"]
    assert any("mxfp4-rceil" in group for group in doc["ties"]) or doc["best"] == "mxfp4-rceil"


def test_a_named_profile_is_checked_like_a_recipe(made):
    p = verify(*made("nvfp4-norht"), "--profile", "nvfp4-row")
    assert p.returncode == 4 and "recipe nvfp4-row" in p.stdout, p.stdout + p.stderr
    assert verify(*made("nvfp4-4over6"), "--profile", "nvfp4-4over6").returncode == 0


@pytest.mark.parametrize("extra, message", [
    (["--profile", "auto", "--recipe", "nvfp4"], "--profile auto names the recipe: drop --recipe"),
    ([], "--recipe NAME or --profile NAME|auto is required"),
    (["--profile", "no-such-stack"], "no-such-stack not in"),
])
def test_usage_errors(made, extra, message):
    p = verify(*made("nvfp4"), *extra)
    assert p.returncode == 2 and message in p.stderr, p.stderr
