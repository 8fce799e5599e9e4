#include "operand.hpp"

#include <type_traits>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/quantize_call.hpp"

namespace nb = nanobind;

namespace fp4sim::python {

namespace {

// One override's value as the type its field holds; another type is a UsageError naming the keyword
// (nanobind's own failure is a bare std::bad_cast).
template <class T>
T override_value(const std::string& key, nb::handle value, const char* expected) {
  T out{};
  bool ok = false;
  if constexpr (std::is_same_v<T, std::string>) {
    ok = nb::isinstance<nb::str>(value);  // nb::try_cast has no cleanup list for a string's conversion
    if (ok) out = nb::cast<std::string>(value);
  } else {
    ok = nb::try_cast<T>(value, out);
  }
  if (!ok) {
    throw UsageError("recipe override " + key + ": expected " + expected + ", got " +
                     nb::cast<std::string>(value.type().attr("__name__")));
  }
  return out;
}

}  // namespace

RecipeOverrides overrides_from(const std::string& recipe, const nb::dict& d) {
  RecipeOverrides o;
  o.recipe = recipe;
  for (auto [key, value] : d) {
    const std::string k = nb::cast<std::string>(key);
    if (value.is_none()) continue;
    // "" is RecipeOverrides' "not given": an empty text must be refused, not read as the preset's value
    if (nb::isinstance<nb::str>(value) && nb::len(value) == 0) {
      throw UsageError("recipe override " + k + "='': an empty value names nothing (None keeps the preset's)");
    }
    if (k == "block") o.block = override_value<int>(k, value, "an integer");
    else if (k == "two_d") o.two_d = override_value<bool>(k, value, "a bool");
    else if (k == "scale_format") o.scale_format = override_value<std::string>(k, value, "a string");
    else if (k == "element_format") o.element_format = override_value<std::string>(k, value, "a string");
    else if (k == "target") o.target = override_value<float>(k, value, "a number");
    else if (k == "tensor_scale") o.tensor_scale = override_value<std::string>(k, value, "a string");
    else if (k == "scale_rule") o.scale_rule = override_value<std::string>(k, value, "a string");
    else if (k == "zero_scale") o.zero_scale = override_value<std::string>(k, value, "a string");
    else if (k == "element_scaling") o.element_scaling = override_value<std::string>(k, value, "a string");
    else if (k == "block_choice") o.block_choice = override_value<std::string>(k, value, "a string");
    else if (k == "amax_scope") o.amax_scope = override_value<std::string>(k, value, "a string");
    else if (k == "rht_signs") o.rht_signs = override_value<std::string>(k, value, "a string");
    else if (k == "dequantize_order") o.dequantize_order = override_value<std::string>(k, value, "a string");
    else if (k == "sr_bits") o.sr_bits = override_value<int>(k, value, "an integer");
    else if (k == "rht") o.rht = override_value<bool>(k, value, "a bool");
    else if (k == "rounding") o.rounding = override_value<std::string>(k, value, "a string");
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
