// The fp4sim command line: the top-level app and one subcommand per src/cli/<name>.cpp. main() parses
// and maps errors to exit codes; tests/fuzz/cli_args_fuzz.cpp parses the same app without running it.
#include "cli.hpp"

namespace fp4sim::cli {

void build_app(CLI::App& app) {
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("fp4sim 0.1.0"));
  setup_formats(*app.add_subcommand("formats", "list every known number format"));
  setup_convert(*app.add_subcommand("convert", "element-wise encode a .npy array into a format"));
  setup_quantize(*app.add_subcommand("quantize", "block-quantize one tensor under a recipe (HDF5 out)"));
  setup_gemm(*app.add_subcommand("gemm", "C = A·Bᵀ of two quantized operands through a GEMM datapath; --list-datapaths"));
  setup_mma(*app.add_subcommand("mma", "raw D = A·B + C as a modeled tensor-core instruction chain computes it"));
  setup_crosscheck(*app.add_subcommand("crosscheck", "run the CUDA kernels and the golden model on the same cases; exit 4 on any mismatch (needs a GPU)"));
  setup_verify(*app.add_subcommand("verify", "check your own kernel's quantize or GEMM output against the golden model"));
  setup_replay(*app.add_subcommand("replay", "replay a tensor trace through recipes: error, scale and GEMM statistics"));
  setup_sweep(*app.add_subcommand("sweep", "grid of formats x block sizes x tensor scaling x rounding over a trace or synthetic data"));
  setup_vectors(*app.add_subcommand("vectors", "write bit-exact conformance vectors for a recipe (.npy + manifest.json), checkable with numpy alone"));
}

}  // namespace fp4sim::cli
