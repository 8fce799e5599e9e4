#include "operand.hpp"

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/quantize_call.hpp"

namespace nb = nanobind;

namespace fp4sim::python {

RecipeOverrides overrides_from(const std::string& recipe, const nb::dict& d) {
  RecipeOverrides o;
  o.recipe = recipe;
  for (auto [key, value] : d) {
    const std::string k = nb::cast<std::string>(key);
    if (value.is_none()) continue;
    if (k == "block") o.block = nb::cast<int>(value);
    else if (k == "two_d") o.two_d = nb::cast<bool>(value);
    else if (k == "scale_format") o.scale_format = nb::cast<std::string>(value);
    else if (k == "element_format") o.element_format = nb::cast<std::string>(value);
    else if (k == "target") o.target = nb::cast<float>(value);
    else if (k == "tensor_scale") o.tensor_scale = nb::cast<std::string>(value);
    else if (k == "scale_rule") o.scale_rule = nb::cast<std::string>(value);
    else if (k == "zero_scale") o.zero_scale = nb::cast<std::string>(value);
    else if (k == "element_scaling") o.element_scaling = nb::cast<std::string>(value);
    else if (k == "block_choice") o.block_choice = nb::cast<std::string>(value);
    else if (k == "amax_scope") o.amax_scope = nb::cast<std::string>(value);
    else if (k == "rht_signs") o.rht_signs = nb::cast<std::string>(value);
    else if (k == "dequantize_order") o.dequantize_order = nb::cast<std::string>(value);
    else if (k == "sr_bits") o.sr_bits = nb::cast<int>(value);
    else if (k == "rht") o.rht = nb::cast<bool>(value);
    else if (k == "rounding") o.rounding = nb::cast<std::string>(value);
    else {
      throw UsageError("unknown recipe override '" + k +
                       "' (known: block, two_d, scale_format, element_format, target, tensor_scale, scale_rule, "
                       "zero_scale, element_scaling, block_choice, amax_scope, rht_signs, dequantize_order, "
                       "rounding, sr_bits, rht)");
    }
  }
  return o;
}

ResolvedOperand resolve_operand(const RecipeOverrides& recipe, const std::string& where, std::uint64_t seed,
                                std::optional<float> amax_ref, bool random_bits) {
  const OperandArguments operand{amax_ref, std::nullopt, random_bits};
  const std::size_t dot = where.find('.');
  if (dot == std::string::npos) {
    const QuantizeCall call{recipe, where, seed, operand};
    QuantizeCall::Resolved r = call.resolve();
    return {r.recipe, r.request};
  }
  const std::string side = where.substr(dot + 1);
  if (side != "a" && side != "b") {
    throw UsageError("operand '" + where + "': expected a role or <gemm>.a / <gemm>.b (fprop.a, wgrad.b, ...)");
  }
  GemmCall call;
  call.recipe = recipe;
  call.gemm = where.substr(0, dot);
  call.seed = seed;
  (side == "a" ? call.a : call.b) = operand;
  GemmCall::Resolved r = call.resolve();
  return {r.recipe, side == "a" ? r.a : r.b};
}

}  // namespace fp4sim::python
