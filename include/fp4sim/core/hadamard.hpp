// The 16-point random Hadamard transform of NVFP4's wgrad operands (TransformerEngine; docs/semantics.md
// §1.8 and N8): x'_j = BF16_RN( sum_i x_i * s_i * H16[i][j] * 0.25 ), with H16 the Sylvester Hadamard
// matrix and s TE's fixed sign vector. The 16 products are exact; they are summed in binary32 in
// ascending i from +0 (docs/design.md: the GPU kernel must match this order, not its tensor-core order).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace fp4sim {

// TE get_wgrad_sign_vector(): "Hard-coded random signs".
inline constexpr std::array<int, 16> kRhtSigns{1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

// Sylvester Hadamard entry H16[i][j] = (-1)^popcount(i & j).
constexpr int hadamard16(int i, int j) { return (__builtin_popcount(static_cast<unsigned>(i & j)) & 1) ? -1 : 1; }

// Transforms each group of 16 consecutive elements along the last dimension of x [rows, cols]; a
// partial last group is padded with +0.0. The result holds BF16 values widened to binary32.
std::vector<float> random_hadamard_transform(std::span<const float> x, std::size_t rows, std::size_t cols);

}  // namespace fp4sim
