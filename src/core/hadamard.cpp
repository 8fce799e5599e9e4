#include "fp4sim/core/hadamard.hpp"

#include <bit>

#include "fp4sim/core/codec.hpp"

namespace fp4sim {

namespace {
constexpr NameRow<RhtPrecision> kPrecisions[] = {
    {"bf16", RhtPrecision::bf16, "the transform rounded to BF16 (TE's kernels; its reference on BF16 input)"},
    {"float32", RhtPrecision::float32, "the transform kept in binary32 (TE's reference_nvfp4.py on float32 input)"}};
}  // namespace

std::span<const NameRow<RhtPrecision>> names(RhtPrecision) { return kPrecisions; }

std::optional<RhtSigns> parse_rht_signs(std::string_view text) {
  if (text.size() != 16) return std::nullopt;
  RhtSigns signs{};
  for (std::size_t i = 0; i < 16; ++i) {
    if (text[i] != '+' && text[i] != '-') return std::nullopt;
    signs[i] = text[i] == '+' ? 1 : -1;
  }
  return signs;
}

std::string rht_signs_text(const RhtSigns& signs) {
  std::string text;
  for (std::int8_t s : signs) text += s > 0 ? '+' : '-';
  return text;
}

std::vector<float> random_hadamard_transform(std::span<const float> x, std::size_t rows, std::size_t cols,
                                             const RhtSigns& signs, RhtPrecision precision) {
  std::array<std::array<float, 16>, 16> matrix{};  // s_i * H16[i][j] * 0.25, exact in binary32
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) matrix[i][j] = 0.25f * static_cast<float>(signs[i] * hadamard16(i, j));
  }
  const Float32Encoder to_bf16(formats::bf16, {Rounding::rne, false});
  std::vector<float> out(rows * cols);
  const std::size_t groups = (cols + 15) / 16;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelThreshold)
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t g = 0; g < groups; ++g) {
      std::array<float, 16> in{};
      for (std::size_t i = 0; i < 16 && g * 16 + i < cols; ++i) in[i] = x[r * cols + g * 16 + i];
      for (std::size_t j = 0; j < 16 && g * 16 + j < cols; ++j) {
        float sum = 0.0f;
        for (int i = 0; i < 16; ++i) sum = sum + in[i] * matrix[i][j];
        out[r * cols + g * 16 + j] = precision == RhtPrecision::float32
                                         ? sum
                                         : std::bit_cast<float>(to_bf16(std::bit_cast<std::uint32_t>(sum)) << 16);
      }
    }
  }
  return out;
}

}  // namespace fp4sim
