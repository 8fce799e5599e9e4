// The golden GEMM of a row-scaled A (AmaxScope::row, TE's row-scaled NVFP4 activations): each output row
// takes its own alpha, gemm_alpha of A's row amax and B's tensor amax, D[i, j] = RN(acc[i, j] · alpha_i).
// Checked against a float64 reference of the epilogue (the unit-alpha GEMM's accumulator times alpha_i,
// exact in binary64, rounded once), with alpha_i itself formed in binary64 where the products are exact
// (and its quotient rounded twice, which is innocuous for 53 >= 2 * 24 + 2 bits).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim {
namespace {

std::vector<float> rows_of_many_binades(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 30) - 15);
    for (std::size_t c = 0; c < cols; ++c) x[r * cols + c] = normal(rng) * scale;
  }
  std::fill(x.begin() + 3 * cols, x.begin() + 4 * cols, 0.0f);  // a zero row: amax 0, G = 1
  return x;
}

// alpha_i by docs' formula, in binary64: RN32 of an exact binary64 product or of a binary64 quotient.
float reference_alpha(AlphaRule rule, float amax_a, float target_a, float amax_b, float target_b) {
  if (rule == AlphaRule::one) return 1.0f;
  const float num = static_cast<float>(static_cast<double>(amax_a) * amax_b);
  const float den = static_cast<float>(static_cast<double>(static_cast<float>(6.0 * target_a)) *
                                       static_cast<float>(6.0 * target_b));
  if (rule == AlphaRule::division) return static_cast<float>(static_cast<double>(num) / den);
  return static_cast<float>(static_cast<double>(num) * static_cast<float>(1.0 / den));
}

struct Operands {
  Recipe recipe;
  QuantizedTensor a, b;
};

// A [m, k] row-scaled (1-D activation blocks), B [n, k] the recipe's weight with its tensor amax.
Operands operands(const char* preset, std::size_t m, std::size_t n, std::size_t k) {
  Operands o{*find_recipe(preset), {}, {}};
  o.recipe.amax_scope = AmaxScope::row;
  Recipe tensor_scaled = o.recipe;
  tensor_scaled.amax_scope = AmaxScope::tensor;
  QuantizeRequest ra, rb;
  ra.spec = operands_for(o.recipe, Gemm::fprop).a;
  rb.spec = operands_for(o.recipe, Gemm::fprop).b;
  o.a = quantize(o.recipe, ra, rows_of_many_binades(m, k, 1), m, k);
  o.b = quantize(tensor_scaled, rb, rows_of_many_binades(n, k, 2), n, k);
  return o;
}

TEST(GemmRowAlpha, EachRowTakesItsOwnAlphaAsAFloat64Epilogue) {
  for (const char* preset : {"nvfp4", "nvfp4-4over6", "ue5m3-te"}) {
    const std::size_t m = 24, n = 20, k = 128;
    const Operands o = operands(preset, m, n, k);
    ASSERT_EQ(o.a.row_amax.size(), m);
    for (const char* datapath : {"fp32-seq", "sm90-bf16", "probe-matched"}) {
      GemmRequest request;
      request.datapath = &datapath_argument(datapath, "datapath");
      const GemmOptions options = resolve_gemm(o.recipe, o.a, o.b, request);
      const AlphaRule rule = alpha_rule_for(*options.datapath, o.recipe);
      ASSERT_NE(rule, AlphaRule::one) << preset;
      ASSERT_EQ(options.row_alpha.size(), m);
      GemmOptions unit = options;
      unit.row_alpha.assign(m, 1.0f);
      const std::vector<float> acc = gemm(o.a, o.b, unit);
      const std::vector<float> c = gemm(o.a, o.b, options);
      GemmOptions reference = options;
      reference.impl = GemmImpl::reference;
      EXPECT_EQ(gemm(o.a, o.b, reference), c) << preset << " " << datapath << ": the fast path differs";
      std::size_t distinct = 0;
      for (std::size_t i = 0; i < m; ++i) {
        const float alpha = reference_alpha(rule, o.a.row_amax[i], o.a.target, o.b.tensor_amax, o.b.target);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(options.row_alpha[i]), std::bit_cast<std::uint32_t>(alpha))
            << preset << " row " << i;
        distinct += alpha != options.row_alpha[0];
        for (std::size_t j = 0; j < n; ++j) {
          const float want = static_cast<float>(static_cast<double>(acc[i * n + j]) * alpha);  // exact, then RN32
          ASSERT_EQ(std::bit_cast<std::uint32_t>(c[i * n + j]), std::bit_cast<std::uint32_t>(want))
              << preset << " " << datapath << " [" << i << ", " << j << "]";
        }
      }
      EXPECT_GT(distinct, m / 2) << preset << ": the rows' alphas should differ";
    }
  }
}

// The exact datapath rounds alpha_i · (exact sum) once: row i equals the same GEMM with a tensor alpha of
// alpha_i.
TEST(GemmRowAlpha, ExactRowsEqualTheScalarAlphaGemm) {
  const std::size_t m = 8, n = 12, k = 96;
  const Operands o = operands("nvfp4", m, n, k);
  GemmRequest request;
  request.datapath = &datapath_argument("exact", "datapath");
  const GemmOptions options = resolve_gemm(o.recipe, o.a, o.b, request);
  const std::vector<float> c = gemm(o.a, o.b, options);
  for (std::size_t i = 0; i < m; ++i) {
    GemmOptions scalar = options;
    scalar.row_alpha.assign(m, options.row_alpha[i]);
    const std::vector<float> row = gemm(o.a, o.b, scalar);
    for (std::size_t j = 0; j < n; ++j) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(c[i * n + j]), std::bit_cast<std::uint32_t>(row[i * n + j])) << i << "," << j;
    }
  }
}

TEST(GemmRowAlpha, RefusesARowScaledAWithoutRowAlphasAndARowScaledB) {
  const Operands o = operands("nvfp4", 8, 8, 64);
  GemmRequest request;
  request.datapath = &datapath_argument("fp32-seq", "datapath");
  GemmOptions options = resolve_gemm(o.recipe, o.a, o.b, request);
  options.row_alpha.clear();
  EXPECT_THROW(gemm(o.a, o.b, options), DataError);
  options.row_alpha.assign(8, 1.0f);
  EXPECT_THROW(gemm(o.b, o.a, options), DataError);  // B row-scaled
}

}  // namespace
}  // namespace fp4sim
