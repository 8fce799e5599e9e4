// The flags several subcommands share, bound to the fields of the library's call objects, which check
// them: the recipe overrides of `quantize`, `gemm` and `verify` (docs/cli.md), and the operand flags of
// `gemm` and `verify gemm`. And the random-bits files those flags name.
#pragma once

#include <optional>
#include <string>

#include "cli.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/recipe_overrides.hpp"

namespace fp4sim::cli {

void add_recipe_options(CLI::App& app, RecipeOverrides& overrides);

// --gemm, --inner, --no-snap, --out-dtype and the per-operand --amax-ref-a/-b, --target-a/-b, --rbits-a/-b
// (file paths into rbits_a, rbits_b) and --seed; the caller adds --datapath with its own choices.
void add_gemm_options(CLI::App& app, GemmCall& call, std::string& rbits_a, std::string& rbits_b);

// Every numeric option of `app` and its subcommands checked as its type demands, before CLI11 converts it:
// unsigned (UINT): digits only, no sign, within 64 bits; signed (INT): within 64 bits; FLOAT: a finite
// number. An empty value is refused too. (CLI11 would wrap "-1" and 2^64 into an unsigned and take "".)
void check_numbers(CLI::App& app);

// The explicit random bits a --rbits flag names (nothing for an empty path).
std::optional<RandomBitsArray> random_bits_file(const std::string& path);

}  // namespace fp4sim::cli
