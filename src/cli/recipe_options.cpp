#include "recipe_options.hpp"

#include "fp4sim/core/error.hpp"

namespace fp4sim::cli {

std::string recipe_help() {
  std::string help = "recipe preset:";
  for (const auto& preset : recipe_presets()) {
    help += "\n  " + std::string(preset.name) + ": " + preset.get().source;
  }
  return help;
}

void RecipeOverrides::add_to(CLI::App& app) {
  std::vector<std::string> names;
  for (const auto& preset : recipe_presets()) names.emplace_back(preset.name);
  app.add_option("--recipe", recipe, recipe_help())->required()->check(CLI::IsMember(names));
  app.add_option("--block", block, "block size B along the reduction dimension");
  auto* two = app.add_flag_function("--two-d", [this](std::int64_t) { two_d = true; }, "B x B tiles");
  app.add_flag_function("--one-d", [this](std::int64_t) { two_d = false; }, "1 x B blocks")->excludes(two);
  app.add_option("--scale-format", scale_format, "block scale format (e.g. ue5m3, ue4m3, ue5m3fn, e8m0)");
  app.add_option("--element-format", element_format, "element format (e.g. e2m1, e2m3, e3m2)");
  app.add_option("--target", target, "scale target T");
  app.add_option("--tensor-scale", tensor_scale, "tensor scale policy: none, current or periodic:D");
  app.add_option("--scale-rule", scale_rule, "scale rule: two-level, floor, ceil, even, rceil");
  app.add_option("--zero-scale", zero_scale, "a block scale that rounds to zero: keep or one")
      ->check(CLI::IsMember({"keep", "one"}));
  app.add_option("--dequantize-order", dequantize_order, "portable, kernel or te_kernel")
      ->check(CLI::IsMember({"portable", "kernel", "te_kernel"}));
  app.add_option("--rounding", rounding, "element rounding of this operand")
      ->transform(CLI::CheckedTransformer(rounding_map()));
  app.add_option("--sr-bits", sr_bits, "random bits per element for stochastic rounding")->check(CLI::Range(1, 16));
  auto* on = app.add_flag_function("--rht", [this](std::int64_t) { rht = true; }, "apply the 16-point RHT");
  app.add_flag_function("--no-rht", [this](std::int64_t) { rht = false; }, "no RHT")->excludes(on);
}

Recipe RecipeOverrides::resolve() const {
  auto found = find_recipe(recipe);
  if (!found) throw UsageError("--recipe: unknown recipe '" + recipe + "'");
  Recipe r = *found;
  if (block) r.block = *block;
  if (!scale_format.empty()) r.scale = format_from_flag(scale_format, "--scale-format");
  if (!element_format.empty()) r.element = format_from_flag(element_format, "--element-format");
  if (target) r.target = r.wgrad_grad_target = *target;
  if (sr_bits) r.sr_bits = *sr_bits;
  if (!tensor_scale.empty()) {
    if (tensor_scale == "none") {
      r.tensor_scale = TensorScalePolicy::none;
    } else if (tensor_scale == "current") {
      r.tensor_scale = TensorScalePolicy::current;
      r.period = 1;
    } else if (tensor_scale.starts_with("periodic:")) {
      r.tensor_scale = TensorScalePolicy::periodic;
      try {
        r.period = std::stoi(tensor_scale.substr(9));
      } catch (const std::exception&) {
        throw UsageError("--tensor-scale: period in '" + tensor_scale + "' is not a number");
      }
    } else {
      throw UsageError("--tensor-scale: expected none, current or periodic:D, got '" + tensor_scale + "'");
    }
  }
  if (!scale_rule.empty()) {
    auto rule = parse_scale_rule(scale_rule);
    if (!rule) throw UsageError("--scale-rule: unknown rule '" + scale_rule + "'");
    r.scale_rule = *rule;
  }
  if (!zero_scale.empty()) r.zero_scale = zero_scale == "one" ? ZeroScale::one : ZeroScale::keep;
  if (!dequantize_order.empty()) {
    r.dequantize_order = dequantize_order == "portable" ? DequantizeOrder::portable
                         : dequantize_order == "kernel" ? DequantizeOrder::kernel
                                                        : DequantizeOrder::te_kernel;
  }
  const auto problems = validate(r);
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    throw UsageError("invalid recipe: " + all);
  }
  return r;
}

OperandSpec RecipeOverrides::apply(OperandSpec spec) const {
  if (two_d) spec.two_d = *two_d;
  if (rounding) spec.rounding = *rounding;
  if (rht) spec.rht = *rht;
  if (target) spec.target = *target;
  return spec;
}

}  // namespace fp4sim::cli
