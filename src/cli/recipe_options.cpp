#include "recipe_options.hpp"

#include "fp4sim/core/names.hpp"

namespace fp4sim::cli {

void add_recipe_options(CLI::App& app, RecipeOverrides& o) {
  std::vector<std::string> presets;
  for (const Recipe& preset : recipe_presets()) presets.push_back(preset.name);
  app.add_option("--recipe", o.recipe, recipe_help())->required()->check(CLI::IsMember(presets));
  app.add_option("--block", o.block, "block size B along the reduction dimension");
  auto* two = app.add_flag_function("--two-d", [&o](std::int64_t) { o.two_d = true; }, "B x B tiles");
  app.add_flag_function("--one-d", [&o](std::int64_t) { o.two_d = false; }, "1 x B blocks")->excludes(two);
  app.add_option("--scale-format", o.scale_format, "block scale format (e.g. ue5m3, ue4m3, ue5m3fn, e8m0)");
  app.add_option("--element-format", o.element_format, "element format (e.g. e2m1, e2m3, e3m2)");
  app.add_option("--target", o.target, "scale target T");
  app.add_option("--tensor-scale", o.tensor_scale, "tensor scale policy: none, current or periodic:D");
  app.add_option("--scale-rule", o.scale_rule, "scale rule: two-level, floor, ceil, even, rceil");
  app.add_option("--zero-scale", o.zero_scale, "a block scale that rounds to zero: keep or one")
      ->check(CLI::IsMember(name_strings<ZeroScale>()));
  app.add_option("--dequantize-order", o.dequantize_order, "portable, kernel or te_kernel")
      ->check(CLI::IsMember(name_strings<DequantizeOrder>()));
  app.add_option("--rounding", o.rounding, "element rounding of this operand")
      ->check(CLI::IsMember(name_strings<Rounding>()));
  app.add_option("--sr-bits", o.sr_bits, "random bits per element for stochastic rounding")->check(CLI::Range(1, 16));
  auto* on = app.add_flag_function("--rht", [&o](std::int64_t) { o.rht = true; }, "apply the 16-point RHT");
  app.add_flag_function("--no-rht", [&o](std::int64_t) { o.rht = false; }, "no RHT")->excludes(on);
}

}  // namespace fp4sim::cli
