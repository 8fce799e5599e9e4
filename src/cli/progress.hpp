// The one progress reporter of the command line: `replay`, `sweep`, `gemm`, `verify gemm` and `crosscheck`
// hand its callback to the library call (fp4sim::ProgressFn) and it shows, on stderr, how far the call
// got, the rate and the time left.
//  * On a terminal (the default there): one line redrawn at most 10 times a second and cleared at the
//    end: `[########            ]  41%  1.52 M elements/s  ETA 0:27  step 200 lm_head`.
//  * Elsewhere, only when forced with --progress: a plain line every 5 seconds and one at the end,
//    `fp4sim: 41% of 2.70 G elements, 1.52 M elements/s, ETA 0:27: step 200 lm_head`.
// --no-progress turns both off.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "fp4sim/core/progress.hpp"

namespace fp4sim::cli {

enum class ProgressMode : std::uint8_t { automatic, on, off };

// --progress / --no-progress.
void add_progress_flags(CLI::App& app, ProgressMode& mode);

class Progress {
 public:
  // `unit`: what the library call counts ("elements", "tiles"; "" where the label says); `shown` false: never shows
  // (the processes other than rank 0 of a run on many).
  Progress(ProgressMode mode, std::string unit, bool shown = true);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(std::uint64_t done, std::uint64_t total, const std::string& what);
  // The library's callback, reporting to this object (which must outlive the call).
  ProgressFn callback();

 private:
  using Clock = std::chrono::steady_clock;
  std::string line(std::uint64_t done, std::uint64_t total, const std::string& what, bool terminal) const;
  void clear();

  bool enabled_ = false, terminal_ = false, drawn_ = false;
  std::string unit_;
  std::uint64_t total_ = 0;
  Clock::time_point start_{}, last_{};
};

}  // namespace fp4sim::cli
