"""What replay's figures and summary promise a researcher (tools/plot_replay.py, docs/replay.md "The summary"),
checked on a slice of the shipped trace: the counts the figures draw apart (repaired scales, saturation by FP32
rounding, flushed blocks) against NumPy and against each other, and the words each figure and the summary
owe the reader. The figures are built but not rendered (the script's `save` is replaced by a collector of
their text), all in this one process: matplotlib starts once.

The binary is $FP4SIM_BINARY (ctest sets it).
"""

import importlib.util
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from cli_run import TRACE, needs_binary, run

pytestmark = needs_binary

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "plot_replay.py"
# lm_head dy at step 200 flushes whole blocks; layers.3 q_proj dy has zero blocks and underflowed scales
# (repaired to 1.0 by ue5m3); nvfp4 saturates a few scales by FP32 rounding, in o_proj x at step 200 two
# ulps above 448.
SLICE = ["--steps", "1,200", "--layers", r"lm_head|layers\.3\.self_attn\.[qo]_proj", "--datapath", "f64"]


@pytest.fixture(scope="module")
def plot_replay():
    spec = importlib.util.spec_from_file_location("plot_replay", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """hold -> (JSON, summary) of the slice under that hold rule."""
    out = {}
    for hold in ("window", "previous"):
        path = tmp_path_factory.mktemp(hold) / "r.json"
        r = run("replay", TRACE, *SLICE, "--hold", hold, "--json", path)
        assert r.returncode == 0, r.stderr
        out[hold] = (json.loads(path.read_text()), r.stdout)
    return out


def figure_texts(plot_replay, monkeypatch, data, tmp_path, figures):
    """name -> (figure, every text of it: titles, labels, legends, annotations) of the named plot functions,
    built, not drawn. (sqnr_per_layer and gemm_error, the slowest to build, promise nothing checked here;
    ReplayCli.PlotsWhenMatplotlibIsAvailable draws all six.)"""
    texts = {}

    def collect(fig, out, name):
        found = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
        texts[name] = (fig, "\n".join(t for t in found if t))

    monkeypatch.setattr(plot_replay, "save", collect)
    for name in figures:
        function = getattr(plot_replay, name)
        function(data, str(tmp_path), "nvfp4") if name == "plot_block_sqnr" else function(data, str(tmp_path))
    return texts


def entries(data, recipe):
    return [t for t in data["tensors"] if t["recipe"] == recipe]


def test_counts_the_figures_draw_apart(replays):
    data, _ = replays["window"]
    ue5m3, nvfp4, mxfp4 = (entries(data, r) for r in ("ue5m3", "nvfp4", "mxfp4"))
    # ue5m3 (zero_scale one) repairs every zero scale, the zero blocks' and the underflowed ones'; the
    # others repair none.
    for t in ue5m3:
        assert t["scale_repaired"] == t["zero_blocks"] + t["scale_underflow"], (t["layer"], t["tensor"])
    assert sum(t["scale_repaired"] for t in ue5m3) > 0
    assert all(t["scale_repaired"] == 0 for t in nvfp4 + mxfp4)
    # A flushed block has block SQNR exactly 0 dB; nvfp4's underflowed scales flush whole blocks.
    for t in ue5m3 + nvfp4 + mxfp4:
        b = t["block_stats"]
        assert b["flushed_blocks"] <= b["block_sqnr_db_hist"].get("0", 0)
    for t in nvfp4:
        assert t["block_stats"]["flushed_blocks"] >= t["scale_underflow"]
    assert sum(t["block_stats"]["flushed_blocks"] for t in nvfp4) > 0
    for h in data["headroom"]:
        for f in h["formats"].values():
            assert 0 <= f["saturated_rounding_blocks"] <= f["saturated_blocks"]
            # Proposition 1: at rho <= U/T no block saturates in exact arithmetic, so whatever saturates is
            # rounding (a bound that missed the 2-ulp cases would fail here).
            if h["rho"] <= f["headroom"]:
                assert f["saturated_rounding_blocks"] == f["saturated_blocks"], (h["step"], h["layer"], h["tensor"])
    assert sum(h["formats"]["ue4m3"]["saturated_blocks"] for h in data["headroom"]) > 0


def test_saturation_by_rounding_against_numpy(replays):
    """nvfp4's scale saturation, all of it and the part within 2^-22 above 448, from the trace with NumPy:
    u = RN(a_B * RN(G * RN(1/6))), G = RN(RN(6 * 448) / amax) in float32 (current scaling)."""
    data, _ = replays["window"]
    f32 = np.float32
    checked = rounding = two_ulps = 0
    with h5py.File(TRACE, "r") as trace:
        for t in entries(data, "nvfp4"):
            if t["tensor"] == "w" or t["tensor_scale"] != "current":
                continue
            x = np.abs(trace["step_%06d/%s/%s" % (t["step"], t["layer"], t["tensor"])][()].astype(f32))
            block_amax = x.reshape(x.shape[0], -1, t["block_cols"]).max(axis=2)
            g = f32(f32(6 * 448) / f32(x.max()))
            u = block_amax * f32(g * (f32(1) / f32(6)))
            assert int((u > 448).sum()) == t["scale_saturated"], (t["step"], t["layer"], t["tensor"])
            near = (u > 448) & (u.astype(np.float64) <= 448 * (1 + 2.0 ** -22))
            assert int(near.sum()) == t["scale_saturated_rounding"], (t["step"], t["layer"], t["tensor"])
            checked += 1
            rounding += t["scale_saturated_rounding"]
            two_ulps += int((u > np.nextafter(f32(448), f32(np.inf))).sum())
    assert checked == 12 and rounding > 0 and two_ulps > 0


def test_scale_histogram_leaves_out_what_was_not_measured(replays, plot_replay):
    data, _ = replays["window"]
    values = data["scale_code_values"]["ue5m3"]
    one = values.index(1.0)
    dy = [t for t in entries(data, "ue5m3") if t["tensor"] == "dy"]
    raw = sum(t["block_stats"]["scale_codes"].get(str(one), 0) for t in dy)
    counts, left = plot_replay.scale_code_counts(dy, values)
    assert left["repaired"] > 0 and counts.get(one, 0) == raw - left["repaired"]
    e8m0 = data["scale_code_values"]["e8m0"]
    counts, left = plot_replay.scale_code_counts([t for t in entries(data, "mxfp4") if t["tensor"] == "dy"], e8m0)
    raw = sum(t["block_stats"]["scale_codes"].get("0", 0) for t in entries(data, "mxfp4") if t["tensor"] == "dy")
    assert left["zero"] > 0 and counts.get(0, 0) == raw - left["zero"]  # all-zero blocks at 2^-127, not drawn


def test_figures_say_what_they_leave_out(replays, plot_replay, monkeypatch, tmp_path):
    data, _ = replays["window"]
    texts = figure_texts(plot_replay, monkeypatch, data, tmp_path,
                         ["plot_scale_codes", "plot_heatmaps", "plot_block_sqnr", "plot_headroom"])
    fig, scale = texts["scale_codes.png"]
    repaired = sum(t["scale_repaired"] for t in entries(data, "ue5m3"))
    assert "%d repaired to scale 1.0" % repaired in scale and "kept at scale 0" in scale
    assert "at the smallest e8m0 scale 2^-127" in scale and "no zero scales" not in scale
    lo, hi = fig.axes[2].get_xlim()  # mxfp4: the axis spans the measured scales, not 2^-127..2^127
    assert lo > -100 and hi < 100
    _, heat = texts["underflow_saturation.png"]
    assert "scale saturated by rounding only" in heat and "nothing is clipped" in heat
    assert "blocks whose scale clipped" in heat  # zero everywhere: named, not drawn
    _, blocks = texts["block_sqnr.png"]
    assert "flushed whole to 0 (0 dB, not drawn)" in blocks
    _, head = texts["headroom_rho.png"]
    assert "No rho figure" in head and "is 1 for all 18 tensors under --hold window" in head
    assert "rho = current amax / held amax" in head and "hatched: by FP32 rounding" in head


def test_a_rho_figure_when_there_is_a_rho(replays, plot_replay, monkeypatch, tmp_path):
    data, _ = replays["previous"]
    assert any(h["rho"] != 1 for h in data["headroom"])
    _, head = figure_texts(plot_replay, monkeypatch, data, tmp_path, ["plot_headroom"])["headroom_rho.png"]
    assert "No rho figure" not in head and "a scale format saturates above its U/T line" in head


def test_a_recipe_map_bf16_is_named_not_drawn_as_blocks(replays, plot_replay, monkeypatch, tmp_path):
    data, _ = replays["window"]
    mapped = dict(data, tensors=[dict(t, recipe="bf16", blocks=0) if t["layer"] == "lm_head" and
                                 t["recipe"] == "mxfp4" else t for t in data["tensors"] if t["recipe"] != "ue5m3"])
    mapped["recipes"] = [{"name": "nvfp4"}, {"name": "mxfp4"}, {"name": "bf16"}]
    texts = figure_texts(plot_replay, monkeypatch, mapped, tmp_path,
                         ["plot_scale_codes", "plot_heatmaps", "plot_block_sqnr"])
    assert "not block-quantized: bf16" in texts["underflow_saturation.png"][1]
    assert "bf16: not block-quantized, not drawn" in texts["block_sqnr.png"][1]
    assert "bf16" not in texts["scale_codes.png"][1]


def test_the_summary_defines_its_terms(replays):
    _, window = replays["window"]
    for term in ("underflow: nonzero inputs flushed to 0", "saturated: elements scaled above the element max",
                 "scale sat / scale unf: blocks whose ideal", "GEMM rel err:", "U = the scale format's largest",
                 "tensors sat.:", "by rounding: ideal scale within 2^-22 above U", "blocks underflow:",
                 "scale sat by FP32 rounding alone", "best: the highest", "block SQNR p01: the 1st percentile"):
        assert term in window, term
    assert "rho = 1 for every tensor" in window and "largest rho" not in window
    _, previous = replays["previous"]
    assert "largest rho" in previous and "rho = 1 for every tensor" not in previous
