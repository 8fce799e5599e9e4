// The probe experiments of docs/datapaths.md §7 (H200, sm_90) and §7.1 (B200 mxf4nvf4), each with
// the bit pattern the consensus model predicts, run through the golden preset rows. Where §7 lists
// competing predictions (O3 alignment floor, O4 sign of zero, O5 overflow, O8 zeros in E_max; O9-O11 of
// §7.4) the row's choice is pinned here, and the alternative parameter value is shown to give the other
// prediction, so an H200 measurement can decide by flipping one field.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"

namespace fp4sim {
namespace {

std::uint32_t f32(double v) { return std::bit_cast<std::uint32_t>(static_cast<float>(v)); }

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

const Datapath& row(std::string_view name) {
  const Datapath* dp = find_datapath(name);
  if (!dp) throw std::runtime_error("no datapath " + std::string(name));
  return *dp;
}

// One MMA with the test vector in A row 0 / B column 0 (everything else zero), D[0][0] returned as
// FP32 bits. K is padded with zeros to whole instructions.
std::uint32_t probe(const Datapath& dp, std::string_view input, std::vector<double> a, std::vector<double> b,
                    std::uint32_t c_bits, std::size_t instructions = 1) {
  const auto spec = find_input(dp, input);
  if (!spec) throw std::runtime_error("row does not take " + std::string(input));
  const std::size_t k = static_cast<std::size_t>(spec->instruction_k) * instructions;
  a.resize(k, 0.0);
  b.resize(k, 0.0);
  const Format fmt = spec->format;
  const InputCodes ca = input_codes(fmt, a), cb = input_codes(fmt, b);
  if (ca.first_unrepresentable || cb.first_unrepresentable) throw std::runtime_error("probe input not representable");
  return tfdpa_dot(dp, fmt, ca.codes, cb.codes, c_bits);
}

#define EXPECT_BITS(actual, expected) EXPECT_EQ(hex(actual), hex(expected))

// Probe 1: C passes through zero products unchanged; NaN becomes canonical; C = -0 gives +0 (O4).
TEST(Probe1, CPassThroughAndSignOfZero) {
  const Datapath& dp = row("sm90-bf16");
  const std::uint32_t cs[] = {0x3F800000u, 0xBF800001u, 0x00000001u, 0x807FFFFFu, 0x00400000u, 0x7F7FFFFFu,
                              0xFF7FFFFFu, 0x12345678u, 0x9ABCDEF0u, 0x7F800000u, 0xFF800000u};
  for (std::uint32_t c : cs) EXPECT_BITS(probe(dp, "bf16", {0.0}, {0.0}, c), c);
  for (std::uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7FA5A5A5u})
    EXPECT_BITS(probe(dp, "bf16", {0.0}, {0.0}, nan), 0x7FFFFFFFu);
  EXPECT_BITS(probe(dp, "bf16", {0.0}, {0.0}, 0x00000000u), 0x00000000u);
  EXPECT_BITS(probe(dp, "bf16", {0.0}, {0.0}, 0x80000000u), 0x00000000u);  // O4: -0 -> +0
  // FP8 wgmma: D = C with the low 10 fraction bits cleared.
  const Datapath& fp8 = row("sm90-fp8");
  EXPECT_BITS(probe(fp8, "e4m3", {0.0}, {0.0}, 0x3F800001u), 0x3F800000u);  // 1 + 2^-23
  EXPECT_BITS(probe(fp8, "e4m3", {0.0}, {0.0}, f32(1.0 + std::ldexp(1.0, -13))), 0x3F800400u);
  EXPECT_BITS(probe(fp8, "e4m3", {0.0}, {0.0}, 0xBF8007FFu), 0xBF800400u);
}

// Probe 2: alignment width F and joint alignment of C.
TEST(Probe2, AlignmentWidthIs25AndCJoinsTheAlignment) {
  const Datapath& dp = row("sm90-bf16");
  const double m = 128.0;  // products +-2^14 cancel
  for (int e = 14; e >= -20; --e) {
    const std::uint32_t expected = e >= -11 ? f32(std::ldexp(1.0, e)) : 0u;
    EXPECT_BITS(probe(dp, "bf16", {m, -m}, {m, m}, f32(std::ldexp(1.0, e))), expected) << "C = 2^" << e;
    // The small term as a third product instead of C: the same threshold.
    const int ea = (e + (e > 0 ? 1 : 0)) / 2, eb = e - ea;
    EXPECT_BITS(probe(dp, "bf16", {m, -m, std::ldexp(1.0, ea)}, {m, m, std::ldexp(1.0, eb)}, 0u), expected)
        << "product 2^" << e;
  }
  EXPECT_BITS(probe(dp, "bf16", {m, -m}, {m, m}, f32(std::ldexp(1.0, -11))), 0x3A000000u);
  // Ampere-like F = 24 would stop at e = -10.
  Datapath f24 = dp;
  f24.fused.frac_bits = 24;
  EXPECT_BITS(probe(f24, "bf16", {m, -m}, {m, m}, f32(std::ldexp(1.0, -11))), 0u);
  // FP8 (wgmma e4m3): products +-2^8; C = 2^-5 survives, 2^-6 does not => F = 13.
  const Datapath& fp8 = row("sm90-fp8");
  EXPECT_BITS(probe(fp8, "e4m3", {16.0, -16.0}, {16.0, 16.0}, f32(std::ldexp(1.0, -5))), f32(std::ldexp(1.0, -5)));
  EXPECT_BITS(probe(fp8, "e4m3", {16.0, -16.0}, {16.0, 16.0}, f32(std::ldexp(1.0, -6))), 0u);
}

// Probe 3: the aligned addends are truncated toward zero (sign-magnitude).
TEST(Probe3, AddendsTruncateTowardZero) {
  const Datapath& dp = row("sm90-bf16");
  const double u = std::ldexp(1.0, -11);
  const double m = 128.0;
  const double cs[] = {0.75 * u, -0.75 * u, 0.25 * u, 0.5 * u, -0.5 * u, 1.5 * u};
  const std::uint32_t expected[] = {0u, 0u, 0u, 0u, 0u, 0x3A000000u};
  for (int i = 0; i < 6; ++i) EXPECT_BITS(probe(dp, "bf16", {m, -m}, {m, m}, f32(cs[i])), expected[i]) << cs[i] / u;
  // The AMD-style alternative (two's-complement floor) sends -0.75u to -u.
  Datapath floor = dp;
  floor.fused.addend = AddendRounding::floor_twos;
  EXPECT_BITS(probe(floor, "bf16", {m, -m}, {m, m}, f32(-0.75 * u)), 0xBA000000u);
}

// Probe 4: one final rounding, RZ for FP32 output, RNE for FP16 output.
TEST(Probe4, FinalRoundingRzForFp32RneForFp16) {
  const Datapath& dp = row("sm90-bf16");
  const double c = 1.0 + std::ldexp(1.0, -22) + std::ldexp(1.0, -23);
  EXPECT_BITS(probe(dp, "bf16", {1, 1, 1, 1}, {1, 1, 1, 1}, f32(c)), 0x40A00000u);
  EXPECT_BITS(probe(dp, "bf16", {1, 1, 1, 1}, {-1, -1, -1, -1}, f32(-c)), 0xC0A00000u);
  const Datapath& h = row("sm90-f16acc");
  const double ch = 1.0 + std::ldexp(1.0, -9) + std::ldexp(1.0, -10);
  EXPECT_BITS(probe(h, "fp16", {1, 1, 1, 1}, {1, 1, 1, 1}, f32(ch)), f32(5.0 + std::ldexp(1.0, -8)));
  EXPECT_BITS(probe(h, "fp16", {1, 1, 1, 1}, {-1, -1, -1, -1}, f32(-ch)), f32(-5.0 - std::ldexp(1.0, -8)));
}

// Probe 5: all 16 products of a k16 instruction are fused with C (G = 16); RZ between instructions.
TEST(Probe5, GroupSizeIs16AndInstructionsRoundBetween) {
  const Datapath& dp = row("sm90-bf16");
  const std::uint32_t c = 0x3F800001u;  // 1 + 2^-23
  for (int j = 1; j < 16; ++j) {
    std::vector<double> a(16, 0.0), b(16, 0.0);
    a[0] = b[0] = 1.0;
    a[j] = std::ldexp(1.0, -23);
    b[j] = 1.0;
    EXPECT_BITS(probe(dp, "bf16", a, b, c), 0x40000001u) << "j = " << j;
    // Ampere's 8+8 split drops the term from j = 8 on.
    EXPECT_BITS(probe(row("sm80"), "bf16", a, b, c), j < 8 ? 0x40000001u : 0x40000000u) << "sm80 j = " << j;
  }
  for (int j = 16; j < 32; ++j) {  // the small term in the second chained instruction
    std::vector<double> a(32, 0.0), b(32, 0.0);
    a[0] = b[0] = 1.0;
    a[j] = std::ldexp(1.0, -23);
    b[j] = 1.0;
    EXPECT_BITS(probe(dp, "bf16", a, b, c, 2), 0x40000000u) << "j = " << j;
  }
  // FP8 (G = 32, e8m13 output): C = 1 + 2^-13, a0 = b0 = 1, one product 2^-13 anywhere in the k32
  // instruction: 2 + 2^-12 survives only if all 32 products are fused with C.
  const Datapath& fp8 = row("sm90-fp8");
  for (int j = 1; j < 32; ++j) {
    std::vector<double> a(32, 0.0), b(32, 0.0);
    a[0] = b[0] = 1.0;
    a[j] = std::ldexp(1.0, -7);  // e4m3 subnormal
    b[j] = std::ldexp(1.0, -6);
    EXPECT_BITS(probe(fp8, "e4m3", a, b, f32(1.0 + std::ldexp(1.0, -13))), 0x40000400u) << "fp8 j = " << j;
  }
}

// Probe 6 (FPRev / MMA-Sim is_fused_dot_add): every y^2 term is swamped by the X^2 group.
TEST(Probe6, SummationTreeIsOneFusedGroup) {
  const Datapath& dp = row("sm90-bf16");
  const double x = 128.0, y = std::ldexp(1.0, -9);
  for (int i = 0; i < 16; ++i) {
    std::vector<double> a(16, y), b(16, y);
    a[i] = b[i] = x;
    EXPECT_BITS(probe(dp, "bf16", a, b, f32(-x * x)), 0u) << "i = " << i;
  }
  // With G = 8 the y^2 terms of the other half survive: 8 * 2^-18 = 2^-15.
  Datapath g8 = dp;
  g8.fused.group = 8;
  std::vector<double> a(16, y), b(16, y);
  a[0] = b[0] = x;
  EXPECT_BITS(probe(g8, "bf16", a, b, f32(-x * x)), f32(8 * y * y));
}

// Probe 7: alignment uses ea + eb (products not renormalised).
TEST(Probe7, AlignmentOnUnnormalisedProducts) {
  const Datapath& dp = row("sm90-bf16");
  const std::uint32_t c = f32(std::ldexp(1.0, -12));
  EXPECT_BITS(probe(dp, "bf16", {64, -64}, {128, 128}, c), 0x39800000u);                 // calibration
  EXPECT_BITS(probe(dp, "bf16", {1.5 * 64, -1.5 * 64}, {1.5 * 128, 1.5 * 128}, c), 0x39800000u);  // test
  EXPECT_BITS(probe(dp, "bf16", {2.25 * 64, -2.25 * 64}, {128, 128}, c), 0u);            // control
  Datapath normalised = dp;
  normalised.fused.product_unnormalized = false;
  EXPECT_BITS(probe(normalised, "bf16", {1.5 * 64, -1.5 * 64}, {1.5 * 128, 1.5 * 128}, c), 0u);
}

// Probe 8: per-addend truncation, not RZ of the exact sum.
TEST(Probe8, PerAddendTruncationIsNotRzOfTheSum) {
  const Datapath& dp = row("sm90-bf16");
  EXPECT_BITS(probe(dp, "bf16", {-std::ldexp(1.0, -26)}, {1.0}, 0x3F800000u), 0x3F800000u);
  EXPECT_BITS(probe(dp, "bf16", {-std::ldexp(1.0, -25)}, {1.0}, 0x3F800000u), 0x3F7FFFFFu);
}

// Probe 9: subnormals are honoured; the alignment floor (O3) is Khattak–Mikaitis's -133.
TEST(Probe9, SubnormalsAndTheAlignmentFloor) {
  const Datapath& dp = row("sm90-bf16");
  EXPECT_BITS(probe(dp, "bf16", {std::ldexp(1.0, -133)}, {128.0}, 0u), 0x00800000u);  // (a)
  EXPECT_BITS(probe(dp, "bf16", {std::ldexp(1.0, -126)}, {0.5}, 0u), 0x00400000u);    // (b)
  for (std::uint32_t c : {0x00000001u, 0x007FFFFFu, 0x80000003u})                      // (c)
    EXPECT_BITS(probe(dp, "bf16", {0.0}, {0.0}, c), c);
  // (d) 8 products of 2^-152, C = +0: our choice (K–M floor -133, zero C ignored) gives 2^-149.
  const std::vector<double> tiny(8, std::ldexp(1.0, -76));
  EXPECT_BITS(probe(dp, "bf16", tiny, tiny, 0u), 0x00000001u);
  // MMA-Sim HEAD's rule (a zero C has exponent -126 and sets the window) predicts 0.
  Datapath mmasim = dp;
  mmasim.fused.zero_exponent = -126;
  mmasim.fused.e_floor = kNoExponent;
  EXPECT_BITS(probe(mmasim, "bf16", tiny, tiny, 0u), 0u);
  // 4 products of 2^-151: both predict 2^-149.
  const std::vector<double> a4(4, std::ldexp(1.0, -75)), b4(4, std::ldexp(1.0, -76));
  EXPECT_BITS(probe(dp, "bf16", a4, b4, 0u), 0x00000001u);
  EXPECT_BITS(probe(mmasim, "bf16", a4, b4, 0u), 0x00000001u);
}

// Probe 10: specials and overflow (O5: Inf, as measured on H200).
TEST(Probe10, SpecialsAndOverflow) {
  const Datapath& dp = row("sm90-bf16");
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // NaN payloads in A (as bf16 codes: several payloads).
  for (std::uint32_t payload : {0x7FC1u, 0x7F81u, 0xFFFFu}) {
    std::vector<std::uint32_t> a(16, 0), b(16, 0);
    a[0] = payload;
    b[0] = 0x3F80;
    EXPECT_BITS(tfdpa_dot(dp, formats::bf16, a, b, 0u), 0x7FFFFFFFu);
  }
  EXPECT_BITS(probe(dp, "bf16", {nan}, {1.0}, 0u), 0x7FFFFFFFu);
  EXPECT_BITS(probe(dp, "bf16", {inf, -inf}, {1.0, 1.0}, 0u), 0x7FFFFFFFu);  // Inf - Inf
  EXPECT_BITS(probe(dp, "bf16", {0.0}, {inf}, 0u), 0x7FFFFFFFu);             // 0 * Inf
  EXPECT_BITS(probe(dp, "bf16", {inf, 1.0}, {1.0, 1.0}, 0u), 0x7F800000u);
  EXPECT_BITS(probe(dp, "bf16", {inf}, {-2.0}, 0x3F800000u), 0xFF800000u);
  const double big = std::ldexp(1.0, 127);
  EXPECT_BITS(probe(dp, "bf16", {big, big}, {1.0, 1.0}, 0u), 0x7F800000u);  // 2^128 -> +Inf, not FLT_MAX
  EXPECT_BITS(probe(dp, "bf16", {-big, -big}, {1.0, 1.0}, 0u), 0xFF800000u);
  // C = FLT_MAX plus 2^127 overflows to Inf; minus one FLT_MAX ulp (2^104) stays finite.
  EXPECT_BITS(probe(dp, "bf16", {big}, {1.0}, 0x7F7FFFFFu), 0x7F800000u);
  EXPECT_BITS(probe(dp, "bf16", {-std::ldexp(1.0, 104)}, {1.0}, 0x7F7FFFFFu), 0x7F7FFFFEu);
  // Below 2^128 RZ keeps FLT_MAX: FLT_MAX + half an ulp truncates.
  EXPECT_BITS(probe(dp, "bf16", {std::ldexp(1.0, 103)}, {1.0}, 0x7F7FFFFFu), 0x7F7FFFFFu);
  Datapath saturating = dp;
  saturating.fused.overflow_to_inf = false;
  EXPECT_BITS(probe(saturating, "bf16", {big, big}, {1.0, 1.0}, 0u), 0x7F7FFFFFu);
}

// Probe 11 (O8): zero operands take no part in E_max (K–M, old MMA-Sim); MMA-Sim HEAD would give 0.
TEST(Probe11, ZeroOperandsDoNotRaiseEmax) {
  const Datapath& dp = row("sm90-bf16");
  const std::uint32_t c = f32(std::ldexp(1.0, -25));
  EXPECT_BITS(probe(dp, "bf16", {1.0, -1.0, 0.0}, {1.0, 1.0, std::ldexp(1.0, 127)}, c), 0x33000000u);
  Datapath mmasim = dp;
  mmasim.fused.zero_exponent = -126;
  EXPECT_BITS(probe(mmasim, "bf16", {1.0, -1.0, 0.0}, {1.0, 1.0, std::ldexp(1.0, 127)}, c), 0u);
}

// §7.4 (issue 25): the witnesses the H200 gave, each beside the rule it overturned.
// O9: no Hopper result is -0, not even an underflowing negative sum or an f16 tie to zero.
TEST(ProbeO9, HopperZeroResultsArePositive) {
  const double tiny = std::ldexp(1.0, -75);
  for (const char* name : {"sm90-bf16", "sm90-tf32"}) {
    const Datapath& dp = row(name);
    const char* input = std::string_view(name) == "sm90-bf16" ? "bf16" : "tf32";
    EXPECT_BITS(probe(dp, input, {-tiny}, {tiny}, 0u), 0x00000000u) << name;  // -2^-150 under RZ
    Datapath ieee = dp;
    ieee.fused.zero_result = ZeroResult::signed_underflow;
    EXPECT_BITS(probe(ieee, input, {-tiny}, {tiny}, 0u), 0x80000000u) << name;
    EXPECT_BITS(probe(dp, input, {-0.0}, {1.0}, 0x80000000u), 0x00000000u) << name;  // -0*1 + (-0)
  }
  const Datapath& f16acc = row("sm90-f16acc");
  EXPECT_BITS(probe(f16acc, "fp16", {-std::ldexp(1.0, -12)}, {std::ldexp(1.0, -13)}, 0u), 0x00000000u);  // tie
  Datapath ieee = f16acc;
  ieee.fused.zero_result = ZeroResult::signed_underflow;
  EXPECT_BITS(probe(ieee, "fp16", {-std::ldexp(1.0, -12)}, {std::ldexp(1.0, -13)}, 0u), 0x80000000u);
  // Rows no measurement has decided keep IEEE's sign (docs/datapaths.md §6.3, O9).
  EXPECT_BITS(probe(row("sm100-f16"), "bf16", {-tiny}, {tiny}, 0u), 0x80000000u);
}

// O10: a TF32 row truncates the binary32 register it reads, NaNs included: 0x7F800001 is +Inf.
TEST(ProbeO10, Tf32NanPayloadBelowTheCutIsInf) {
  const Datapath& dp = row("sm90-tf32");
  auto run = [&](std::uint32_t a0, std::uint32_t b0, std::uint32_t a1 = 0, std::uint32_t b1 = 0) {
    const std::vector<double> a{widen_binary32(a0), widen_binary32(a1), 0, 0, 0, 0, 0, 0};
    const std::vector<double> b{widen_binary32(b0), widen_binary32(b1), 0, 0, 0, 0, 0, 0};
    const InputCodes ca = input_codes(formats::fp32, a), cb = input_codes(formats::fp32, b);
    EXPECT_FALSE(ca.first_unrepresentable || cb.first_unrepresentable);
    EXPECT_EQ(ca.codes[0], a0);  // the reader keeps the pattern (a signalling NaN stays one)
    return tfdpa_dot(dp, formats::fp32, ca.codes, cb.codes, 0u);
  };
  const std::uint32_t one = 0x3F800000u, minus_one = 0xBF800000u;
  EXPECT_BITS(run(0x7F800001u, one), 0x7F800000u);
  EXPECT_BITS(run(0x7F800001u, minus_one), 0xFF800000u);
  EXPECT_BITS(run(0xFF801FFFu, one), 0xFF800000u);
  EXPECT_BITS(run(0x7F800001u, 0u), 0x7FFFFFFFu);                      // Inf * 0
  EXPECT_BITS(run(0x7F800001u, one, 0xFF800000u, one), 0x7FFFFFFFu);  // Inf - Inf
  EXPECT_BITS(run(0x7F802000u, one), 0x7FFFFFFFu);                    // payload above the cut: NaN
  // A double NaN whose payload binary32 cannot hold is refused, not rounded to some pattern.
  const std::vector<double> odd{std::bit_cast<double>(0x7FF0000000000001ull)};
  EXPECT_TRUE(input_codes(formats::fp32, odd).first_unrepresentable.has_value());
}

// O11: a subnormal fp16 accumulator enters the alignment at fp16's emin -14, not at its leading bit.
TEST(ProbeO11, SubnormalFp16CAlignsAtMinus14) {
  const Datapath& dp = row("sm90-f16acc");
  const std::vector<double> a{std::ldexp(1.0, -12), std::ldexp(1.0, -20)}, b{std::ldexp(1.0, -13), std::ldexp(1.0, -20)};
  const std::uint32_t c = f32(std::ldexp(1.0, -23));
  EXPECT_BITS(probe(dp, "fp16", a, b, c), f32(2 * std::ldexp(1.0, -24)));  // H200 0x0002
  Datapath leading_bit = dp;
  leading_bit.fused.c_at_accumulator_emin = false;
  EXPECT_BITS(probe(leading_bit, "fp16", a, b, c), f32(3 * std::ldexp(1.0, -24)));  // the old 0x0003
  // The E_max floor -21 witness (C = +0): H200 0x0101.
  EXPECT_BITS(probe(dp, "fp16", {std::ldexp(1.0, -8), std::ldexp(1.0, -12), std::ldexp(1.0, -20)},
                    {std::ldexp(1.0, -8), std::ldexp(1.0, -13), std::ldexp(1.0, -20)}, 0u),
              f32(257 * std::ldexp(1.0, -24)));
}

// ---------------------------------------------------------------------------------------------------
// §7.1: Blackwell kind::mxf4nvf4 (GST-FDPA), through gst_step with e2m1 sub-block sums. A sub-block
// sum is an integer count of 2^-2 (e2m1 products are multiples of 0.25).

constexpr std::uint32_t kUe4m3One = 0b0'0111'000;  // 1.0
constexpr std::uint32_t kE8m0One = 127;

std::uint32_t gst(const Datapath& dp, const Format& scale, std::vector<SubblockSum> sums, std::uint32_t c = 0) {
  return gst_step(dp, scale, 2, sums, c);
}

TEST(ProbeB1, SubBlockSumsAreExact) {
  const Datapath& dp = row("sm100-mxf4nvf4");
  // 15 * 6*6 + 0.5*0.5 = 540.25 = 2161 quarters; scales 1, C = 0.
  EXPECT_BITS(gst(dp, formats::ue4m3, {{2161, kUe4m3One, kUe4m3One}, {0, kUe4m3One, kUe4m3One}}), f32(540.25));
}

TEST(ProbeB2, CrossBlockWindowIs35Bits) {
  const Datapath& dp = row("sm100-mxf4nvf4");
  for (int d = 0; d <= 40; ++d) {
    const std::uint32_t small_scale = static_cast<std::uint32_t>(127 - d);  // 2^-d, UE8M0
    const std::uint32_t got = gst(dp, formats::e8m0,
                                  {{4, kE8m0One, kE8m0One}, {-4, kE8m0One, kE8m0One}, {1, small_scale, kE8m0One}, {0, kE8m0One, kE8m0One}});
    EXPECT_BITS(got, d <= 33 ? f32(std::ldexp(0.25, -d)) : 0u) << "d = " << d;
  }
}

TEST(ProbeB3, CIsTruncatedWhenEmaxIsMoreThan12Above) {
  const Datapath& dp = row("sm100-mxf4nvf4");
  for (int e : {12, 13}) {
    const std::uint32_t s = static_cast<std::uint32_t>(127 + e);
    const std::vector<SubblockSum> cancel{{4, s, kE8m0One}, {-4, s, kE8m0One}};
    EXPECT_BITS(gst(dp, formats::e8m0, cancel, 0x3F800000u), 0x3F800000u) << "C = 1, scale 2^" << e;
    // C = 1 + 2^-23: its last bit survives at E_max - E_C = 12 and is cut at 13 [inference, §1.4].
    EXPECT_BITS(gst(dp, formats::e8m0, cancel, 0x3F800001u), e == 12 ? 0x3F800001u : 0x3F800000u) << e;
  }
}

TEST(ProbeB4, ScaleSignIgnoredAndNanScales) {
  const Datapath& dp = row("sm100-mxf4nvf4");
  const std::uint32_t neg_two = 0x80 | 0b0'1000'000;  // UE4M3 2.0 with the sign bit set
  EXPECT_BITS(gst(dp, formats::ue4m3, {{4, neg_two, kUe4m3One}}), f32(2.0));
  EXPECT_BITS(gst(dp, formats::ue4m3, {{4, 0x7F, kUe4m3One}}), 0x7FFFFFFFu);
  EXPECT_BITS(gst(dp, formats::ue4m3, {{4, kUe4m3One, 0xFF}}), 0x7FFFFFFFu);
  EXPECT_BITS(gst(dp, formats::e8m0, {{4, 0xFF, kE8m0One}}), 0x7FFFFFFFu);
  EXPECT_BITS(gst(dp, formats::e8m0, {{0, 0xFF, kE8m0One}}), 0x7FFFFFFFu);  // a NaN scale poisons even a zero sum
  EXPECT_BITS(gst(dp, formats::e8m0, {{4, kE8m0One, kE8m0One}}, 0x7FC00000u), 0x7FFFFFFFu);
}

TEST(ProbeB5, Block32HalvesAreExactSubSums) {
  const Datapath& dp = row("sm100-mxf4nvf4");
  // block32: two 16-halves share one UE8M0 scale pair. Half 0: 15*36 + 0.25 (2161 quarters); half 1:
  // -(0.25) (-1 quarter) at the same scale 2^20: the exact total 540 * 2^20 survives.
  const std::uint32_t s = 127 + 20;
  EXPECT_BITS(gst(dp, formats::e8m0, {{2161, s, kE8m0One}, {-1, s, kE8m0One}}), f32(540.0 * std::ldexp(1.0, 20)));
}

// ue5m3-native: every sub-block term survives over the whole UE5M3 range (F = 66): a 0.25 sum at the
// smallest scale product 2^-34 next to a cancelling pair at the largest (61440^2).
TEST(Ue5m3Native, WholeScaleRangeIsExact) {
  const Datapath& dp = row("ue5m3-native");
  const std::uint32_t top = 0b11110'111;  // 61440
  const std::uint32_t bottom = 0b00000'001;  // 2^-17 (subnormal)
  const std::vector<SubblockSum> sums{{2304, top, top}, {-2304, top, top}, {1, bottom, bottom}};
  EXPECT_BITS(gst(dp, formats::ue5m3, sums), f32(std::ldexp(0.25, -34)));
  // One bit narrower (F = 65) loses it: the design margin is exactly one bit.
  Datapath f65 = dp;
  f65.fused.frac_bits = 65;
  EXPECT_BITS(gst(f65, formats::ue5m3, sums), 0u);
}

// tcgen05 kind::f8f6f4 with an f16 accumulator (MMA-Sim: F = 25, RNE) against Hopper wgmma's F = 13: products
// 1*1, 2^-9*2^-2 = 2^-11 (half an fp16 ulp of 1: a tie) and 2^-9*2^-5 = 2^-14. F = 25 keeps the 2^-14 and
// rounds the tie up to 1 + 2^-10 (0x3C01); F = 13 cuts it, and the tie goes to even, 1.0.
TEST(DatapathTable, Fp8F16AccumulatorWindowOnBlackwell) {
  std::vector<std::uint32_t> a(32, 0), b(32, 0);
  a[0] = 0x38, b[0] = 0x38;  // e4m3 1.0
  a[1] = 0x01, b[1] = 0x28;  // 2^-9 * 2^-2
  a[2] = 0x01, b[2] = 0x10;  // 2^-9 * 2^-5
  EXPECT_BITS(tfdpa_dot(*find_datapath("sm100-f8f6f4-f16acc"), formats::e4m3, a, b, 0), 0x3F802000u);
  EXPECT_BITS(tfdpa_dot(*find_datapath("sm90-fp8-f16acc"), formats::e4m3, a, b, 0), 0x3F800000u);
}

// tcgen05 kind::mxf8f6f4 (`sm100-mxf8f6f4`, MMA-Sim's model): one UE8M0 pair per 32 elements; both scale
// exponents join every product's alignment exponent, so the F = 25 window sits below the scaled products.
std::uint32_t mx_dot(const Format& element, std::vector<std::uint32_t> a, std::vector<std::uint32_t> b,
                     std::uint32_t sa, std::uint32_t sb, std::uint32_t c) {
  a.resize(32, 0);
  b.resize(32, 0);
  const std::uint32_t as[] = {sa}, bs[] = {sb};
  return tfdpa_dot(row("sm100-mxf8f6f4"), element, a, element, b, BlockScales{formats::e8m0, as, bs, 32}, c);
}

TEST(Mxf8f6f4, ScaleExponentsSetTheWindow) {
  // e4m3 1·1 - 1·1 cancels at E_max = e_sa + e_sb; C = 1 is kept while E_max <= 25 (F = 25), cut beyond.
  const std::vector<std::uint32_t> a = {0b0'0111'000, 0b1'0111'000}, b = {0b0'0111'000, 0b0'0111'000};
  EXPECT_BITS(mx_dot(formats::e4m3, a, b, 127 + 25, 127, f32(1.0)), f32(1.0));
  EXPECT_BITS(mx_dot(formats::e4m3, a, b, 127 + 26, 127, f32(1.0)), 0u);
  EXPECT_BITS(mx_dot(formats::e4m3, a, b, 127 + 13, 127 + 13, f32(1.0)), 0u);  // both scales count
  EXPECT_BITS(mx_dot(formats::e4m3, a, b, 127 + 12, 127 + 13, f32(1.0)), f32(1.0));
  // The unscaled kind::f8f6f4 row keeps C: the scales are what moved the window.
  std::vector<std::uint32_t> a32 = a, b32 = b;
  a32.resize(32, 0);
  b32.resize(32, 0);
  EXPECT_BITS(tfdpa_dot(row("sm100-f8f6f4"), formats::e4m3, a32, b32, f32(1.0)), f32(1.0));
  // 1.5 · 1.5 at 2^-3 · 2^10 = 2.25 · 2^7.
  EXPECT_BITS(mx_dot(formats::e4m3, {0b0'0111'100}, {0b0'0111'100}, 127 - 3, 127 + 10, 0), f32(288.0));
}

TEST(Mxf8f6f4, SubnormalElementsAlignAtTheirEmin) {
  // e2m1 ±0.5 is subnormal: significand 0.1b at exponent 0 (emin), so the cancelling pair sets E_max = 0
  // and C = 2^-26 is cut; renormalised to 1.0b · 2^-1 (the encoded operand q·s in a wider format) it
  // would be kept. This is why gemm does not run the row on encoded operands.
  const std::vector<std::uint32_t> a = {0b0'00'1, 0b1'00'1}, b = {0b0'01'0, 0b0'01'0};
  EXPECT_BITS(mx_dot(formats::e2m1, a, b, 127, 127, f32(std::ldexp(1.0, -26))), 0u);
  EXPECT_BITS(mx_dot(formats::e2m1, a, b, 127, 127, f32(std::ldexp(1.0, -25))), f32(std::ldexp(1.0, -25)));
}

TEST(Mxf8f6f4, NanScaleIsNanOverZeroElements) {
  EXPECT_BITS(mx_dot(formats::e4m3, {}, {}, 0xFF, 127, 0), 0x7FFFFFFFu);
  EXPECT_BITS(mx_dot(formats::e4m3, {}, {}, 127, 0xFF, f32(1.0)), 0x7FFFFFFFu);
  EXPECT_BITS(mx_dot(formats::e4m3, {}, {}, 0, 0, f32(1.0)), f32(1.0));  // 2^-127 scales are finite
}

// AMD CDNA3 (`cdna3-*`, MMA-Sim's amd_fused_dot_rd_add): products at F = 24 truncated toward zero; then the
// product sum (31 bits) and C (24 bits) floored toward -inf at max(E_products, E_C); RNE into FP32.
TEST(Cdna3, NegativeCIsFlooredOrDropped) {
  // bf16: 1·1 + C, C = -2^-100 floors to -2^-24 below 2^0: 1 - 2^-24 (an NVIDIA row keeps 1.0).
  EXPECT_BITS(probe(row("cdna3-bf16"), "bf16", {1.0}, {1.0}, f32(-std::ldexp(1.0, -100))), 0x3F7FFFFFu);
  EXPECT_BITS(probe(row("sm90-bf16"), "bf16", {1.0}, {1.0}, f32(-std::ldexp(1.0, -100))), 0x3F800000u);
  EXPECT_BITS(probe(row("cdna3-bf16"), "bf16", {1.0}, {1.0}, f32(-std::ldexp(1.0, -26))), 0x3F7FFFFFu);
  // fp8: a C more than 25 binades below is dropped, at 25 it is still floored.
  EXPECT_BITS(probe(row("cdna3-fp8"), "fp8", {1.0}, {1.0}, f32(-std::ldexp(1.0, -25))), 0x3F7FFFFFu);
  EXPECT_BITS(probe(row("cdna3-fp8"), "fp8", {1.0}, {1.0}, f32(-std::ldexp(1.0, -26))), 0x3F800000u);
  Datapath no_drop = row("cdna3-fp8");
  no_drop.fused.c_drop_distance = 0;
  EXPECT_BITS(probe(no_drop, "fp8", {1.0}, {1.0}, f32(-std::ldexp(1.0, -26))), 0x3F7FFFFFu);
}

TEST(Cdna3, GroupOfEightRoundsRneBetweenGroups) {
  // 1·1 and 1.5·2^-24 (at k = j): in one group the small product is cut to 2^-24 and 1 + 2^-24 ties to
  // 1.0; in the next group it survives whole and 1 + 1.5·2^-24 rounds up.
  for (int j = 1; j < 16; ++j) {
    std::vector<double> a(16, 0.0), b(16, 0.0);
    a[0] = b[0] = 1.0;
    a[j] = 1.5 * std::ldexp(1.0, -12);
    b[j] = std::ldexp(1.0, -12);
    EXPECT_BITS(probe(row("cdna3-bf16"), "bf16", a, b, 0, 2), j < 8 ? 0x3F800000u : 0x3F800001u) << "j = " << j;
  }
}

TEST(Cdna3, SecondWindowIs31BitsBelowC) {
  // C = 1 and a product sum 2^-24 + t (one window, exact at F = 24): RNE sees a tie at 2^-24 unless t survives
  // the floor to 31 bits below 2^0. t = 2^-31 survives (1 + 2^-23), t = 2^-32 does not (1.0).
  auto run = [](const Datapath& dp, double t_a, double t_b) {
    return probe(dp, "bf16", {std::ldexp(1.0, -12), t_a}, {std::ldexp(1.0, -12), t_b}, f32(1.0));
  };
  const double p16 = std::ldexp(1.0, -16), p15 = std::ldexp(1.0, -15);
  EXPECT_BITS(run(row("cdna3-bf16"), p16, p15), 0x3F800001u);
  EXPECT_BITS(run(row("cdna3-bf16"), p16, p16), 0x3F800000u);
  Datapath w30 = row("cdna3-bf16"), w32 = row("cdna3-bf16");
  w30.fused.c_window_bits = 30;
  w32.fused.c_window_bits = 32;
  EXPECT_BITS(run(w30, p16, p15), 0x3F800000u);
  EXPECT_BITS(run(w32, p16, p16), 0x3F800001u);
}

TEST(Cdna3, ProductsBeyondBinary32AreInf) {
  const double big = std::ldexp(1.0, 100);
  EXPECT_BITS(probe(row("cdna3-bf16"), "bf16", {big, big}, {big, -big}, 0), 0x7FC00000u);
  EXPECT_BITS(probe(row("sm90-bf16"), "bf16", {big, big}, {big, -big}, 0), 0u);  // exact products cancel
  EXPECT_BITS(probe(row("cdna3-bf16"), "bf16", {big}, {std::ldexp(1.0, 28)}, 0), 0x7F800000u);
  EXPECT_BITS(probe(row("cdna3-bf16"), "bf16", {-big}, {std::ldexp(1.0, 27)}, 0), 0xFF000000u);
}

TEST(Cdna3, ZeroCAtMinus126FloorsTinySums) {
  // 2^-140 + 2^-150 + 2^-160: the zero C (exponent -126) puts the second window's floor at 2^-157, so
  // 2^-160 goes and 2^-140 + 2^-150 ties to even 2^-140; zeros outside E_max keep it and round up.
  const std::vector<double> a = {std::ldexp(1.0, -70), std::ldexp(1.0, -75), std::ldexp(1.0, -80)};
  EXPECT_BITS(probe(row("cdna3-bf16"), "bf16", a, a, 0), 0x00000200u);
  Datapath zeros_out = row("cdna3-bf16");
  zeros_out.fused.zero_exponent = kNoExponent;
  EXPECT_BITS(probe(zeros_out, "bf16", a, a, 0), 0x00000201u);
  // A negative sum that rounds to zero keeps its sign (MMA-Sim's IEEE conversion).
  EXPECT_BITS(probe(row("cdna3-bf16"), "bf16", {-std::ldexp(1.0, -80)}, {std::ldexp(1.0, -80)}, 0), 0x80000000u);
}

TEST(Cdna3Fp8, InterleavedLanesAreSeparateWindows) {
  // 16·16 at k = 0 and -2^-10 · 2^-7 = -2^-17: in the same lane (k = 2) it is truncated away, in the other
  // lane (k = 1) it is exact there and floored to -2^-16 when the lanes join: 256 - 2^-16.
  for (int k : {1, 2}) {
    std::vector<double> a(16, 0.0), b(16, 0.0);
    a[0] = b[0] = 16.0;
    a[k] = -std::ldexp(1.0, -10);
    b[k] = std::ldexp(1.0, -7);
    EXPECT_BITS(probe(row("cdna3-fp8"), "fp8", a, b, 0), k == 1 ? 0x437FFFFFu : 0x43800000u) << "k = " << k;
  }
}

TEST(Cdna3Xf32, InputsAreCutToTf32) {
  EXPECT_BITS(probe(row("cdna3-xf32"), "fp32", {1.0 + std::ldexp(1.0, -20)}, {1.0}, 0), f32(1.0));
  EXPECT_BITS(probe(row("cdna3-xf32"), "fp32", {1.0 + std::ldexp(1.0, -10)}, {1.0}, 0), f32(1.0 + std::ldexp(1.0, -10)));
}

// Every row of the table is valid and printable.
TEST(DatapathTable, RowsValidate) {
  for (const Datapath* dp : datapath_presets()) {
    EXPECT_TRUE(validate(*dp).empty()) << dp->name;
    EXPECT_FALSE(describe_parameters(*dp).empty());
    EXPECT_FALSE(dp->source.empty()) << dp->name;
  }
  EXPECT_EQ(find_datapath("sm90-bf16")->fused.frac_bits, 25);
  EXPECT_EQ(find_datapath("sm90-bf16")->fused.group, 16);
  EXPECT_EQ(find_datapath("sm90-fp8")->fused.group, 32);
  EXPECT_EQ(find_datapath("sm90-fp8")->fused.frac_bits, 13);
  EXPECT_EQ(find_datapath("sm90-fp8-f16acc")->fused.frac_bits, 13);
  EXPECT_EQ(find_datapath("sm90-fp8-f16acc")->fused.out, formats::fp16);
  EXPECT_EQ(find_datapath("sm100-mxf4nvf4")->fused.frac_bits, 35);
  EXPECT_EQ(find_datapath("no-such"), nullptr);
}

// Helpers of the composed datapaths.
TEST(Fp32Helpers, RoundToIntegerAndSnap) {
  auto rint_bits = [](double v) { return std::bit_cast<float>(round_to_integer_rne(f32(v))); };
  EXPECT_EQ(rint_bits(0.5), 0.0f);
  EXPECT_EQ(rint_bits(1.5), 2.0f);
  EXPECT_EQ(rint_bits(2.5), 2.0f);
  EXPECT_EQ(rint_bits(-2.5), -2.0f);
  EXPECT_TRUE(std::signbit(rint_bits(-0.25)));
  EXPECT_EQ(rint_bits(0.75), 1.0f);
  EXPECT_EQ(rint_bits(8388607.5), 8388608.0f);
  auto snap = [](double v) { return std::bit_cast<float>(snap_1024(f32(v))); };
  EXPECT_EQ(snap(1.0 + std::ldexp(1.0, -11)), 1.0f);                       // tie -> even
  EXPECT_EQ(snap(1.0 + 3 * std::ldexp(1.0, -11)), 1.0f + 0x1p-9f);         // tie -> even (up)
  EXPECT_EQ(snap(std::ldexp(1.0, -12)), 0.0f);
  EXPECT_TRUE(std::signbit(snap(-std::ldexp(1.0, -12))));
  EXPECT_EQ(snap(3.0), 3.0f);
  EXPECT_EQ(snap(0x1p110), 0x1p110f);
  EXPECT_TRUE(std::isinf(snap(0x1p120)));  // 2^130 is not binary32: torch gives Inf too
  EXPECT_TRUE(std::isinf(snap(0x1p127)));  // C*1024 overflows in binary32
}

}  // namespace
}  // namespace fp4sim
