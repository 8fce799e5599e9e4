// What a Python call names, resolved once for both front ends of the extension (the golden model in
// bindings.cpp, the CUDA launches in cuda_ops.cpp, both also through the plans of plans.hpp): keywords carried into the library's call objects
// through their argument tables (fp4sim/front/arguments.hpp), each type-checked on the way; a recipe with
// keyword overrides, and one operand of it, so that a tensor quantized on the GPU is asked for by exactly
// the words that ask the golden model.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/front/arguments.hpp"

namespace fp4sim::python {

// Keyword `key` carried into `call` through its row of `rows`, when there is one (false when not). None
// keeps the call's default. A value of another type than the row's is a UsageError naming the keyword and
// the type it wants: a bool for a switch (numpy's too); an int for an integer (numpy's too; not a bool, not
// a float, within the row's range; a count not negative); an int or float for a real number (numpy's too);
// a non-empty str for text.
template <class Call>
bool set_keyword(std::span<const front::Argument<Call>> rows, Call& call, std::string_view key, nanobind::handle value);

// Recipe overrides as keyword arguments: the CLI's flags with underscores (block=32, two_d=True, ...).
RecipeOverrides overrides_from(const std::string& recipe, const nanobind::dict& d);

// The other keywords of a GEMM (gemm=, datapath=, inner=, snap=, out_dtype=, amax_ref_a/b=, target_a/b=,
// seed=, ...: front::gemm_arguments()) with the recipe's overrides.
GemmCall gemm_call_from(const std::string& recipe, const nanobind::dict& overrides, const nanobind::dict& args);

// A quantize call's own keywords (amax_ref, seed: front::quantize_arguments()) as given positionally.
QuantizeCall quantize_call_from(const std::string& recipe, const nanobind::dict& overrides, const std::string& role,
                                nanobind::handle amax_ref, nanobind::handle seed);

struct ResolvedOperand {
  Recipe recipe;
  QuantizeRequest request;
};

// `where` names the operand: a role (activation, weight, grad_output: `fp4sim quantize --role`, Philox
// stream 0 of call.seed), or "<gemm>.a" / "<gemm>.b" for operand A / B of `fp4sim gemm --gemm <gemm>`
// (fprop, dgrad, wgrad: the same spec, Philox stream 0 / 1 of the seed), with call.operand's arguments
// (amax_ref; random_bits: explicit bits will be given, the operand must round stochastically).
// UsageError for a bad name.
ResolvedOperand resolve_operand(const QuantizeCall& call, const std::string& where);

}  // namespace fp4sim::python
