// TE's 4over6 candidate selection (BlockScaleChoice::four_over_six_*; docs/semantics.md 1.12): the error
// each candidate's codes make, in the FP32 operation order of TE's quantize_4over6_kernel.cuh
// (NVTE_NVFP4_4OVER6_ERR_USE_FAST_MATH=0, the default), and how a 2-D tile sums its rows' errors.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "fp4sim/core/format.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim {

class FourOverSixError {
 public:
  FourOverSixError(const Format& element, BlockScaleChoice choice, float target);

  // One row of a block: err = sum over j, from +0 in ascending j, of e(diff_j), where
  // diff_j = RN(RN(RN(RN(q_j * s) * A) / RN(F * T)) - x_j) and e is |diff| (MAE) or RN(diff * diff) (MSE).
  float operator()(std::span<const float> x, std::span<const std::uint8_t> codes, float scale, float amax) const;

  // A block's error from its rows' (one row: itself). TE sums a 16 x 16 tile's rows with a warp shuffle
  // tree, v[i] += v[i + offset] for offset 8, 4, 2, 1; other row counts are padded with +0 rows to the
  // next power of two (an assumption: TE has only 16-row tiles).
  static float block_sum(std::span<const float> row_errors);

 private:
  std::array<float, 256> values_{};  // element code -> value
  bool squared_ = false;
  float denominator_ = 0.0f;  // RN(F * T)
};

}  // namespace fp4sim
