#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

#include "cli.hpp"
#include "arguments.hpp"
#include "interrupt.hpp"
#include "ranks.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/io/hdf5.hpp"
#include "fp4sim/io/output_file.hpp"

namespace {

// Whatever went to standard output reached it: a failed write (a full disk, a closed pipe) is an error.
void finish_standard_output() {
  std::cout.flush();
  // The errno of the write that failed, when it was the last call to set one.
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (failed) {
    throw fp4sim::DataError(std::string("standard output: write failed") + (errno ? std::string(": ") + std::strerror(errno) : ""));
  }
}

// CLI11's parse errors as one line under the one error prefix (docs/cli.md), control bytes of the
// offending value escaped, pointing at the --help of the subcommand being parsed.
std::string one_line(const CLI::App* top, const CLI::Error& e) {
  std::string line = "fp4sim: error: ";
  for (const char c : std::string(e.what())) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
      line += escaped;
    } else {
      line += c;
    }
  }
  std::string command = top->get_name().empty() ? "fp4sim" : top->get_name();
  for (const CLI::App* at = top; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    command += " " + at->get_name();
  }
  return line + " (see '" + command + " --help')\n";
}

// The first argument when it is neither a flag nor a subcommand: named, with the known ones.
void check_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return;
  std::string known;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == argv[1]) return;
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  throw fp4sim::UsageError(std::string("unknown subcommand '") + argv[1] + "' (known: " + known + ")");
}

}  // namespace

int main(int argc, char** argv) {
  // HDF5 1.10's exit-time cleanup faults on a file whose close failed (a full disk) after the error was
  // reported; every file is closed explicitly before exit, so the cleanup has nothing left to do.
  H5dont_atexit();
  fp4sim::cli::handle_interrupts();
  CLI::App app{"fp4sim: bit-exact emulator of FP4 (E2M1) block-scaled formats, recipes and GEMM datapaths"};
  app.require_subcommand(1);
  app.name("fp4sim");
  app.set_version_flag("--version", std::string("fp4sim 0.1.0"));
  fp4sim::cli::setup_formats(*app.add_subcommand("formats", "list every known number format"));
  fp4sim::cli::setup_convert(*app.add_subcommand("convert", "element-wise encode a .npy array into a format"));
  fp4sim::cli::setup_quantize(*app.add_subcommand("quantize", "block-quantize one tensor under a recipe (HDF5 and/or .npy out)"));
  fp4sim::cli::setup_gemm(*app.add_subcommand("gemm", "C = A·Bᵀ of two quantized operands through a GEMM datapath; --list-datapaths"));
  fp4sim::cli::setup_mma(*app.add_subcommand("mma", "raw D = A·B + C as a modeled tensor-core instruction chain computes it"));
  fp4sim::cli::setup_crosscheck(*app.add_subcommand("crosscheck", "run the CUDA kernels and the golden model on the same cases; exit 4 on any mismatch (needs a GPU)"));
  fp4sim::cli::setup_verify(*app.add_subcommand("verify", "check your own kernel's quantize or GEMM output against the golden model"));
  fp4sim::cli::setup_replay(*app.add_subcommand("replay", "replay a tensor trace through recipes: error, scale and GEMM statistics"));
  fp4sim::cli::setup_sweep(*app.add_subcommand("sweep", "grid of formats x block sizes x tensor scaling x rounding over a trace or synthetic data"));
  fp4sim::cli::setup_vectors(*app.add_subcommand("vectors", "write bit-exact conformance vectors for a recipe (.npy + manifest.json), checkable with numpy alone"));
  fp4sim::cli::check_numbers(app);
  app.failure_message(one_line);
  try {
    // Every output of the command is renamed into place together, only when all of them and standard
    // output were written (src/io/output_file.hpp).
    fp4sim::OutputSet outputs;
    check_subcommand(app, argc, argv);
    app.parse(argc, argv);
    finish_standard_output();
    outputs.commit();
    return 0;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (code != 0) return 2;
    try {
      finish_standard_output();  // --help, --version
    } catch (const std::exception& failed) {
      std::fprintf(stderr, "fp4sim: error: %s\n", failed.what());
      return 3;
    }
    return 0;
  } catch (const fp4sim::cli::ReportedByRankZero&) {
    return 0;
  } catch (const fp4sim::UsageError& e) {
    std::fprintf(stderr, "fp4sim: error: %s\n", e.what());
    return 2;
  } catch (const fp4sim::cli::Mismatch& e) {
    std::fprintf(stderr, "fp4sim: %s\n", e.what());
    return 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp4sim: error: %s\n", e.what());
    return 3;
  }
}
