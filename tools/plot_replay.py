#!/usr/bin/env python3
"""Plots of `fp4sim replay --json` (or `fp4sim sweep --json`) output, as PNG files (matplotlib, Agg).

    python3 tools/plot_replay.py replay.json --out plots/

Writes:
  sqnr_per_layer.png        SQNR (dB) per layer and recipe, one panel per tensor (x, w, dy), steps side by side
  scale_codes.png           histograms of block-scale codes (x axis: log2 of the decoded scale), per recipe
                            and tensor role
  underflow_saturation.png  heat maps (layer.tensor x step) of the underflow fraction and of the blocks whose
                            scale saturated, per recipe
  headroom_rho.png          headroom rho = current amax / held amax over steps (periodic scaling), with each
                            scale format's U/T, and the blocks that would saturate per scale format
  gemm_error.png            relative Frobenius error per GEMM (fprop, dgrad, wgrad) and recipe
  block_sqnr.png            distribution of per-block SQNR per recipe and role
A sweep JSON (no steps/layers) gets sqnr_sweep.png instead.
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

ROLE_ORDER = ["x", "w", "dy"]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"]



def save(fig, out, name, title=None, tight=True):
    """Title, lay out, write OUT/NAME and close one figure."""
    if title:
        fig.suptitle(title)
    if tight:
        fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)

def short_layer(name):
    """'model.layers.3.self_attn.q_proj' -> 'L3.q_proj'."""
    parts = name.replace("/", ".").split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return "L%s.%s" % (p, parts[-1])
    return parts[-1] if len(name) > 18 else name


def decode_scale(fmt, code):
    """Value of a block-scale code (unsigned formats of fp4sim), or None when not a finite positive number."""
    if fmt == "e8m0":
        return None if code == 255 else 2.0 ** (code - 127)
    spec = {"ue4m3": (4, 3, 7), "ue5m3": (5, 3, 15), "ue5m3fn": (5, 3, 15)}.get(fmt)
    if spec is None:
        return None
    e_bits, m_bits, bias = spec
    e = code >> m_bits
    m = code & ((1 << m_bits) - 1)
    if e == 0:
        v = m * 2.0 ** (1 - bias - m_bits)
    else:
        v = (1 + m / 2.0**m_bits) * 2.0 ** (e - bias)
    return v if v > 0 else None


def recipes_of(data):
    names = [r["name"] for r in data.get("recipes", [])]
    for t in data["tensors"]:
        if t["recipe"] not in names:
            names.append(t["recipe"])
    return names


def finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def plot_sqnr(data, out):
    recipes = recipes_of(data)
    steps = sorted({t["step"] for t in data["tensors"]})
    layers = sorted({t["layer"] for t in data["tensors"]})
    table = {(t["step"], t["layer"], t["tensor"], t["recipe"]): t for t in data["tensors"]}
    fig, axes = plt.subplots(3, 1, figsize=(max(10, 0.45 * len(layers) * len(steps) + 3), 11), sharex=True)
    positions, labels = [], []
    pos = 0.0
    for s in steps:
        for layer in layers:
            positions.append(pos)
            labels.append("%s @%d" % (short_layer(layer), s))
            pos += 1
        pos += 0.8
    width = 0.8 / max(1, len(recipes))
    for ax, tensor in zip(axes, ROLE_ORDER):
        for ri, r in enumerate(recipes):
            ys = []
            for s in steps:
                for layer in layers:
                    e = table.get((s, layer, tensor, r))
                    ys.append(e["sqnr_db"] if e is not None and finite(e.get("sqnr_db")) else np.nan)
            xs = np.array(positions) + (ri - (len(recipes) - 1) / 2) * width
            ax.bar(xs, ys, width=width, color=COLORS[ri % len(COLORS)], label=r)
        vals = [t["sqnr_db"] for t in data["tensors"] if t["tensor"] == tensor and finite(t.get("sqnr_db"))]
        if vals:
            ax.set_ylim(max(0.0, min(vals) - 3), max(vals) + 2)
        ax.set_ylabel("SQNR (dB)")
        ax.set_title("tensor %s (%s)" % (tensor, {"x": "activation, fprop", "w": "weight, fprop",
                                                  "dy": "grad_output, dgrad"}[tensor]))
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(ncol=len(recipes), loc="lower right", bbox_to_anchor=(1.0, 1.08), fontsize=9, frameon=False)
    axes[-1].set_xticks(positions)
    axes[-1].set_xticklabels(labels, rotation=70, ha="right", fontsize=8)
    save(fig, out, "sqnr_per_layer.png",
         title="SQNR per layer and recipe (higher is better): %s" % os.path.basename(data["trace"]["path"]))


def plot_scale_codes(data, out):
    recipes = recipes_of(data)
    fig, axes = plt.subplots(1, len(recipes), figsize=(5.5 * len(recipes), 4.5), squeeze=False)
    for ax, r in zip(axes[0], recipes):
        fmt = None
        for ti, tensor in enumerate(ROLE_ORDER):
            counts = defaultdict(int)
            for t in data["tensors"]:
                if t["recipe"] != r or t["tensor"] != tensor:
                    continue
                fmt = t["scale_format"]
                for code, n in t["block_stats"]["scale_codes"].items():
                    counts[int(code)] += n
            xs, ys = [], []
            zero = sum(n for code, n in counts.items() if decode_scale(fmt, code) is None)
            used = [c for c in counts if decode_scale(fmt, c) is not None]
            if used:
                # Every code between the smallest and largest used one, zero-filled, so the steps are a
                # histogram over the code axis (log2 of the decoded scale).
                for code in range(min(used), max(used) + 1):
                    v = decode_scale(fmt, code)
                    if v is None:
                        continue
                    xs.append(math.log2(v))
                    ys.append(max(counts.get(code, 0), 0.5))
                ax.step(xs, ys, where="mid", color=COLORS[ti], lw=1.2,
                        ls=["-", "--", ":"][ti % 3] if len(xs) < 3 else "-",
                        label="%s%s" % (tensor, " (+%d zero/NaN scales)" % zero if zero else ""))
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.7)
        ax.set_xlabel("log2 of the decoded block-scale code (%s)" % fmt)
        ax.set_ylabel("blocks")
        ax.set_title("%s: scale codes" % r)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    save(fig, out, "scale_codes.png", title="Block-scale code histograms (all steps and layers)")


def plot_heatmaps(data, out):
    recipes = recipes_of(data)
    steps = sorted({t["step"] for t in data["tensors"]})
    rows = sorted({(t["layer"], t["tensor"]) for t in data["tensors"]},
                  key=lambda lt: (lt[0], ROLE_ORDER.index(lt[1]) if lt[1] in ROLE_ORDER else 9))
    table = {(t["step"], t["layer"], t["tensor"], t["recipe"]): t for t in data["tensors"]}
    quantities = [
        ("underflow_fraction", "nonzero inputs that dequantize to 0", lambda e: e.get("underflow_fraction")),
        ("scale_saturated", "blocks whose scale saturated (fraction)",
         lambda e: e["scale_saturated"] / e["blocks"] if e.get("blocks") else None),
        ("scale_underflow", "blocks whose scale underflowed (fraction)",
         lambda e: e["scale_underflow"] / e["blocks"] if e.get("blocks") else None),
    ]
    fig, axes = plt.subplots(len(quantities), len(recipes),
                             figsize=(3.2 * len(recipes) + 2.5, 0.22 * len(rows) * len(quantities) + 2.0),
                             squeeze=False, layout="constrained")
    for qi, (key, title, get) in enumerate(quantities):
        vmax = 0.0
        grids = []
        for r in recipes:
            g = np.full((len(rows), len(steps)), np.nan)
            for i, (layer, tensor) in enumerate(rows):
                for j, s in enumerate(steps):
                    e = table.get((s, layer, tensor, r))
                    v = get(e) if e is not None else None
                    if finite(v):
                        g[i, j] = v
                        vmax = max(vmax, v)
            grids.append(g)
        for ri, (r, g) in enumerate(zip(recipes, grids)):
            ax = axes[qi][ri]
            im = ax.imshow(g, aspect="auto", cmap="magma_r", vmin=0.0, vmax=vmax if vmax > 0 else 1.0,
                           interpolation="nearest")
            ax.set_xticks(range(len(steps)))
            ax.set_xticklabels([str(s) for s in steps], fontsize=8)
            if ri == 0:
                ax.set_yticks(range(len(rows)))
                ax.set_yticklabels(["%s %s" % (short_layer(layer), t) for layer, t in rows], fontsize=7)
            else:
                ax.set_yticks([])
            ax.set_title("%s\n%s" % (r, key), fontsize=9)
            if qi == len(quantities) - 1:
                ax.set_xlabel("step")
            for i in range(g.shape[0]):
                for j in range(g.shape[1]):
                    if np.isfinite(g[i, j]) and g[i, j] > 0:
                        ax.text(j, i, "%.2g" % g[i, j], ha="center", va="center", fontsize=6,
                                color="white" if g[i, j] > 0.6 * vmax else "black")
        fig.colorbar(im, ax=axes[qi].tolist(), shrink=0.9, label=title)
    save(fig, out, "underflow_saturation.png", title="Underflow and saturation per layer, tensor and step", tight=False)


def plot_headroom(data, out):
    head = data.get("headroom") or []
    if not head:
        return
    steps = sorted({h["step"] for h in head})
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    series = defaultdict(list)
    for h in head:
        if finite(h.get("rho")):
            series[(h["layer"], h["tensor"])].append((h["step"], h["rho"], h.get("held_from_step")))
    ranked = sorted(series.items(), key=lambda kv: -max(r for _, r, _ in kv[1]))
    for i, ((layer, tensor), pts) in enumerate(ranked):
        pts.sort()
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        label = "%s %s" % (short_layer(layer), tensor) if i < 8 else None
        ax.plot(xs, ys, marker="o", ms=4, lw=1.2 if i < 8 else 0.6, alpha=0.9 if i < 8 else 0.35,
                color=COLORS[i % len(COLORS)] if i < 8 else "#999999", label=label)
    target = head[0]["target"]
    for name, f in head[0]["formats"].items():
        ax.axhline(f["max_scale"] / target, ls="--", lw=1, color="black" if name == "ue4m3" else "#555555")
        ax.text(1.0, f["max_scale"] / target * 1.08, "%s: U/T = %.3g" % (name, f["max_scale"] / target),
                fontsize=8, ha="right", transform=ax.get_yaxis_transform())
    ax.set_yscale("log")
    ax.set_xscale("log" if steps[0] > 0 and steps[-1] / max(steps[0], 1) > 20 else "linear")
    ax.set_xlabel("step")
    ax.set_ylabel("rho = current amax / held amax")
    exact = sum(1 for h in head if h.get("held_exact"))
    ax.set_title("Headroom rho (periodic D=%d, hold %s; held amax exact for %d of %d)" % (
        head[0]["period"], data.get("hold", "?"), exact, len(head)), fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower left", title="largest rho", title_fontsize=7, framealpha=0.8)
    stale = sum(1 for h in head if h.get("held_exact") is False)
    if stale and data.get("hold") == "window":
        ax.text(0.5, 0.5, "%d of %d entries: refresh step not captured,\nso the step holds its own amax (rho = 1).\n"
                "Capture a whole window, or replay with --hold previous." % (stale, len(head)),
                transform=ax.transAxes, ha="center", va="center", fontsize=9,
                bbox=dict(boxstyle="round", fc="#fff8dc", ec="#999999"))

    formats = list(head[0]["formats"].keys())
    width = 0.8 / max(1, len(formats))
    for fi, name in enumerate(formats):
        sat = [sum(h["formats"][name]["saturated_blocks"] for h in head if h["step"] == s) for s in steps]
        unf = [sum(h["formats"][name]["underflow_blocks"] for h in head if h["step"] == s) for s in steps]
        xs = np.arange(len(steps)) + (fi - (len(formats) - 1) / 2) * width
        ax2.bar(xs, sat, width=width, color=COLORS[fi], label="%s saturated" % name)
        ax2.bar(xs, unf, width=width, bottom=sat, color=COLORS[fi], alpha=0.35, hatch="//",
                label="%s underflow" % name)
    ax2.set_xticks(range(len(steps)))
    ax2.set_xticklabels([str(s) for s in steps])
    ax2.set_xlabel("step")
    ax2.set_ylabel("blocks (all layers and tensors)")
    ax2.set_yscale("symlog", linthresh=1)
    ax2.set_title("Blocks saturating / underflowing with the held scale (T=%g)" % target, fontsize=10)
    ax2.text(0.0, -0.2, "Saturated = ideal scale above U before rounding: at rho = 1 the block\n"
             "holding the amax can land one FP32 ulp above U (one block per tensor).", transform=ax2.transAxes,
             fontsize=7, va="top")
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3, axis="y")
    save(fig, out, "headroom_rho.png")


def plot_gemms(data, out):
    gemms = data.get("gemms") or []
    if not gemms:
        return
    recipes = recipes_of(data)
    kinds = ["fprop", "dgrad", "wgrad"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for ax, kind in zip(axes, kinds):
        for ri, r in enumerate(recipes):
            pts = [(g["step"], g["layer"], g["rel_fro_err"]) for g in gemms
                   if g["gemm"] == kind and g["recipe"] == r and finite(g.get("rel_fro_err"))]
            pts.sort()
            ax.plot(range(len(pts)), [p[2] for p in pts], marker="os^D"[ri % 4], ms=3, lw=0.8,
                    ls=["-", "--", ":", "-."][ri % 4], color=COLORS[ri % len(COLORS)],
                    label="%s (%s)" % (r, next((g["datapath"] for g in gemms if g["recipe"] == r), "?")))
        ax.set_title(kind)
        ax.set_xlabel("(step, layer) in order")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("||C_hat - C||_F / ||C||_F")
    axes[0].legend(fontsize=8)
    save(fig, out, "gemm_error.png", title="GEMM relative Frobenius error against the float64 product")


def plot_block_sqnr(data, out):
    recipes = recipes_of(data)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    for ax, tensor in zip(axes, ROLE_ORDER):
        for ri, r in enumerate(recipes):
            hist = defaultdict(int)
            for t in data["tensors"]:
                if t["recipe"] == r and t["tensor"] == tensor:
                    for db, n in t["block_stats"]["block_sqnr_db_hist"].items():
                        hist[int(db)] += n
            if not hist:
                continue
            xs = np.arange(min(hist), max(hist) + 1)
            ys = np.array([hist.get(int(x), 0) for x in xs], dtype=float)
            ax.step(xs + 0.5, ys / ys.sum(), where="mid", color=COLORS[ri % len(COLORS)],
                    ls=["-", "--", ":", "-."][ri % 4], lw=1.4, label=r)
        ax.set_title("tensor %s: per-block SQNR" % tensor)
        ax.set_xlabel("block SQNR (dB, 1 dB bins)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of inexact blocks")
    axes[0].legend()
    save(fig, out, "block_sqnr.png")


def plot_sweep(data, out):
    entries = data["tensors"]
    synthetic = data.get("input") == "synthetic"
    groups = defaultdict(lambda: defaultdict(list))  # input -> config -> SQNR values
    for t in entries:
        key = t.get("distribution") if synthetic else "tensor %s" % t["tensor"]
        if finite(t.get("sqnr_db")):
            groups[key][t["recipe"]].append(t["sqnr_db"])
    configs = data.get("configs") or sorted({t["recipe"] for t in entries})
    fig, axes = plt.subplots(2, 1, figsize=(max(9, 0.55 * len(configs) + 4), 9), sharex=True)
    ax = axes[0]
    width = 0.8 / max(1, len(groups))
    for gi, (key, by) in enumerate(sorted(groups.items())):
        ys = [np.mean(by[c]) if by.get(c) else np.nan for c in configs]
        ax.bar(np.arange(len(configs)) + (gi - (len(groups) - 1) / 2) * width, ys, width=width,
               color=COLORS[gi % len(COLORS)], label=key)
    vals = [v for by in groups.values() for vs in by.values() for v in vs]
    if vals:
        ax.set_ylim(max(0.0, min(vals) - 2), max(vals) + 0.18 * (max(vals) - max(0.0, min(vals) - 2)) + 1.5)
    ax.set_ylabel("SQNR (dB)%s" % ("" if synthetic else ", mean over the trace's tensors"))
    ax.legend(fontsize=7, ncol=min(5, len(groups)))
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("Sweep over %s: SQNR per configuration" % ("synthetic distributions" if synthetic
                                                            else os.path.basename(data.get("input", "?"))))
    # Saturation and underflow of the block scales per configuration (all inputs together).
    ax = axes[1]
    sat = defaultdict(lambda: [0, 0, 0])
    for t in entries:
        s = sat[t["recipe"]]
        s[0] += t["scale_saturated"]
        s[1] += t["scale_underflow"]
        s[2] += t["blocks"]
    xs = np.arange(len(configs))
    ax.bar(xs - 0.2, [sat[c][0] / max(1, sat[c][2]) for c in configs], width=0.4, color=COLORS[1],
           label="blocks whose scale saturated")
    ax.bar(xs + 0.2, [sat[c][1] / max(1, sat[c][2]) for c in configs], width=0.4, color=COLORS[0],
           label="blocks whose scale underflowed")
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_ylabel("fraction of blocks")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_xticks(xs)
    ax.set_xticklabels(configs, rotation=70, ha="right", fontsize=7)
    save(fig, out, "sqnr_sweep.png")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json", help="output of fp4sim replay --json (or fp4sim sweep --json)")
    p.add_argument("--out", default="plots", help="directory for the PNG files")
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
    plot_sqnr(data, a.out)
    plot_scale_codes(data, a.out)
    plot_heatmaps(data, a.out)
    plot_headroom(data, a.out)
    plot_gemms(data, a.out)
    plot_block_sqnr(data, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
