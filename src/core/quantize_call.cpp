#include "fp4sim/core/quantize_call.hpp"

#include <cmath>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"

namespace fp4sim {

void OperandArguments::apply_to(QuantizeRequest& request, const std::string& suffix) const {
  if (amax_ref && !(*amax_ref >= 0.0f && std::isfinite(*amax_ref))) {
    throw UsageError("{amax_ref" + suffix + "} must be a finite non-negative number");
  }
  request.amax_ref = amax_ref;
  if (target && !valid_target(*target)) {
    throw UsageError("{target" + suffix + "}: must be a positive normal number (2^-126 <= T <= 3.4e38), got " +
                     std::to_string(*target));
  }
  if (target) request.spec.target = *target;
  if (random_bits && !is_stochastic(request.spec.rounding)) {
    throw UsageError("{rbits" + suffix + "}: the operand is not stochastically rounded (rounding " +
                     std::string(name_of(request.spec.rounding)) + ")");
  }
}

std::vector<std::uint32_t> attach_random_bits(const std::optional<RandomBitsArray>& bits,
                                              const std::vector<std::size_t>& operand_shape, int sr_bits,
                                              QuantizeRequest& request) {
  if (!bits) return {};
  std::vector<std::uint32_t> values = checked_random_bits(*bits, operand_shape, sr_bits);
  request.random.explicit_bits = values;
  return values;
}

QuantizeCall::Resolved QuantizeCall::resolve() const {
  Resolved r;
  r.recipe = recipe.resolve();
  r.role = parse_name_or_throw<Role>(role, "{role}");
  r.request.spec = operand_for_role(r.recipe, r.role);
  r.request.spec.takes_row_amax = true;  // one tensor on its own: row-scaled whatever its role, as TE's quantizer
  r.request.random.seed = seed;
  r.request.random.stream = 0;
  operand.apply_to(r.request, "");
  return r;
}

}  // namespace fp4sim
