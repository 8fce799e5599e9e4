#include "fp4sim/verify/verify_call.hpp"

#include <cstdlib>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/names.hpp"

namespace fp4sim {

namespace {

// A number as a flag gives it: the whole text must parse (strtof rounds a decimal to nearest even).
std::optional<float> parse_float(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const float v = std::strtof(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

VerifyQuantizeCall::Resolved VerifyQuantizeCall::resolve() const {
  // --tensor-scale: a policy name is the recipe override, a number the user's tensor scale value.
  QuantizeCall q = quantize;
  std::string value_text = tensor_scale_text;
  const std::string& t = q.recipe.tensor_scale;
  if (!t.empty() && !parse_tensor_scale(t)) {
    if (!parse_float(t)) {
      throw UsageError("{tensor_scale}: expected none, current, periodic:D (the policy) or a number (your FP32 "
                       "tensor scale), got '" + t + "'");
    }
    if (!value_text.empty()) throw UsageError("{tensor_scale} V and {tensor_scale_value} both give your tensor scale");
    value_text = t;
    q.recipe.tensor_scale.clear();
  }
  if (!tensor_scale_policy.empty()) {
    if (!q.recipe.tensor_scale.empty()) throw UsageError("{tensor_scale} P and {tensor_scale_policy} both set the policy");
    q.recipe.tensor_scale = tensor_scale_policy;
  }
  Resolved r;
  if (profile.empty() && q.recipe.recipe.empty()) throw UsageError("{recipe} NAME or {profile} NAME|auto is required");
  if (!profile.empty()) {
    if (!(q.recipe == RecipeOverrides{})) {
      throw UsageError("{profile} " + profile + " names the recipe: drop {recipe} and its overrides");
    }
    r.auto_profile = profile == "auto";
    const StackProfile* named = r.auto_profile ? &stack_profiles().front() : find_profile(profile);
    if (!named) throw UsageError("{profile}: unknown profile '" + profile + "' (fp4sim verify quantize --help lists them)");
    q.recipe = named->recipe;
  }
  if (r.auto_profile) {
    bool base_chosen = false;  // the base request: the first profile that can quantize this operand
    for (const StackProfile& p : stack_profiles()) {
      QuantizeCall call = q;
      call.recipe = p.recipe;
      ProfileCandidate candidate{p.name, {}, {}, {}};
      try {
        const QuantizeCall::Resolved made = call.resolve();
        candidate.recipe = made.recipe;
        candidate.recipe.name = p.name;  // reports name the profile, not only its preset
        candidate.request = made.request;
        if (!base_chosen) q.recipe = p.recipe;
        base_chosen = true;
      } catch (const UsageError& e) {
        candidate.error = e.what();
      }
      r.profiles.push_back(std::move(candidate));
    }
  }
  const QuantizeCall::Resolved base = q.resolve();
  r.recipe = base.recipe;
  if (!profile.empty() && !r.auto_profile) r.recipe.name = profile;
  r.request.quantize = base.request;
  r.request.role = base.role;
  r.request.max_explained = max_explained;
  r.theirs.layout = parse_name_or_throw<ScaleLayout>(layout, "{layout}");
  r.theirs.nibbles = stored_order(r.recipe.element, parse_name_or_throw<NibbleOrder>(nibbles, "{nibbles}"));
  r.theirs.tensor_scale_kind = parse_name_or_throw<TensorScaleKind>(tensor_scale_kind, "{tensor_scale_kind}");
  r.theirs.tensor_scale = tensor_scale;
  if (!value_text.empty()) {
    const auto v = parse_float(value_text);
    if (!v) throw UsageError("{tensor_scale_value}: expected a number, got '" + value_text + "'");
    r.theirs.tensor_scale = *v;
  }
  return r;
}

VerifyGemmCall::Resolved VerifyGemmCall::resolve() const {
  const bool automatic = gemm.datapath == "auto";
  if (automatic && (!gemm.inner.empty() || !gemm.snap)) {
    throw UsageError("{datapath} auto tries every inner datapath and snap setting itself: drop {inner}/{snap=false}");
  }
  GemmCall g = gemm;
  if (automatic) g.datapath.clear();
  const GemmCall::Resolved base = g.resolve();
  Resolved r;
  r.recipe = base.recipe;
  r.request.gemm = base.gemm;
  r.request.a = base.a;
  r.request.b = base.b;
  r.request.datapath = base.request;
  r.request.auto_datapath = automatic;
  r.request.worst = worst;
  return r;
}

void check_output_shape(const ArrayShape& c, std::size_t m, std::size_t n) {
  if (c.shape.size() != 2 || c.shape[0] != m || c.shape[1] != n) {
    throw DataError(c.source + ": shape " + shape_text(c.shape) + ", but C = A·Bᵀ is [" + std::to_string(m) + ", " +
                    std::to_string(n) + "]");
  }
}

}  // namespace fp4sim
