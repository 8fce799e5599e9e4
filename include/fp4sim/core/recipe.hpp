// A block-scaled recipe is a pairing of existing parts (CUTLASS's mx_float4_t / nv_float4_t): element
// and scale formats, a block shape, a scale rule, a tensor-scale policy and per-role rounding, plus the
// source its semantics come from. Presets are rows of one table; no code branches on a preset's name.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/rounding.hpp"

namespace fp4sim {

// How a block's scale code is chosen from the block amax.
enum class ScaleRule : std::uint8_t {
  // amax/F mapped through a global FP32 multiplier G = RN(RN(F*T) / amax_ref) (G = 1 without a
  // tensor scale), then RNE into the scale format, saturating (the UE5M3 paper's formats.py and TE's
  // NVFP4 kernels share this exact FP32 operation order; docs/design.md).
  two_level,
  pow2_floor,  // OCP MX v1.0: 2^(floor(log2 amax) - emax_elem) from the exponent field
  pow2_ceil,   // smallest 2^e with amax <= max_elem * 2^e (no element clips; TE reference cast_to_e8)
  pow2_ceil_exponent,  // torchao CEIL: smallest 2^e with amax <= 2^emax_elem * 2^e (amax's exponent rounded up)
  pow2_even,   // torchao EVEN: amax rounded to element precision, then floor (NaN block where that overflows)
  pow2_rceil,  // cuBLAS / torchao RCEIL: RN(amax * RN(1/max_elem)) rounded up to a power of two
  pow2_float_log2,  // microxcaling: floor of a binary32-rounded log2(amax), one too high just below 2^k
};

// What a block scale that rounds to zero becomes.
enum class ZeroScale : std::uint8_t {
  keep,  // stays 0; the encode multiplier becomes FLT_MAX (TE NVFP4 kernel, N6)
  one,   // replaced by the numeric scale 1.0 before the reciprocal (UE5M3 paper, "zero-scale-to-one")
};

enum class TensorScalePolicy : std::uint8_t {
  none,      // G = 1: single-level block scales
  current,   // amax of the tensor being quantized (TE NVFP4, D = 1)
  periodic,  // sample-and-hold amax refreshed at steps 1, 1+D, 1+2D, ... (UE5M3 paper, D = 50)
};

// How an element of a two-level block is scaled before rounding (power-of-two scales multiply by the
// exact 2^-e either way).
enum class ElementScaling : std::uint8_t {
  reciprocal,  // y = RN(x * min(RN(1 / RN(s * Gd)), FLT_MAX))  (TE kernel N6-N7, UE5M3 paper)
  division,    // y = RN(x / RN(s * Gd)), the reciprocal's multiplier kept where RN(s * Gd) = 0 (the kernel
               // defect TE PRs #2615/#2639 fixed)
  bf16_coefficient,  // y = RN(x * BF16(min(RN(G / s), BF16_MAX))) (TE's tuned 1-D kernel with use_fast_math,
                     // compute_nvfp4_scaling_coefficient<bf16>; docs/semantics.md 1.4)
  // `verify` tries the other two as alternative rules; no preset uses them (--element-scaling picks one).
};

// The FP32 operation order of a two-level block's scale u and of its elements' scaling, for the stacks whose
// Python reference divides where TE multiplies. P = RN(A / RN(F * T)) is their per-tensor scale (1 without a
// tensor scale; docs/semantics.md §4 and §4b).
enum class ScaleOrder : std::uint8_t {
  te,        // u = RN(amax * RN(G * RN(1/F))); elements as ElementScaling says (TE, UE5M3 paper)
  torchao,   // u = RN(RN(amax / F) / P); y = RN(x * RN(RN(1/P) / s)) (torchao nvfp4_quantize)
  modelopt,  // u = RN(amax / RN(F * P)); y = RN(x / RN(s * P)) (ModelOpt NVFP4QTensor.quantize)
};

// How many scale candidates a two-level block tries (TE's nvfp4_4over6, docs/semantics.md 1.12).
enum class BlockScaleChoice : std::uint8_t {
  single,     // the one scale of the two-level rule
  four_over_six_mae,  // map-to-6 and map-to-4 (scale x 1.5) candidates; the lower summed |error| wins, ties map-to-6
  four_over_six_mse,  // the same, by summed squared error
};

// Where TE's 4over6 measures a candidate's error (nvfp4_4over6_err_use_fast_math; docs/semantics.md 1.12).
enum class FourOverSixErrorDomain : std::uint8_t {
  input,      // RN(RN(RN(RN(q * s) * A) / RN(F * T)) - x): the input domain (TE's default)
  fast_math,  // RN(RN(q * s) - RN(x * G)): the E4M3-scaled FP16 product domain (err_use_fast_math=True)
  decode_scale,  // RN(RN(RN(q * s) * Gd) - x), Gd = RN(1 / G): FlashInfer's strict per-tensor error (#3448)
};

// What a NaN does to the amax of a two-level recipe's tensor scale.
enum class NanAmax : std::uint8_t {
  ignore,     // a NaN never compares greater (TE's kernels, fmaxf; docs/semantics.md N2)
  propagate,  // torch.amax returns NaN (TE's reference_nvfp4.py): every block scale of that amax's scope
              // (the tensor, or the row under AmaxScope::row) is the scale format's NaN and every code 0
};

// Which amax the tensor scale G is made from.
enum class AmaxScope : std::uint8_t {
  tensor,  // one amax per tensor (TE NVFP4)
  row,     // one amax per row, G and Gd per row (TE row_scaled_activation; 1-D blocks only)
};

// Order of the multiplications that reconstruct a value (all RN32).
enum class DequantizeOrder : std::uint8_t {
  portable,   // q * RN(s * Gd)                 (paper's portable reference formats.py)
  kernel,     // RN(q * s) * Gd                 (paper's Triton quantizer, decoded domain)
  te_kernel,  // q * RN(RN(s * A) * RN(1/(F*T))) (TE dequantize_fp4_kernel, N10)
};

// How the GEMM epilogue forms alpha from the two tensor amaxes.
enum class AlphaRule : std::uint8_t {
  one,                  // no tensor scale (MXFP4)
  reciprocal,           // RN(RN(A_a*A_b) * RN(1/(RN(F*T_a)*RN(F*T_b))))  (paper's code)
  division,             // RN(RN(A_a*A_b) / (RN(F*T_a)*RN(F*T_b)))         (TE reference qgemm)
};

enum class Role : std::uint8_t { activation, weight, grad_output };
enum class Gemm : std::uint8_t { fprop, dgrad, wgrad };

std::span<const NameRow<ScaleRule>> names(ScaleRule);
std::span<const NameRow<ZeroScale>> names(ZeroScale);
std::span<const NameRow<ElementScaling>> names(ElementScaling);
std::span<const NameRow<ScaleOrder>> names(ScaleOrder);
std::span<const NameRow<BlockScaleChoice>> names(BlockScaleChoice);
std::span<const NameRow<AmaxScope>> names(AmaxScope);
std::span<const NameRow<FourOverSixErrorDomain>> names(FourOverSixErrorDomain);
std::span<const NameRow<NanAmax>> names(NanAmax);
std::span<const NameRow<TensorScalePolicy>> names(TensorScalePolicy);
std::span<const NameRow<DequantizeOrder>> names(DequantizeOrder);
std::span<const NameRow<AlphaRule>> names(AlphaRule);
std::span<const NameRow<Role>> names(Role);
std::span<const NameRow<Gemm>> names(Gemm);

// A tensor-scale policy as users write it: "none", "current", "periodic:D" (D a whole number >= 1) or
// "periodic" (D = 50, the UE5M3 paper's). Current scaling is D = 1.
struct TensorScaleSetting {
  TensorScalePolicy policy = TensorScalePolicy::none;
  int period = 1;
};
std::optional<TensorScaleSetting> parse_tensor_scale(std::string_view text);
std::string tensor_scale_text(TensorScalePolicy policy, int period);  // the canonical text: "periodic:50"

// A base preset states its fields in its row of the table (recipe.cpp) and a variant only what it changes;
// the defaults here are neutral (no format, no block, no target, no datapath), so a base row that forgets
// a field fails validate() instead of silently inheriting another preset's value.
struct Recipe {
  std::string name;
  std::string source;  // where the semantics come from, printed by --help and docs
  Format element{};
  Format scale{};
  int block = 0;                  // B: elements per block along the reduction dimension
  bool weight_two_d = false;      // weights as B x B tiles shared by both orientations
  ScaleRule scale_rule = ScaleRule::two_level;
  ZeroScale zero_scale = ZeroScale::keep;
  ElementScaling element_scaling = ElementScaling::reciprocal;
  ScaleOrder scale_order = ScaleOrder::te;
  // A two-level u below this is raised to it before rounding (torch.clamp(min=...): torchao 2^-6, ModelOpt
  // 2^-9), a zero u too unless ZeroScale::one makes it 1.0 first (ModelOpt's `[== 0] = 1.0`); 0 = none.
  float scale_min = 0.0f;
  BlockScaleChoice block_choice = BlockScaleChoice::single;
  FourOverSixErrorDomain four_over_six_error = FourOverSixErrorDomain::input;
  AmaxScope amax_scope = AmaxScope::tensor;
  NanAmax nan_amax = NanAmax::ignore;
  // How an element encodes -0 and NaN: as the hardware does (every preset) or as TE's reference cast_to_fp4x2
  // (te_python: an exact -0, say a tiny negative x whose RN(x * multiplier) is -0, and NaN give code 0).
  SpecialConvention element_specials = SpecialConvention::hardware;
  TensorScalePolicy tensor_scale = TensorScalePolicy::none;
  int period = 1;                 // D, for periodic tensor scaling
  float target = 0.0f;            // T: the scale code a block whose amax equals the tensor amax gets
  float wgrad_grad_target = 0.0f; // T for dY as the wgrad operand (the paper uses 2048 on chosen layers)
  Rounding element_rounding = Rounding::rne;  // activations, weights, and dY where no SR applies
  Rounding grad_rounding = Rounding::rne;     // dY payloads in dgrad and wgrad
  int sr_bits = 0;                // random bits per element of the stochastic roundings
  bool rht_wgrad = false;         // 16x16 random Hadamard transform on both wgrad operands
  RhtSigns rht_signs = kRhtSigns;  // the transform's sign vector s (hadamard.hpp)
  RhtPrecision rht_precision = RhtPrecision::bf16;  // what the transform's sum is rounded to (hadamard.hpp)
  // A user-defined recipe's setting of every operand (the override keys two_d and rht; no preset sets them):
  // each operand of each GEMM in B x B tiles or not, transformed or not, as `gemm --two-d` / `--no-rht` ask;
  // none: the orientation rules of weight_two_d and rht_wgrad.
  std::optional<bool> operand_two_d = std::nullopt, operand_rht = std::nullopt;
  DequantizeOrder dequantize_order = DequantizeOrder::portable;
  AlphaRule alpha = AlphaRule::one;
  const Datapath* default_datapath = nullptr;  // the GEMM datapath `gemm` and `replay` use by default
};
// Every preset clamps the element multiplier, min(RN(1/RN(s*Gd)), FLT_MAX), as TE's kernel does. The
// paper's code has no clamp; the two differ only when RN(s*Gd) < 2^-128, i.e. a held amax below about
// 2^-100, where the paper's multiplier would be +Inf.

std::span<const Recipe> recipe_presets();
const Recipe* find_recipe(std::string_view name);
std::string recipe_names();  // "ue5m3, ue5m3-b32, ..." for messages

// Whether a tensor quantized under this recipe has a tensor scale (G, Gd): a tensor-scale policy and
// two-level block scales. The one home of the rule the quantizer, the kernels' bindings and the vectors use.
inline bool has_tensor_scale(const Recipe& recipe) {
  return recipe.tensor_scale != TensorScalePolicy::none && recipe.scale_rule == ScaleRule::two_level;
}

// The settings of a recipe that only the CPU golden model implements, as the keys of their overrides
// ("element_format", ...): an element format other than E2M1 (MXFP8, MXFP6), a block other than 16 or 32, a non-default
// element scaling, NaN amax rule, element specials or RHT sign vector. The emu/ kernels refuse a recipe
// with any of them; empty when they can run it (4over6 and row-scaled amax run there too, within the
// limits gpu::make_plan states).
std::vector<std::string_view> cpu_only_settings(const Recipe& recipe);

// Problems that make a recipe unusable (empty when valid), CPFloat VALIDATE_INPUT style.
std::vector<std::string> validate(const Recipe& recipe);

// A scale target T maps a block's amax onto the scale grid: a positive normal binary32 (2^-126 <= T <=
// FLT_MAX), so T and 1/T are finite and nonzero. The one rule for the recipe's T and per-operand targets.
bool valid_target(float target);

// How one operand of one GEMM is quantized: the recipe's orientation rules resolved (paper §1.4).
struct OperandSpec {
  Role role = Role::activation;
  bool two_d = false;        // B x B tiles instead of 1 x B blocks along the last dimension
  Rounding rounding = Rounding::rne;
  bool rht = false;
  float target = 448.0f;
  // Whether a row-scaled recipe (AmaxScope::row) gives this operand one amax per row: of a layer's GEMMs
  // fprop's A alone, the forward activations that TE's row_scaled_activation scales (B's rows would need one
  // alpha per output column; TE runs a row-scaled recipe's backward in high precision), and any tensor
  // quantized on its own (QuantizeCall: TE's row_scaled_nvfp4 quantizer takes whatever it is given).
  bool takes_row_amax = true;
};

// fprop: A = x, B = w; dgrad: A = dy, B = w^T; wgrad: A = dy^T, B = x^T (docs/cli.md). K is always the
// last dimension of both operands.
struct GemmOperands {
  OperandSpec a, b;
};
GemmOperands operands_for(const Recipe& recipe, Gemm gemm);

// The spec of a tensor quantized outside a GEMM (`fp4sim quantize --role`): as the first GEMM that
// consumes it (x and w as in fprop, dy as in dgrad).
OperandSpec operand_for_role(const Recipe& recipe, Role role);

// Whether operand `spec` takes one amax per row under `recipe` (which then takes no held amax).
bool row_scaled(const Recipe& recipe, const OperandSpec& spec);

}  // namespace fp4sim
