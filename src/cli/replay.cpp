// `fp4sim replay TRACE.h5 ...` (docs/cli.md): the flags of fp4sim::replay::Call, fp4sim::replay::run, the
// summary printed and the requested outputs written (all through temporaries, renamed only when
// everything succeeded).
#include <filesystem>
#include <memory>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/analysis/calls.hpp"
#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/analysis/result_bytes.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/front/analysis_arguments.hpp"
#include "progress.hpp"
#include "ranks.hpp"
#include "replay_common.hpp"

namespace fp4sim::cli {

namespace fs = std::filesystem;

namespace {

struct ReplayCliOptions {
  replay::Call call;
  std::string trace;
  OutputFlags outputs;
  bool quiet = false;
  ProgressMode progress = ProgressMode::automatic;
};

// --csv a.csv: a_tensors.csv, a_gemms.csv, a_headroom.csv.
std::vector<CsvTable> csv_tables(const replay::Result& result) {
  std::vector<CsvTable> tables;
  for (const auto& row : names(replay::Records{})) {
    tables.push_back({std::string(row.name), [&result, kind = row.value](std::ostream& os) {
                        replay::write_csv(result, kind, os);
                      }});
  }
  return tables;
}

void run_replay(const ReplayCliOptions& o) {
  fs::path script;
  // On many processes (ranks.hpp) each does its share; rank 0 writes the outputs, so it alone checks them.
  const auto result = run_on_ranks<replay::Result>(
      Ranks::world(),
      [&](const Share& share, const Starting& starting) {
        replay::Options options = o.call.resolve();
        if (share.index == 0) {
          if (!o.outputs.plots.empty()) script = plot_script();
          // Output paths are checked now and written only when everything succeeded (temporaries renamed).
          check_outputs(o.outputs, o.trace);
        }
        options.share = share;
        options.starting = starting;
        FatalSignalGuard guard(o.trace);
        Progress progress(o.progress, "elements", share.index == 0);
        options.progress = progress.callback();
        return replay::run(o.trace, options);
      },
      replay_result_from_bytes, replay::merge);
  if (!result) return;
  const ResultWriters writers{[&] { return replay::summary(*result); },
                              [&](std::ostream& os) { replay::write_json(*result, os); },
                              csv_tables(*result),
                              [&](const fs::path& path) { replay::write_h5(*result, path); }};
  write_outputs(writers, o.outputs, script, o.quiet);
}

}  // namespace

void setup_replay(CLI::App& app) {
  auto o = std::make_shared<ReplayCliOptions>();
  app.description(
      "Replay a tensor trace (docs/trace-format.md) through block-scaled recipes: per step, layer, tensor and recipe "
      "error, underflow/saturation and per-block statistics; per GEMM the relative Frobenius error; periodic "
      "tensor scaling carried across steps (Proposition 1 headroom).");
  app.add_option("trace", o->trace, "TRACE.h5 (docs/trace-format.md, version 1)")->required();
  add_arguments(app, front::replay_arguments(), o->call);
  app.get_option("--recipe-map")->excludes(app.get_option("--recipes"));
  app.add_option("--json", o->outputs.json, "write the full results as JSON ('-' for stdout)")->check(not_empty_path());
  app.add_option("--csv", o->outputs.csv, "write the entries as CSV, one file per kind: --csv a.csv writes a_tensors.csv, a_gemms.csv and "
                 "a_headroom.csv")->check(not_empty_path());
  app.add_option("--h5", o->outputs.h5, "write the results as HDF5 column datasets")->check(not_empty_path());
  app.add_option("--plots", o->outputs.plots, "write PNG plots into this directory (python3 + matplotlib)")
      ->check(not_empty_path());
  app.add_flag("--quiet,-q", o->quiet, "do not print the summary table");
  add_progress_flags(app, o->progress);
  add_example(app, "fp4sim replay traces/trace_a.h5 --recipes ue5m3,nvfp4,mxfp4:scale_rule=rceil,block=16 --json a.json --plots plots/");
  app.callback([o] { run_replay(*o); });
}

}  // namespace fp4sim::cli
