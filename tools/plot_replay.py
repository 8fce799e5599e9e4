#!/usr/bin/env python3
"""Plots of `fp4sim replay --json` (or `fp4sim sweep --json`) output, as PNG files (matplotlib, Agg).

    python3 tools/plot_replay.py replay.json --out plots/ [--baseline RECIPE]

Every figure gives a recipe the same colour and marker (the Okabe-Ito palette, told apart with the
common colour-vision deficiencies), lists layers in model order grouped by step, draws one marker per
layer (no line joins unrelated layers) and shares the value axis between panels that compare the same
quantity. Difference panels show each recipe against the baseline recipe (--baseline; default nvfp4
when it was replayed, else the first recipe), where gaps too small for the absolute axis show.

Writes:
  sqnr_per_layer.png        SQNR (dB) per layer, step and recipe, one row per tensor (x, w, dy); right:
                            each recipe minus the baseline
  scale_codes.png           histograms of the block scales measured from data (log2 of the decoded scale
                            code) per recipe and tensor role, on an axis spanning them and the format's
                            limits when near; each panel lists what it leaves out: zero blocks, underflowed
                            scales and where the recipe put them (X at 2^0: repaired to 1.0), NaN/Inf blocks
  underflow_saturation.png  per layer (rows) and tensor and step (columns), per recipe: the nonzero inputs
                            that dequantize to 0, the blocks whose scale clipped, those saturated by FP32
                            rounding only (within 2^-22 above the max: not clipping; a count), the blocks
                            whose scale underflowed (a quantity that is zero everywhere is named instead of
                            drawn; a recipe map's bf16, without blocks, too)
  headroom_rho.png          periodic scaling: rho = current amax / held amax per tensor and step against
                            each scale format's U/T (in its place, when rho = 1 throughout, why there is no
                            rho), and the blocks that saturate (by FP32 rounding only: hatched) or underflow
                            per scale format and step
  gemm_error.png            relative Frobenius error per GEMM (fprop, dgrad, wgrad), layer, step and recipe;
                            right: each recipe's error relative to the baseline's
  block_sqnr.png            distribution of the per-block SQNR per recipe and role, flushed blocks (every
                            element to 0: exactly 0 dB) left out of the bins and given in the legend; below:
                            each recipe minus the baseline
A sweep JSON (no steps/layers) gets sqnr_sweep.png instead (SQNR per configuration and input; saturated and
underflowed block scales, saturation by FP32 rounding only hatched).
"""
import argparse
import json
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

# Okabe & Ito, "Color Universal Design" (2008): distinguishable under protanopia, deuteranopia and
# tritanopia. Yellow comes last: it is faint on white.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442"]
MARKERS = ["o", "s", "D", "^", "v", "P", "X", "*"]
FORMAT_COLOURS = ["#D55E00", "#0072B2", "#56B4E9", "#CC79A7", "#009E73"]  # scale formats (headroom)
ROLE_ORDER = ["x", "w", "dy"]
ROLE_TITLE = {"x": "x (activation, fprop)", "w": "w (weight, fprop)", "dy": "dy (grad_output, dgrad)"}
# Roles drawn as lines inside one recipe's panel: colours apart from the first recipes' and a dash pattern.
ROLE_STYLE = {"x": dict(color="#CC79A7", ls="-"), "w": dict(color="#D55E00", ls="--"),
              "dy": dict(color="#56B4E9", ls="-.")}
# Order of the projections inside a transformer block, for listing layers in model order.
PROJECTION_ORDER = ["q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj", "out_proj", "gate_proj", "up_proj", "fc1",
                    "down_proj", "fc2"]
DPI = 100

plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
                     "xtick.labelsize": 9, "ytick.labelsize": 9, "figure.titlesize": 13})


def short_layer(name):
    """'model.layers.3.self_attn.q_proj' -> 'L3.q_proj'."""
    parts = name.replace("/", ".").split(".")
    for p in parts:
        if p.isdigit():
            return "L%s.%s" % (p, parts[-1])
    return parts[-1] if len(name) > 18 else name


def layer_key(name):
    """Model order: numbered blocks by number, projections in block order, unnumbered layers (lm_head) last."""
    parts = name.replace("/", ".").split(".")
    index = next((int(p) for p in parts if p.isdigit()), None)
    leaf = parts[-1]
    rank = PROJECTION_ORDER.index(leaf) if leaf in PROJECTION_ORDER else len(PROJECTION_ORDER)
    return (index is None, index or 0, rank, name)


def recipes_of(data):
    names = [r["name"] for r in data.get("recipes", [])]
    for t in data["tensors"]:
        if t["recipe"] not in names:
            names.append(t["recipe"])
    return names


def quantized_recipes(data):
    """The recipes with block scales (a recipe map's bf16 has none: its tensors are not block-quantized)."""
    return [r for r in recipes_of(data) if any(t["recipe"] == r and t.get("blocks") for t in data["tensors"])]


def recipe_styles(recipes):
    return {r: {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)]}
            for i, r in enumerate(recipes)}


def finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def save(fig, out, name):
    fig.savefig(os.path.join(out, name), dpi=DPI)
    plt.close(fig)


class StepLayerAxis:
    """x positions of (step, layer): layers in model order, one group per step, a gap between groups."""

    def __init__(self, steps, layers):
        self.steps, self.layers = steps, layers
        self.x = {}
        pos = 0.0
        for s in steps:
            for layer in layers:
                self.x[(s, layer)] = pos
                pos += 1.0
            pos += 1.0

    def decorate(self, ax, tick_labels, step_headers):
        n = len(self.layers)
        for gi in range(1, len(self.steps)):
            ax.axvline(self.x[(self.steps[gi], self.layers[0])] - 1.0, color="#999999", lw=0.8)
        ax.set_xlim(-0.8, max(self.x.values()) + 0.8)
        ax.set_xticks([self.x[(s, layer)] for s in self.steps for layer in self.layers])
        if tick_labels:
            ax.set_xticklabels([short_layer(layer) for _ in self.steps for layer in self.layers], rotation=90,
                               fontsize=8)
        if step_headers:
            for s in self.steps:
                centre = self.x[(s, self.layers[0])] + (n - 1) / 2
                ax.text(centre, 1.01, "step %d" % s, transform=ax.get_xaxis_transform(), ha="center",
                        va="bottom", fontsize=9, fontweight="bold")


def widen(get, set_, span, around_zero=False):
    """Widens an axis to at least `span` (symmetric about 0 when around_zero), so that autoscaling never
    blows a gap of a few hundredths up to the full panel."""
    lo, hi = get()
    if hi - lo >= span:
        return
    if around_zero:
        half = max(abs(lo), abs(hi), span / 2)
        set_(-half, half)
    else:
        mid = (lo + hi) / 2
        set_(mid - span / 2, mid + span / 2)


def dodge(i, n, width=0.56):
    """Horizontal offset of series i of n around a slot, so that equal values stay visible side by side."""
    return 0.0 if n < 2 else (i / (n - 1) - 0.5) * width


def signed(v, decimals=2):
    """'+0.25' / '−0.25' (a true minus sign)."""
    return ("%+.*f" % (decimals, v)).replace("-", "\u2212")


def difference_summary(recipe, baseline, diffs, unit, decimals=2):
    """Two lines saying how far a recipe is from the baseline over the points of one panel."""
    if not diffs:
        return "%s:\nnothing to compare" % recipe
    if max(abs(d) for d in diffs) < 0.5 * 10.0 ** -decimals:
        return "%s = %s\nwithin \u00b1%.*f %s" % (recipe, baseline, decimals + 1, 0.5 * 10.0 ** -decimals, unit)
    return "%s: mean %s %s\nrange %s to %s" % (recipe, signed(np.mean(diffs), decimals), unit,
                                              signed(min(diffs), decimals), signed(max(diffs), decimals))


def side_notes(ax, notes):
    """Coloured notes stacked down the right margin of a panel: (text, colour) pairs."""
    y = 1.0
    for text, colour in notes:
        ax.text(1.015, y, text, transform=ax.transAxes, ha="left", va="top", fontsize=8.5, color=colour,
                fontweight="bold")
        y -= 0.09 * (text.count("\n") + 1) + 0.05


def plot_per_layer(data, out, baseline, name, rows, value, row_label, value_label, diff, diff_label, diff_unit,
                   title, ylim_zero, min_span, diff_min_span, legend_extra=None):
    """Rows of absolute values per (step, layer) and recipe (left) and, with more than one recipe, their
    difference from the baseline (right); the value axes are shared down each column and at least
    min_span / diff_min_span tall."""
    recipes = recipes_of(data)
    style = recipe_styles(recipes)
    steps = sorted({t["step"] for t in data["tensors"]})
    layers = sorted({t["layer"] for t in data["tensors"]}, key=layer_key)
    axis = StepLayerAxis(steps, layers)
    others = [r for r in recipes if r != baseline]
    columns = 2 if others else 1
    width = max(10.0 + 4.0 * (columns - 1), 0.22 * (len(axis.x) + len(steps)) * columns + 2.3 * columns)
    fig, axes = plt.subplots(len(rows), columns, figsize=(width, 2.9 * len(rows) + 2.2), sharex=True, sharey="col",
                             squeeze=False)
    all_values = []
    for ri, row in enumerate(rows):
        ax = axes[ri][0]
        for k, r in enumerate(recipes):
            pts = [(axis.x[(s, layer)], value(row, s, layer, r)) for s in steps for layer in layers]
            pts = [(x, v) for x, v in pts if finite(v)]
            all_values += [v for _, v in pts]
            ax.plot([x + dodge(k, len(recipes)) for x, _ in pts], [v for _, v in pts], ls="none", ms=5,
                    marker=style[r]["marker"], color=style[r]["color"], mec="white", mew=0.4,
                    label="%s%s" % (r, legend_extra(r) if legend_extra else ""))
        ax.set_ylabel("%s\n%s" % (row_label(row), value_label))
        if others:
            dax = axes[ri][1]
            dax.axhline(0.0, color=style[baseline]["color"], lw=1.8, zorder=1)
            notes = [("%s = 0 (baseline)" % baseline, style[baseline]["color"])]
            for k, r in enumerate(others):
                pts = []
                for s in steps:
                    for layer in layers:
                        d = diff(value(row, s, layer, r), value(row, s, layer, baseline))
                        if finite(d):
                            pts.append((axis.x[(s, layer)], d))
                dax.plot([x + dodge(k, len(others)) for x, _ in pts], [d for _, d in pts], ls="none", ms=5,
                         marker=style[r]["marker"], color=style[r]["color"], mec="white", mew=0.4, zorder=3)
                notes.append((difference_summary(r, baseline, [d for _, d in pts], diff_unit), style[r]["color"]))
            side_notes(dax, notes)
            dax.set_ylabel(diff_label)
        for a in axes[ri]:
            a.grid(axis="y", alpha=0.35)
            axis.decorate(a, tick_labels=ri == len(rows) - 1, step_headers=ri == 0)
    if ylim_zero and all_values:
        axes[0][0].set_ylim(0.0, max(all_values) * 1.08)
    widen(axes[0][0].get_ylim, axes[0][0].set_ylim, min_span)
    axes[0][0].set_title("%s per layer" % value_label, pad=20)
    if others:
        widen(axes[0][1].get_ylim, axes[0][1].set_ylim, diff_min_span, around_zero=True)
        axes[0][1].set_title("difference from %s" % baseline, pad=20)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(recipes), bbox_to_anchor=(0.5, 0.955), frameon=False,
               markerscale=1.4, fontsize=10)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    save(fig, out, name)


def plot_sqnr(data, out, baseline):
    table = {(t["tensor"], t["step"], t["layer"], t["recipe"]): t.get("sqnr_db") for t in data["tensors"]}
    plot_per_layer(
        data, out, baseline, "sqnr_per_layer.png", ROLE_ORDER,
        value=lambda row, s, layer, r: table.get((row, s, layer, r)),
        row_label=lambda row: ROLE_TITLE[row], value_label="SQNR (dB)",
        diff=lambda v, b: v - b if finite(v) and finite(b) else None,
        diff_label="SQNR \u2212 baseline (dB)\n(> 0: better than baseline)", diff_unit="dB",
        title="Quantization SQNR per layer, step and recipe (higher is better): %s" %
              os.path.basename(data["trace"]["path"]),
        ylim_zero=False, min_span=6.0, diff_min_span=1.0)


def plot_gemms(data, out, baseline):
    gemms = data.get("gemms") or []
    if not gemms:
        return
    table = {(g["gemm"], g["step"], g["layer"], g["recipe"]): g.get("rel_fro_err") for g in gemms}
    datapath = {g["recipe"]: g["datapath"] for g in gemms}
    kinds = [k for k in ["fprop", "dgrad", "wgrad"] if any(g["gemm"] == k for g in gemms)]
    plot_per_layer(
        data, out, baseline, "gemm_error.png", kinds,
        value=lambda row, s, layer, r: table.get((row, s, layer, r)),
        row_label=lambda row: row, value_label="relative error \u2016\u0108 \u2212 C\u2016F / \u2016C\u2016F",
        diff=lambda v, b: 100.0 * (v / b - 1.0) if finite(v) and finite(b) and b > 0 else None,
        diff_label="error / baseline's \u2212 1 (%)\n(< 0: smaller error)", diff_unit="%",
        title="GEMM error against the float64 product, per layer, step and recipe (lower is better): %s" %
              os.path.basename(data["trace"]["path"]),
        ylim_zero=True, min_span=0.0, diff_min_span=10.0,
        legend_extra=lambda r: " (datapath %s)" % datapath.get(r, "?"))


def scale_code_counts(entries, values):
    """Blocks per scale code, summed over entries, of the blocks whose scale was measured from their data,
    and the blocks left out: zero blocks (all +-0), underflowed scales (nonzero ideal scale rounded to 0),
    the repaired ones among both (set to 1.0 by a recipe with zero_scale one) and nonfinite blocks.
    A recipe that repairs repairs every zero scale (zero blocks' and underflowed ones' alike): they sit at
    the code of 1.0. Unrepaired, they sit at the zero code, or at the smallest scale in a format without
    one (E8M0: a power-of-two rule gives an all-zero block the smallest scale)."""
    counts = defaultdict(int)
    left = {"zero": 0, "underflow": 0, "repaired": 0, "nonfinite": 0}
    one_code = next((c for c, v in enumerate(values) if v == 1.0), None)
    zero_code = 0 if values and values[0] == 0 else None
    smallest = next((c for c, v in enumerate(values) if v > 0), None)
    for t in entries:
        per = defaultdict(int)
        for code, n in t["block_stats"]["scale_codes"].items():
            per[int(code)] += n
        repaired = t.get("scale_repaired", 0)
        unrepaired = t["zero_blocks"] + t["scale_underflow"] - repaired
        if repaired and one_code is not None:
            per[one_code] -= repaired
        at = zero_code if zero_code is not None else smallest
        if unrepaired and at is not None:
            per[at] -= unrepaired
        for code, n in per.items():
            counts[code] += n
        left["zero"] += t["zero_blocks"]
        left["underflow"] += t["scale_underflow"]
        left["repaired"] += repaired
        left["nonfinite"] += t["block_stats"].get("nonfinite_blocks", 0)
    return {c: n for c, n in counts.items() if n > 0}, left


def left_out_note(left, values, fmt):
    """Lines saying which blocks the histogram leaves out and where their scales went."""
    lines = []
    if left["zero"]:
        lines.append("%d zero blocks (all \u00b10)" % left["zero"])
    if left["underflow"]:
        lines.append("%d underflowed (ideal scale \u2192 0)" % left["underflow"])
    if left["zero"] or left["underflow"]:
        if left["repaired"]:
            lines.append("  \u2192 %d repaired to scale 1.0 (\u2715 at 2^0)" % left["repaired"])
        elif values and values[0] == 0:
            lines.append("  \u2192 kept at scale 0 (no log2)")
        else:
            smallest = next(v for v in values if v > 0)
            lines.append("  \u2192 at the smallest %s scale 2^%d" % (fmt, round(math.log2(smallest))))
    if left["nonfinite"]:
        lines.append("%d blocks holding NaN/Inf" % left["nonfinite"])
    return ["not drawn (scale not measured from data):"] + lines if lines else ["every block's scale measured"]


def plot_scale_codes(data, out):
    recipes = quantized_recipes(data)
    if not recipes:
        return
    values_of = data.get("scale_code_values") or {}
    fig, axes = plt.subplots(1, len(recipes), figsize=(max(11.2, 5.6 * len(recipes)), 5.6), squeeze=False,
                             sharey=True)
    top = 1.0
    for ax, r in zip(axes[0], recipes):
        entries = [t for t in data["tensors"] if t["recipe"] == r]
        fmt = entries[0]["scale_format"]
        values = values_of.get(fmt)
        if not values:
            ax.text(0.5, 0.5, "no code values for %s in the JSON" % fmt, ha="center", va="center",
                    transform=ax.transAxes)
            continue
        positive = [v for v in values if v > 0]
        lo, hi = math.log2(min(positive)), math.log2(max(positive))
        drawn_lo, drawn_hi = hi, lo
        left_total = {"zero": 0, "underflow": 0, "repaired": 0, "nonfinite": 0}
        for tensor in ROLE_ORDER:
            counts, left = scale_code_counts([t for t in entries if t["tensor"] == tensor], values)
            for k in left_total:
                left_total[k] += left[k]
            used = [c for c in counts if c < len(values) and values[c] > 0]
            if not used:
                continue
            # Every code between the smallest and largest used one, zero-filled, so that the steps are a
            # histogram over the scale axis.
            codes = [c for c in range(min(used), max(used) + 1) if values[c] > 0]
            xs = [math.log2(values[c]) for c in codes]
            drawn_lo, drawn_hi = min(drawn_lo, xs[0]), max(drawn_hi, xs[-1])
            ax.step(xs, [max(counts.get(c, 0), 0.5) for c in codes], where="mid", lw=1.4, label=ROLE_TITLE[tensor],
                    **ROLE_STYLE[tensor])
            top = max([top] + list(counts.values()))
            if left["repaired"]:
                ax.plot([0.0], [left["repaired"]], ls="none", marker="X", ms=9, mec="white", mew=0.6,
                        color=ROLE_STYLE[tensor]["color"], zorder=4)
        if drawn_lo > drawn_hi:
            drawn_lo, drawn_hi = lo, hi
        if left_total["repaired"]:
            drawn_lo, drawn_hi = min(drawn_lo, 0.0), max(drawn_hi, 0.0)
        # The axis spans the drawn scales (and the format's limits when they are near): a format spanning
        # 2^-127..2^127 would squeeze the data into spikes.
        pad = 0.06 * (drawn_hi - drawn_lo) + 1.0
        x0 = lo - pad if drawn_lo - lo < 8 else drawn_lo - pad
        x1 = hi + pad if hi - drawn_hi < 8 else drawn_hi + pad
        ax.set_xlim(x0, x1)
        for edge, what, ha in ((lo, "smallest %s scale\n2^%.3g" % (fmt, lo), "left"),
                               (hi, "largest %s scale\n%.6g = 2^%.3g" % (fmt, max(positive), hi), "right")):
            if x0 <= edge <= x1:
                ax.axvspan(*((x0, edge) if ha == "left" else (edge, x1)), color="#dddddd", zorder=0)
                ax.axvline(edge, color="black", ls=":", lw=1.2)
                ax.text(edge, 0.98, what, transform=ax.get_xaxis_transform(), ha=ha, va="top", fontsize=8,
                        bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.85))
            else:
                ax.text(1.0 if ha == "right" else 0.0, 0.98, ("%s \u2192" if ha == "right" else "\u2190 %s") %
                        what.replace("\n", " "), transform=ax.transAxes, ha=ha, va="top", fontsize=8, color="#555555")
        ax.text(0.02, 0.86, "\n".join(left_out_note(left_total, values, fmt)), transform=ax.transAxes, ha="left",
                va="top", fontsize=8, bbox=dict(boxstyle="round,pad=0.3", fc="#f7f7f7", ec="#bbbbbb", alpha=0.95))
        ax.set_yscale("log")
        ax.set_xlabel("log2 of the block scale (decoded %s code)" % fmt)
        ax.set_title("%s: %s block scales measured from data" % (r, fmt), fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylim(0.7, top * 30.0)
    axes[0][0].set_ylabel("blocks (all steps and layers)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, bbox_to_anchor=(0.5, 0.905), frameon=False)
    fig.suptitle("Where the measured block scales sit in their scale format's range\n(grey: beyond the format's "
                 "range; \u2715: blocks set to 1.0, not measured)")
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    save(fig, out, "scale_codes.png")


def plot_heatmaps(data, out):
    recipes = quantized_recipes(data)
    if not recipes:
        return
    steps = sorted({t["step"] for t in data["tensors"]})
    layers = sorted({t["layer"] for t in data["tensors"]}, key=layer_key)
    roles = [r for r in ROLE_ORDER if any(t["tensor"] == r for t in data["tensors"])]
    columns = [(tensor, s) for tensor in roles for s in steps]
    table = {(t["step"], t["layer"], t["tensor"], t["recipe"]): t for t in data["tensors"]}
    scale_format = {t["recipe"]: t["scale_format"] for t in data["tensors"]}
    quantities = [  # (panel title, colour bar label, value of one entry)
        ("inputs flushed to 0", "nonzero inputs that dequantize to 0 (%)",
         lambda e: 100.0 * e["underflow_fraction"] if finite(e.get("underflow_fraction")) else None),
        ("blocks whose scale clipped", "blocks whose scale saturated beyond FP32 rounding (% of the tensor's "
         "blocks)", lambda e: 100.0 * (e["scale_saturated"] - e.get("scale_saturated_rounding", 0)) / e["blocks"]
         if e.get("blocks") else None),
        ("scale saturated by rounding only (blocks)", "blocks whose ideal scale was within 2^-22 above the\n"
         "max (FP32 rounding at the amax's block, not clipping; count)",
         lambda e: e.get("scale_saturated_rounding", 0) if e.get("blocks") else None),
        ("blocks whose scale underflowed", "blocks whose scale underflowed to 0 (% of the tensor's blocks)",
         lambda e: 100.0 * e["scale_underflow"] / e["blocks"] if e.get("blocks") else None),
    ]
    grids = []
    for short, label, get in quantities:
        by_recipe = {}
        for r in recipes:
            g = np.full((len(layers), len(columns)), np.nan)
            for i, layer in enumerate(layers):
                for j, (tensor, s) in enumerate(columns):
                    e = table.get((s, layer, tensor, r))
                    v = get(e) if e is not None else None
                    if finite(v):
                        g[i, j] = v
            by_recipe[r] = g
        vmax = max(np.nanmax(g, initial=0.0) for g in by_recipe.values())
        grids.append((short, label, by_recipe, vmax))
    drawn = [q for q in grids if q[3] > 0]
    zero_everywhere = [q[0] for q in grids if q[3] <= 0]
    cell_w, cell_h = 0.5, 0.3
    fig = plt.figure(figsize=(max(12.0, len(recipes) * len(columns) * cell_w + 3.2),
                              len(drawn) * (len(layers) * cell_h + 1.4) + 1.2), layout="constrained")
    grid = fig.add_gridspec(len(drawn), len(recipes) + 1, width_ratios=[1.0] * len(recipes) + [0.06])
    cmap = plt.get_cmap("magma_r").with_extremes(bad="white")
    for qi, (short, label, by_recipe, vmax) in enumerate(drawn):
        for ri, r in enumerate(recipes):
            ax = fig.add_subplot(grid[qi, ri])
            g = by_recipe[r]
            shown = np.ma.masked_where(~(g > 0), g)  # zero and missing cells stay white
            image = ax.imshow(shown, aspect="auto", cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest")
            ax.set_xticks(range(len(columns)))
            ax.set_xticklabels([str(s) for _, s in columns], fontsize=8)
            ax.set_yticks(range(len(layers)))
            ax.set_yticklabels([short_layer(layer) for layer in layers] if ri == 0 else [], fontsize=9)
            ax.tick_params(length=0)
            for k in range(1, len(roles)):
                ax.axvline(k * len(steps) - 0.5, color="black", lw=1.5)
            for k, tensor in enumerate(roles):
                ax.text((k + 0.5) * len(steps) - 0.5, -0.6, tensor, ha="center", va="bottom", fontsize=10,
                        fontweight="bold")
            ax.set_title("%s (%s scales): %s" % (r, scale_format[r], short), pad=16, fontsize=10)
            if qi == len(drawn) - 1:
                ax.set_xlabel("step, per tensor")
            if not np.nanmax(g, initial=0.0) > 0:
                ax.text(0.5, 0.5, "none in any tensor", ha="center", va="center", transform=ax.transAxes,
                        fontsize=11, bbox=dict(boxstyle="round", fc="#f4f4f4", ec="#bbbbbb"))
            for i in range(g.shape[0]):
                for j in range(g.shape[1]):
                    if g[i, j] > 0:
                        ax.text(j, i, "%.2g" % g[i, j], ha="center", va="center", fontsize=7.5,
                                color="white" if g[i, j] > 0.55 * vmax else "black")
        fig.colorbar(image, cax=fig.add_subplot(grid[qi, -1])).set_label(label, fontsize=9)
    note = ""
    if zero_everywhere:
        note = "\nnot drawn, zero in every tensor and recipe: " + "; ".join(zero_everywhere)
    unquantized = [r for r in recipes_of(data) if r not in recipes]
    if unquantized:
        note += "\nnot drawn, not block-quantized: %s" % ", ".join(unquantized)
    if any(q[0].startswith("scale saturated by rounding") for q in drawn):
        note += ("\nsaturated by FP32 rounding only (cells count blocks): the four FP32 roundings of the ideal scale "
                 "can put the blocks holding the\ntensor's amax up to 2^-22 above the scale max; its largest "
                 "element still rounds to the element max, so nothing is clipped")
    fig.suptitle("Underflow and scale saturation per layer, tensor and step (cells in %% unless said; white: none)%s"
                 % note)
    save(fig, out, "underflow_saturation.png")


def plot_rho(ax, head, steps, colours):
    """rho per (layer, tensor) at each step, one column of markers per tensor role, on a log axis."""
    ax.set_yscale("log")
    layers = sorted({h["layer"] for h in head}, key=layer_key)
    # A fixed offset per layer inside its column keeps equal values apart without suggesting a trend.
    spread = {layer: dodge(i, len(layers), 0.14) for i, layer in enumerate(layers)}
    ranked = []
    for si, s in enumerate(steps):
        for k, tensor in enumerate(ROLE_ORDER):
            pts = [(si + (k - 1) * 0.25 + spread[h["layer"]], h["rho"], h["layer"]) for h in head
                   if h["step"] == s and h["tensor"] == tensor and finite(h.get("rho"))]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ls="none", marker=MARKERS[k], ms=5, alpha=0.9,
                    mec="white", mew=0.4, color=ROLE_STYLE[tensor]["color"],
                    label=ROLE_TITLE[tensor] if si == 0 else None)
            ranked += [(rho, x, "%s %s" % (short_layer(layer), tensor)) for x, rho, layer in pts]
    for rho, x, label in sorted(ranked, reverse=True)[:3]:
        ax.annotate(label, (x, rho), xytext=(6, 0), textcoords="offset points", fontsize=8, va="center")
    target = head[0]["target"]
    for name, f in head[0]["formats"].items():
        u = f["max_scale"] / target
        ax.axhline(u, ls="--", lw=1.2, color=colours[name])
        ax.text(1.01, u, "%s\nU/T = %.3g" % (name, u), transform=ax.get_yaxis_transform(), fontsize=8,
                va="center", color=colours[name], fontweight="bold")
    ax.set_xticks(range(len(steps)))
    ax.set_xticklabels([str(s) for s in steps])
    ax.set_xlim(-0.6, len(steps) - 0.4)
    ax.set_xlabel("step")
    ax.set_ylabel("rho = current amax / held amax")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
    ax.set_title("rho per tensor: a scale format saturates above its U/T line", fontsize=10)


def why_no_rho(ax, head, exact, hold):
    """In the rho panel's place: why there is no rho to draw."""
    ax.axis("off")
    own = len(head) - exact
    why = ("%d of them hold the amax of their own step\n(their refresh step was not captured),\n%d are refresh "
           "steps themselves." % (own, exact)) if hold == "window" else "Every held amax equals the current one."
    text = ("No rho figure: rho = current amax / held amax\nis 1 for all %d tensors under --hold %s.\n\n%s\n\n"
            "No scale is stale, so there is nothing to\ncompare with U/T. Replay with --hold previous\nto hold "
            "the previous captured step's amax." % (len(head), hold, why))
    ax.text(0.5, 0.55, text, transform=ax.transAxes, ha="center", va="center", fontsize=10.5,
            bbox=dict(boxstyle="round,pad=0.8", fc="#f4f4f4", ec="#bbbbbb"))
    ax.set_title("rho per tensor", fontsize=10)


def plot_headroom(data, out):
    head = data.get("headroom") or []
    if not head:
        return
    steps = sorted({h["step"] for h in head})
    formats = list(head[0]["formats"].keys())
    target = head[0]["target"]
    colours = {name: FORMAT_COLOURS[i % len(FORMAT_COLOURS)] for i, name in enumerate(formats)}
    rho_varies = any(finite(h.get("rho")) and h["rho"] != 1 for h in head)
    exact = sum(1 for h in head if h.get("held_exact"))
    fig, axes = plt.subplots(1, 3, figsize=(17.4, 6.4), squeeze=False)
    axes = list(axes[0])
    if rho_varies:
        plot_rho(axes.pop(0), head, steps, colours)
    else:
        why_no_rho(axes.pop(0), head, exact, data.get("hold", "?"))
    blocks = {s: sum(h["formats"][formats[0]]["blocks"] for h in head if h["step"] == s) for s in steps}
    width = 0.8 / max(1, len(formats))
    for ax, key, what in ((axes[0], "saturated_blocks", "saturate with the held amax\n(ideal scale above U before "
                                                          "rounding; hatched: by FP32 rounding\nonly, within 2^-22 "
                                                          "above U at the amax's block: not clipping)"),
                          (axes[1], "underflow_blocks", "underflow to 0 with the held amax")):
        top = 0
        for fi, name in enumerate(formats):
            counts = [sum(h["formats"][name][key] for h in head if h["step"] == s) for s in steps]
            xs = np.arange(len(steps)) + (fi - (len(formats) - 1) / 2) * width
            bars = ax.bar(xs, counts, width=width * 0.92, color=colours[name],
                          label="%s (U/T = %.3g)" % (name, head[0]["formats"][name]["max_scale"] / target))
            if key == "saturated_blocks":
                rounding = [sum(h["formats"][name].get("saturated_rounding_blocks", 0) for h in head
                                if h["step"] == s) for s in steps]
                ax.bar(xs, rounding, width=width * 0.92, color="white", alpha=0.55, hatch="///", edgecolor="black",
                       lw=0.0)
                labels = ["%d\n(%d by\nrounding)" % (c, k) if k else "%d" % c for c, k in zip(counts, rounding)]
            else:
                labels = ["%d" % c for c in counts]
            ax.bar_label(bars, labels=labels, fontsize=8, padding=2)
            top = max([top] + counts)
        ax.set_ylim(0, max(1, top) * (1.3 if key == "saturated_blocks" else 1.12))
        ax.set_xticks(range(len(steps)))
        ax.set_xticklabels(["%d\n(%d blocks)" % (s, blocks[s]) for s in steps])
        ax.set_xlabel("step (blocks of all layers and tensors)")
        ax.set_ylabel("blocks")
        ax.set_title("blocks whose scale would %s" % what, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    title = "Periodic tensor scaling (D = %d, T = %g, hold %s; held amax exact for %d of %d tensors)" % (
        head[0]["period"], target, data.get("hold", "?"), exact, len(head))
    fig.suptitle(title, fontsize=11, y=0.995)
    legend_y = 0.985 - 0.042 * (title.count("\n") + 1)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, legend_y), ncol=len(formats),
               frameon=False, title="scale format (U = its largest scale)", title_fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, legend_y - 0.03))
    save(fig, out, "headroom_rho.png")


def block_sqnr_fractions(data, recipe, tensor):
    """Per 1 dB bin, the fraction of the inexact blocks in it, flushed blocks (every element to 0: exactly
    0 dB) left out of their bin; and the fraction of flushed blocks."""
    hist = defaultdict(int)
    flushed = 0
    for t in data["tensors"]:
        if t["recipe"] == recipe and t["tensor"] == tensor:
            for db, n in t["block_stats"]["block_sqnr_db_hist"].items():
                hist[int(db)] += n
            flushed += t["block_stats"].get("flushed_blocks", 0)
    total = sum(hist.values())
    hist[0] -= flushed
    return ({db: n / total for db, n in hist.items() if n} if total else {}), (flushed / total if total else 0.0)


def plot_block_sqnr(data, out, baseline):
    recipes = quantized_recipes(data)
    if not recipes:
        return
    style = recipe_styles(recipes_of(data))
    others = [r for r in recipes if r != baseline] if baseline in recipes else []
    rows = 2 if others else 1
    fig, axes = plt.subplots(rows, 3, figsize=(16, 8.2 if others else 5.0), sharex="col", sharey="row",
                             squeeze=False, gridspec_kw={"height_ratios": [3, 2][:rows]})
    shown = 0.001  # the x axis covers the bins that hold at least this fraction of some recipe's blocks
    for col, tensor in enumerate(ROLE_ORDER):
        ax = axes[0][col]
        both = {r: block_sqnr_fractions(data, r, tensor) for r in recipes}
        fractions = {r: f for r, (f, _) in both.items()}
        flushed = {r: share for r, (_, share) in both.items()}
        bins = sorted({db for f in fractions.values() for db, v in f.items() if v >= shown})
        if not bins:
            continue
        edges = np.arange(bins[0], bins[-1] + 2)
        for r in recipes:
            ys = [fractions[r].get(int(b), 0.0) * 100 for b in edges[:-1]]
            # The baseline wide and pale underneath, so that a recipe equal to it shows as a line inside it.
            ax.stairs(ys, edges, color=style[r]["color"], lw=4.0 if others and r == baseline else 1.5,
                      alpha=0.45 if others and r == baseline else 1.0, zorder=1 if r == baseline else 3,
                      label=r + (" (baseline)" if others and r == baseline else "") +
                      ("\n  + %.2g%% flushed whole to 0 (0 dB, not drawn)" % (100 * flushed[r])
                       if any(flushed.values()) else ""))
        ax.set_xlim(edges[0], edges[-1])
        ax.set_title("tensor %s" % ROLE_TITLE[tensor])
        ax.legend(fontsize=8)
        for a in axes[:, col]:
            a.grid(alpha=0.3)
        axes[-1][col].set_xlabel("block SQNR (dB, 1 dB bins)")
        if not others:
            continue
        dax = axes[1][col]
        dax.axhline(0.0, color=style[baseline]["color"], lw=4.0, alpha=0.45, zorder=1)
        for r in others:
            ys = [(fractions[r].get(int(b), 0.0) - fractions[baseline].get(int(b), 0.0)) * 100 for b in edges[:-1]]
            worst = int(np.argmax(np.abs(ys)))
            label = ("%s \u2212 %s: largest %s pp at %d dB" % (r, baseline, signed(ys[worst], 1), edges[worst])
                     if abs(ys[worst]) >= 0.05 else "%s = %s in every bin (within 0.05 pp)" % (r, baseline))
            dax.stairs(ys, edges, color=style[r]["color"], lw=1.5, baseline=0.0, zorder=3, label=label)
        dax.legend(fontsize=8, loc="best")
    axes[0][0].set_ylabel("blocks in the bin (% of inexact blocks)")
    if others:
        widen(axes[1][0].get_ylim, axes[1][0].set_ylim, 2.0, around_zero=True)
        axes[1][0].set_ylabel("difference from %s\n(percentage points)" % baseline)
    fig.suptitle("Per-block SQNR (all steps and layers; the x axis spans the bins holding at least %.1f%% of some "
                 "recipe's blocks)\nflushed block: every element dequantizes to 0 (block SQNR exactly 0 dB); counted "
                 "in the percentages, shown as the legend's share%s" % (
                     100 * shown, "".join("; %s: not block-quantized, not drawn" % r for r in recipes_of(data)
                                          if r not in recipes)))
    fig.tight_layout()
    save(fig, out, "block_sqnr.png")


def plot_sweep(data, out):
    entries = data["tensors"]
    synthetic = data.get("input") == "synthetic"
    groups = defaultdict(lambda: defaultdict(list))  # input -> config -> SQNR values
    order = []
    for t in entries:
        key = t.get("distribution") if synthetic else "tensor %s" % t["tensor"]
        if key not in order:
            order.append(key)
        if finite(t.get("sqnr_db")):
            groups[key][t["recipe"]].append(t["sqnr_db"])
    if not synthetic:
        order.sort(key=lambda k: ROLE_ORDER.index(k.split()[-1]) if k.split()[-1] in ROLE_ORDER else 9)
    configs = data.get("configs") or sorted({t["recipe"] for t in entries})
    ys = np.arange(len(configs))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(15, 0.42 * len(configs) + 3.2), sharey=True,
                                  gridspec_kw={"width_ratios": [3, 2]})
    for gi, key in enumerate(order):
        means = [np.mean(groups[key][c]) if groups[key].get(c) else np.nan for c in configs]
        ax.plot(means, ys + dodge(gi, len(order), 0.5), ls="none", marker=MARKERS[gi % len(MARKERS)], ms=6,
                color=PALETTE[gi % len(PALETTE)], mec="white", mew=0.4, label=key)
    for a in (ax, ax2):
        for y in ys[::2]:
            a.axhspan(y - 0.5, y + 0.5, color="#f2f2f2", zorder=0)
    ax.set_yticks(ys)
    ax.set_yticklabels(configs, fontsize=9)
    ax.set_ylim(len(configs) - 0.5, -0.5)
    ax.set_ylabel("element / scale format / block /\ntensor scale / rounding")
    widen(ax.get_xlim, ax.set_xlim, 6.0)
    ax.set_xlabel("SQNR (dB, higher is better)%s" % ("" if synthetic else "; mean over the trace's tensors"))
    ax.grid(axis="x", alpha=0.35)
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=min(5, len(order)), frameon=False)
    # Saturation and underflow of the block scales per configuration (all inputs together).
    sat = defaultdict(lambda: [0, 0, 0, 0])
    for t in entries:
        s = sat[t["recipe"]]
        s[0] += t["scale_saturated"]
        s[1] += t["scale_underflow"]
        s[2] += t["blocks"]
        s[3] += t.get("scale_saturated_rounding", 0)
    for k, (idx, what) in enumerate(((0, "saturated"), (1, "underflowed to 0"))):
        vals = [100.0 * sat[c][idx] / max(1, sat[c][2]) for c in configs]
        bars = ax2.barh(ys + (k - 0.5) * 0.38, vals, height=0.36, color=PALETTE[5 if idx == 0 else 4],
                        label="blocks whose scale %s" % what)
        ax2.bar_label(bars, labels=["%.2g" % v if v > 0 else "0" for v in vals], fontsize=7, padding=2)
        rounding = [100.0 * sat[c][3] / max(1, sat[c][2]) for c in configs]
        if idx == 0 and any(rounding):
            ax2.barh(ys - 0.5 * 0.38, rounding, height=0.36, color="white", alpha=0.55, hatch="///", edgecolor="black",
                     lw=0.0, label="of those, by FP32 rounding only (within 2^-22 above the max: not clipping)")
    ax2.set_xlim(0, max(1e-9, ax2.get_xlim()[1]) * 1.18)
    ax2.set_xlabel("blocks (% of all blocks of the configuration)")
    ax2.grid(axis="x", alpha=0.35)
    ax2.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=1, frameon=False)
    fig.suptitle("Sweep over %s" % ("synthetic distributions (%s x %s)" % (data.get("rows"), data.get("cols"))
                                    if synthetic else os.path.basename(data.get("input", "?"))), y=0.995)
    fig.tight_layout()
    save(fig, out, "sqnr_sweep.png")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json", help="output of fp4sim replay --json (or fp4sim sweep --json)")
    p.add_argument("--out", default="plots", help="directory for the PNG files")
    p.add_argument("--baseline", help="recipe the difference panels compare against (default: nvfp4 when "
                   "replayed, else the first recipe)")
    a = p.parse_args(argv)
    with open(a.json) as f:
        data = json.load(f)
    os.makedirs(a.out, exist_ok=True)
    if not data.get("tensors"):
        print("plot_replay.py: no tensor entries in %s" % a.json, file=sys.stderr)
        return 1
    if data.get("kind") == "sweep":
        plot_sweep(data, a.out)
        return 0
    recipes = recipes_of(data)
    baseline = a.baseline or ("nvfp4" if "nvfp4" in recipes else recipes[0])
    if baseline not in recipes:
        print("plot_replay.py: --baseline %s: not a replayed recipe (%s)" % (baseline, ", ".join(recipes)),
              file=sys.stderr)
        return 2
    plot_sqnr(data, a.out, baseline)
    plot_scale_codes(data, a.out)
    plot_heatmaps(data, a.out)
    plot_headroom(data, a.out)
    plot_gemms(data, a.out, baseline)
    plot_block_sqnr(data, a.out, baseline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
