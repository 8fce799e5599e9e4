// The 16-point random Hadamard transform of NVFP4's wgrad operands (TransformerEngine; docs/semantics.md
// §1.8 and N8): x'_j = BF16_RN( sum_i x_i * s_i * H16[i][j] * 0.25 ), with H16 the Sylvester Hadamard
// matrix and s a sign vector, TE's fixed one unless the recipe says otherwise (--rht-signs). The 16
// products are exact; they are summed in binary32 in ascending i from +0 (docs/design.md: the GPU kernel
// must match this order, not its tensor-core order).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4sim {

using RhtSigns = std::array<std::int8_t, 16>;

// TE get_wgrad_sign_vector(): "Hard-coded random signs".
inline constexpr RhtSigns kRhtSigns{1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

// A sign vector as users write it: 16 characters, each '+' or '-' (TE's is "+++-+------+-+--"); nullopt
// for anything else.
std::optional<RhtSigns> parse_rht_signs(std::string_view text);
std::string rht_signs_text(const RhtSigns& signs);

// Sylvester Hadamard entry H16[i][j] = (-1)^popcount(i & j).
constexpr int hadamard16(int i, int j) { return (__builtin_popcount(static_cast<unsigned>(i & j)) & 1) ? -1 : 1; }

// Transforms each group of 16 consecutive elements along the last dimension of x [rows, cols]; a
// partial last group is padded with +0.0. The result holds BF16 values widened to binary32.
std::vector<float> random_hadamard_transform(std::span<const float> x, std::size_t rows, std::size_t cols,
                                             const RhtSigns& signs = kRhtSigns);

}  // namespace fp4sim
