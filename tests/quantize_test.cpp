// Hand-derived cases of each scale rule, the periodic-scaling arithmetic of the UE5M3 paper's
// Proposition 1, each preset's documented worst-case round-trip error (docs/recipes.md), and the report
// of what each block used (quantize_trace.hpp) under row scope, division and 4over6.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/quantize_trace.hpp"
#include "fp4sim/core/tensor_scale.hpp"

namespace fp4sim {
namespace {

QuantizedTensor quantize_with(const Recipe& r, Role role, std::span<const float> x, std::size_t rows,
                              std::size_t cols, std::optional<float> amax_ref = std::nullopt,
                              std::span<const std::uint32_t> bits = {}) {
  QuantizeRequest request;
  request.spec = operand_for_role(r, role);
  request.amax_ref = amax_ref;
  request.random.explicit_bits = bits;
  return quantize(r, request, x, rows, cols);
}

Recipe preset(const char* name) { return *find_recipe(name); }

TEST(Ue5m3, BlockWithTensorAmaxGetsCodeT) {
  // a_B = g gives the ideal code exactly T = 448 = 1.75 * 2^8: UE5M3 code 0b10111'110.
  std::vector<float> x(16, 0.0f);
  x[3] = -5.0f;
  x[7] = 2.5f;
  const auto q = quantize_with(preset("ue5m3"), Role::activation, x, 1, 16);
  EXPECT_EQ(q.scales[0], 0b10111'110);
  // G = RN(2688/5) = 537.6 -> Gd = RN(1/G); s*Gd rounds near 5/6; y = -5 * RN(1/RN(s*Gd)) ~ -6.
  EXPECT_EQ(q.code(0, 3), 0b1'11'1);
  EXPECT_EQ(q.tensor_amax, 5.0f);
}

TEST(Ue5m3, ZeroBlockAndUnderflowingScaleBecomeOne) {
  // Block 0 all zero; block 1's amax maps below UE5M3's smallest subnormal 2^-17 (half of it rounds to 0).
  std::vector<float> x(32, 0.0f);
  x[16] = 1e-9f;
  const Recipe r = preset("ue5m3");
  // amax_ref = 1000: ideal code for block 1 = 1e-9 * 448 / 1000 = 4.5e-10 < 2^-18: rounds to 0 -> 1.0.
  const auto q = quantize_with(r, Role::activation, x, 1, 32, 1000.0f);
  EXPECT_EQ(q.scales[0], 0x78);  // zero block: repaired to 1.0 (code 0b01111'000)
  EXPECT_EQ(q.scales[1], 0x78);
  EXPECT_EQ(q.counts.zero_blocks, 1u);
  EXPECT_EQ(q.counts.scale_underflow, 1u);
  EXPECT_EQ(q.code(0, 16), 0u);  // payload flushes to +0
  const auto d = dequantize(q);
  EXPECT_EQ(d[16], 0.0f);
}

TEST(Ue5m3, StaleAmaxClampsAt61440AndCountsSaturation) {
  std::vector<float> x(16, 1.0f);
  x[0] = 300.0f;  // 300x the held amax of 1: ideal code 448 * 300 = 134400 > 61440
  const auto q = quantize_with(preset("ue5m3"), Role::activation, x, 1, 16, 1.0f);
  EXPECT_EQ(q.scales[0], 0b11110'111);  // 61440
  EXPECT_EQ(q.counts.scale_saturated, 1u);
  // 300 / (61440 * Gd) = 300 * 448 / 61440 * 6 = 13.1 units: clipped to 6.
  EXPECT_EQ(q.counts.saturated, 1u);
  EXPECT_EQ(q.code(0, 0), 0x7);
}

TEST(Nvfp4, ScaleUnderflowKeepsZeroAndMultiplierFltMax) {
  // TE N6/N7: s_b = 0 while the block has non-zero values -> enc = FLT_MAX, codes from x * FLT_MAX.
  std::vector<float> x(32, 0.0f);
  x[0] = 1000.0f;
  x[16] = 1e-7f;  // ideal scale 1e-7 * 448 / 1000 = 4.48e-8 < 2^-10: E4M3 underflows to 0
  const auto q = quantize_with(preset("nvfp4"), Role::activation, x, 1, 32);
  EXPECT_EQ(q.scales[0], 0x7E);  // 448
  EXPECT_EQ(q.scales[1], 0x00);
  EXPECT_EQ(q.counts.scale_underflow, 1u);
  EXPECT_EQ(q.code(0, 16), 0x7);  // 1e-7 * FLT_MAX saturates to +6
  EXPECT_EQ(dequantize(q)[16], 0.0f);
}

TEST(Nvfp4, InfAndNanElements) {
  std::vector<float> x(16, 1.0f);
  x[2] = std::numeric_limits<float>::infinity();
  x[5] = std::numeric_limits<float>::quiet_NaN();
  const auto q = quantize_with(preset("nvfp4-norht"), Role::activation, x, 1, 16);
  // Tensor amax = Inf (NaN ignored) -> S_enc = RN(2688/Inf) = 0 -> 1 (N3); block amax Inf -> s_b = 448.
  EXPECT_EQ(q.global_encode_scale, 1.0f);
  EXPECT_EQ(q.scales[0], 0x7E);
  EXPECT_EQ(q.code(0, 2), 0x7);  // +Inf * enc -> +6
  EXPECT_EQ(q.code(0, 5), 0x7);  // NaN -> 0x7 (G3)
  EXPECT_EQ(q.counts.nan, 1u);
  EXPECT_EQ(q.counts.inf, 1u);
}

TEST(Mxfp4, FloorRuleFromExponentField) {
  std::vector<float> x(32, 0.0f);
  x[0] = 0x1.fffffep2f;  // just below 8: floor(log2) = 2 -> shared 0 -> code 127, 7.99 clips to 6
  const auto q = quantize_with(preset("mxfp4"), Role::activation, x, 1, 32);
  EXPECT_EQ(q.scales[0], 127);
  EXPECT_EQ(q.code(0, 0), 0x7);
  EXPECT_EQ(q.counts.saturated, 1u);
  std::vector<float> zeros(32, 0.0f);
  EXPECT_EQ(quantize_with(preset("mxfp4"), Role::activation, zeros, 1, 32).scales[0], 0);
  std::vector<float> nan_block(32, 1.0f);
  nan_block[9] = std::numeric_limits<float>::quiet_NaN();
  const auto qn = quantize_with(preset("mxfp4"), Role::activation, nan_block, 1, 32);
  EXPECT_EQ(qn.scales[0], 0xFF);
  EXPECT_TRUE(std::isnan(dequantize(qn)[0]));
}

TEST(Mxfp4, ScaleRules) {
  Recipe r = preset("mxfp4");
  std::vector<float> x(32, 0.0f);
  // 6.5 = 1.625 * 2^2. floor: 2^(2-2) = 1 (6.5 clips to 6); ceil: 6.5 > 6 -> 2; even: 1.625 rounds to
  // 1.5 at E2M1's one mantissa bit, exponent stays -> 1; rceil: RN(6.5 * RN(1/6)) = 1.083 -> up to 2.
  // 7 = 1.75 * 2^2: even rounds 1.75 up to 2.0 (tie, carry into the exponent) -> 2.
  const std::tuple<ScaleRule, float, int> expected[] = {
      {ScaleRule::pow2_floor, 6.5f, 127}, {ScaleRule::pow2_ceil, 6.5f, 128}, {ScaleRule::pow2_even, 6.5f, 127},
      {ScaleRule::pow2_rceil, 6.5f, 128}, {ScaleRule::pow2_even, 7.0f, 128},  {ScaleRule::pow2_floor, 7.0f, 127}};
  for (const auto& [rule, amax, code] : expected) {
    r.scale_rule = rule;
    x[0] = amax;
    EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], code) << name_of(rule) << " " << amax;
  }
  // microxcaling's float-log2: 2^100 - 2^76, the binary32 just below 2^100, has log2 within half an ulp of
  // 100, which its binary32 log2 returns: 2^(100-2) (code 225) where the exponent field gives 2^97 (224).
  r.scale_rule = ScaleRule::pow2_float_log2;
  x[0] = 0x1.fffffep99f;
  EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], 225);
  x[0] = 0x1.fff000p99f;  // 2^12 ulps lower: log2 rounds below 100, the floor rule's code
  EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], 224);
  r.scale_rule = ScaleRule::pow2_floor;
  EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], 224);
  x[0] = 6.0f;  // exactly representable: every rule gives scale 1
  for (const auto& [rule, amax, code] : expected) {
    r.scale_rule = rule;
    EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], 127) << name_of(rule);
  }
}

// torchao CEIL (mx_tensor.py to_mx at 36027d8): the exponent field plus one where a mantissa bit is set,
// minus E2M1's emax 2, so amax <= 4 * 2^e; fp4sim's ceil (TE reference cast_to_e8) is amax <= 6 * 2^e.
TEST(Mxfp4, TorchaoCeilExponent) {
  Recipe r = preset("mxfp4");
  r.scale_rule = ScaleRule::pow2_ceil_exponent;
  std::vector<float> x(32, 0.0f);
  x[0] = 5.0f;  // 1.25 * 2^2 -> 2^3 / 2^2 = 2^1 (code 128); 5 / 2 = 2.5 ties to 2.0 = 0b0'10'0
  auto q = quantize_with(r, Role::activation, x, 1, 32);
  EXPECT_EQ(q.scales[0], 128);
  EXPECT_EQ(q.code(0, 0), 0b0'10'0);
  r.scale_rule = ScaleRule::pow2_ceil;
  EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], 127);  // 5 <= 6 * 2^0
  r.scale_rule = ScaleRule::pow2_ceil_exponent;
  x[0] = 4.0f;  // a power of two: no rounding up -> 2^0
  EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], 127);
  x[0] = std::bit_cast<float>(0x00000001u);  // binary32 subnormal: field 0 -> -127 + 1 - 2, clamped to -127
  q = quantize_with(r, Role::activation, x, 1, 32);
  EXPECT_EQ(q.scales[0], 0);
  EXPECT_EQ(q.counts.scale_underflow, 1u);
}

// torchao EVEN at the top of the binary32 range: 1.75 * 2^127 (0x7F600000) plus half an E2M1 ulp carries
// into exponent 255, the rounded amax is +Inf and isfinite gives the block scale 0xFF; one ulp below stays
// finite (0x7F7FFFFF masked to 2^127 -> 2^125, code 0xFC).
TEST(Mxfp4, EvenOverflowIsNanBlock) {
  Recipe r = preset("mxfp4");
  r.scale_rule = ScaleRule::pow2_even;
  std::vector<float> x(32, 0.0f);
  x[0] = std::bit_cast<float>(0x7F600000u);  // 2.97747071e38
  const auto q = quantize_with(r, Role::activation, x, 1, 32);
  EXPECT_EQ(q.scales[0], 0xFF);
  EXPECT_EQ(q.counts.scale_saturated, 1u);
  const auto y = dequantize(q);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_TRUE(std::isnan(y[31]));
  x[0] = std::bit_cast<float>(0x7F5FFFFFu);
  EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], 0xFC);
  r.scale_rule = ScaleRule::pow2_floor;  // the other rules stay finite there
  x[0] = std::bit_cast<float>(0x7F600000u);
  EXPECT_EQ(quantize_with(r, Role::activation, x, 1, 32).scales[0], 0xFC);
}

// TE's reference NaN rule (reference_nvfp4.py at d0067d0): torch.max(torch.abs(x)) is NaN, so S_enc and every
// block scale are NaN (E4M3 0x7F) and cast_to_fp4x2 leaves every code 0; per row under the row scope. The
// kernels' rule (the default) keeps finite scales for the NaN-free blocks.
TEST(Nvfp4, NanAmaxPropagate) {
  Recipe r = preset("nvfp4-norht");
  std::vector<float> x(2 * 32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  x[5] = std::numeric_limits<float>::quiet_NaN();  // row 0, block 0
  r.nan_amax = NanAmax::propagate;
  auto q = quantize_with(r, Role::activation, x, 2, 32);
  for (std::uint8_t s : q.scales) EXPECT_EQ(s, 0x7F);
  for (std::uint8_t c : q.codes) EXPECT_EQ(c, 0);
  EXPECT_TRUE(std::isnan(dequantize(q)[40]));
  r.amax_scope = AmaxScope::row;
  q = quantize_with(r, Role::activation, x, 2, 32);
  EXPECT_EQ(q.scales[0], 0x7F);
  EXPECT_EQ(q.scales[1], 0x7F);
  r.nan_amax = NanAmax::ignore;
  const auto kept = quantize_with(r, Role::activation, x, 2, 32);
  EXPECT_NE(kept.scales[1], 0x7F);
  EXPECT_EQ(q.scales[2], kept.scales[2]);  // row 1 holds no NaN: as without the rule
  EXPECT_EQ(q.scales[3], kept.scales[3]);
  for (std::size_t c = 0; c < 32; ++c) EXPECT_EQ(q.code(1, c), kept.code(1, c)) << c;
  r.scale_rule = ScaleRule::pow2_floor;  // no tensor scale, no rule to apply
  r.scale = formats::e8m0;
  r.tensor_scale = TensorScalePolicy::none;
  r.amax_scope = AmaxScope::tensor;
  r.nan_amax = NanAmax::propagate;
  EXPECT_FALSE(validate(r).empty());
}

// TE's 4over6 with nvfp4_4over6_err_use_fast_math: a 1 x 32 tensor whose second block TE's reference
// (reference_nvfp4.py at d0067d0, run on the CPU by tools/te_oracle.py) scales map-to-4 (0x7C) with the
// input-domain error and map-to-6 (0x78) with the fast-math one; scales and codes below are the reference's.
TEST(Nvfp4, FourOverSixFastMathError) {
  const std::uint32_t bits[32] = {
      0x3D1FFFFFu, 0x3D3FFFFFu, 0x3CBFFFFFu, 0xBE3FFFFFu, 0xBDBFFFFFu, 0xBC800001u, 0xBC000000u, 0x3D3FFFFFu,
      0x3DBFFFFFu, 0x00000000u, 0xBD3FFFFFu, 0xBD7FFFFFu, 0x3DDFFFFFu, 0x3D9FFFFFu, 0x3DC00001u, 0x3D800000u,
      0x3F7FFFFFu, 0x409FFFFFu, 0x3FE00001u, 0xC0BFFFFFu, 0x40400001u, 0xBFE00000u, 0xBF000000u, 0x40A00001u,
      0xBFC00000u, 0xBFE00001u, 0xC0800000u, 0x3F3FFFFFu, 0x40400001u, 0x3F800000u, 0xBE800000u, 0x40C00001u};
  std::vector<float> x(32);
  for (std::size_t i = 0; i < 32; ++i) x[i] = std::bit_cast<float>(bits[i]);
  const std::uint8_t block0[16] = {2, 3, 1, 15, 13, 9, 8, 3, 5, 0, 11, 12, 5, 4, 5, 4};
  const std::uint8_t input[16] = {1, 5, 2, 14, 4, 10, 9, 5, 10, 10, 13, 1, 4, 1, 8, 6};
  const std::uint8_t fast[16] = {2, 6, 3, 15, 5, 11, 9, 6, 11, 11, 14, 1, 5, 2, 8, 7};
  Recipe r = preset("nvfp4-4over6");
  r.element_specials = SpecialConvention::te_python;
  for (const auto domain : {FourOverSixErrorDomain::input, FourOverSixErrorDomain::fast_math}) {
    r.four_over_six_error = domain;
    const bool is_fast = domain == FourOverSixErrorDomain::fast_math;
    const auto q = quantize_with(r, Role::activation, x, 1, 32);
    EXPECT_EQ(q.scales[0], 0x50);
    EXPECT_EQ(q.scales[1], is_fast ? 0x78 : 0x7C);
    for (std::size_t c = 0; c < 16; ++c) {
      EXPECT_EQ(q.code(0, c), block0[c]) << c;
      EXPECT_EQ(q.code(0, 16 + c), is_fast ? fast[c] : input[c]) << name_of(domain) << " " << c;
    }
  }
}

// FlashInfer's exact-math 4over6 (tests/test_helpers/utils_fp4.py ref_fp4_quant_4over6_te at d9b175ac6, MAE,
// e4m3_max 448) measures the error through RN(1/G): on this block of tools/te_oracle.py's binary32-wide data
// (the tensor amax 0x7F6A9536 beside it) it picks scale 0x5E and these codes, as its reference does, where TE's
// input-domain error picks 0x5A and codes 13 and 15 at elements 10 and 11.
TEST(FourOverSix, FlashInferDecodeScaleError) {
  const std::uint32_t bits[17] = {0x76F71EA7u, 0x31F3C7D4u, 0x98582389u, 0x4FE789F8u, 0xDC7E002Au, 0x64F4E98Au,
                                  0x3A19EDDFu, 0xD74194A9u, 0x72A985FBu, 0x39056653u, 0xFC950CCEu, 0xFD2062FFu,
                                  0xAE44C59Bu, 0x83019F65u, 0x11A915EDu, 0x29DA5137u, 0x7F6A9536u};
  std::vector<float> x(32, 0.0f);
  for (std::size_t i = 0; i < 17; ++i) x[i] = std::bit_cast<float>(bits[i]);
  const std::uint8_t flashinfer[16] = {0, 0, 0, 0, 8, 0, 0, 8, 0, 0, 12, 14, 0, 0, 0, 0};
  Recipe r = preset("nvfp4-4over6");
  r.element_specials = SpecialConvention::te_python;
  for (const auto domain : {FourOverSixErrorDomain::decode_scale, FourOverSixErrorDomain::input}) {
    r.four_over_six_error = domain;
    const bool decode = domain == FourOverSixErrorDomain::decode_scale;
    QuantizeRequest request;
    request.spec = operand_for_role(r, Role::activation);
    request.spec.target = 448.0f;
    const auto q = quantize(r, request, x, 1, 32);
    EXPECT_EQ(q.scales[0], decode ? 0x5E : 0x5A) << name_of(domain);
    EXPECT_EQ(q.scales[1], 0x7E);
    for (std::size_t c = 0; c < 16; ++c) {
      const bool moved = c == 10 || c == 11;
      EXPECT_EQ(q.code(0, c), flashinfer[c] + (!decode && moved ? 1 : 0)) << name_of(domain) << " " << c;
    }
  }
}

TEST(PeriodicScaling, RefreshSteps) {
  EXPECT_TRUE(is_refresh_step(1, 50));
  EXPECT_FALSE(is_refresh_step(50, 50));
  EXPECT_TRUE(is_refresh_step(51, 50));
  EXPECT_EQ(refresh_step_for(1, 50), 1);
  EXPECT_EQ(refresh_step_for(50, 50), 1);
  EXPECT_EQ(refresh_step_for(51, 50), 51);
  EXPECT_EQ(refresh_step_for(200, 50), 151);
  EXPECT_EQ(refresh_step_for(7, 1), 7);
  // a trace's @step is 64-bit: 4294967306 = 2^32 + 10 is not step 10
  EXPECT_EQ(refresh_step_for(4294967306, 1), 4294967306);
  EXPECT_EQ(refresh_step_for(4294967306, 50), 4294967301);
  EXPECT_FALSE(is_refresh_step(4294967306, 50));
}

// Proposition 1 (paper §5.2): with held amax g and growth rho = a/g, a block is unsaturated iff
// T * rho <= U. UE4M3 (U = T = 448) saturates for any growth; UE5M3 stays clean up to 61440/448 = 137x.
TEST(PeriodicScaling, PropositionOne) {
  for (const char* scale_name : {"ue4m3", "ue5m3"}) {
    Recipe r = preset("ue5m3");
    r.scale = *parse_format(scale_name);
    const float held = 2.0f;
    for (const float rho : {1.0f, 1.01f, 1.5f, 10.0f, 137.0f, 138.0f, 1000.0f}) {
      std::vector<float> x(16, 0.25f);
      x[0] = held * rho;
      const auto q = quantize_with(r, Role::activation, x, 1, 16, held);
      const double bound = decode_to_double(r.scale, r.scale.max_finite_code());
      // exact ideal code a*T/g in real numbers; the FP32 order can push it one ulp past T at rho = 1.
      const bool predicted = 448.0 * rho > bound * (1 + 1e-6);
      EXPECT_EQ(q.counts.scale_saturated == 1, predicted) << scale_name << " rho=" << rho;
    }
  }
}

// |x - dequantize(quantize(x))| <= bound * block_amax for every element of blocks whose scale is normal,
// with the bounds derived in docs/recipes.md.
TEST(RoundTrip, WorstCaseErrorBound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> log_scale(-6.0f, 6.0f);
  const std::size_t rows = 64, cols = 96;
  std::vector<float> x(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const float s = std::exp2(log_scale(rng));
    for (std::size_t c = 0; c < cols; ++c) x[r * cols + c] = normal(rng) * s;
  }
  for (const Recipe& r : recipe_presets()) {
    for (Role role : {Role::activation, Role::weight, Role::grad_output}) {
      const auto q = quantize_with(r, role, x, rows, cols);
      const auto d = dequantize(q);
      const bool pow2 = r.scale.specials == Specials::pow2_nan;
      const bool stochastic = is_stochastic(q.spec.rounding);
      // RNE: half the top E2M1 step (1 of 6 units) with a scale rounded by <= 2^-4 relative; SR: a whole
      // step. Power-of-two floor scales can put the block max at up to 8 units (clipped to 6).
      const double bound = pow2 ? 0.5 : (stochastic ? 2.0 : 1.0) * 1.0625 / 6.0 * (1 + 1e-6);
      for (std::size_t i = 0; i < rows; ++i) {
        for (std::size_t j = 0; j < cols; ++j) {
          double block_amax = 0;
          const std::size_t r0 = i / q.block_rows * q.block_rows, c0 = j / q.block_cols * q.block_cols;
          for (std::size_t a = r0; a < std::min(rows, r0 + q.block_rows); ++a) {
            for (std::size_t b = c0; b < std::min(cols, c0 + q.block_cols); ++b) {
              block_amax = std::max(block_amax, std::fabs(static_cast<double>(x[a * cols + b])));
            }
          }
          const double err = std::fabs(static_cast<double>(d[i * cols + j]) - x[i * cols + j]);
          ASSERT_LE(err, bound * block_amax) << r.name << " role " << name_of(role) << " at " << i << "," << j;
        }
      }
    }
  }
}

TEST(Rht, OrthonormalOnExactInputs) {
  // (diag(s) H16 / 4) is orthonormal: applying it to e_k gives row k, whose squared norm is 1.
  for (int k = 0; k < 16; ++k) {
    std::vector<float> e(16, 0.0f);
    e[k] = 1.0f;
    const auto t = random_hadamard_transform(e, 1, 16);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(t[j], 0.25f * kRhtSigns[k] * hadamard16(k, j)) << k << "," << j;
  }
}

TEST(Rht, SumsInAscendingOrderThenBf16) {
  // 2^-10 cancelled against 1 in ascending order: ((1 + 2^-25) - 1) loses 2^-25 in binary32 before BF16.
  std::vector<float> x(16, 0.0f);
  x[0] = 4.0f;          // contributes 1 * s0 * H[0][j]
  x[1] = 0x1p-23f;      // 2^-25 after the 0.25 factor: below binary32's half-ulp of 1
  const auto t = random_hadamard_transform(x, 1, 16);
  EXPECT_EQ(t[0], 1.0f);
}

TEST(StochasticRounding, ExplicitBitsDecideTheCode) {
  const Recipe r = preset("nvfp4-norht");  // dY: sr-fastest
  std::vector<float> x(16, 0.0f);
  x[0] = 6.0f;   // block amax -> scale gives y(x[0]) = 6 (approximately)
  x[1] = 1.25f;  // scaled y about 1.25: between 1 and 1.5, delta = 0.5
  std::vector<std::uint32_t> low(16, 0), high(16, 255);
  const auto q_low = quantize_with(r, Role::grad_output, x, 1, 16, std::nullopt, low);
  const auto q_high = quantize_with(r, Role::grad_output, x, 1, 16, std::nullopt, high);
  EXPECT_EQ(q_low.code(0, 1), 0b0'01'0);   // r = 0: floor(256 * 0.5) + 0 < 256 -> down to 1
  EXPECT_EQ(q_high.code(0, 1), 0b0'01'1);  // r = 255: up to 1.5
}

// ------------------------------------------------------------------------------------------------
// The trace: what each block and element used, checked against values derived here by hand.

QuantizedTensor traced(const Recipe& r, std::span<const float> x, std::size_t rows, std::size_t cols,
                       QuantizeTrace& trace) {
  QuantizeRequest request;
  request.spec = operand_for_role(r, Role::activation);
  return quantize(r, request, x, rows, cols, &trace);
}

// Row scope: G = RN(RN(6 * 448) / row amax) per row, 2688 / 6 = 448 for row 0 and 2688 / 3 = 896 for
// row 1; each block's amax is its row's, so both get the scale 448 (0x7E), where one tensor G = 448 would
// give row 1 the scale 224.
TEST(QuantizeTrace, RowScopeReportsEachRowsG) {
  Recipe r = preset("nvfp4-norht");
  r.amax_scope = AmaxScope::row;
  std::vector<float> x(32, 0.5f);
  x[4] = -6.0f;
  x[16 + 9] = 3.0f;
  QuantizeTrace trace;
  const auto q = traced(r, x, 2, 16, trace);
  ASSERT_EQ(trace.blocks.size(), 2u);
  EXPECT_EQ(trace.block(0, 0).global_amax, 6.0f);
  EXPECT_EQ(trace.block(1, 0).global_amax, 3.0f);
  EXPECT_EQ(trace.block(0, 0).global.encode, 448.0f);
  EXPECT_EQ(trace.block(1, 0).global.encode, 896.0f);
  EXPECT_EQ(trace.block(1, 0).global.decode, 1.0f / 896.0f);
  for (std::size_t row = 0; row < 2; ++row) {
    EXPECT_EQ(trace.block(row, 0).scale.code, 0x7E) << row;
    EXPECT_EQ(q.scales[row], 0x7E) << row;
  }
  // y = RN(x * RN(1 / RN(448 * Gd))), each step one binary32 operation.
  const float m1 = 1.0f / (448.0f * (1.0f / 896.0f));
  EXPECT_EQ(trace.block(1, 0).scale.multiplier, m1);
  EXPECT_EQ(trace.scaled[16 + 9], 3.0f * m1);
  EXPECT_EQ(trace.x, x);
}

// ElementScaling::division: d = RN(s * Gd) and y = RN(x / d) for every element.
TEST(QuantizeTrace, DivisionReportsTheDivisor) {
  Recipe r = preset("nvfp4-norht");
  r.element_scaling = ElementScaling::division;
  std::vector<float> x(32);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.3f * static_cast<float>(i) - 4.1f;
  QuantizeTrace trace;
  const auto q = traced(r, x, 1, 32, trace);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const BlockTrace& b = trace.block(0, i / 16);
    const float d = decode_to_float(r.scale, q.scales[i / 16]) * q.global_decode_scale;
    ASSERT_EQ(b.scale.divisor, d) << i;
    EXPECT_EQ(trace.scaled[i], x[i] / d) << i;
    EXPECT_EQ(encode(r.element, trace.scaled[i], EncodeOptions{Rounding::rne, true}).code, q.code(0, i)) << i;
  }
}

// 4over6 (MAE) with tensor amax 6 (G = 448). Block 1 has amax 4: base = RN(RN(4/6) * 448) = 298.666..., whose
// RNE in UE4M3 is 288 (0x79, map-to-6); RN(base * 1.5) is one ulp above 448 and saturates to 448 (0x7E,
// map-to-4). Under 448 the multiplier is 1 within an ulp and the block's values 4, 2, 1, 0.5, 3 keep
// their e2m1 codes (error 0); under 288 they scale by 14/9 and miss, so map-to-4 wins. Block 0 (amax 6) keeps map-to-6 = 448 (its map-to-4 saturates
// to the same code, the same error: a tie keeps map-to-6).
TEST(QuantizeTrace, FourOverSixReportsBothCandidates) {
  Recipe r = preset("nvfp4-norht");
  r.block_choice = BlockScaleChoice::four_over_six_mae;
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;
  const float block1[] = {4.0f, 2.0f, 1.0f, 0.5f, 3.0f, -2.0f};
  std::copy(std::begin(block1), std::end(block1), x.begin() + 16);
  QuantizeTrace trace;
  const auto q = traced(r, x, 1, 32, trace);
  ASSERT_TRUE(trace.block(0, 1).four_over_six);
  const FourOverSixTrace& c = *trace.block(0, 1).four_over_six;
  EXPECT_GT(c.map6_trace.ideal, 298.66f);
  EXPECT_LT(c.map6_trace.ideal, 298.67f);
  EXPECT_EQ(c.map6.code, 0x79);
  EXPECT_GT(c.map4_trace.ideal, 448.0f);
  EXPECT_EQ(c.map4.code, 0x7E);
  EXPECT_TRUE(c.map4.saturated);
  EXPECT_EQ(c.map4_error, 0.0f);
  EXPECT_GT(c.map6_error, 0.0f);
  EXPECT_TRUE(c.map4_chosen);
  EXPECT_EQ(trace.block(0, 1).scale.code, 0x7E);
  EXPECT_EQ(trace.block(0, 1).trace.ideal, c.map4_trace.ideal);
  EXPECT_EQ(q.scales[1], 0x7E);
  const float m = 1.0f / (448.0f * (1.0f / 448.0f));  // RN(1 / RN(448 * Gd)), Gd = RN(1 / 448)
  for (std::size_t j = 0; j < 6; ++j) EXPECT_EQ(trace.scaled[16 + j], block1[j] * m) << j;
  ASSERT_TRUE(trace.block(0, 0).four_over_six);
  EXPECT_FALSE(trace.block(0, 0).four_over_six->map4_chosen);
  EXPECT_EQ(trace.block(0, 0).four_over_six->map4_error, trace.block(0, 0).four_over_six->map6_error);
}

// Asking for the trace changes no byte.
TEST(QuantizeTrace, SameBytesWithAndWithoutIt) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(32 * 48);
  for (float& v : x) v = normal(rng);
  for (const Recipe& r : recipe_presets()) {
    for (Role role : {Role::activation, Role::weight, Role::grad_output}) {
      QuantizeRequest request;
      request.spec = operand_for_role(r, role);
      QuantizeTrace trace;
      const auto with = quantize(r, request, x, 32, 48, &trace);
      const auto without = quantize(r, request, x, 32, 48);
      EXPECT_EQ(with.codes, without.codes) << r.name << " " << name_of(role);
      EXPECT_EQ(with.scales, without.scales) << r.name << " " << name_of(role);
      ASSERT_EQ(trace.blocks.size(), with.scales.size());
      for (std::size_t b = 0; b < trace.blocks.size(); ++b) ASSERT_EQ(trace.blocks[b].scale.code, with.scales[b]);
    }
  }
}

}  // namespace
}  // namespace fp4sim
