// The recipe-override flags shared by `quantize`, `gemm` and `verify` (docs/cli.md), bound to the fields
// of fp4sim::RecipeOverrides, which checks them.
#pragma once

#include "cli.hpp"
#include "fp4sim/core/recipe_overrides.hpp"

namespace fp4sim::cli {

void add_recipe_options(CLI::App& app, RecipeOverrides& overrides);

}  // namespace fp4sim::cli
