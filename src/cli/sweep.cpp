// `fp4sim sweep [TRACE.h5] ...` (docs/cli.md): a grid of recipe parameters over a trace or synthetic
// distributions, with the fields of replay's tensors entries.
#include <memory>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/analysis/calls.hpp"
#include "fp4sim/analysis/result_bytes.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/core/rounding.hpp"
#include "fp4sim/front/recipe_spec.hpp"
#include "progress.hpp"
#include "ranks.hpp"
#include "replay_common.hpp"

namespace fp4sim::cli {

namespace {

struct SweepCliOptions {
  sweep::Call call;
  OutputFlags outputs;
  bool quiet = false;
  ProgressMode progress = ProgressMode::automatic;
};

void run_sweep(const SweepCliOptions& o) {
  std::filesystem::path script;
  // On many processes (ranks.hpp) each does its share; rank 0 writes the outputs, so it alone checks them.
  const auto result = run_on_ranks<sweep::Result>(
      Ranks::world(),
      [&](const Share& share, const Starting& starting) {
        sweep::Options s = o.call.resolve();
        if (share.index == 0) {
          if (!o.outputs.plots.empty()) script = plot_script();
          check_outputs(o.outputs, o.call.trace);
        }
        s.share = share;
        s.starting = starting;
        FatalSignalGuard guard(o.call.trace.empty() ? std::string("synthetic input") : o.call.trace);
        Progress progress(o.progress, "elements", share.index == 0);
        s.progress = progress.callback();
        return sweep::run(s);
      },
      sweep_result_from_bytes, sweep::merge);
  if (!result) return;
  const ResultWriters writers{[&] { return sweep::summary(*result); },
                              [&](std::ostream& os) { sweep::write_json(*result, os); },
                              {{"", [&](std::ostream& os) { sweep::write_csv(*result, os); }}}, {}};
  write_outputs(writers, o.outputs, script, o.quiet);
}

}  // namespace

void setup_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepCliOptions>();
  app.description(
      "Sweep a grid of element format x scale format x block size x tensor-scale policy x rounding over a trace "
      "(its x/w/dy tensors, periodic scaling across its steps) or over seeded synthetic distributions; writes "
      "the fields of replay's tensors entries per (input, configuration).");
  app.add_option("trace", o->call.trace, "TRACE.h5 (optional; without it, synthetic distributions are swept)");
  app.add_option("--synthetic", o->call.synthetic,
                 "distributions: normal, laplace, student-t:NU, lognormal:SIGMA, each with optional +outliers:P:K")
      ->capture_default_str();
  app.add_option("--rows", o->call.rows, "rows of each synthetic tensor")->capture_default_str();
  app.add_option("--cols", o->call.cols, "columns of each synthetic tensor (blocks run along them)")->capture_default_str();
  app.add_option("--role", o->call.role, "how synthetic tensors are quantized:" + name_help<Role>())
      ->capture_default_str();
  app.add_option("--element-formats", o->call.element_formats, "element formats (docs/cli.md names or eXmY)")->capture_default_str();
  app.add_option("--scale-formats", o->call.scale_formats, "block-scale formats (e8m0 uses the OCP floor rule unless --scale-rules)")
      ->capture_default_str();
  app.add_option("--blocks", o->call.blocks, "block sizes")->capture_default_str();
  app.add_option("--tensor-scales", o->call.tensor_scales, "tensor-scale policies:" + name_help<TensorScalePolicy>())
      ->capture_default_str();
  app.add_option("--roundings", o->call.roundings, "element roundings:" + name_help<Rounding>())->capture_default_str();
  app.add_option("--scale-rules", o->call.scale_rules,
                 "scale rules, each suiting every --scale-formats (default: each format's own, floor on e8m0 and "
                 "two-level otherwise; given, the configurations name their rule):" + name_help<ScaleRule>());
  app.add_option("--rho", o->call.rhos, "synthetic periodic scaling: held amax = amax / rho, for each rho")
      ->capture_default_str();
  app.add_option_function<std::string>(
         "--base", [o](const std::string& spec) { o->call.base = front::recipe_spec(spec, "base"); },
         "recipe every other setting comes from: a preset or PRESET:KEY=VALUE,... (docs/cli.md \"User-defined "
         "recipes\")")
      ->type_name("SPEC")
      ->default_str("ue5m3");
  app.add_option("--steps", o->call.steps, "trace steps (default: all)");
  app.add_option("--layers", o->call.layers, "trace layers: regular expression");
  app.add_option("--recipe-map", o->call.recipe_map,
                 "trace only: one recipe map as replay's whose RECIPE may be grid (each grid point in turn), e.g. "
                 "'lm_head=bf16,*=grid'; one policy per grid point");
  names_of<replay::HoldRule>(app.add_option("--hold", o->call.hold, "trace periodic scaling: what is held when a refresh step was not captured"))
      ->capture_default_str();
  app.add_option("--seed", o->call.seed, "seed of the synthetic data and of stochastic rounding")->capture_default_str();
  app.add_option("--slab-mib", o->call.slab_mib, "stream trace tensors larger than this many MiB of float32 in row slabs")
      ->capture_default_str();
  app.add_option("--json", o->outputs.json, "write the results as JSON ('-' for stdout)")->check(not_empty_path());
  app.add_option("--csv", o->outputs.csv, "write one CSV row per (input, configuration)")->check(not_empty_path());
  app.add_option("--plots", o->outputs.plots, "write PNG plots into this directory (python3 + matplotlib)")
      ->check(not_empty_path());
  app.add_flag("--quiet,-q", o->quiet, "do not print the summary table");
  add_progress_flags(app, o->progress);
  add_example(app, "fp4sim sweep --rows 64 --cols 1024 --scale-formats e8m0 --scale-rules floor,rceil --blocks 16,32 "
                   "--tensor-scales none --csv sweep.csv");
  app.callback([o] { run_sweep(*o); });
}

}  // namespace fp4sim::cli
