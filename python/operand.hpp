// What a Python call names, resolved once for both front ends of the extension (the golden model in
// bindings.cpp, the CUDA launches in cuda_ops.cpp): a recipe with keyword overrides, and one operand of
// it, so that a tensor quantized on the GPU is asked for by exactly the words that ask the golden model.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/core/recipe_overrides.hpp"

namespace fp4sim::python {

// Recipe overrides as keyword arguments: the CLI's flags with underscores (block=32, two_d=True, ...).
RecipeOverrides overrides_from(const std::string& recipe, const nanobind::dict& d);

struct ResolvedOperand {
  Recipe recipe;
  QuantizeRequest request;
};

// `where` names the operand: a role (activation, weight, grad_output: `fp4sim quantize --role`, Philox
// stream 0 of seed), or "<gemm>.a" / "<gemm>.b" for operand A / B of `fp4sim gemm --gemm <gemm>` (fprop,
// dgrad, wgrad: the same spec, Philox stream 0 / 1 of seed). amax_ref: a held tensor amax; random_bits:
// explicit bits will be given (the operand must round stochastically). UsageError for a bad name.
ResolvedOperand resolve_operand(const RecipeOverrides& recipe, const std::string& where, std::uint64_t seed,
                                std::optional<float> amax_ref, bool random_bits);

}  // namespace fp4sim::python
