// The stack profiles: every preset, then each stack quantizer that is a preset plus overrides (the rows of
// docs/recipes.md "Stack profiles" that name overrides). tools/te_oracle.py and tools/torchao_oracle.py
// check these settings against the stacks' own code.
#include "fp4sim/verify/profiles.hpp"

#include <tuple>
#include <utility>
#include <vector>

namespace fp4sim {

namespace {

constexpr const char* kTeReference =
    "TransformerEngine d0067d0 transformer_engine/pytorch/custom_recipes/reference_nvfp4.py";
constexpr const char* kTorchao = "torchao 36027d8 torchao/prototype/mx_formats/mx_tensor.py to_mx";
constexpr const char* kFlashInfer =
    "FlashInfer d9b175ac6 (PR #3448) tests/test_helpers/utils_fp4.py ref_fp4_quant_4over6_te, the contract its NVFP4 "
    "kernels are tested bitwise against with FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1";
constexpr const char* kMicroxcaling =
    "microxcaling 7bc4195 mx/mx_ops.py _quantize_mx (fp4_e2m1, scale_bits 8, shared_exp_method max, "
    "mx_flush_fp32_subnorms False), mx/elemwise_ops.py _round_mantissa";
constexpr const char* kTorchaoNvfp4 = "torchao 36027d8 torchao/prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize";
constexpr const char* kModelopt =
    "Model-Optimizer a2fbac7 modelopt/torch/quantization/qtensor/nvfp4_tensor.py NVFP4QTensor.quantize";

StackProfile variant(std::string name, std::string preset, std::string follows, auto change) {
  StackProfile p{std::move(name), RecipeOverrides{}, std::move(follows)};
  p.recipe.recipe = std::move(preset);
  change(p.recipe);
  return p;
}

std::vector<StackProfile> make_profiles() {
  std::vector<StackProfile> out;
  for (const Recipe& preset : recipe_presets()) {
    StackProfile p{preset.name, RecipeOverrides{}, ""};
    p.recipe.recipe = preset.name;
    out.push_back(std::move(p));
  }
  const std::string te = kTeReference;
  const std::string ao = kTorchao;
  auto four_over_six_448 = [](RecipeOverrides& o) { o.target = 448.0f; };
  auto fast_math = [](RecipeOverrides& o) { o.four_over_six_error = "fast-math"; };
  auto row_scaled = [](RecipeOverrides& o) {
    o.amax_scope = "row";
    o.two_d = false;  // TE scales rows of 1-D blocks only
  };
  out.push_back(variant("nvfp4-row", "nvfp4-norht", te + " row_scaled_nvfp4: one amax per row", row_scaled));
  out.push_back(variant("nvfp4-te-reference", "nvfp4-norht",
                        te + " NVFP4QuantizerRef: -0 and NaN give code 0, torch.amax propagates NaN",
                        [](RecipeOverrides& o) {
                          o.element_specials = "te-python";
                          o.nan_amax = "propagate";
                        }));
  out.push_back(variant("nvfp4-4over6-448", "nvfp4-4over6", te + " nvfp4_e4m3_max=448", four_over_six_448));
  out.push_back(variant("nvfp4-4over6-mse-448", "nvfp4-4over6-mse", te + " nvfp4_e4m3_max=448", four_over_six_448));
  out.push_back(variant("nvfp4-4over6-fast-448", "nvfp4-4over6-fast", te + " nvfp4_e4m3_max=448", four_over_six_448));
  out.push_back(variant("nvfp4-4over6-mse-fast", "nvfp4-4over6-mse", te + " nvfp4_4over6_err_use_fast_math=True",
                        fast_math));
  out.push_back(variant("nvfp4-4over6-mse-fast-448", "nvfp4-4over6-mse",
                        te + " nvfp4_4over6_err_use_fast_math=True, nvfp4_e4m3_max=448", [&](RecipeOverrides& o) {
                          fast_math(o);
                          four_over_six_448(o);
                        }));
  out.push_back(variant("nvfp4-4over6-row", "nvfp4-4over6", te + " row_scaled_nvfp4 with nvfp4_4over6='all'",
                        row_scaled));
  out.push_back(variant("nvfp4-rht-float32", "nvfp4",
                        te + " with_rht=True on a float32 tensor: every operand transformed, the transform kept in "
                             "binary32 (_apply_rht), -0 and NaN give code 0, torch.amax propagates NaN",
                        [](RecipeOverrides& o) {
                          o.rht = true;
                          o.rht_precision = "float32";
                          o.element_specials = "te-python";
                          o.nan_amax = "propagate";
                        }));
  for (const char* element : {"mxfp8", "mxfp8-e5m2"}) {
    out.push_back(variant(std::string(element) + "-ceil", element, ao + ", ScaleCalculationMode.CEIL",
                          [](RecipeOverrides& o) { o.scale_rule = "ceil-exponent"; }));
    out.push_back(variant(std::string(element) + "-even", element, ao + ", ScaleCalculationMode.EVEN",
                          [](RecipeOverrides& o) { o.scale_rule = "even"; }));
  }
  // FlashInfer's strict 4over6 error goes through the global decode scale (its fast-math one is TE's, the
  // nvfp4-4over6-*fast* profiles above).
  for (auto [mse, bound] : {std::pair{false, 448.0f}, std::pair{false, 256.0f}, std::pair{true, 448.0f},
                            std::pair{true, 256.0f}}) {
    const std::string name = std::string(mse ? "nvfp4-4over6-mse" : "nvfp4-4over6") + "-flashinfer" +
                             (bound == 256.0f ? "-256" : "");
    out.push_back(variant(name, mse ? "nvfp4-4over6-mse" : "nvfp4-4over6",
                          std::string(kFlashInfer) + ", NVFP44Over6Config(e4m3_max=" + std::to_string(int(bound)) +
                              ", err_mode=" + (mse ? "MSE" : "MAE") + ")",
                          [target = bound](RecipeOverrides& o) {  // clang 14 captures no structured binding
                            o.target = target;
                            o.four_over_six_error = "decode-scale";
                          }));
  }
  // microxcaling: the float log2's shared exponent and its elementwise rounding's -0 and tie artifacts
  // (docs/semantics.md §3), under each of its deterministic rounding modes.
  for (auto [suffix, mode, rounding] : {std::tuple{"", "nearest", "rna"}, std::tuple{"-even", "even", "rne"},
                                        std::tuple{"-floor", "floor", "rtz"}}) {
    out.push_back(variant(std::string("mxfp4-microxcaling") + suffix, "mxfp4",
                          std::string(kMicroxcaling) + ", round=\"" + mode + "\"", [r = rounding](RecipeOverrides& o) {
                            o.scale_rule = "float-log2";
                            o.element_specials = "microxcaling";
                            o.rounding = r;
                          }));
  }
  // torchao's NVFP4 tensor: division order, scales clamped to [2^-6, 448] (finfo(float8_e4m3fn).tiny, the
  // smallest normal: no subnormal or zero scale), 1 x 16 blocks; one-level without per_tensor_scale, two-level
  // with per_tensor_amax_to_scale(max|x|) = RN(A / 2688).
  auto torchao_nvfp4 = [](RecipeOverrides& o) {
    o.scale_order = "torchao";
    o.scale_min = 0x1p-6f;
    o.two_d = false;
  };
  out.push_back(variant("nvfp4-torchao", "nvfp4-norht", std::string(kTorchaoNvfp4) + ", per_tensor_scale None",
                        [&](RecipeOverrides& o) {
                          torchao_nvfp4(o);
                          o.tensor_scale = "none";
                        }));
  out.push_back(variant("nvfp4-torchao-two-level", "nvfp4-norht",
                        std::string(kTorchaoNvfp4) + ", per_tensor_scale = per_tensor_amax_to_scale(max|x|)",
                        torchao_nvfp4));
  // ModelOpt's dynamic NVFP4: u = amax / RN(6 * P), a zero u set to 1.0, clamped to [2^-9, 448]; elements
  // divided by RN(s * P); _cast_fp4 gives an exact -0 the code 0 (sign from x < 0) and NaN 0x7; a NaN anywhere
  // makes P NaN (every scale NaN, every code 0x7).
  out.push_back(variant("nvfp4-modelopt", "nvfp4-norht", kModelopt, [](RecipeOverrides& o) {
    o.scale_order = "modelopt";
    o.scale_min = 0x1p-9f;
    o.zero_scale = "one";
    o.element_specials = "modelopt";
    o.nan_amax = "propagate";
    o.two_d = false;
  }));
  return out;
}

}  // namespace

std::span<const StackProfile> stack_profiles() {
  static const std::vector<StackProfile> profiles = make_profiles();
  return profiles;
}

const StackProfile* find_profile(std::string_view name) {
  for (const StackProfile& p : stack_profiles()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> profile_names() {
  std::vector<std::string> names{"auto"};
  for (const StackProfile& p : stack_profiles()) names.push_back(p.name);
  return names;
}

}  // namespace fp4sim
