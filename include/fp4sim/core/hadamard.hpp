// The 16-point random Hadamard transform of NVFP4's wgrad operands (TransformerEngine; docs/semantics.md
// §1.8 and N8): x'_j = BF16_RN( sum_i x_i * s_i * H16[i][j] * 0.25 ), with H16 the Sylvester Hadamard
// matrix and s a sign vector, TE's fixed one unless the recipe says otherwise (--rht-signs). The 16
// products are exact; they are summed in binary32 in ascending i from +0 (docs/design.md: the GPU kernel
// must match this order, not its tensor-core order). TE's reference on a float32 tensor keeps the sum in
// binary32 (RhtPrecision::float32, --rht-precision).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/names.hpp"

namespace fp4sim {

using RhtSigns = std::array<std::int8_t, 16>;

// TE get_wgrad_sign_vector(): "Hard-coded random signs".
inline constexpr RhtSigns kRhtSigns{1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

// A sign vector as users write it: 16 characters, each '+' or '-' (TE's is "+++-+------+-+--"); nullopt
// for anything else.
std::optional<RhtSigns> parse_rht_signs(std::string_view text);
std::string rht_signs_text(const RhtSigns& signs);

// What the transform's binary32 sum is rounded to. TE's kernels take BF16 only (hadamard_transform_cast_fusion.cu,
// d0067d0); its reference_nvfp4.py _apply_rht multiplies in the input's dtype, so a float32 input stays float32.
enum class RhtPrecision : std::uint8_t {
  bf16,     // BF16_RN(sum): TE's kernels, and its reference on BF16 input
  float32,  // the binary32 sum as is: TE's reference on float32 input
};
std::span<const NameRow<RhtPrecision>> names(RhtPrecision);

// Sylvester Hadamard entry H16[i][j] = (-1)^popcount(i & j).
constexpr int hadamard16(int i, int j) { return (__builtin_popcount(static_cast<unsigned>(i & j)) & 1) ? -1 : 1; }

// Transforms each group of 16 consecutive elements along the last dimension of x [rows, cols]; a
// partial last group is padded with +0.0. Under RhtPrecision::bf16 the result holds BF16 values widened to
// binary32.
std::vector<float> random_hadamard_transform(std::span<const float> x, std::size_t rows, std::size_t cols,
                                             const RhtSigns& signs = kRhtSigns,
                                             RhtPrecision precision = RhtPrecision::bf16);

}  // namespace fp4sim
