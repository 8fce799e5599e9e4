// TE's 4over6 candidate selection (BlockScaleChoice::four_over_six_*; docs/semantics.md 1.12): the error
// each candidate's codes make, in the FP32 operation order of TE's quantize_4over6_kernel.cuh and of its
// reference (custom_recipes/reference_nvfp4.py, _quantize_blockwise_4over6_reference at d0067d0), in the input
// domain (the default) or the fast-math one (nvfp4_4over6_err_use_fast_math), or through the global decode
// scale as FlashInfer's strict path (tests/test_helpers/utils_fp4.py ref_fp4_quant_4over6_te at d9b175ac6), and
// how a 2-D tile sums its rows' errors.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "fp4sim/core/format.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim {

class FourOverSixError {
 public:
  // The recipe's element format, block choice and error domain; T of the operand.
  FourOverSixError(const Recipe& recipe, float target);

  // One row of a block: err = sum over j, from +0 in ascending j, of e(diff_j), where e is |diff| (MAE) or
  // RN(diff * diff) (MSE) and, with A and G the amax and encode scale of the block's tensor (or row),
  //   input:     diff_j = RN(RN(RN(RN(q_j * s) * A) / RN(F * T)) - x_j)
  //   fast_math: diff_j = RN(RN(q_j * s) - RN(x_j * G))  (q_j * s is exact: at most 8 significant bits, and
  //              TE's FP16 product of it too, since |q_j * s| <= 6 * 448 and s >= 2^-9)
  //   decode_scale: diff_j = RN(RN(RN(q_j * s) * RN(1 / G)) - x_j)  (FlashInfer's per-tensor strict error)
  float operator()(std::span<const float> x, std::span<const std::uint8_t> codes, float scale, float amax,
                   float encode) const;

  // A block's error from its rows' (one row: itself). TE sums a 16 x 16 tile's rows with a warp shuffle
  // tree, v[i] += v[i + offset] for offset 8, 4, 2, 1; other row counts are padded with +0 rows to the
  // next power of two (an assumption: TE has only 16-row tiles).
  static float block_sum(std::span<const float> row_errors);

 private:
  std::array<float, 256> values_{};  // element code -> value
  bool squared_ = false;
  FourOverSixErrorDomain domain_ = FourOverSixErrorDomain::input;
  float denominator_ = 0.0f;  // RN(F * T)
};

}  // namespace fp4sim
