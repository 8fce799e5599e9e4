// The recipe overrides shared by `quantize`, `gemm` and `verify` (docs/cli.md): --block, --two-d/--one-d,
// --scale-format, --element-format, --target, --tensor-scale, --rounding, --rht/--no-rht, plus the
// --scale-rule, --zero-scale and --dequantize-order options for comparing references.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim::cli {

struct RecipeOverrides {
  std::string recipe;
  std::optional<int> block;
  std::optional<bool> two_d;
  std::string scale_format, element_format, tensor_scale, scale_rule, zero_scale, dequantize_order;
  std::optional<float> target;
  std::optional<Rounding> rounding;
  std::optional<bool> rht;
  std::optional<int> sr_bits;

  void add_to(CLI::App& app);
  // The recipe with overrides applied (UsageError for unknown names or an invalid combination).
  Recipe resolve() const;
  // The operand spec with the per-operand overrides (--two-d, --rounding, --rht, --target) applied.
  OperandSpec apply(OperandSpec spec) const;
};

std::string recipe_help();

}  // namespace fp4sim::cli
