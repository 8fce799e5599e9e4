#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace fp4sim::cli {

namespace {

constexpr auto kTerminalInterval = std::chrono::milliseconds(100);
constexpr auto kPlainInterval = std::chrono::seconds(5);
constexpr std::size_t kWhatWidth = 40;

// 1.52 M, 870 k, 12.0 (three significant figures); a whole count below 1000 as it is (21).
std::string si(double v, bool count = true) {
  if (count && v < 999.5) return std::to_string(static_cast<long long>(v));
  static const char* const kPrefixes[] = {"", " k", " M", " G", " T", " P"};
  int p = 0;
  while (v >= 999.5 && p < 5) {
    v /= 1000.0;
    ++p;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 99.95 ? "%.0f%s" : v >= 9.995 ? "%.1f%s" : "%.2f%s", v, kPrefixes[p]);
  return buf;
}

// 0:27, 12:05, 3:02:10.
std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

}  // namespace

void add_progress_flags(CLI::App& app, ProgressMode& mode) {
  auto* on = app.add_flag_function("--progress", [&mode](std::int64_t) { mode = ProgressMode::on; },
                                   "show progress, rate and time left on stderr even when it is not a terminal "
                                   "(a line every 5 seconds); default: only on a terminal");
  app.add_flag_function("--no-progress", [&mode](std::int64_t) { mode = ProgressMode::off; },
                        "never show progress")
      ->excludes(on);
}

Progress::Progress(ProgressMode mode, std::string unit, bool shown)
    : terminal_(::isatty(STDERR_FILENO) != 0), unit_(std::move(unit)) {
  enabled_ = shown && (mode == ProgressMode::on || (mode == ProgressMode::automatic && terminal_));
}

Progress::~Progress() { clear(); }

ProgressFn Progress::callback() {
  return [this](std::uint64_t done, std::uint64_t total, const std::string& what) { update(done, total, what); };
}

void Progress::update(std::uint64_t done, std::uint64_t total, const std::string& what) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (total != total_ || start_ == Clock::time_point{}) {
    // A new count (crosscheck's phases): the rate starts again.
    total_ = total;
    start_ = last_ = now;
  }
  const bool end = done >= total;
  if (terminal_) {
    if (!end && drawn_ && now - last_ < kTerminalInterval) return;
    last_ = now;
    std::fprintf(stderr, "\r\033[K%s", line(done, total, what, true).c_str());
    drawn_ = true;
  } else {
    if (!end && now - last_ < kPlainInterval) return;
    last_ = now;
    std::fprintf(stderr, "%s\n", line(done, total, what, false).c_str());
  }
  std::fflush(stderr);
}

std::string Progress::line(std::uint64_t done, std::uint64_t total, const std::string& what, bool terminal) const {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  const double fraction = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
  const int percent = static_cast<int>(fraction * 100.0);
  const std::string per = (unit_.empty() ? "" : " " + unit_) + "/s";
  std::string rate = "-" + per, eta = "-:--";
  if (seconds > 0 && done > 0) {
    const double per_second = static_cast<double>(done) / seconds;
    rate = si(per_second, false) + per;
    eta = clock_text(static_cast<double>(total - std::min(done, total)) / per_second);
  }
  const std::string label = what.size() > kWhatWidth ? what.substr(0, kWhatWidth - 3) + "..." : what;
  char buf[512];
  if (terminal) {
    constexpr int kWidth = 20;
    std::string bar(static_cast<std::size_t>(fraction * kWidth), '#');
    bar.resize(kWidth, ' ');
    std::snprintf(buf, sizeof buf, "[%s] %3d%%  %s  ETA %s  %s", bar.c_str(), percent, rate.c_str(), eta.c_str(),
                  label.c_str());
  } else {
    const std::string of = si(static_cast<double>(total)) + (unit_.empty() ? "" : " " + unit_);
    std::snprintf(buf, sizeof buf, "fp4sim: %d%% of %s, %s, ETA %s, %s elapsed: %s", percent, of.c_str(),
                  rate.c_str(), eta.c_str(), clock_text(seconds).c_str(), label.c_str());
  }
  return buf;
}

void Progress::clear() {
  if (terminal_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace fp4sim::cli
