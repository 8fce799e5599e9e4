// `fp4sim sweep [TRACE.h5] ...` (docs/cli.md): a grid of recipe parameters over a trace or synthetic
// distributions, with the fields of replay's tensors entries.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/io/output_file.hpp"
#include "fp4sim/analysis/result_bytes.hpp"
#include "fp4sim/analysis/sweep.hpp"
#include "ranks.hpp"
#include "replay_common.hpp"

namespace fp4sim::cli {

namespace {

struct SweepCliOptions {
  std::string trace;
  std::string synthetic = "normal,laplace,student-t:3,lognormal:1,normal+outliers:0.001:100";
  std::size_t rows = 256, cols = 4096;
  std::string role = "activation";
  std::string element_formats = "e2m1", scale_formats = "ue4m3,ue5m3,e8m0", blocks = "16,32";
  std::string tensor_scales = "none,current", roundings = "rne", rhos = "1";
  std::string base = "ue5m3";
  std::string steps, layers, hold = "window";
  std::uint64_t seed = 0;
  std::string json, csv, plots;
  bool quiet = false;
  double slab_mib = 256;
};

// The sweep's options from the flags (UsageError on a bad one).
sweep::Options sweep_options(const SweepCliOptions& o) {
  sweep::Options s;
  if (!find_recipe(o.base)) throw UsageError("--base: unknown recipe '" + o.base + "'");
  s.grid.base = o.base;
  s.grid.element_formats.clear();
  for (const auto& f : split_list(o.element_formats)) s.grid.element_formats.push_back(format_from_flag(f, "--element-formats"));
  s.grid.scale_formats.clear();
  for (const auto& f : split_list(o.scale_formats)) s.grid.scale_formats.push_back(format_from_flag(f, "--scale-formats"));
  s.grid.blocks.clear();
  for (const auto& b : split_list(o.blocks)) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(b, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != b.size() || v < 2 || v > 256) throw UsageError("--blocks: '" + b + "' is not a block size in 2..256");
    s.grid.blocks.push_back(v);
  }
  for (const auto& t : split_list(o.tensor_scales)) {
    auto ts = sweep::parse_tensor_scale(t);
    if (!ts) throw UsageError("--tensor-scales: expected none, current or periodic:D, got '" + t + "'");
    s.grid.tensor_scales.push_back(*ts);
  }
  s.grid.roundings.clear();
  for (const auto& r : split_list(o.roundings)) {
    auto rd = parse_rounding(r);
    if (!rd) throw UsageError("--roundings: unknown rounding '" + r + "'");
    s.grid.roundings.push_back(*rd);
  }
  s.grid.rhos.clear();
  for (const auto& r : split_list(o.rhos)) {
    char* end = nullptr;
    const double v = std::strtod(r.c_str(), &end);
    if (end != r.c_str() + r.size() || !(v > 0) || !std::isfinite(v)) throw UsageError("--rho: bad value '" + r + "'");
    s.grid.rhos.push_back(v);
  }
  const auto role = parse_role(o.role);
  if (!role) throw UsageError("--role: expected activation, weight or grad_output, got '" + o.role + "'");
  s.role = *role;
  s.rows = o.rows;
  s.cols = o.cols;
  s.seed = o.seed;
  if (!(o.slab_mib > 0)) throw UsageError("--slab-mib must be positive");
  s.max_slab_bytes = static_cast<std::size_t>(o.slab_mib * 1024 * 1024);
  if (!o.trace.empty()) {
    s.trace = o.trace;
    if (!o.steps.empty()) s.steps = steps_from_flag(o.steps);
    s.layers = o.layers;
    const auto hold = replay::parse_hold_rule(o.hold);
    if (!hold) throw UsageError("--hold: expected window or previous, got '" + o.hold + "'");
    s.hold = *hold;
  } else {
    for (const auto& d : split_list(o.synthetic)) {
      auto dist = sweep::parse_distribution(d);
      if (!dist) {
        throw UsageError("--synthetic: unknown distribution '" + d +
                         "' (normal, laplace, student-t:NU, lognormal:SIGMA, each with optional +outliers:P:K)");
      }
      s.distributions.push_back(*dist);
    }
  }
  return s;
}

void run_sweep(const SweepCliOptions& o) {
  std::filesystem::path script;
  // On many processes (ranks.hpp) each does its share; rank 0 writes the outputs, so it alone checks them.
  const auto shared = run_on_ranks<sweep::Result>(
      Ranks::world(),
      [&](const Share& share, const Starting& starting) {
        sweep::Options s = sweep_options(o);
        if (share.index == 0) {
          if (!o.plots.empty()) script = plot_script();
          check_writable(o.json, "--json");
          check_writable(o.csv, "--csv");
          check_writable(o.plots, "--plots");
        }
        s.share = share;
        s.starting = starting;
        FatalSignalGuard guard(o.trace.empty() ? std::string("synthetic input") : o.trace);
        ProgressBar bar;
        s.progress = [&](double f, const std::string& what) { bar.update(f, what); };
        return sweep::run(s);
      },
      sweep_result_from_bytes, sweep::merge);
  if (!shared) return;
  const sweep::Result& result = *shared;
  const bool json_stdout = o.json == "-";
  if (!o.quiet) std::fputs(sweep::summary(result).c_str(), json_stdout ? stderr : stdout);
  std::unique_ptr<OutputFile> json, csv;
  std::unique_ptr<PlotDirectory> plots;
  if (!o.json.empty() && !json_stdout) {
    json = std::make_unique<OutputFile>(o.json);
    sweep::write_json(result, json->stream());
    json->stream().flush();
  }
  if (!o.csv.empty()) {
    csv = std::make_unique<OutputFile>(o.csv);
    sweep::write_csv(result, csv->stream());
  }
  if (!o.plots.empty()) {
    plots = std::make_unique<PlotDirectory>(o.plots);
    OutputFile scratch(plots->temporary_path() / "sweep.json");
    sweep::write_json(result, scratch.stream());
    scratch.stream().flush();
    run_plot_script(script, scratch.temporary_path(), plots->temporary_path());
    scratch.commit();
  }
  if (json_stdout) sweep::write_json(result, std::cout);
  if (json) json->commit();
  if (csv) csv->commit();
  if (plots) plots->commit();
}

}  // namespace

void setup_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepCliOptions>();
  app.description(
      "Sweep a grid of element format x scale format x block size x tensor-scale policy x rounding over a trace "
      "(its x/w/dy tensors, periodic scaling across its steps) or over seeded synthetic distributions; writes "
      "the fields of replay's tensors entries per (input, configuration).");
  app.add_option("trace", o->trace, "TRACE.h5 (optional; without it, synthetic distributions are swept)");
  app.add_option("--synthetic", o->synthetic,
                 "distributions: normal, laplace, student-t:NU, lognormal:SIGMA, each with optional +outliers:P:K")
      ->capture_default_str();
  app.add_option("--rows", o->rows, "rows of each synthetic tensor")->capture_default_str();
  app.add_option("--cols", o->cols, "columns of each synthetic tensor (blocks run along them)")->capture_default_str();
  app.add_option("--role", o->role, "how synthetic tensors are quantized: activation, weight (2-D tiles) or grad_output")
      ->capture_default_str();
  app.add_option("--element-formats", o->element_formats, "element formats (docs/cli.md names or eXmY)")->capture_default_str();
  app.add_option("--scale-formats", o->scale_formats, "block-scale formats (e8m0 uses the OCP floor rule)")
      ->capture_default_str();
  app.add_option("--blocks", o->blocks, "block sizes")->capture_default_str();
  app.add_option("--tensor-scales", o->tensor_scales, "tensor-scale policies: none, current, periodic:D")
      ->capture_default_str();
  app.add_option("--roundings", o->roundings, "element roundings (rne, sr-fast, ...)")->capture_default_str();
  app.add_option("--rho", o->rhos, "synthetic periodic scaling: held amax = amax / rho, for each rho")
      ->capture_default_str();
  app.add_option("--base", o->base, "recipe preset every other setting comes from")->capture_default_str();
  app.add_option("--steps", o->steps, "trace steps (default: all)");
  app.add_option("--layers", o->layers, "trace layers: regular expression");
  app.add_option("--hold", o->hold, "trace periodic scaling hold rule: window | previous")->capture_default_str();
  app.add_option("--seed", o->seed, "seed of the synthetic data and of stochastic rounding")->capture_default_str();
  app.add_option("--slab-mib", o->slab_mib, "stream trace tensors larger than this many MiB of float32 in row slabs")
      ->capture_default_str();
  app.add_option("--json", o->json, "write the results as JSON ('-' for stdout)");
  app.add_option("--csv", o->csv, "write one CSV row per (input, configuration)");
  app.add_option("--plots", o->plots, "write PNG plots into this directory (python3 + matplotlib)");
  app.add_flag("--quiet,-q", o->quiet, "do not print the summary table");
  app.callback([o] { run_sweep(*o); });
}

}  // namespace fp4sim::cli
