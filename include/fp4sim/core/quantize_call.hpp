// The arguments of a quantize call as the front ends receive them (CLI flags, Python keywords), and the
// one place they are checked and turned into a recipe and a QuantizeRequest. The front ends bind
// arguments to these fields and read files; every rule about the arguments lives here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp4sim/core/arrays.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe_overrides.hpp"

namespace fp4sim {

// One operand's own arguments.
struct OperandArguments {
  std::optional<float> amax_ref;  // held tensor amax (periodic scaling); finite, >= 0
  std::optional<float> target;    // the operand's scale target T (GEMM operands)
  bool random_bits = false;       // explicit random bits will be given: the operand must round stochastically

  // `request` with these arguments applied (UsageError naming the argument, whose key's suffix is "" for
  // quantize: amax_ref, rbits; "_a" / "_b" for the operands of a GEMM: amax_ref_a, rbits_b).
  void apply_to(QuantizeRequest& request, const std::string& suffix) const;
};

// `bits`, checked for an operand of `operand_shape`, attached to `request`; request.random.explicit_bits
// points into the returned values, which must live as long as the request is used. No bits: no change.
std::vector<std::uint32_t> attach_random_bits(const std::optional<RandomBitsArray>& bits,
                                              const std::vector<std::size_t>& operand_shape, int sr_bits,
                                              QuantizeRequest& request);

struct QuantizeCall {
  RecipeOverrides recipe;
  std::string role = "activation";
  std::uint64_t seed = 0;  // Philox seed of the stochastic-rounding bits (stream 0)
  OperandArguments operand;

  struct Resolved {
    Recipe recipe;
    Role role = Role::activation;
    QuantizeRequest request;
  };
  // Everything that needs no data, checked (UsageError): the recipe, the role, the operand's arguments.
  Resolved resolve() const;
};

}  // namespace fp4sim
