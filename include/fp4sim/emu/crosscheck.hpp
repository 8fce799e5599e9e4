// The CUDA kernels of emu/ against the golden model on the same inputs (`fp4sim crosscheck`, docs/gpu.md):
// quantize and dequantize per recipe preset (and row-scaled variants) over mixed shapes and adversarial values, and the GEMM paths
// against their golden datapaths (bf16-tc vs the sm90-bf16 chain, probe-matched, exact).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/progress.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"

namespace fp4sim::crosscheck {

// What can be checked: quantize, dequantize and every GEMM kernel of the table, by name.
inline std::vector<std::string> all_paths() {
  std::vector<std::string> paths{"quantize", "dequantize"};
  for (const gpu::GemmKernel& kernel : gpu::gemm_kernels()) paths.emplace_back(kernel.name);
  return paths;
}

// The row-scaled variant of a preset (TE's row-scaled NVFP4: one amax, G and Gd per row, 1-D blocks), named
// as its override reads.
inline constexpr std::string_view kRowScaled = ":amax_scope=row";
inline Recipe row_scaled(const Recipe& preset) {
  Recipe r = preset;
  r.name += kRowScaled;
  r.amax_scope = AmaxScope::row;
  return r;
}

// What `recipes` may name: every preset, and PRESET:amax_scope=row for each that takes a row-scaled amax
// (two-level with current tensor scaling). Needs no GPU.
inline std::vector<std::string> recipe_names() {
  std::vector<std::string> names;
  for (const Recipe& r : recipe_presets()) {
    names.push_back(r.name);
    if (validate(row_scaled(r)).empty()) names.push_back(r.name + std::string(kRowScaled));
  }
  return names;
}

struct Options {
  std::vector<std::string> recipes;  // recipe_names(); empty or {"all"}: every preset the kernels serve, and
                                     // nvfp4 and nvfp4-4over6 row-scaled
  std::vector<std::string> paths = all_paths();
  double elements = 1e8;             // quantize elements per preset (at least)
  int gemms = 10000;                 // GEMMs in total, spread over the presets
  int max_gemm = 1024;               // largest M = N of the few large GEMMs (K up to 4 * max_gemm)
  int large_gemms = 4;               // how many of the GEMMs are large
  std::vector<std::string> shapes;   // extra GEMMs "MxNxK", checked with the first recipe
  std::uint64_t seed = 1;
  bool verbose = false;              // a line for every case, not only the mismatching ones
  ProgressFn progress;               // optional: cases checked of all
};

// Runs every case, writing one line per mismatching case (every case when verbose) and a summary table
// to `log`; returns the number of mismatches. DataError when no GPU can run the kernels (nothing can be
// checked: never a success without one); UsageError for an unknown preset or a bad shape.
std::uint64_t run(const Options& options, std::FILE* log);

}  // namespace fp4sim::crosscheck
