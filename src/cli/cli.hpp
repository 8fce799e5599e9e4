// One setup_<name>(CLI::App&) per subcommand file (CLI11's subcom_in_files): it binds flags to an
// options struct and sets a callback that runs the library call. Errors leave as fp4sim::UsageError
// (exit 2), fp4sim::DataError (exit 3) or fp4sim::cli::Mismatch (exit 4); main() maps them.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <stdexcept>

#include "fp4sim/core/format.hpp"
#include "fp4sim/core/rounding.hpp"

namespace fp4sim::cli {

struct Mismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void setup_formats(CLI::App& app);
void setup_convert(CLI::App& app);
void setup_quantize(CLI::App& app);
void setup_gemm(CLI::App& app);
void setup_mma(CLI::App& app);
void setup_crosscheck(CLI::App& app);
void setup_verify(CLI::App& app);
void setup_replay(CLI::App& app);
void setup_sweep(CLI::App& app);
void setup_vectors(CLI::App& app);

// Name -> value maps built from the preset tables, for CLI::CheckedTransformer, so flags accept
// exactly the tables' names.
std::map<std::string, Rounding> rounding_map();

// A --format value: a preset name or an eXmY/ueXmY descriptor; anything else is a usage error.
Format format_from_flag(const std::string& text, const std::string& flag);

// Exact shortest round-trip decimal of a double (JSON numbers).
std::string json_number(double value);

}  // namespace fp4sim::cli
