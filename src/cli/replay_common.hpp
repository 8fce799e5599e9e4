// Helpers shared by the `replay` and `sweep` subcommands (src/cli/replay.cpp, src/cli/sweep.cpp).
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fp4sim/analysis/replay.hpp"

namespace fp4sim::cli {

// A one-line progress bar on stderr, drawn only when stderr is a terminal, at most 10 times a second.
class ProgressBar {
 public:
  ProgressBar();
  ~ProgressBar();
  void update(double fraction, const std::string& what);
  void finish();

 private:
  bool enabled_ = false;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// tools/plot_replay.py: $FP4SIM_PLOT_SCRIPT, the source tree, or next to the executable.
std::filesystem::path plot_script();
// Runs `python3 SCRIPT JSON --out DIR`; DataError when it fails.
void run_plot_script(const std::filesystem::path& script, const std::filesystem::path& json,
                     const std::filesystem::path& out_dir);

// Fails with a usage error when an output could not be created (missing or read-only directory).
void check_writable(const std::string& path, const std::string& flag);

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

// Prints the summary (unless quiet) and writes --json/--csv/--h5/--plots through temporaries, renamed
// into place only when every one of them succeeded.
void write_replay_outputs(const replay::Result& result, const std::string& json_path, const std::string& csv_path,
                          const std::string& h5_path, const std::string& plots_path,
                          const std::filesystem::path& script, bool quiet);

}  // namespace fp4sim::cli
