// `fp4sim replay TRACE.h5 ...` (docs/cli.md): parse, validate, call fp4sim::replay::run, print the summary,
// write the requested outputs (all through temporaries, renamed only when everything succeeded).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/io/output_file.hpp"
#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/analysis/result_bytes.hpp"
#include "ranks.hpp"
#include "replay_common.hpp"

namespace fp4sim::cli {

namespace fs = std::filesystem;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

std::vector<Recipe> recipes_from_flag(const std::string& text) {
  std::vector<Recipe> out;
  for (const std::string& name : split_list(text)) {
    auto r = find_recipe(name);
    if (!r) {
      std::string known;
      for (const auto& p : recipe_presets()) known += (known.empty() ? "" : ", ") + std::string(p.name);
      throw UsageError("--recipes: unknown recipe '" + name + "' (known: " + known + ")");
    }
    out.push_back(*r);
  }
  if (out.empty()) throw UsageError("--recipes: no recipe named");
  return out;
}

std::vector<std::int64_t> steps_from_flag(const std::string& text) {
  std::vector<std::int64_t> out;
  for (const std::string& item : split_list(text)) {
    auto parse = [&](const std::string& s) {
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(s, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != s.size() || s.empty()) throw UsageError("--steps: '" + item + "' is not a step or a range A-B");
      return static_cast<std::int64_t>(v);
    };
    const auto dash = item.find('-', 1);
    if (dash == std::string::npos) {
      out.push_back(parse(item));
    } else {
      const std::int64_t a = parse(item.substr(0, dash)), b = parse(item.substr(dash + 1));
      if (b < a || b - a > 10'000'000) throw UsageError("--steps: bad range '" + item + "'");
      for (std::int64_t s = a; s <= b; ++s) out.push_back(s);
    }
  }
  return out;
}

ProgressBar::ProgressBar() : enabled_(::isatty(STDERR_FILENO) != 0) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(double fraction, const std::string& what) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (fraction < 1.0 && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth + 0.5);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  std::string label = what.size() > 40 ? what.substr(0, 37) + "..." : what;
  std::fprintf(stderr, "\r\033[K[%s] %3d%% %s", bar.c_str(), static_cast<int>(fraction * 100 + 0.5), label.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && shown_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }
}

fs::path plot_script() {
  if (const char* env = std::getenv("FP4SIM_PLOT_SCRIPT")) return env;
  std::vector<fs::path> candidates;
  // The source tree this binary was built from (CMake passes absolute source paths), then paths
  // relative to the executable (a build directory inside the source tree, or an install prefix).
  candidates.push_back(fs::path(__FILE__).parent_path().parent_path().parent_path() / "tools" / "plot_replay.py");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "tools" / "plot_replay.py");
    candidates.push_back(exe.parent_path().parent_path() / "share" / "fp4sim" / "plot_replay.py");
  }
  for (const auto& c : candidates) {
    if (fs::exists(c, ec)) return c;
  }
  throw UsageError("--plots: cannot find tools/plot_replay.py (set FP4SIM_PLOT_SCRIPT to its path)");
}

void run_plot_script(const fs::path& script, const fs::path& json, const fs::path& out_dir) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw DataError("--plots: cannot start python3");
  if (pid == 0) {
    const std::string s = script.string(), j = json.string(), o = out_dir.string();
    ::execlp("python3", "python3", s.c_str(), j.c_str(), "--out", o.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "fp4sim: cannot run python3\n");
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw DataError("--plots: waitpid failed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw DataError("--plots: " + script.string() + " failed (exit " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                    "); it needs python3 with matplotlib");
  }
}

// A directory written under a temporary name and renamed (or merged) into place by commit().
PlotDirectory::PlotDirectory(fs::path path) : path_(std::move(path)) {
  temporary_ = path_;
  temporary_ += ".tmp." + std::to_string(::getpid());
  fs::create_directories(temporary_);
}

PlotDirectory::~PlotDirectory() {
  std::error_code ec;
  if (!committed_) fs::remove_all(temporary_, ec);
}

void PlotDirectory::commit() {
  std::error_code ec;
  if (!fs::exists(path_, ec)) {
    fs::rename(temporary_, path_, ec);
    if (ec) throw DataError(path_.string() + ": cannot rename into place: " + ec.message());
  } else {
    for (const auto& entry : fs::directory_iterator(temporary_)) {
      fs::rename(entry.path(), path_ / entry.path().filename(), ec);
      if (ec) throw DataError((path_ / entry.path().filename()).string() + ": cannot move into place: " + ec.message());
    }
    fs::remove_all(temporary_, ec);
  }
  committed_ = true;
}

void check_writable(const std::string& path, const std::string& flag) {
  if (path.empty() || path == "-") return;
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) throw UsageError(flag + " " + path + ": directory " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK) != 0) throw UsageError(flag + " " + path + ": directory " + parent.string() + " is not writable");
  if (fs::is_directory(path, ec) && flag != "--plots") throw UsageError(flag + " " + path + ": is a directory");
}

namespace {

// The HDF5 1.10 C library can fault on some corrupted files (e.g. a damaged global heap under a
// variable-length string). While a trace is read, such a fault ends the command with the message and
// exit code of bad input (3) instead of a crash; no output exists yet at that point.
char g_fatal_message[1024];

extern "C" void on_fatal_signal(int) {
  const ssize_t n = static_cast<ssize_t>(std::strlen(g_fatal_message));
  if (::write(STDERR_FILENO, g_fatal_message, static_cast<std::size_t>(n)) < 0) {
    // nothing more can be done in a signal handler
  }
  ::_exit(3);
}

}  // namespace

FatalSignalGuard::FatalSignalGuard(const std::string& input) {
  std::snprintf(g_fatal_message, sizeof g_fatal_message,
                "\nfp4sim: error: %s: the HDF5 library faulted while reading this file (corrupted or malicious "
                "HDF5?); no output was written\n",
                input.c_str());
  struct sigaction action {};
  action.sa_handler = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (int i = 0; i < 4; ++i) {
    const int sig = kSignals[i];
    sigaction(sig, &action, &previous_[i]);
  }
}

FatalSignalGuard::~FatalSignalGuard() {
  for (int i = 0; i < 4; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

namespace {

struct ReplayCliOptions {
  std::string trace;
  std::string recipes = "ue5m3,nvfp4,mxfp4";
  std::string datapath = "recipe";
  std::string steps, layers, json, csv, h5, plots;
  std::uint64_t seed = 0;
  std::string hold = "window";
  bool no_gemms = false;
  bool quiet = false;
  int period = 50;
  double slab_mib = 256;
};

void run_replay(const ReplayCliOptions& o) {
  fs::path script;
  // On many processes (ranks.hpp) each does its share; rank 0 writes the outputs, so it alone checks them.
  const auto result = run_on_ranks<replay::Result>(
      Ranks::world(),
      [&](const Share& share, const Starting& starting) {
        replay::Options options;
        options.recipes = recipes_from_flag(o.recipes);
        options.datapath = o.datapath;
        if (!o.steps.empty()) options.steps = steps_from_flag(o.steps);
        options.layers = o.layers;
        options.seed = o.seed;
        const auto hold = replay::parse_hold_rule(o.hold);
        if (!hold) throw UsageError("--hold: expected window or previous, got '" + o.hold + "'");
        options.hold = *hold;
        options.gemms = !o.no_gemms;
        options.headroom_period = o.period;
        if (!(o.slab_mib > 0)) throw UsageError("--slab-mib must be positive");
        options.max_slab_bytes = static_cast<std::size_t>(o.slab_mib * 1024 * 1024);
        if (share.index == 0) {
          if (!o.plots.empty()) script = plot_script();
          // Output paths are checked now and written only when everything succeeded (temporaries renamed).
          check_writable(o.json, "--json");
          check_writable(o.csv, "--csv");
          check_writable(o.h5, "--h5");
          check_writable(o.plots, "--plots");
        }
        options.share = share;
        options.starting = starting;
        FatalSignalGuard guard(o.trace);
        ProgressBar bar;
        options.progress = [&](double f, const std::string& what) { bar.update(f, what); };
        return replay::run(o.trace, options);
      },
      replay_result_from_bytes, replay::merge);
  if (result) write_replay_outputs(*result, o.json, o.csv, o.h5, o.plots, script, o.quiet);
}

}  // namespace

void write_replay_outputs(const replay::Result& result, const std::string& json_path, const std::string& csv_path,
                          const std::string& h5_path, const std::string& plots_path, const fs::path& script,
                          bool quiet) {
  const bool json_stdout = json_path == "-";
  if (!quiet) {
    const std::string text = replay::summary(result);
    std::fputs(text.c_str(), json_stdout ? stderr : stdout);
  }
  std::unique_ptr<OutputFile> json, csv;
  std::unique_ptr<OutputPath> h5;
  std::unique_ptr<PlotDirectory> plots;
  if (!json_path.empty() && !json_stdout) {
    json = std::make_unique<OutputFile>(json_path);
    replay::write_json(result, json->stream());
    json->stream().flush();
  }
  if (!csv_path.empty()) {
    csv = std::make_unique<OutputFile>(csv_path);
    replay::write_csv(result, csv->stream());
  }
  if (!h5_path.empty()) {
    // Written to a scratch name of its own, renamed with the others below.
    h5 = std::make_unique<OutputPath>(h5_path);
    replay::write_h5(result, h5->temporary_path());
  }
  if (!plots_path.empty()) {
    plots = std::make_unique<PlotDirectory>(plots_path);
    fs::path input;
    std::unique_ptr<OutputFile> scratch;
    if (json) {
      input = json->temporary_path();
    } else {
      scratch = std::make_unique<OutputFile>(plots->temporary_path() / "replay.json");
      replay::write_json(result, scratch->stream());
      scratch->stream().flush();
      input = scratch->temporary_path();
    }
    run_plot_script(script, input, plots->temporary_path());
    if (scratch) {
      // Keep the JSON the plots were drawn from next to them.
      scratch->commit();
    }
  }
  if (json_stdout) replay::write_json(result, std::cout);
  if (json) json->commit();
  if (csv) csv->commit();
  if (h5) h5->commit();
  if (plots) plots->commit();
}


void setup_replay(CLI::App& app) {
  auto o = std::make_shared<ReplayCliOptions>();
  app.description(
      "Replay a tensor trace (docs/trace-format.md) through block-scaled recipes: per step, layer, tensor and recipe "
      "error, underflow/saturation and per-block statistics; per GEMM the relative Frobenius error; periodic "
      "tensor scaling carried across steps (Proposition 1 headroom).");
  app.add_option("trace", o->trace, "TRACE.h5 (docs/trace-format.md, version 1)")->required();
  app.add_option("--recipes", o->recipes, "comma-separated recipe presets")->capture_default_str();
  app.add_option("--datapath", o->datapath,
                 "GEMM datapath of the gemms entries: recipe = each recipe's default (fp4sim gemm "
                 "--list-datapaths), f64 = float64 product of the dequantized operands (fast), or a datapath name")
      ->capture_default_str();
  app.add_option("--steps", o->steps, "captured steps to replay, e.g. 1,200 or 100-200 (default: all)");
  app.add_option("--layers", o->layers, "regular expression (ECMAScript) searched in layer names");
  app.add_option("--json", o->json, "write the full results as JSON ('-' for stdout)");
  app.add_option("--csv", o->csv, "write one CSV row per tensor, gemm and headroom entry");
  app.add_option("--h5", o->h5, "write the results as HDF5 column datasets");
  app.add_option("--plots", o->plots, "write PNG plots into this directory (python3 + matplotlib)");
  app.add_option("--seed", o->seed, "seed of the stochastic-rounding bits")->capture_default_str();
  app.add_option("--hold", o->hold,
                 "periodic-scaling hold rule when a refresh step was not captured: window | previous")
      ->capture_default_str();
  app.add_option("--period", o->period, "D of the Proposition 1 headroom analysis")->capture_default_str();
  app.add_flag("--no-gemms", o->no_gemms, "skip the GEMM-level entries (per-tensor statistics only)");
  app.add_flag("--quiet,-q", o->quiet, "do not print the summary table");
  app.add_option("--slab-mib", o->slab_mib, "stream tensors larger than this many MiB of float32 in row slabs")
      ->capture_default_str();
  app.callback([o] { run_replay(*o); });
}

}  // namespace fp4sim::cli
