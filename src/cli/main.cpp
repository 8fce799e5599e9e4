#include <cstdio>
#include <exception>

#include "cli.hpp"
#include "ranks.hpp"
#include "fp4sim/core/error.hpp"

int main(int argc, char** argv) {
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
  // CLI11's own parse errors carry the one error prefix, and point at the --help of the subcommand
  // being parsed.
  app.failure_message([](const CLI::App* top, const CLI::Error& e) {
    std::string command = top->get_name().empty() ? "fp4sim" : top->get_name();
    for (const CLI::App* at = top; !at->get_subcommands().empty();) {
      at = at->get_subcommands().front();
      command += " " + at->get_name();
    }
    return "fp4sim: error: " + std::string(e.what()) + " (see '" + command + " --help')\n";
  });
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
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
