// Helpers shared by the `replay` and `sweep` subcommands (src/cli/replay.cpp, src/cli/sweep.cpp).
#pragma once

#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "fp4sim/analysis/replay.hpp"

namespace fp4sim::cli {

// tools/plot_replay.py: $FP4SIM_PLOT_SCRIPT, the source tree, or next to the executable.
std::filesystem::path plot_script();
// Runs `python3 SCRIPT JSON --out DIR`; DataError when it fails.
void run_plot_script(const std::filesystem::path& script, const std::filesystem::path& json,
                     const std::filesystem::path& out_dir);

// While alive, SIGSEGV/SIGBUS/SIGFPE/SIGILL (the HDF5 1.10 library faulting on a corrupted file) end the
// process with a message naming `input` and exit code 3 instead of a crash.
class FatalSignalGuard {
 public:
  explicit FatalSignalGuard(const std::string& input);
  ~FatalSignalGuard();
  FatalSignalGuard(const FatalSignalGuard&) = delete;
  FatalSignalGuard& operator=(const FatalSignalGuard&) = delete;

 private:
  static constexpr int kSignals[4] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
  struct sigaction previous_[4];
};

// The output flags of `replay` and `sweep` (empty: not asked for; --json "-": standard output).
struct OutputFlags {
  std::string json, csv, h5, plots;
};
// Fails before any work when an asked-for output cannot be created (DataError: a missing or unwritable
// directory) or is refused (UsageError: a directory or device, one of the others, or `input`, the trace
// or "" for none; src/io/output_file.hpp).
void check_outputs(const OutputFlags& flags, const std::string& input);

// One CSV table of a result: `suffix` empty writes the --csv path itself, else `--csv a.csv` writes
// a_<suffix>.csv.
struct CsvTable {
  std::string suffix;
  std::function<void(std::ostream&)> write;
};

// What a result can be written as: the terminal summary, JSON, CSV tables, HDF5 (empty: the command
// has no --h5). The plots are drawn from the JSON (a scratch copy when --json is not given).
struct ResultWriters {
  std::function<std::string()> summary;
  std::function<void(std::ostream&)> json;
  std::vector<CsvTable> csv;
  std::function<void(const std::filesystem::path&)> h5;
};

// Prints the summary (unless quiet) and writes the asked-for outputs through temporaries, renamed into
// place only when every one of them succeeded; the plots are drawn by `script` from the JSON.
void write_outputs(const ResultWriters& writers, const OutputFlags& flags, const std::filesystem::path& script,
                   bool quiet);

}  // namespace fp4sim::cli
