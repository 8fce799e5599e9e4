// `fp4sim sweep [TRACE.h5] ...` (docs/cli.md): a grid of recipe parameters over a trace or synthetic
// distributions, with the fields of replay's tensors entries.
#include <memory>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/analysis/calls.hpp"
#include "fp4sim/analysis/sweep.hpp"
#include "fp4sim/analysis/result_bytes.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/core/rounding.hpp"
#include "fp4sim/front/analysis_arguments.hpp"
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
  add_arguments(app, front::sweep_arguments(), o->call);
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
