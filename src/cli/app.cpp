// The fp4sim command line: the top-level app and one subcommand per src/cli/<name>.cpp, with its checks
// of numbers and its one-line errors. run() (run.hpp) parses and maps errors to exit codes;
// tests/fuzz/cli_args_fuzz.cpp parses the same app without running it.
#include <cstdio>
#include <string>

#include "arguments.hpp"
#include "cli.hpp"

namespace fp4sim::cli {

namespace {

// CLI11's parse errors as one line under the one error prefix (docs/cli.md), control bytes of the
// offending value escaped, pointing at the --help of the subcommand being parsed.
std::string one_line(const CLI::App* top, const CLI::Error& e) {
  std::string line = "fp4sim: error: " + printable(e.what());
  std::string command = top->get_name().empty() ? "fp4sim" : top->get_name();
  for (const CLI::App* at = top; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    command += " " + at->get_name();
  }
  return line + " (see '" + command + " --help')\n";
}

}  // namespace

std::string printable(std::string_view message) {
  std::string line;
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
      line += escaped;
    } else {
      line += c;
    }
  }
  return line;
}

void build_app(CLI::App& app) {
  app.require_subcommand(1);
  app.name("fp4sim");
  app.set_version_flag("--version", std::string("fp4sim " FP4SIM_VERSION));
  setup_formats(*app.add_subcommand("formats", "list every known number format"));
  setup_convert(*app.add_subcommand("convert", "element-wise encode a .npy array into a format"));
  setup_quantize(*app.add_subcommand("quantize", "block-quantize one tensor under a recipe (HDF5 and/or .npy out)"));
  setup_gemm(*app.add_subcommand("gemm", "C = A·Bᵀ of two quantized operands through a GEMM datapath; --list-datapaths"));
  setup_mma(*app.add_subcommand("mma", "raw D = A·B + C as a modeled tensor-core instruction chain computes it"));
  setup_datapath(*app.add_subcommand("datapath", "tensor-core datapath rows against measurements: identify"));
  setup_crosscheck(*app.add_subcommand("crosscheck", "run the CUDA kernels and the golden model on the same cases; exit 4 on any mismatch (needs a GPU)"));
  setup_verify(*app.add_subcommand("verify", "check your own kernel's quantize or GEMM output against the golden model"));
  setup_replay(*app.add_subcommand("replay", "replay a tensor trace through recipes: error, scale and GEMM statistics"));
  setup_sweep(*app.add_subcommand("sweep", "grid of formats x block sizes x tensor scaling x rounding over a trace or synthetic data"));
  setup_vectors(*app.add_subcommand("vectors", "write bit-exact conformance vectors for a recipe (.npy + manifest.json), checkable with numpy alone"));
  check_numbers(app);
  app.failure_message(one_line);
}

}  // namespace fp4sim::cli
