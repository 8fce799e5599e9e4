"""fp4sim.stats (issue 27): the per-tensor statistics of one quantized tensor, against the figures the
fp4sim command's replay writes for the same tensors of the shipped trace, and the error decomposition's
terms against a NumPy reference on random and trace tensors."""
import json
import os
import pathlib
import subprocess

import h5py
import numpy as np
import pytest

import fp4sim

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRACE = ROOT / "traces" / "trace_a.h5"
BINARY = os.environ.get("FP4SIM_BINARY")
STEP = 1
LAYERS = "lm_head|layers.0.mlp.down_proj"


def figures(entry: dict) -> dict:
    """What fp4sim.stats returns, cut out of a replay `tensors` entry: from `elements` up to the tensor-scale
    hold (`held_amax`, which is replay's), and `block_stats`."""
    keys = list(entry)
    first, last = keys.index("elements"), keys.index("held_amax")
    out = {k: entry[k] for k in keys[first:last]}
    out["block_stats"] = entry["block_stats"]
    return out


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    if not BINARY:
        pytest.skip("FP4SIM_BINARY names the fp4sim command replay's figures come from")
    out = tmp_path_factory.mktemp("replay") / "r.json"
    subprocess.run([BINARY, "replay", str(TRACE), "--recipes", "nvfp4,mxfp4,ue5m3", "--steps", str(STEP),
                    "--layers", LAYERS, "--no-gemms", "--json", str(out), "-q"], check=True)
    return json.loads(out.read_text())


def test_stats_equals_replay_on_the_shipped_trace(replayed):
    compared = 0
    with h5py.File(TRACE, "r") as f:
        for entry in replayed["tensors"]:
            if entry["rounding"] != "rne":
                continue  # stochastic rounding: replay's bits come from its stream per tensor
            x = f[f"step_{entry['step']:06d}/{entry['layer']}/{entry['tensor']}"][...]
            q = fp4sim.quantize(x, entry["recipe"], entry["role"], amax_ref=entry["held_amax"])
            got = fp4sim.stats(x, q)
            want = figures(entry)
            assert list(got) == list(want), entry["layer"]
            for key, value in want.items():
                # JSON numbers in shortest round-trip form: equal floats are equal doubles
                assert got[key] == value, (entry["layer"], entry["tensor"], entry["recipe"], key, got[key], value)
            compared += 1
    # x and w of two layers under three recipes, dy where the recipe rounds it to nearest
    assert compared >= 12


def test_stats_types_are_plain():
    x = np.random.default_rng(1).standard_normal((8, 64), dtype=np.float32)
    s = fp4sim.stats(x, fp4sim.quantize(x, "mxfp4"))
    assert isinstance(s["elements"], int) and isinstance(s["underflow"], int)
    assert isinstance(s["sqnr_db"], float) and isinstance(s["block_stats"]["exact_blocks"], int)
    zero = np.zeros((2, 32), np.float32)
    z = fp4sim.stats(zero, fp4sim.quantize(zero, "mxfp4"))
    assert z["sqnr_db"] is None and z["sqnr_db_note"] == "all-zero tensor (sum x^2 = 0)"
    assert z["grid_noise"] is None and z["grid_noise_note"] == z["sqnr_db_note"]
    # the reference the error is measured against: x itself by default
    q = fp4sim.quantize(x, "nvfp4")
    assert fp4sim.stats(x, q, reference=x.astype(np.float64)) == fp4sim.stats(x, q)
    moved = fp4sim.stats(x, q, reference=x.astype(np.float64) * (1 + 2.0 ** -30))
    assert moved["rel_mse"] != fp4sim.stats(x, q)["rel_mse"]


def test_stats_refuses_a_foreign_shape():
    x = np.ones((4, 64), np.float32)
    q = fp4sim.quantize(x, "nvfp4")
    with pytest.raises(ValueError, match="x"):
        fp4sim.stats(x[:2], q)
    with pytest.raises(TypeError):
        fp4sim.stats(x, q._native)


# ---------------------------------------------------------------------------------------------------
# The error decomposition (docs/replay.md "Error decomposition") against NumPy, written from the
# definitions: scale codes decoded by ml_dtypes, the element grid from ml_dtypes' float4_e2m1fn.

import ml_dtypes  # noqa: E402

SCALE_DTYPES = {"ue4m3": (ml_dtypes.float8_e4m3fn, 0x7E), "e8m0": (ml_dtypes.float8_e8m0fnu, 0xFE)}
GRID = np.arange(8, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)  # codes 0..7 ascending
WINDOW = 4


def grid_round(t: np.ndarray) -> np.ndarray:
    """|x| / d to the nearest element of GRID, ties to the even code, saturating at GRID[-1]."""
    k = np.searchsorted(GRID, t, side="right")
    inside = k < len(GRID)
    kk = np.where(inside, k, 1)
    below, above = t - GRID[kk - 1], GRID[np.minimum(kk, len(GRID) - 1)] - t
    lower_even = (kk - 1) % 2 == 0
    pick_low = (below < above) | ((below == above) & lower_even)
    return np.where(inside, np.where(pick_low, GRID[kk - 1], GRID[np.minimum(kk, len(GRID) - 1)]), GRID[-1])


def reference_terms(x: np.ndarray, q) -> dict:
    r = x.astype(np.float64)
    xhat = q.dequantize().astype(np.float64)
    counted = np.isfinite(r) & np.isfinite(xhat)  # the elements of the error sums
    e = np.where(counted, xhat - r, 0.0)
    rc = np.where(counted, r, 0.0)
    ssr = np.sum(rc * rc)
    dead = counted & (r != 0) & (xhat == 0)
    out = {"bias": e.sum() / counted.sum(), "shrinkage": np.sum(np.where(counted, xhat, 0.0) * rc) / ssr - 1.0,
           "dead_zone_energy_fraction": np.sum(np.where(dead, rc * rc, 0.0)) / ssr,
           # over `nonzero`, which counts the nonzero inputs of the error sums (a finite x-hat too)
           "underflow_fraction": dead.sum() / np.count_nonzero(counted & (r != 0))}
    dtype, max_code = SCALE_DTYPES[q.scale_format]
    decoded = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    decoded = np.where(np.isfinite(decoded) & (decoded > 0) & (np.arange(256) <= max_code), decoded, 0.0)
    br, bc = q.block
    rows, cols = r.shape
    blocks = r.reshape(rows // br, br, cols // bc, bc).transpose(0, 2, 1, 3).reshape(rows // br, cols // bc, br * bc)
    chosen_code = q.scales.astype(np.int64)
    errors = []
    for offset in range(-WINDOW, WINDOW + 1):
        code = chosen_code + offset
        valid = (code >= 0) & (code <= max_code)
        d = np.where(valid, decoded[np.clip(code, 0, 255)], 0.0) * np.float64(q.global_decode_scale)
        with np.errstate(divide="ignore", invalid="ignore"):
            m = grid_round(np.abs(blocks) / d[..., None])
        err = np.where(d[..., None] > 0, np.copysign(m * d[..., None], blocks) - blocks, -blocks)
        sq = np.sum(err * err, axis=-1)
        errors.append(sq if offset == 0 else np.where(d > 0, sq, np.inf))
    errors = np.stack(errors)
    chosen, best = errors[WINDOW], errors.min(axis=0)
    with np.errstate(invalid="ignore"):
        nonzero = np.any(blocks != 0, axis=-1) & np.all(np.isfinite(blocks), axis=-1)
    out["grid_noise"] = np.sum(best[nonzero]) / ssr
    out["scale_choice_loss"] = np.sum((chosen - best)[nonzero]) / ssr
    out["rescalable_blocks"] = int(np.sum(best[nonzero] < chosen[nonzero]))
    out["mean_abs_err"] = np.abs(e).sum() / counted.sum()
    out["amax_deciles"] = reference_deciles(x, xhat, q.block, chosen, best)
    return out


def as_blocks(a: np.ndarray, block) -> np.ndarray:
    br, bc = block
    rows, cols = a.shape
    return a.reshape(rows // br, br, cols // bc, bc).transpose(0, 2, 1, 3).reshape(rows // br, cols // bc, br * bc)


def reference_deciles(x: np.ndarray, xhat: np.ndarray, block, chosen: np.ndarray, best: np.ndarray) -> list:
    """The terms per block-amax decile (docs/replay.md), from the definitions: bins of the float32 bits of
    the block amax >> 20, each bin in the decile of its median block, sums over nonzero blocks whose inputs
    and outputs are all finite."""
    xb, hb = as_blocks(x, block), as_blocks(xhat, block)
    rb = xb.astype(np.float64)
    with np.errstate(invalid="ignore"):
        kept = np.all(np.isfinite(xb), -1) & np.all(np.isfinite(hb), -1) & np.any(xb != 0, -1)
    amax = np.max(np.abs(np.where(kept[..., None], xb, 0)), -1).astype(np.float32)
    bins = amax.view(np.uint32) >> 20
    edges, counts = np.unique(bins[kept], return_counts=True)
    below = np.concatenate([[0], np.cumsum(counts)[:-1]])
    decile_of_bin = np.minimum(9, (20 * below + 10 * counts) // (2 * counts.sum()))
    decile = np.full(bins.shape, -1)
    decile[kept] = decile_of_bin[np.searchsorted(edges, bins[kept])]
    e = np.where(kept[..., None], hb - rb, 0.0)
    r = np.where(kept[..., None], rb, 0.0)
    energy = np.sum(r * r)
    out = []
    for d in range(10):
        m = decile == d
        ssr = np.sum(r[m] ** 2)
        row = {"decile": d, "blocks": int(m.sum())}
        if row["blocks"]:
            in_d = edges[decile_of_bin == d]
            row["block_amax_from"] = float(np.uint32(in_d.min() << 20).view(np.float32))
            row["block_amax_to"] = float(np.uint32((in_d.max() + 1) << 20).view(np.float32))
            dead = (r[m] != 0) & (hb[m] == 0)
            row.update(energy_fraction=ssr / energy, rel_mse=np.sum(e[m] ** 2) / ssr, bias=e[m].sum() / e[m].size,
                       shrinkage=np.sum(hb[m].astype(np.float64) * r[m]) / ssr - 1.0,
                       underflow_fraction=dead.sum() / np.count_nonzero(r[m]),
                       dead_zone_energy_fraction=np.sum(np.where(dead, r[m] ** 2, 0.0)) / ssr,
                       grid_noise=np.sum(best[m]) / ssr, scale_choice_loss=np.sum((chosen - best)[m]) / ssr,
                       rescalable_blocks=int(np.sum(best[m] < chosen[m])), mean_abs_err=np.abs(e[m]).mean())
        out.append(row)
    return out


def random_tensor(seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    x = g.standard_normal((64, 256)) * np.exp(g.normal(0, 1.5, (64, 1)))  # rows a few octaves apart
    x[g.random(x.shape) < 0.01] *= 100.0  # outliers push their blocks' small values into the dead zone
    x[:, :16] *= 1e-40  # a block row of tiny values: scale underflow
    x = x.astype(np.float32)
    if seed == 3:  # data, not errors: excluded from the sums, their blocks from the model
        x[5, 40], x[9, 100], x[20, 200] = np.nan, np.nan, -np.nan
    return x


def trace_tensor(name: str) -> np.ndarray:
    with h5py.File(TRACE, "r") as f:
        return f[f"step_{STEP:06d}/{name}"][...]


@pytest.mark.parametrize("recipe", ["nvfp4", "mxfp4"])
@pytest.mark.parametrize("source,role", [("random:0", "activation"), ("random:1", "weight"), ("random:3", "activation"),
                                         ("lm_head/x", "activation"), ("lm_head/w", "weight"),
                                         ("model.layers.0.mlp.down_proj/dy", "grad_output")])
def test_decomposition_against_numpy(source, role, recipe):
    x = random_tensor(int(source[7:])) if source.startswith("random:") else trace_tensor(source)
    q = fp4sim.quantize(x, recipe, role)
    got, want = fp4sim.stats(x, q), reference_terms(x, q)
    assert got["rescalable_blocks"] == want["rescalable_blocks"]
    assert got["underflow_fraction"] == want["underflow_fraction"]
    # Sums of the same terms in another order: equal to rounding; the bias, a signed sum, to rounding of the
    # absolute errors it sums.
    assert abs(got["bias"] - want["bias"]) <= 1e-12 * want["mean_abs_err"]
    for key in ("shrinkage", "dead_zone_energy_fraction", "grid_noise", "scale_choice_loss"):
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-15), key
    # Not vacuous: every input has blocks a neighbouring scale code would have served better
    assert got["grid_noise"] > 0 and got["scale_choice_loss"] > 0 and got["rescalable_blocks"] > 0
    # The same terms per block-amax decile.
    filled = 0
    for g, w in zip(got["amax_deciles"], want["amax_deciles"], strict=True):
        assert (g["decile"], g["blocks"]) == (w["decile"], w["blocks"])
        if not w["blocks"]:
            assert g["bias"] is None and g["energy_fraction"] == 0
            continue
        filled += 1
        for key in ("block_amax_from", "block_amax_to", "rescalable_blocks", "underflow_fraction"):
            assert g[key] == w[key], (g["decile"], key)
        assert abs(g["bias"] - w["bias"]) <= 1e-12 * w["mean_abs_err"]
        for key in ("energy_fraction", "rel_mse", "shrinkage", "dead_zone_energy_fraction", "grid_noise",
                    "scale_choice_loss"):
            assert g[key] == pytest.approx(w[key], rel=1e-9, abs=1e-15), (g["decile"], key)
    assert filled >= 5
    if source != "random:3":  # without NaN blocks the deciles hold every error: their rel_mse recombine
        recombined = sum(d["energy_fraction"] * d["rel_mse"] for d in got["amax_deciles"] if d["blocks"])
        assert recombined == pytest.approx(got["rel_mse"], rel=1e-9)


def test_decomposition_figures_are_none_under_rht():
    x = random_tensor(2)
    s = fp4sim.stats(x, fp4sim.quantize(x, "nvfp4", rht=True))
    assert s["grid_noise"] is None and "RHT" in s["grid_noise_note"]
    assert s["bias"] is not None  # the element-wise terms need no model
