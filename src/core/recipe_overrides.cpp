#include "fp4sim/core/recipe_overrides.hpp"

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"

namespace fp4sim {

Recipe RecipeOverrides::resolve() const {
  const Recipe* preset = find_recipe(recipe);
  if (!preset) throw UsageError("{recipe}: unknown recipe '" + recipe + "' (known: " + recipe_names() + ")");
  Recipe r = *preset;
  if (!name.empty() && name != preset->name) {
    r.name = name;
    r.source = "user-defined: preset " + preset->name + " with overrides; " + preset->source;
  }
  if (block) r.block = *block;
  if (!scale_format.empty()) r.scale = format_argument(scale_format, "{scale_format}");
  if (!element_format.empty()) r.element = format_argument(element_format, "{element_format}");
  if (target) r.target = r.wgrad_grad_target = *target;
  if (wgrad_grad_target) r.wgrad_grad_target = *wgrad_grad_target;
  if (scale_min) r.scale_min = *scale_min;
  if (sr_bits) {
    if (*sr_bits < 1 || *sr_bits > 16) throw UsageError("{sr_bits}: must be between 1 and 16");
    r.sr_bits = *sr_bits;
  }
  if (!tensor_scale.empty()) {
    const auto setting = parse_tensor_scale(tensor_scale);
    if (!setting) throw UsageError("{tensor_scale}: expected none, current or periodic:D, got '" + tensor_scale + "'");
    r.tensor_scale = setting->policy;
    r.period = setting->period;
  }
  if (!scale_rule.empty()) r.scale_rule = parse_name_or_throw<ScaleRule>(scale_rule, "{scale_rule}");
  if (!zero_scale.empty()) r.zero_scale = parse_name_or_throw<ZeroScale>(zero_scale, "{zero_scale}");
  if (!element_scaling.empty()) {
    r.element_scaling = parse_name_or_throw<ElementScaling>(element_scaling, "{element_scaling}");
  }
  if (!scale_order.empty()) r.scale_order = parse_name_or_throw<ScaleOrder>(scale_order, "{scale_order}");
  if (!block_choice.empty()) r.block_choice = parse_name_or_throw<BlockScaleChoice>(block_choice, "{block_choice}");
  if (!four_over_six_error.empty()) {
    r.four_over_six_error = parse_name_or_throw<FourOverSixErrorDomain>(four_over_six_error, "{four_over_six_error}");
  }
  if (!amax_scope.empty()) r.amax_scope = parse_name_or_throw<AmaxScope>(amax_scope, "{amax_scope}");
  if (!nan_amax.empty()) r.nan_amax = parse_name_or_throw<NanAmax>(nan_amax, "{nan_amax}");
  if (!element_specials.empty()) {
    r.element_specials = parse_name_or_throw<SpecialConvention>(element_specials, "{element_specials}");
  }
  if (!rht_signs.empty()) {
    const auto signs = parse_rht_signs(rht_signs);
    if (!signs) throw UsageError("{rht_signs}: expected 16 characters, each + or -, got '" + rht_signs + "'");
    r.rht_signs = *signs;
  }
  if (!rht_precision.empty()) r.rht_precision = parse_name_or_throw<RhtPrecision>(rht_precision, "{rht_precision}");
  if (!dequantize_order.empty()) {
    r.dequantize_order = parse_name_or_throw<DequantizeOrder>(dequantize_order, "{dequantize_order}");
  }
  if (!rounding.empty()) r.element_rounding = r.grad_rounding = parse_name_or_throw<Rounding>(rounding, "{rounding}");
  if (!alpha.empty()) r.alpha = parse_name_or_throw<AlphaRule>(alpha, "{alpha}");
  r.operand_two_d = two_d;
  r.operand_rht = rht;
  const auto problems = validate(r);
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    throw UsageError("invalid recipe: " + all);
  }
  return r;
}

}  // namespace fp4sim
