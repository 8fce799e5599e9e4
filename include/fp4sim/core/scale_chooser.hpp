// The golden block-scale rule of a recipe: from a block's amax to its scale code and the multiplier every
// element of the block is scaled by. quantize() runs it for every block and reports what it computed
// (quantize_trace.hpp); `verify` reads that report, and asks the rule how a user's own code scales.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/fp32.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim {

// Whether an ideal scale above a scale format's max lies within 2^-22 of it: the relative error that the
// four FP32 roundings of u = RN(a * RN(RN(RN(6T) / g) * RN(1/6))) can add (4 x 2^-24), so the block
// holding the reference amax g can land there under current scaling (up to 3 ulps above 448 on trace A's
// tensors: 2 seen). Saturation by rounding, not clipping: the block's largest element still rounds to the
// element max.
inline bool saturated_by_rounding(float ideal, float scale_max) {
  return ideal > scale_max && static_cast<double>(ideal) <= static_cast<double>(scale_max) * (1.0 + 0x1p-22);
}

struct BlockScale {
  std::uint8_t code = 0;
  float value = 0.0f;       // decoded scale (after any zero repair)
  float multiplier = 0.0f;  // what each element is multiplied by before rounding
  float divisor = 0.0f;     // ElementScaling::division: RN(s * Gd), what each element is divided by
                            // instead (0: multiply, as for a zero scale and every other rule)
  bool saturated = false;
  bool saturated_rounding = false;  // of saturated: by FP32 rounding alone (saturated_by_rounding)
  bool underflow = false;
  bool repaired = false;           // a zero scale replaced by 1.0 (ZeroScale::one)
};

// The intermediate values of one choice, as the rule computed them.
struct ScaleTrace {
  // two-level
  float ideal = 0.0f;              // u = min(RN(amax * block_multiplier), FLT_MAX), before rounding
  std::uint8_t rounded_code = 0;   // RNE of u into the scale format, before any zero-scale repair
  bool repaired = false;           // a zero scale replaced by 1.0 (ZeroScale::one)
  // power of two
  int shared_exponent = 0;         // the unbiased scale exponent before clamping (rceil: floor(log2 descale))
};

class ScaleChooser {
 public:
  ScaleChooser(const Recipe& recipe, const GlobalScale& global);

  // The scale of a block with this amax (NaN-ignoring) that holds a NaN or Inf when has_nonfinite.
  BlockScale choose(float block_amax, bool has_nonfinite, ScaleTrace* trace = nullptr) const;
  // How the elements of a block are scaled under any stored scale code: the golden scale for a golden
  // code, and the one a kernel that stored this code would apply, with the recipe's element scaling
  // (multiplier, or divisor under ElementScaling::division; NaN for NaN or invalid codes of a two-level
  // format; multiplier 1 for the NaN code of a power-of-two format, whose elements go unscaled).
  BlockScale from_code(std::uint32_t code) const;
  // Elements of a block with this scale, scaled as the recipe's ElementScaling says, before rounding
  // (one branch per row, so that each loop vectorises).
  static void scale(std::span<const float> x, const BlockScale& scale, std::span<float> y) {
    if (scale.divisor != 0.0f) {
      for (std::size_t j = 0; j < x.size(); ++j) y[j] = fp32::div_rn(x[j], scale.divisor);
    } else {
      for (std::size_t j = 0; j < x.size(); ++j) y[j] = fp32::mul_rn(x[j], scale.multiplier);
    }
  }
  // TE's 4over6 candidates of a two-level block (BlockScaleChoice::four_over_six_*): from base =
  // RN(RN(amax / F) * G), map-to-6 = the scale code of min(base, max) and map-to-4 = that of
  // min(RN(base * 1.5), max), each with its zero-scale repair and element multiplier.
  struct Candidates {
    BlockScale map4, map6;
  };
  Candidates four_over_six(float block_amax, ScaleTrace* map4_trace = nullptr, ScaleTrace* map6_trace = nullptr) const;
  // A two-level code after the zero-scale repair of the recipe.
  std::uint8_t repaired(std::uint32_t code) const;

  const Recipe& recipe() const { return recipe_; }
  const GlobalScale& global() const { return global_; }
  float element_max() const { return element_max_; }
  float block_multiplier() const { return block_multiplier_; }  // RN(G * RN(1/F))
  std::uint8_t one_code() const { return one_code_; }            // the scale code of 1.0

 private:
  BlockScale two_level(float block_amax, ScaleTrace* trace) const;
  float ideal_scale(float block_amax) const;  // u, in the recipe's ScaleOrder
  BlockScale two_level_from_ideal(float ideal, ScaleTrace* trace) const;
  BlockScale pow2(float block_amax, bool has_nonfinite, ScaleTrace* trace) const;
  float two_level_multiplier(float value) const;
  void set_element_scaling(BlockScale& b) const;

  const Recipe& recipe_;
  GlobalScale global_;
  float element_max_;
  float scale_max_;
  Float32Encoder to_scale_;
  Float32Encoder to_bf16_;  // ElementScaling::bf16_coefficient
  float block_multiplier_;
  float per_tensor_reciprocal_;  // RN(1/P), ScaleOrder::torchao
  std::uint8_t one_code_;
};

}  // namespace fp4sim
