// Plans: what a Python caller names (a recipe with keyword overrides, one operand of it, one GEMM of it
// through a datapath), resolved once into the library's objects and kept for the life of the process under
// a small integer handle. fp4sim.torch resolves each setting once and passes the handle to every operator
// call, so nothing is parsed per call: torch's custom operators take ints, and torch.compile treats them as
// constants. A handle is process-local (a checkpoint stores the settings, never a handle); the registry
// never frees a plan, so a handle never dangles, and equal settings share one plan, so it holds one plan per
// distinct setting asked for.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <string>

#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/core/recipe_overrides.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"

namespace fp4sim::python {

using PlanHandle = std::uint32_t;

// One operand resolved: the recipe with its overrides, the operand's spec and Philox stream (the
// request's seed, held amax and explicit bits are the call's), and its shape-free quantized form (block
// grid, formats, tensor-scale flag) that a tensor of any shape copies.
struct QuantizePlan {
  std::string operand;  // a role, or "<gemm>.a" / "<gemm>.b" (python/operand.hpp), as asked
  std::string suffix;   // the keys' suffix of its per-call arguments: "" (amax_ref), "_a" / "_b" (amax_ref_a)
  Recipe recipe;
  QuantizeRequest request;
  QuantizedTensor blank;  // rows = cols = 0, no codes or scales

  // The form of a [rows, cols] tensor of this operand without its bytes: what the kernels that read codes
  // and scales from device memory take.
  QuantizedTensor described(std::size_t rows, std::size_t cols) const;
  // The request of one call: the seed, the held amax (UsageError when not finite and >= 0) and whether
  // explicit random bits come (UsageError when the operand does not round stochastically).
  QuantizeRequest request_for(std::uint64_t seed, std::optional<float> amax_ref, bool random_bits) const;
};

// One GEMM resolved: its operands' plans, the datapath rows and options, the alpha rule and the GPU kernel
// that computes what the golden model computes (nullptr when the GPU has none).
struct GemmPlan {
  Gemm gemm = Gemm::fprop;
  PlanHandle a = 0, b = 0;  // the quantize plans of "<gemm>.a" and "<gemm>.b"
  Recipe recipe;
  GemmRequest request;  // bf16_output is the call's
  GemmOptions options;  // gemm_options(recipe, request), alpha left at 1
  AlphaRule alpha_rule = AlphaRule::one;
  float element_max = 6.0f;
  const gpu::GemmKernel* kernel = nullptr;
};

// The handle of operand `operand` of recipe `recipe` (resolved and registered on first use; UsageError
// naming the key for a bad recipe, override or operand).
PlanHandle quantize_plan(const RecipeOverrides& recipe, const std::string& operand);
// The handle of GEMM call.gemm of call.recipe through call.datapath / call.inner with call.snap (the
// call's other fields, per call or per operand, are not part of a plan: left at their defaults, as the
// plan's requests have them).
PlanHandle gemm_plan(const GemmCall& call);

// The plans behind handles (UsageError for a handle no call of this process returned, or one of the other
// kind). The references stay valid for the life of the process.
const QuantizePlan& quantize_plan_of(PlanHandle handle);
const GemmPlan& gemm_plan_of(PlanHandle handle);

// The settings of an operand without data (_fp4sim.operand_info, plan_info): block grid, rounding, RHT,
// target, tensor scaling, sr_bits and the recipe's datapath.
nanobind::dict operand_info(const Recipe& recipe, const QuantizeRequest& request);

// _fp4sim.quantize_plan, gemm_plan, plan_info.
void register_plans(nanobind::module_& m);

}  // namespace fp4sim::python
