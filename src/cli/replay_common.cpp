// The pieces `replay` and `sweep` share (replay_common.hpp): plot script, fault guard, output checks and
// writing.
#include "replay_common.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "fp4sim/core/error.hpp"
#include "fp4sim/front/arguments.hpp"
#include "fp4sim/io/output_file.hpp"
#include "interrupt.hpp"

namespace fp4sim::cli {

namespace fs = std::filesystem;

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
  if (pid < 0) throw DataError(std::string("--plots: cannot start python3: ") + std::strerror(errno));
  if (pid == 0) {
    prepare_child_signals();
    const std::string s = script.string(), j = json.string(), o = out_dir.string();
    ::execlp("python3", "python3", s.c_str(), j.c_str(), "--out", o.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "fp4sim: cannot run python3\n");
    ::_exit(127);
  }
  track_child(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      untrack_child(pid);
      throw DataError(std::string("--plots: waitpid failed: ") + std::strerror(errno));
    }
  }
  untrack_child(pid);
  end_if_interrupted(status);  // the run was interrupted, not the script failing
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw DataError("--plots: " + script.string() + " failed (exit " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                    "); it needs python3 with matplotlib");
  }
}

namespace {

// "plots/" names the directory "plots".
fs::path without_trailing_separator(fs::path path) {
  while (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path;
}

fs::path csv_path(const std::string& csv, const std::string& suffix) {
  if (suffix.empty()) return csv;
  fs::path path(csv);
  if (path.extension() == ".csv") path.replace_extension();
  path += "_" + suffix + ".csv";
  return path;
}

void check_writable(const std::string& path, const std::string& flag, OutputKind kind) {
  if (path.empty() || path == "-") return;
  fs::path parent = without_trailing_separator(path).parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) throw DataError(flag + " " + path + ": directory " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK) != 0) {
    throw DataError(flag + " " + path + ": directory " + parent.string() + " is not writable: " + std::strerror(errno));
  }
  check_output_path(path, kind, flag);
}

}  // namespace

void check_outputs(const OutputFlags& flags, const std::string& input) {
  note_input(input);
  const std::pair<const std::string*, const char*> outputs[] = {
      {&flags.json, "--json"}, {&flags.csv, "--csv"}, {&flags.h5, "--h5"}, {&flags.plots, "--plots"}};
  for (const auto& [path, flag] : outputs) {
    check_writable(*path, flag, path == &flags.plots ? OutputKind::directory : OutputKind::file);
  }
  for (std::size_t i = 0; i < std::size(outputs); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      const std::string &a = *outputs[i].first, &b = *outputs[j].first;
      if (a.empty() || b.empty() || a == "-" || b == "-") continue;
      std::error_code ec;
      if (fs::weakly_canonical(fs::absolute(a), ec) == fs::weakly_canonical(fs::absolute(b), ec)) {
        throw UsageError(std::string(outputs[i].second) + " " + a + ": is also given to " + outputs[j].second);
      }
    }
  }
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

void write_outputs(const ResultWriters& w, const OutputFlags& flags, const fs::path& script, bool quiet) {
  const bool json_stdout = flags.json == "-";
  // the summary's advice names arguments by key: spelled here as flags
  if (!quiet) std::fputs(front::render(w.summary(), front::Spelling::cli).c_str(), json_stdout ? stderr : stdout);
  std::unique_ptr<OutputFile> json;
  std::unique_ptr<OutputPath> h5;
  std::unique_ptr<OutputDirectory> plots;
  if (!flags.json.empty() && !json_stdout) {
    json = std::make_unique<OutputFile>(flags.json);
    w.json(json->stream());
    json->stream().flush();
  }
  if (!flags.csv.empty()) {
    // Each table committed as soon as it is written: a failed write is reported with its own errno,
    // before anything else can overwrite it (the renames still wait for the whole command).
    for (const CsvTable& table : w.csv) {
      OutputFile file(csv_path(flags.csv, table.suffix));
      table.write(file.stream());
      file.commit();
    }
  }
  if (!flags.h5.empty()) {
    // Written to a scratch name of its own, renamed with the others below.
    h5 = std::make_unique<OutputPath>(flags.h5);
    w.h5(h5->temporary_path());
  }
  if (!flags.plots.empty()) {
    plots = std::make_unique<OutputDirectory>(flags.plots, OutputDirectory::Existing::merge);
    fs::path input;
    // Without --json the plots are drawn from a scratch JSON next to the plot directory, never
    // committed: the directory holds the plots alone.
    std::unique_ptr<OutputFile> scratch;
    if (json) {
      input = json->temporary_path();
    } else {
      scratch = std::make_unique<OutputFile>(fs::path(plots->temporary_path()) += ".json");
      w.json(scratch->stream());
      scratch->stream().flush();
      input = scratch->temporary_path();
    }
    run_plot_script(script, input, plots->temporary_path());
  }
  if (json_stdout) w.json(std::cout);
  if (json) json->commit();
  if (h5) h5->commit();
  if (plots) plots->commit();
}

}  // namespace fp4sim::cli
