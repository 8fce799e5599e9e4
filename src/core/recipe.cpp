#include "fp4sim/core/recipe.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

namespace fp4sim {

namespace {

// The presets: three base rows (ue5m3, nvfp4, mxfp4) state every field that differs from Recipe's
// neutral defaults; a variant is its base row plus the fields its source changes (ml_dtypes' Traits<>
// specialisations state only their difference), so the table says exactly what each variant is.
template <class Change>
Recipe variant(const Recipe& base, std::string name, std::string source, Change change) {
  Recipe recipe = base;
  recipe.name = std::move(name);
  recipe.source = std::move(source);
  change(recipe);
  return recipe;
}

const Recipe kUe5m3 = {
    .name = "ue5m3",
    .source = "UE5M3 paper (Hu, Luschi, Balanca, arXiv:2609.02846) proposed recipe, released code formats.py / "
              "backends/triton: E2M1 + UE5M3 (max 61440) block 16, 16x16 weight tiles, periodic tensor amax D=50, "
              "T=448, sr-fast-f32 on dY only, no RHT, zero scale -> 1.0",
    .element = formats::e2m1,
    .scale = formats::ue5m3,
    .block = 16,
    .weight_two_d = true,
    .scale_rule = ScaleRule::two_level,
    .zero_scale = ZeroScale::one,
    .element_scaling = ElementScaling::reciprocal,
    .tensor_scale = TensorScalePolicy::periodic,
    .period = 50,
    .target = 448.0f,
    .wgrad_grad_target = 448.0f,
    .element_rounding = Rounding::rne,
    .grad_rounding = Rounding::sr_fast_f32,
    .sr_bits = 8,
    .rht_wgrad = false,
    .dequantize_order = DequantizeOrder::portable,
    .alpha = AlphaRule::reciprocal,
    .default_datapath = &datapaths::probe_matched};

const Recipe kNvfp4 = {
    .name = "nvfp4",
    .source = "NVIDIA TransformerEngine NVFP4BlockScaling, CUDA kernels (core_nvfp4.cuh, "
              "quantize_transpose_nvfp4.cuh; docs/semantics.md N1-N12): E2M1 + E4M3 (UE4M3) block 16, 16x16 weight "
              "tiles, current tensor amax, T=448, sr-fastest on gradients, RHT on wgrad operands, zero scale kept "
              "(multiplier FLT_MAX)",
    .element = formats::e2m1,
    .scale = formats::ue4m3,
    .block = 16,
    .weight_two_d = true,
    .scale_rule = ScaleRule::two_level,
    .zero_scale = ZeroScale::keep,
    .element_scaling = ElementScaling::reciprocal,
    .tensor_scale = TensorScalePolicy::current,
    .period = 1,
    .target = 448.0f,
    .wgrad_grad_target = 448.0f,
    .element_rounding = Rounding::rne,
    .grad_rounding = Rounding::sr_fastest,
    .sr_bits = 8,
    .rht_wgrad = true,
    .dequantize_order = DequantizeOrder::te_kernel,
    .alpha = AlphaRule::division,
    .default_datapath = &datapaths::fp32_seq};

// No tensor scale: T takes part in no scale; 448 is the target the operand specs and files record.
const Recipe kMxfp4 = {
    .name = "mxfp4",
    .source = "OCP Microscaling Formats (MX) v1.0: E2M1 + E8M0 block 32 along K (weights too), scale "
              "2^(floor(log2 amax) - 2) from the exponent field (docs/semantics.md M1-M8), RNE saturating "
              "elements, no tensor scale; also torchao 36027d8 mx_tensor.py to_mx, ScaleCalculationMode.FLOOR",
    .element = formats::e2m1,
    .scale = formats::e8m0,
    .block = 32,
    .weight_two_d = false,
    .scale_rule = ScaleRule::pow2_floor,
    .zero_scale = ZeroScale::keep,
    .element_scaling = ElementScaling::reciprocal,
    .tensor_scale = TensorScalePolicy::none,
    .period = 1,
    .target = 448.0f,
    .wgrad_grad_target = 448.0f,
    .element_rounding = Rounding::rne,
    .grad_rounding = Rounding::rne,
    .sr_bits = 8,
    .rht_wgrad = false,
    .dequantize_order = DequantizeOrder::portable,
    .alpha = AlphaRule::one,
    .default_datapath = &datapaths::fp32_seq};

// TE's nvfp4_4over6='all' at its defaults, the base of the 4over6 rows below.
void as_four_over_six(Recipe& r) {
  r.block_choice = BlockScaleChoice::four_over_six_mae;
  r.target = 256.0f;
  r.wgrad_grad_target = 256.0f;
  r.grad_rounding = Rounding::rne;
  r.rht_wgrad = false;
}

const Recipe kPresets[] = {
    kUe5m3,
    variant(kUe5m3, "ue5m3-b32",
            "UE5M3 paper (arXiv:2609.02846) B=32 control run: the ue5m3 recipe with 1x32 blocks and 32x32 weight "
            "tiles",
            [](Recipe& r) { r.block = 32; }),
    variant(kUe5m3, "ue5m3-te",
            "UE5M3 paper (arXiv:2609.02846) 'UE5M3 FP4 with Transformer Engine settings': UE5M3 scales with "
            "current tensor scaling (D=1), RHT on both wgrad operands, sr-fast-f32 on dY, zero scale -> 1.0",
            [](Recipe& r) {
              r.tensor_scale = TensorScalePolicy::current;
              r.period = 1;
              r.rht_wgrad = true;
            }),
    kNvfp4,
    variant(kNvfp4, "nvfp4-norht",
            "TransformerEngine NVFP4 with disable_rht=True (docs/semantics.md N1-N12 without N8)",
            [](Recipe& r) { r.rht_wgrad = false; }),
    variant(kNvfp4, "nvfp4-4over6",
            "TransformerEngine NVFP4 with nvfp4_4over6='all' at its defaults (MAE, E4M3 bound 256; "
            "quantize_4over6_kernel.cuh; docs/semantics.md 1.12), which TE runs without the RHT and rounds to "
            "nearest only (the kernel has no stochastic path): each block keeps the scale mapping its amax to "
            "4 or to 6, whichever reconstructs it with the smaller error",
            as_four_over_six),
    kMxfp4,
    // Stack profiles: a stack's quantizer where fp4sim models it exactly, each row naming the file and commit
    // it follows (docs/recipes.md "Stack profiles"; checked by tools/te_oracle.py and tools/torchao_oracle.py).
    variant(kNvfp4, "nvfp4-4over6-mse",
            "TransformerEngine d0067d0 NVFP4 with nvfp4_4over6='all', nvfp4_4over6_err_mode='MSE' "
            "(custom_recipes/reference_nvfp4.py _quantize_blockwise_4over6_reference): nvfp4-4over6 with the "
            "summed squared error",
            [](Recipe& r) {
              as_four_over_six(r);
              r.block_choice = BlockScaleChoice::four_over_six_mse;
            }),
    variant(kNvfp4, "nvfp4-4over6-fast",
            "TransformerEngine d0067d0 NVFP4 with nvfp4_4over6='all' and nvfp4_4over6_err_use_fast_math=True "
            "(custom_recipes/reference_nvfp4.py _ref_nvfp4_4over6_fp16_candidate): nvfp4-4over6 (MAE, bound 256) "
            "with the error RN(q*s) - RN(x*G) in the scaled FP16 product domain",
            [](Recipe& r) {
              as_four_over_six(r);
              r.four_over_six_error = FourOverSixErrorDomain::fast_math;
            }),
    variant(kMxfp4, "mxfp4-rceil",
            "torchao 36027d8 prototype/mx_formats/mx_tensor.py to_mx, ScaleCalculationMode.RCEIL (_to_mx_rceil, "
            "cuBLAS's UE8M0 recipe): RN(amax * RN(1/6)) rounded up into E8M0",
            [](Recipe& r) { r.scale_rule = ScaleRule::pow2_rceil; }),
    variant(kMxfp4, "mxfp4-ceil",
            "torchao 36027d8 prototype/mx_formats/mx_tensor.py to_mx, ScaleCalculationMode.CEIL: amax's exponent "
            "field plus one where a mantissa bit is set, minus 2 (amax <= 4 * 2^e)",
            [](Recipe& r) { r.scale_rule = ScaleRule::pow2_ceil_exponent; }),
    variant(kMxfp4, "mxfp4-even",
            "torchao 36027d8 prototype/mx_formats/mx_tensor.py to_mx, ScaleCalculationMode.EVEN: amax rounded to "
            "E2M1 precision on its bits, then floor; a rounding to +Inf gives the NaN scale 0xFF",
            [](Recipe& r) { r.scale_rule = ScaleRule::pow2_even; }),
    // MXFP8: mxfp4 with 8-bit elements (one code a byte); the GEMM datapaths model FP4 products only.
    variant(kMxfp4, "mxfp8",
            "OCP Microscaling Formats (MX) v1.0 MXFP8: E4M3 + E8M0 block 32, scale 2^(floor(log2 amax) - 8), RNE "
            "saturating at 448; torchao 36027d8 prototype/mx_formats/mx_tensor.py to_mx(elem_dtype=float8_e4m3fn), "
            "ScaleCalculationMode.FLOOR (clamp to +-448, then the cast)",
            [](Recipe& r) { r.element = formats::e4m3; }),
    variant(kMxfp4, "mxfp8-rceil",
            "torchao 36027d8 prototype/mx_formats/mx_tensor.py to_mx(elem_dtype=float8_e4m3fn), "
            "ScaleCalculationMode.RCEIL (_to_mx_rceil, cuBLAS's UE8M0 recipe): RN(amax * RN(1/448)) rounded up "
            "into E8M0",
            [](Recipe& r) {
              r.element = formats::e4m3;
              r.scale_rule = ScaleRule::pow2_rceil;
            }),
    variant(kMxfp4, "mxfp8-e5m2",
            "OCP Microscaling Formats (MX) v1.0 MXFP8 E5M2: E5M2 + E8M0 block 32, scale 2^(floor(log2 amax) - 15), "
            "RNE saturating at 57344; torchao 36027d8 mx_tensor.py to_mx(elem_dtype=float8_e5m2), "
            "ScaleCalculationMode.FLOOR",
            [](Recipe& r) { r.element = formats::e5m2; }),
    variant(kMxfp4, "mxfp8-e5m2-rceil",
            "torchao 36027d8 prototype/mx_formats/mx_tensor.py to_mx(elem_dtype=float8_e5m2), "
            "ScaleCalculationMode.RCEIL: RN(amax * RN(1/57344)) rounded up into E8M0",
            [](Recipe& r) {
              r.element = formats::e5m2;
              r.scale_rule = ScaleRule::pow2_rceil;
            }),
};

constexpr NameRow<ScaleRule> kScaleRules[] = {
    {"two-level", ScaleRule::two_level,
     "amax/F times the FP32 tensor multiplier G, RNE into the scale format, saturating (NVFP4, UE5M3)"},
    {"floor", ScaleRule::pow2_floor, "power of two 2^(floor(log2 amax) - emax) (OCP MX v1.0; may clip)"},
    {"ceil", ScaleRule::pow2_ceil,
     "smallest power of two with amax <= max_elem * 2^e (nothing clips; TE reference cast_to_e8)"},
    {"ceil-exponent", ScaleRule::pow2_ceil_exponent,
     "amax's exponent rounded up, minus emax: amax <= 2^emax * 2^e (torchao CEIL)"},
    {"even", ScaleRule::pow2_even,
     "amax rounded to element precision, then floor; a rounding to +Inf gives the NaN scale (torchao EVEN)"},
    {"rceil", ScaleRule::pow2_rceil, "RN(amax * RN(1/max_elem)) rounded up to a power of two (cuBLAS, torchao RCEIL)"},
    {"float-log2", ScaleRule::pow2_float_log2,
     "floor(log2 amax) - emax with log2 rounded to binary32: one too high just below a power of two (microxcaling)"}};
constexpr NameRow<ZeroScale> kZeroScales[] = {
    {"keep", ZeroScale::keep, "stays 0; the encode multiplier becomes FLT_MAX (TE NVFP4 kernel)"},
    {"one", ZeroScale::one, "becomes the scale 1.0 (UE5M3 paper)"}};
constexpr NameRow<ElementScaling> kElementScalings[] = {
    {"reciprocal", ElementScaling::reciprocal, "y = RN(x * min(RN(1 / RN(s * Gd)), FLT_MAX)) (TE kernel, UE5M3 paper)"},
    {"division", ElementScaling::division, "y = RN(x / RN(s * Gd)) (the defect TE PRs #2615/#2639 fixed)"},
    {"bf16-coefficient", ElementScaling::bf16_coefficient,
     "y = RN(x * BF16(min(RN(G / s), BF16_MAX))) (TE's tuned 1-D kernel with fast math)"}};
constexpr NameRow<ScaleOrder> kScaleOrders[] = {
    {"te", ScaleOrder::te, "u = RN(amax * RN(G * RN(1/F))), elements by the element scaling (TE, UE5M3 paper)"},
    {"torchao", ScaleOrder::torchao,
     "u = RN(RN(amax / F) / P), y = RN(x * RN(RN(1/P) / s)), P = RN(A / RN(F*T)) (torchao nvfp4_quantize)"},
    {"modelopt", ScaleOrder::modelopt,
     "u = RN(amax / RN(F * P)), y = RN(x / RN(s * P)), P = RN(A / RN(F*T)) (ModelOpt NVFP4QTensor)"}};
constexpr NameRow<BlockScaleChoice> kBlockChoices[] = {
    {"single", BlockScaleChoice::single, "one scale per block (the two-level rule)"},
    {"4over6-mae", BlockScaleChoice::four_over_six_mae,
     "TE 4over6: map-to-6 and map-to-4 candidates, the lower summed |error| wins"},
    {"4over6-mse", BlockScaleChoice::four_over_six_mse, "TE 4over6, by summed squared error"}};
constexpr NameRow<FourOverSixErrorDomain> kFourOverSixErrors[] = {
    {"input", FourOverSixErrorDomain::input, "4over6 error in the input domain (TE's default)"},
    {"fast-math", FourOverSixErrorDomain::fast_math,
     "4over6 error as RN(q*s) - RN(x*G), the scaled FP16 product domain (TE nvfp4_4over6_err_use_fast_math)"},
    {"decode-scale", FourOverSixErrorDomain::decode_scale,
     "4over6 error as RN(RN(q*s) * RN(1/G)) - x, through the global decode scale (FlashInfer #3448, exact math)"}};
constexpr NameRow<NanAmax> kNanAmaxes[] = {
    {"ignore", NanAmax::ignore, "a NaN does not enter the tensor amax (TE's kernels)"},
    {"propagate", NanAmax::propagate,
     "a NaN makes the tensor amax NaN: every scale of its tensor (or row) NaN, every code 0 (TE's reference)"}};
constexpr NameRow<AmaxScope> kAmaxScopes[] = {
    {"tensor", AmaxScope::tensor, "one tensor amax (TE NVFP4)"},
    {"row", AmaxScope::row, "one amax per row: row-scaled NVFP4 (TE row_scaled_activation, 1-D blocks)"}};
constexpr NameRow<TensorScalePolicy> kTensorScales[] = {
    {"none", TensorScalePolicy::none, "no tensor scale (G = 1): single-level block scales"},
    {"current", TensorScalePolicy::current, "amax of the tensor being quantized (TE NVFP4)"},
    {"periodic", TensorScalePolicy::periodic,
     "periodic:D, amax sampled at steps 1, 1+D, 1+2D, ... and held in between (UE5M3 paper, D = 50)"}};
constexpr NameRow<DequantizeOrder> kOrders[] = {
    {"portable", DequantizeOrder::portable, "RN(q * RN(s * Gd)) (UE5M3 paper's reference)"},
    {"kernel", DequantizeOrder::kernel, "RN(RN(q * s) * Gd) (UE5M3 paper's Triton quantizer)"},
    {"te_kernel", DequantizeOrder::te_kernel, "RN(q * RN(RN(s * A) * RN(1/(6T)))) (TE dequantize kernel)"}};
constexpr NameRow<AlphaRule> kAlphaRules[] = {{"one", AlphaRule::one},
                                              {"reciprocal", AlphaRule::reciprocal},
                                              {"division", AlphaRule::division}};
constexpr NameRow<Role> kRoles[] = {
    {"activation", Role::activation, "x: 1 x B blocks along K, quantized as fprop's A"},
    {"weight", Role::weight, "w: quantized as fprop's B (B x B tiles where the recipe says 2-D)"},
    {"grad_output", Role::grad_output, "dy: quantized as dgrad's A (the recipe's gradient rounding)"}};
constexpr NameRow<Gemm> kGemms[] = {{"fprop", Gemm::fprop, "y = x w^T: A = x, B = w"},
                                    {"dgrad", Gemm::dgrad, "dx = dy w: A = dy, B = w^T"},
                                    {"wgrad", Gemm::wgrad, "dw = dy^T x: A = dy^T, B = x^T"}};

constexpr int kPaperPeriod = 50;

}  // namespace

std::span<const NameRow<ScaleRule>> names(ScaleRule) { return kScaleRules; }
std::span<const NameRow<ZeroScale>> names(ZeroScale) { return kZeroScales; }
std::span<const NameRow<TensorScalePolicy>> names(TensorScalePolicy) { return kTensorScales; }
std::span<const NameRow<ElementScaling>> names(ElementScaling) { return kElementScalings; }
std::span<const NameRow<ScaleOrder>> names(ScaleOrder) { return kScaleOrders; }
std::span<const NameRow<BlockScaleChoice>> names(BlockScaleChoice) { return kBlockChoices; }
std::span<const NameRow<AmaxScope>> names(AmaxScope) { return kAmaxScopes; }
std::span<const NameRow<FourOverSixErrorDomain>> names(FourOverSixErrorDomain) { return kFourOverSixErrors; }
std::span<const NameRow<NanAmax>> names(NanAmax) { return kNanAmaxes; }

std::span<const NameRow<DequantizeOrder>> names(DequantizeOrder) { return kOrders; }
std::span<const NameRow<AlphaRule>> names(AlphaRule) { return kAlphaRules; }
std::span<const NameRow<Role>> names(Role) { return kRoles; }
std::span<const NameRow<Gemm>> names(Gemm) { return kGemms; }

std::optional<TensorScaleSetting> parse_tensor_scale(std::string_view text) {
  if (text == "none") return TensorScaleSetting{TensorScalePolicy::none, 1};
  if (text == "current") return TensorScaleSetting{TensorScalePolicy::current, 1};
  if (text == "periodic") return TensorScaleSetting{TensorScalePolicy::periodic, kPaperPeriod};
  if (!text.starts_with("periodic:")) return std::nullopt;
  const std::string_view digits = text.substr(9);
  int period = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), period);
  if (ec != std::errc{} || end != digits.data() + digits.size() || period < 1) return std::nullopt;
  return TensorScaleSetting{TensorScalePolicy::periodic, period};
}

std::string tensor_scale_text(TensorScalePolicy policy, int period) {
  if (policy == TensorScalePolicy::periodic) return "periodic:" + std::to_string(period);
  return std::string(name_of(policy));
}

std::span<const Recipe> recipe_presets() { return kPresets; }

const Recipe* find_recipe(std::string_view name) {
  for (const Recipe& preset : kPresets) {
    if (preset.name == name) return &preset;
  }
  return nullptr;
}

std::string recipe_names() {
  std::string names;
  for (const Recipe& preset : kPresets) names += (names.empty() ? "" : ", ") + preset.name;
  return names;
}

bool valid_target(float target) { return std::isnormal(target) && target > 0.0f; }

std::vector<std::string_view> cpu_only_settings(const Recipe& r) {
  std::vector<std::string_view> keys;
  if (r.element != formats::e2m1) keys.push_back("element_format");  // the kernels quantize to E2M1 only
  if (r.block != 16 && r.block != 32) keys.push_back("block");
  if (r.element_scaling != ElementScaling::reciprocal) keys.push_back("element_scaling");
  if (r.scale_rule == ScaleRule::pow2_float_log2) keys.push_back("scale_rule");  // microxcaling's float log2
  if (r.four_over_six_error == FourOverSixErrorDomain::decode_scale) keys.push_back("four_over_six_error");
  if (r.scale_order != ScaleOrder::te) keys.push_back("scale_order");
  if (r.scale_min != 0.0f) keys.push_back("scale_min");
  if (r.nan_amax != NanAmax::ignore) keys.push_back("nan_amax");
  if (r.element_specials != SpecialConvention::hardware) keys.push_back("element_specials");
  if (r.rht_signs != kRhtSigns) keys.push_back("rht_signs");
  if (r.rht_precision != RhtPrecision::bf16) keys.push_back("rht_precision");
  return keys;
}

std::vector<std::string> validate(const Recipe& r) {
  std::vector<std::string> problems;
  if (r.block < 2 || r.block > 256) problems.push_back("block size must be between 2 and 256");
  if (r.element.exponent_bits < 1) problems.push_back("element format missing");
  if (r.scale.exponent_bits < 1) problems.push_back("scale format missing");
  if (r.element.bits() > 8) problems.push_back("element format must have at most 8 bits");
  if (!r.element.is_signed || !r.element.has_zero()) {
    problems.push_back("element format must be signed with a zero and a mantissa (eXmY, not ueXmY or e8m0)");
  }
  if (r.scale.bits() > 8) problems.push_back("scale format must have at most 8 bits (codes are stored as bytes)");
  if (r.scale.is_signed) problems.push_back("scale format must be unsigned (ueXmY)");
  const bool pow2 = r.scale_rule != ScaleRule::two_level;
  if (pow2 && r.scale.specials != Specials::pow2_nan) {
    problems.push_back("scale rules floor/ceil/ceil-exponent/even/rceil/float-log2 need a power-of-two scale format (e8m0)");
  }
  if (!pow2 && r.scale.specials == Specials::pow2_nan) {
    problems.push_back("a power-of-two scale format (e8m0) needs scale rule floor, ceil, ceil-exponent, even, rceil or float-log2");
  }
  if (pow2 && r.tensor_scale != TensorScalePolicy::none) {
    problems.push_back("power-of-two scale rules take no tensor scale ({tensor_scale} none)");
  }
  if (r.tensor_scale == TensorScalePolicy::periodic && r.period < 1) problems.push_back("period D must be >= 1");
  if (!valid_target(r.target) || !valid_target(r.wgrad_grad_target)) {
    problems.push_back("target T must be a positive normal number (2^-126 <= T <= 3.4e38)");
  }
  if (r.sr_bits < 1 || r.sr_bits > 16) problems.push_back("sr_bits must be between 1 and 16");
  if (r.operand_rht.value_or(r.rht_wgrad) && r.block % 16 != 0) {
    problems.push_back("RHT needs a block size that is a multiple of 16");
  }
  if (r.block_choice != BlockScaleChoice::single && !has_tensor_scale(r)) {
    problems.push_back("4over6 needs two-level scales with a tensor scale");
  }
  if (r.four_over_six_error != FourOverSixErrorDomain::input && r.block_choice == BlockScaleChoice::single) {
    problems.push_back("a 4over6 error domain needs a 4over6 block choice");
  }
  if (r.scale_order != ScaleOrder::te &&
      (pow2 || r.block_choice != BlockScaleChoice::single || r.element_scaling != ElementScaling::reciprocal)) {
    problems.push_back("a torchao or modelopt scale order needs two-level scales, one candidate and the default "
                       "element scaling (the order fixes how elements are scaled)");
  }
  if (!(r.scale_min >= 0.0f && r.scale_min <= 0x1p127f) || (pow2 && r.scale_min != 0.0f)) {
    problems.push_back("scale_min must be 0 or a positive finite number, with two-level scales");
  }
  if (r.nan_amax != NanAmax::ignore && !has_tensor_scale(r)) {
    problems.push_back("a NaN-propagating amax needs two-level scales with a tensor scale");
  }
  if (r.amax_scope == AmaxScope::row && (!has_tensor_scale(r) || r.tensor_scale != TensorScalePolicy::current)) {
    problems.push_back("row-scaled amax needs two-level scales with {tensor_scale} current");
  }
  if (!r.default_datapath) problems.push_back("default GEMM datapath missing");
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

bool row_scaled(const Recipe& r, const OperandSpec& spec) {
  return has_tensor_scale(r) && r.amax_scope == AmaxScope::row && spec.takes_row_amax;
}

namespace {

// The recipe's orientation rules (paper §1.4), before a user-defined recipe's setting of every operand.
GemmOperands oriented(const Recipe& r, Gemm gemm) {
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

}  // namespace

GemmOperands operands_for(const Recipe& r, Gemm gemm) {
  GemmOperands ops = oriented(r, gemm);
  for (OperandSpec* spec : {&ops.a, &ops.b}) {
    if (r.operand_two_d) spec->two_d = *r.operand_two_d;
    if (r.operand_rht) spec->rht = *r.operand_rht;
    spec->takes_row_amax = spec == &ops.a && gemm == Gemm::fprop;
  }
  return ops;
}

}  // namespace fp4sim
