// A recipe preset with a user's overrides, as `quantize`, `gemm`, `verify` and the Python module take them
// (docs/cli.md "Recipe overrides"). The front ends bind their flags or keywords to these fields through the
// argument table (fp4sim/front/arguments.hpp, one row per field); this is the one place they are checked,
// and its errors name each by its key (block, two_d, scale_format, ...).
#pragma once

#include <optional>
#include <string>

#include "fp4sim/core/recipe.hpp"

namespace fp4sim {

struct RecipeOverrides {
  std::string recipe;  // preset name
  std::string name;    // the recipe's name in outputs ("" = the preset's): a user-defined recipe's spec
  std::optional<int> block;
  std::optional<bool> two_d;
  std::string scale_format, element_format;  // format names or descriptors ("" = the preset's)
  std::optional<float> target;
  std::optional<float> wgrad_grad_target;
  std::optional<float> scale_min;  // a two-level scale's lower clamp (0 = none)  // T of dY as wgrad's operand alone (after target)
  std::string tensor_scale;  // none | current | periodic:D
  std::string scale_rule, zero_scale, element_scaling, scale_order, block_choice, four_over_six_error, amax_scope, nan_amax;
  std::string element_specials, dequantize_order, rounding, alpha;
  std::string rht_signs;  // 16 characters '+' / '-' ("" = TE's vector)
  std::string rht_precision;
  std::optional<int> sr_bits;
  std::optional<bool> rht;

  bool operator==(const RecipeOverrides&) const = default;  // the same preset and overrides (fp4sim.torch's plans)

  // The preset with the overrides applied (UsageError naming the key for an unknown name, or listing
  // what makes the combination invalid). The per-operand keys become the recipe's: rounding every
  // operand's rounding, target every T, two_d and rht its operand_two_d and operand_rht, so that
  // operands_for() gives each operand of each GEMM what the overrides ask.
  Recipe resolve() const;
};

}  // namespace fp4sim
