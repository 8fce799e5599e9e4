// One setup_<name>(CLI::App&) per subcommand file (CLI11's subcom_in_files): it binds flags to the fields
// of the library's call object (fp4sim::QuantizeCall, GemmCall, ...), which checks them, reads and writes
// the files, and runs the library call. Errors leave as fp4sim::UsageError (exit 2), fp4sim::DataError
// (exit 3) or fp4sim::cli::Mismatch (exit 4); run() (run.hpp) maps them.
#pragma once

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fp4sim::cli {

struct Mismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An error message as one line a terminal shows as it is: control bytes (a layer name's, an option
// value's) as \xHH, so none reaches the terminal raw.
std::string printable(std::string_view message);

// The whole command line: --version and every subcommand below, each with its callback that runs it.
void build_app(CLI::App& app);

void setup_formats(CLI::App& app);
void setup_convert(CLI::App& app);
void setup_quantize(CLI::App& app);
void setup_gemm(CLI::App& app);
void setup_mma(CLI::App& app);
void setup_datapath(CLI::App& app);
void setup_crosscheck(CLI::App& app);
void setup_verify(CLI::App& app);
void setup_replay(CLI::App& app);
void setup_sweep(CLI::App& app);
void setup_vectors(CLI::App& app);

}  // namespace fp4sim::cli
