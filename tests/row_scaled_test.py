"""Row-scaled NVFP4 (`amax_scope=row`, TE's row_scaled_activation) in a layer's GEMMs, driving the built
fp4sim (docs/semantics.md 1.13): fprop's A takes one amax per row and the GEMM one alpha per output row, the
weight keeps its tensor amax, and dgrad and wgrad (which TE runs in high precision) are refused by `gemm`
and quantized per tensor by `replay`."""

import json

import numpy as np
import pytest

from cli_run import TRACE, needs_binary, refused, run

pytestmark = needs_binary
ROW = ["--recipe", "nvfp4-norht", "--amax-scope", "row", "--one-d"]


def ok(*args):
    r = run(*args)
    assert r.returncode == 0, r.stderr
    return r


def test_rows_scaled_by_powers_of_two_give_rows_of_c_scaled_by_them(tmp_path):
    """Row i of A = 2^e_i · row 0: each row's own amax makes its codes and scales those of row 0 and its alpha
    2^e_i times row 0's, so the exact datapath gives C_i = 2^e_i · C_0 bit for bit. One tensor amax breaks
    that: the small rows' blocks then sit far down the scale grid."""
    rng = np.random.default_rng(3)
    base = (rng.standard_normal(128) * np.exp2(rng.integers(-4, 5, 128))).astype(np.float32)
    exps = np.array([0, -9, 7, -20, 3, 12, -14, 1], dtype=np.float32)
    a = (base[None, :] * np.exp2(exps)[:, None]).astype(np.float32)
    b = (rng.standard_normal((24, 128)) * 2).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    for scope, want_scaled in (("row", True), ("tensor", False)):
        out = tmp_path / f"c_{scope}.npy"
        ok("gemm", "--recipe", "nvfp4-norht", "--amax-scope", scope, "--one-d", "--gemm", "fprop", "--datapath",
           "exact", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy", "--out", out)
        c = np.load(out)
        scaled = np.array_equal(c, c[0][None, :] * np.exp2(exps)[:, None])
        assert scaled == want_scaled, scope


@pytest.mark.parametrize("gemm", ["dgrad", "wgrad"])
def test_gemm_refuses_a_row_scaled_backward(tmp_path, gemm):
    np.save(tmp_path / "a.npy", np.ones((4, 32), np.float32))
    refused(run("gemm", *ROW, "--gemm", gemm, "--a", tmp_path / "a.npy", "--b", tmp_path / "a.npy", "--out",
                tmp_path / "c.npy"), 2, "--amax-scope row", "forward activations", "--gemm fprop")
    assert not (tmp_path / "c.npy").exists()


def entries(result, kind, recipe):
    return [{k: v for k, v in e.items() if k != "recipe"} for e in result[kind] if e["recipe"] == recipe]


def test_replay_row_scales_the_forward_activations_only(tmp_path):
    row, tensor = "nvfp4-norht:amax_scope=row,two_d=false", "nvfp4-norht:two_d=false"
    ok("replay", TRACE, "--recipes", f"{row},{tensor}", "--steps", "1", "--json", tmp_path / "r.json", "-q")
    result = json.loads((tmp_path / "r.json").read_text())
    for kind, key, row_scaled in (("tensors", "role", {"activation"}), ("gemms", "gemm", {"fprop"})):
        ours, theirs = entries(result, kind, row), entries(result, kind, tensor)
        assert ours and len(ours) == len(theirs), kind
        differ = {e[key] for e, t in zip(ours, theirs) if e != t}
        assert differ == row_scaled, (kind, differ)
