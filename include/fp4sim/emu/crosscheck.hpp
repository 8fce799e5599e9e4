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

// The recipes checked when none is named: every preset the kernels serve (cpu_only_settings empty), and
// nvfp4 (with its SR and RHT specs) and nvfp4-4over6 row-scaled (TE's row-scaled NVFP4: one amax, G and Gd per
// row, 1-D blocks), named as their specs read (nvfp4:amax_scope=row). Inline: the command line resolves
// names in every build, with CUDA or without.
inline std::vector<Recipe> default_recipes() {
  std::vector<Recipe> recipes;
  for (const Recipe& r : recipe_presets()) {
    if (cpu_only_settings(r).empty()) recipes.push_back(r);  // the rest have no kernel path to check
  }
  for (const char* name : {"nvfp4", "nvfp4-4over6"}) {
    Recipe r = *find_recipe(name);
    r.name += ":amax_scope=row";
    r.amax_scope = AmaxScope::row;
    recipes.push_back(r);
  }
  return recipes;
}

struct Options {
  std::vector<Recipe> recipes;       // empty: default_recipes(); each without cpu_only_settings
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
