#include "fp4sim/core/recipe.hpp"

#include <array>

namespace fp4sim {

namespace {

Recipe make_ue5m3() {
  Recipe r;
  r.name = "ue5m3";
  r.source =
      "UE5M3 paper (Hu, Luschi, Balanca, arXiv:2609.02846) proposed recipe, released code formats.py / "
      "backends/triton: E2M1 + UE5M3 (max 61440) block 16, 16x16 weight tiles, periodic tensor amax D=50, "
      "T=448, sr-fast-f32 on dY only, no RHT, zero scale -> 1.0";
  r.element = formats::e2m1;
  r.scale = formats::ue5m3;
  r.block = 16;
  r.weight_two_d = true;
  r.scale_rule = ScaleRule::two_level;
  r.zero_scale = ZeroScale::one;
  r.tensor_scale = TensorScalePolicy::periodic;
  r.period = 50;
  r.target = 448.0f;
  r.wgrad_grad_target = 448.0f;
  r.element_rounding = Rounding::rne;
  r.grad_rounding = Rounding::sr_fast_f32;
  r.rht_wgrad = false;
  r.dequantize_order = DequantizeOrder::portable;
  r.alpha = AlphaRule::reciprocal;
  r.default_datapath = "probe-matched";
  return r;
}

Recipe make_ue5m3_b32() {
  Recipe r = make_ue5m3();
  r.name = "ue5m3-b32";
  r.source = "UE5M3 paper (arXiv:2609.02846) B=32 control run: the ue5m3 recipe with 1x32 blocks and 32x32 weight tiles";
  r.block = 32;
  return r;
}

Recipe make_ue5m3_te() {
  Recipe r = make_ue5m3();
  r.name = "ue5m3-te";
  r.source =
      "UE5M3 paper (arXiv:2609.02846) 'UE5M3 FP4 with Transformer Engine settings': UE5M3 scales with current "
      "tensor scaling (D=1), RHT on both wgrad operands, sr-fast-f32 on dY, zero scale -> 1.0";
  r.tensor_scale = TensorScalePolicy::current;
  r.period = 1;
  r.rht_wgrad = true;
  return r;
}

Recipe make_nvfp4() {
  Recipe r;
  r.name = "nvfp4";
  r.source =
      "NVIDIA TransformerEngine NVFP4BlockScaling, CUDA kernels (core_nvfp4.cuh, quantize_transpose_nvfp4.cuh; "
      "docs/semantics.md N1-N12): E2M1 + E4M3 (UE4M3) block 16, 16x16 weight tiles, current tensor amax, T=448, "
      "sr-fastest on gradients, RHT on wgrad operands, zero scale kept (multiplier FLT_MAX)";
  r.element = formats::e2m1;
  r.scale = formats::ue4m3;
  r.block = 16;
  r.weight_two_d = true;
  r.scale_rule = ScaleRule::two_level;
  r.zero_scale = ZeroScale::keep;
  r.tensor_scale = TensorScalePolicy::current;
  r.period = 1;
  r.target = 448.0f;
  r.wgrad_grad_target = 448.0f;
  r.element_rounding = Rounding::rne;
  r.grad_rounding = Rounding::sr_fastest;
  r.rht_wgrad = true;
  r.dequantize_order = DequantizeOrder::te_kernel;
  r.alpha = AlphaRule::division;
  r.default_datapath = "fp32-seq";
  return r;
}

Recipe make_nvfp4_norht() {
  Recipe r = make_nvfp4();
  r.name = "nvfp4-norht";
  r.source = "TransformerEngine NVFP4 with disable_rht=True (docs/semantics.md N1-N12 without N8)";
  r.rht_wgrad = false;
  return r;
}

Recipe make_mxfp4() {
  Recipe r;
  r.name = "mxfp4";
  r.source =
      "OCP Microscaling Formats (MX) v1.0: E2M1 + E8M0 block 32 along K (weights too), scale "
      "2^(floor(log2 amax) - 2) from the exponent field (docs/semantics.md M1-M8), RNE saturating elements, no "
      "tensor scale";
  r.element = formats::e2m1;
  r.scale = formats::e8m0;
  r.block = 32;
  r.weight_two_d = false;
  r.scale_rule = ScaleRule::pow2_floor;
  r.zero_scale = ZeroScale::keep;
  r.tensor_scale = TensorScalePolicy::none;
  r.period = 1;
  r.element_rounding = Rounding::rne;
  r.grad_rounding = Rounding::rne;
  r.rht_wgrad = false;
  r.dequantize_order = DequantizeOrder::portable;
  r.alpha = AlphaRule::one;
  r.default_datapath = "fp32-seq";
  return r;
}

template <Recipe (*make)()>
const Recipe& preset() {
  static const Recipe recipe = make();
  return recipe;
}

constexpr std::array kPresets{
    NamedRecipe{"ue5m3", &preset<make_ue5m3>},         NamedRecipe{"ue5m3-b32", &preset<make_ue5m3_b32>},
    NamedRecipe{"ue5m3-te", &preset<make_ue5m3_te>},   NamedRecipe{"nvfp4", &preset<make_nvfp4>},
    NamedRecipe{"nvfp4-norht", &preset<make_nvfp4_norht>}, NamedRecipe{"mxfp4", &preset<make_mxfp4>},
};

template <class E, std::size_t N>
std::optional<E> lookup(const std::array<std::pair<std::string_view, E>, N>& table, std::string_view name) {
  for (const auto& [n, e] : table) {
    if (n == name) return e;
  }
  return std::nullopt;
}

template <class E, std::size_t N>
std::string_view name_of(const std::array<std::pair<std::string_view, E>, N>& table, E value) {
  for (const auto& [n, e] : table) {
    if (e == value) return n;
  }
  return "?";
}

constexpr std::array<std::pair<std::string_view, Role>, 3> kRoles{
    {{"activation", Role::activation}, {"weight", Role::weight}, {"grad_output", Role::grad_output}}};
constexpr std::array<std::pair<std::string_view, Gemm>, 3> kGemms{
    {{"fprop", Gemm::fprop}, {"dgrad", Gemm::dgrad}, {"wgrad", Gemm::wgrad}}};
constexpr std::array<std::pair<std::string_view, ScaleRule>, 5> kScaleRules{{{"two-level", ScaleRule::two_level},
                                                                             {"floor", ScaleRule::pow2_floor},
                                                                             {"ceil", ScaleRule::pow2_ceil},
                                                                             {"even", ScaleRule::pow2_even},
                                                                             {"rceil", ScaleRule::pow2_rceil}}};
constexpr std::array<std::pair<std::string_view, DequantizeOrder>, 3> kOrders{
    {{"portable", DequantizeOrder::portable}, {"kernel", DequantizeOrder::kernel}, {"te_kernel", DequantizeOrder::te_kernel}}};

}  // namespace

std::span<const NamedRecipe> recipe_presets() { return kPresets; }

std::optional<Recipe> find_recipe(std::string_view name) {
  for (const auto& p : kPresets) {
    if (p.name == name) return p.get();
  }
  return std::nullopt;
}

std::string_view role_name(Role role) { return name_of(kRoles, role); }
std::optional<Role> parse_role(std::string_view name) { return lookup(kRoles, name); }
std::string_view gemm_name(Gemm gemm) { return name_of(kGemms, gemm); }
std::optional<Gemm> parse_gemm(std::string_view name) { return lookup(kGemms, name); }
std::string_view scale_rule_name(ScaleRule rule) { return name_of(kScaleRules, rule); }
std::optional<ScaleRule> parse_scale_rule(std::string_view name) { return lookup(kScaleRules, name); }
std::string_view dequantize_order_name(DequantizeOrder order) { return name_of(kOrders, order); }

std::vector<std::string> validate(const Recipe& r) {
  std::vector<std::string> problems;
  if (r.block < 2 || r.block > 256) problems.push_back("block size must be between 2 and 256");
  if (r.element.bits() > 8) problems.push_back("element format must have at most 8 bits");
  if (r.scale.bits() > 8) problems.push_back("scale format must have at most 8 bits (codes are stored as bytes)");
  if (r.scale.is_signed) problems.push_back("scale format must be unsigned (ueXmY)");
  const bool pow2 = r.scale_rule != ScaleRule::two_level;
  if (pow2 && r.scale.specials != Specials::pow2_nan) {
    problems.push_back("scale rules floor/ceil/even/rceil need a power-of-two scale format (e8m0)");
  }
  if (!pow2 && r.scale.specials == Specials::pow2_nan) {
    problems.push_back("a power-of-two scale format (e8m0) needs scale rule floor, ceil, even or rceil");
  }
  if (pow2 && r.tensor_scale != TensorScalePolicy::none) {
    problems.push_back("power-of-two scale rules take no tensor scale (--tensor-scale none)");
  }
  if (r.tensor_scale == TensorScalePolicy::periodic && r.period < 1) problems.push_back("period D must be >= 1");
  if (!(r.target > 0.0f) || !(r.wgrad_grad_target > 0.0f)) problems.push_back("target T must be positive");
  if (r.sr_bits < 1 || r.sr_bits > 16) problems.push_back("sr_bits must be between 1 and 16");
  if (r.rht_wgrad && r.block % 16 != 0) problems.push_back("RHT needs a block size that is a multiple of 16");
  return problems;
}

OperandSpec operand_for_role(const Recipe& r, Role role) {
  switch (role) {
    case Role::activation: return operands_for(r, Gemm::fprop).a;
    case Role::weight: return operands_for(r, Gemm::fprop).b;
    case Role::grad_output: return operands_for(r, Gemm::dgrad).a;
  }
  return {};
}

GemmOperands operands_for(const Recipe& r, Gemm gemm) {
  const OperandSpec activation{Role::activation, false, r.element_rounding, false, r.target};
  const OperandSpec weight{Role::weight, r.weight_two_d, r.element_rounding, false, r.target};
  const OperandSpec grad{Role::grad_output, false, r.grad_rounding, false, r.target};
  switch (gemm) {
    case Gemm::fprop: return {activation, weight};
    case Gemm::dgrad: return {grad, weight};
    case Gemm::wgrad: {
      OperandSpec a = grad, b = activation;
      a.rht = b.rht = r.rht_wgrad;
      a.target = r.wgrad_grad_target;
      return {a, b};
    }
  }
  return {};
}

}  // namespace fp4sim
