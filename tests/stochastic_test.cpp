// Stochastic rounding: bit-exact hand-computed cases for sr-fast, sr-fastest and sr-fast-f32
// (docs/design.md "Formats and rounding"), and unbiasedness: the mean over all 2^k random integers is
// exactly the discretised value each rule promises, and Philox-driven sampling stays within a stated
// statistical bound of it.
//
// Notation: |y| lies between neighbours lo < hi (one quantum q = hi - lo apart); delta = (|y| - lo) / q
// in [0, 1); r is the k-bit random integer; rounding "up" means away from zero, to hi.
//   sr-fastest  (TE, PTX cvt.rs, gfloat StochasticFastest): up iff floor(2^k delta) + r >= 2^k
//   sr-fast     (UE5M3 paper, gfloat StochasticFast):       up iff floor(2^(k+1) delta) + 2r + 1 >= 2^(k+1)
//   sr-fast-f32 (the paper's reference): up iff RN32(delta + (2r+1) 2^-(k+1)) >= 1
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/core/rounding.hpp"

namespace fp4sim {
namespace {

EncodeOptions sr(Rounding r, int k = 8, bool saturate = true) {
  EncodeOptions o;
  o.rounding = r;
  o.sr_bits = k;
  o.saturate = saturate;
  return o;
}

// One case, checked through encode(double), encode(float) and Float32Encoder.
void expect_sr(const Format& f, double y, Rounding mode, std::uint32_t r, std::uint32_t want, int k = 8) {
  const EncodeOptions o = sr(mode, k);
  const auto msg = [&](const char* path, std::uint32_t got) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s %s k=%d r=%u y=%a (0x%016llX): expected 0x%X, %s gave 0x%X",
                  format_name(f).c_str(), name_of(mode).data(), k, r, y,
                  static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(y)), want, path, got);
    return std::string(buf);
  };
  const std::uint32_t g = encode(f, y, o, r).code;
  EXPECT_EQ(g, want) << msg("encode(double)", g);
  const float yf = static_cast<float>(y);
  if (static_cast<double>(yf) == y) {
    const std::uint32_t g32 = encode(f, yf, o, r).code;
    EXPECT_EQ(g32, want) << msg("encode(float)", g32);
    const std::uint32_t fast = Float32Encoder(f, o)(std::bit_cast<std::uint32_t>(yf), r);
    EXPECT_EQ(fast, want) << msg("Float32Encoder", fast);
  }
}

constexpr Rounding kAll[] = {Rounding::sr_fast, Rounding::sr_fastest, Rounding::sr_fast_f32};

TEST(StochasticHandCases, ExactQuarterIsTheSameForAllRules) {
  // e2m1, y = 2.25: lo = 2 (0x4), hi = 3 (0x5), delta = 1/4.
  //   sr-fastest: 64 + r >= 256 <=> r >= 192;  sr-fast: 128 + 2r + 1 >= 512 <=> r >= 192;
  //   sr-fast-f32: 0.25 + (2r+1)/512 >= 1 <=> r >= 192 (exact in binary32).
  for (const Rounding m : kAll) {
    expect_sr(formats::e2m1, 2.25, m, 0, 0x4);
    expect_sr(formats::e2m1, 2.25, m, 191, 0x4);
    expect_sr(formats::e2m1, 2.25, m, 192, 0x5);
    expect_sr(formats::e2m1, 2.25, m, 255, 0x5);
    expect_sr(formats::e2m1, -2.25, m, 191, 0xC);
    expect_sr(formats::e2m1, -2.25, m, 192, 0xD);  // away from zero: -3
  }
}

TEST(StochasticHandCases, FastAndFastestDifferBelowTheEighthBit) {
  // e2m1, y = 2 + 257/512: delta = 257/512 = 0.501953125.
  //   sr-fastest: floor(256 delta) = 128, up iff r >= 128.
  //   sr-fast:    floor(512 delta) = 257, up iff 257 + 2r + 1 >= 512 <=> r >= 127.
  //   sr-fast-f32: 257/512 + 255/512 = 1 exactly at r = 127: up, as sr-fast.
  const double y = 2.0 + 257.0 / 512;
  expect_sr(formats::e2m1, y, Rounding::sr_fastest, 127, 0x4);
  expect_sr(formats::e2m1, y, Rounding::sr_fastest, 128, 0x5);
  expect_sr(formats::e2m1, y, Rounding::sr_fast, 126, 0x4);
  expect_sr(formats::e2m1, y, Rounding::sr_fast, 127, 0x5);
  expect_sr(formats::e2m1, y, Rounding::sr_fast_f32, 126, 0x4);
  expect_sr(formats::e2m1, y, Rounding::sr_fast_f32, 127, 0x5);
  // A delta with bits below 2^-9 that neither rule sees: 2 + 257/512 + 2^-20 behaves the same.
  expect_sr(formats::e2m1, y + 0x1p-20, Rounding::sr_fastest, 127, 0x4);
  expect_sr(formats::e2m1, y + 0x1p-20, Rounding::sr_fast, 126, 0x4);
  // Just below 257/512 sr-fast needs r = 128 (floor(512 delta) = 256).
  expect_sr(formats::e2m1, y - 0x1p-20, Rounding::sr_fast, 127, 0x4);
  expect_sr(formats::e2m1, y - 0x1p-20, Rounding::sr_fast, 128, 0x5);
}

TEST(StochasticHandCases, Fast32RoundsUpBelowAQuarterWhereExactArithmeticDoesNot) {
  // docs/design.md: sr-fast-f32 evaluates delta + (2r+1) 2^-9 as one binary32 addition; for |y| < 0.25 in
  // e2m1 (quantum 0.5, so delta = 2|y| < 0.5 carries bits below 2^-25) the sum can round up to 1.
  // y = 2^-10 - 2^-26: delta = 2^-9 - 2^-25; r = 255: delta + 511/512 = 1 - 2^-25 exactly, the tie
  // between 1 - 2^-24 (odd significand) and 1.0 (even) -> 1.0 >= 1: up to 0.5 (0x1).
  // sr-fast: floor(512 delta) = 0, 0 + 511 < 512: stays 0 (0x0). sr-fastest: floor(256 delta) = 0,
  // 0 + 255 < 256: 0.
  const double y = 0x1p-10 - 0x1p-26;
  ASSERT_EQ(static_cast<double>(static_cast<float>(y)), y);
  expect_sr(formats::e2m1, y, Rounding::sr_fast_f32, 255, 0x1);
  expect_sr(formats::e2m1, y, Rounding::sr_fast, 255, 0x0);
  expect_sr(formats::e2m1, y, Rounding::sr_fastest, 255, 0x0);
  expect_sr(formats::e2m1, -y, Rounding::sr_fast_f32, 255, 0x9);
  expect_sr(formats::e2m1, -y, Rounding::sr_fast, 255, 0x8);
  // One binary32 ulp of delta lower (delta = 2^-9 - 2^-24): the sum 1 - 2^-24 is representable, < 1.
  expect_sr(formats::e2m1, 0x1p-10 - 0x1p-25, Rounding::sr_fast_f32, 255, 0x0);
  // Closer to the threshold (delta = 2^-9 - 2^-30): also rounds up in binary32, not exactly.
  expect_sr(formats::e2m1, 0x1p-10 - 0x1p-31, Rounding::sr_fast_f32, 255, 0x1);
  expect_sr(formats::e2m1, 0x1p-10 - 0x1p-31, Rounding::sr_fast, 255, 0x0);
  // The same effect one step up the random range: delta = 3/512 - 2^-25 with r = 254 (2r+1 = 509).
  expect_sr(formats::e2m1, 1.5 * 0x1p-9 - 0x1p-26, Rounding::sr_fast_f32, 254, 0x1);
  expect_sr(formats::e2m1, 1.5 * 0x1p-9 - 0x1p-26, Rounding::sr_fast, 254, 0x0);
  // At |y| >= 0.25, delta >= 0.5 has a binary32 ulp of 2^-24 and cannot sit within 2^-25 below a
  // multiple of 2^-9: the rules agree. y = 0.25 + 255/1024 - 2^-24: delta = 1/2 + 255/512 - 2^-23.
  const double z = 0.25 + 255.0 / 1024 - 0x1p-24;
  for (std::uint32_t r = 0; r < 256; ++r) {
    EXPECT_EQ(encode(formats::e2m1, z, sr(Rounding::sr_fast_f32), r).code,
              encode(formats::e2m1, z, sr(Rounding::sr_fast), r).code)
        << "r=" << r;
  }
}

TEST(StochasticHandCases, Fast32OnBinary64InputsRoundsDeltaToBinary32First) {
  // The paper's reference works on binary32 y, whose delta is exact in binary32. For a binary64 input
  // the golden path reads "one binary32 addition" as RN32(RN32(delta) + (2r+1) 2^-9): delta is rounded
  // to binary32 first. Pinned here because the other reading, RN32(delta + (2r+1) 2^-9) with the exact
  // delta, differs: y = 2^-10 - 2^-26 - 2^-41 has delta = 2^-9 - 2^-25 - 2^-40, RN32(delta) =
  // 2^-9 - 2^-25, and 2^-9 - 2^-25 + 511/512 = 1 - 2^-25 ties up to 1 (code 0x1), whereas the exact
  // sum 1 - 2^-25 - 2^-40 would round to 1 - 2^-24 < 1 (code 0x0).
  const double y = 0x1p-10 - 0x1p-26 - 0x1p-41;
  ASSERT_NE(static_cast<double>(static_cast<float>(y)), y);
  EXPECT_EQ(encode(formats::e2m1, y, sr(Rounding::sr_fast_f32), 255).code, 0x1u);
  EXPECT_EQ(encode(formats::e2m1, y, sr(Rounding::sr_fast), 255).code, 0x0u);
}

TEST(StochasticHandCases, ExactValuesNeverMove) {
  for (const Rounding m : kAll) {
    for (const std::uint32_t r : {0u, 1u, 128u, 255u}) {
      expect_sr(formats::e2m1, 3.0, m, r, 0x5);
      expect_sr(formats::e2m1, -0.5, m, r, 0x9);
      expect_sr(formats::e2m1, 0.0, m, r, 0x0);
      expect_sr(formats::e2m1, -0.0, m, r, 0x8);
      expect_sr(formats::e4m3, 448.0, m, r, 0x7E);
    }
  }
}

TEST(StochasticHandCases, SaturationNanAndOtherFormats) {
  for (const Rounding m : kAll) {
    // docs/semantics.md G4: saturate at 6; NaN -> +6; sign kept.
    expect_sr(formats::e2m1, 5.5, m, 0, 0x6);    // lo 4, hi 6, delta 3/4: needs r >= 64
    expect_sr(formats::e2m1, 5.5, m, 64, 0x7);
    expect_sr(formats::e2m1, 6.5, m, 0, 0x7);    // past max: lo 6, would-be hi 8, delta 1/4
    expect_sr(formats::e2m1, 6.5, m, 255, 0x7);  // rounds up to 8: saturates to 6
    expect_sr(formats::e2m1, -7.9, m, 255, 0xF);
    expect_sr(formats::e2m1, std::nan(""), m, 255, 0x7);
    expect_sr(formats::e2m1, -HUGE_VAL, m, 0, 0xF);
    EXPECT_NE(encode(formats::e2m1, 6.5, sr(m, 8, false), 255).flags & flag::invalid, 0);
    EXPECT_EQ(encode(formats::e2m1, 6.5, sr(m, 8, false), 0).flags & flag::invalid, 0);
    // e4m3, y = 1 + 2^-4: quantum 2^-3, delta = 1/2: up iff r >= 128 under every rule.
    expect_sr(formats::e4m3, 1.0625, m, 127, 0x38);
    expect_sr(formats::e4m3, 1.0625, m, 128, 0x39);
    // e4m3 subnormal: y = 1.25 * 2^-9 (quantum 2^-9, delta 1/4): up iff r >= 192.
    expect_sr(formats::e4m3, 0x1.4p-9, m, 191, 0x01);
    expect_sr(formats::e4m3, 0x1.4p-9, m, 192, 0x02);
    // e8m0: 1.25 lies between 1 (0x7F) and 2 (0x80), quantum 1, delta 1/4.
    expect_sr(formats::e8m0, 1.25, m, 191, 0x7F);
    expect_sr(formats::e8m0, 1.25, m, 192, 0x80);
    // ue5m3: 1.0 + 2^-5 between 1.0 (0x78) and 1.125 (0x79), delta 1/4.
    expect_sr(formats::ue5m3, 1.03125, m, 192, 0x79);
    // k = 1: sr-fastest up iff floor(2 delta) + r >= 2; sr-fast iff floor(4 delta) + 2r + 1 >= 4.
    // delta = 3/4: fastest: 1 + r >= 2 <=> r = 1; fast: 3 + 2r + 1 >= 4 <=> always.
  }
  expect_sr(formats::e2m1, 2.75, Rounding::sr_fastest, 0, 0x4, 1);
  expect_sr(formats::e2m1, 2.75, Rounding::sr_fastest, 1, 0x5, 1);
  expect_sr(formats::e2m1, 2.75, Rounding::sr_fast, 0, 0x5, 1);
  expect_sr(formats::e2m1, 2.25, Rounding::sr_fast, 0, 0x4, 1);  // 1 + 1 < 4
  expect_sr(formats::e2m1, 2.25, Rounding::sr_fast, 1, 0x5, 1);  // 1 + 3 >= 4
  // k = 16: delta = 1/3-ish values are resolved to 16 bits.
  expect_sr(formats::e2m1, 2.0 + 0x1p-16, Rounding::sr_fastest, 65534, 0x4, 16);
  expect_sr(formats::e2m1, 2.0 + 0x1p-16, Rounding::sr_fastest, 65535, 0x5, 16);
}

// --- Unbiasedness -------------------------------------------------------------------------------

// The neighbours of |y| in e2m1, computed here from the value grid {0, .5, 1, 1.5, 2, 3, 4, 6, (8)}.
struct Bracket {
  double lo, hi;
};
Bracket e2m1_bracket(double a) {
  const double grid[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, 8};
  for (int i = 0; i + 1 < 9; ++i) {
    if (a >= grid[i] && a < grid[i + 1]) return {grid[i], grid[i + 1]};
  }
  return {6, 8};
}

// Exact sum over all 2^k random integers of the decoded SR result, against the discretised value:
// sr-fastest truncates delta to k bits (mean = lo + q floor(2^k delta) / 2^k); sr-fast rounds delta
// to k bits, ties up (mean = lo + q floor(2^k delta + 1/2) / 2^k). All sums are exact in binary64.
TEST(StochasticUnbiased, MeanOverAllRandomIntegersIsTheDiscretisedValue) {
  for (const int k : {1, 4, 8, 12}) {
    const std::uint32_t n = 1u << k;
    for (int step = 0; step < 4096; step += (k >= 12 ? 4 : 1)) {
      // y over [0, 6) on a 2^-9 grid offset by a few fine bits, so both rules are exercised.
      const double a = step * (6.0 / 4096) + ((step % 7) * 0x1p-14);
      if (a >= 6.0) continue;
      const Bracket b = e2m1_bracket(a);
      const double q = b.hi - b.lo;
      const double delta = (a - b.lo) / q;  // exact: a dyadic with few bits
      const double truncated = std::floor(std::ldexp(delta, k));
      const double rounded = std::floor(std::ldexp(delta, k) + 0.5);
      for (const double y : {a, -a}) {
        const double sign = std::signbit(y) ? -1.0 : 1.0;
        for (const Rounding m : {Rounding::sr_fastest, Rounding::sr_fast}) {
          double sum = 0;
          for (std::uint32_t r = 0; r < n; ++r) sum += decode_to_double(formats::e2m1, encode(formats::e2m1, y, sr(m, k), r).code);
          const double units = m == Rounding::sr_fastest ? truncated : rounded;
          const double want = sign * (b.lo * n + q * units);
          ASSERT_EQ(sum, want) << name_of(m) << " k=" << k << " y=" << std::hexfloat << y;
        }
      }
    }
  }
}

TEST(StochasticUnbiased, ValuesOnTheKBitGridAreExactlyUnbiased) {
  // When delta is a multiple of 2^-k, every rule is exactly unbiased: the mean is y itself.
  const double grid[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (const Rounding m : {Rounding::sr_fastest, Rounding::sr_fast, Rounding::sr_fast_f32}) {
    for (int i = 0; i + 1 < 8; ++i) {
      for (int j = 0; j < 256; ++j) {
        for (const double sign : {1.0, -1.0}) {
          const double y = sign * (grid[i] + j * (grid[i + 1] - grid[i]) / 256);
          double sum = 0;
          for (std::uint32_t r = 0; r < 256; ++r) {
            sum += decode_to_double(formats::e2m1, encode(formats::e2m1, y, sr(m), r).code);
          }
          ASSERT_EQ(sum, 256 * y) << name_of(m) << " y=" << y;
        }
      }
    }
  }
}

TEST(StochasticUnbiased, Fast32BiasBelowAQuarterIsOneStepInTwoHundredFiftySix) {
  // The documented deviation, measured: at y = 2^-10 - 2^-26 exactly one r (255) rounds up under
  // sr-fast-f32 and none under sr-fast, so the means differ by q / 256 = 0.5 / 256.
  const double y = 0x1p-10 - 0x1p-26;
  double fast = 0, fast32 = 0;
  for (std::uint32_t r = 0; r < 256; ++r) {
    fast += decode_to_double(formats::e2m1, encode(formats::e2m1, y, sr(Rounding::sr_fast), r).code);
    fast32 += decode_to_double(formats::e2m1, encode(formats::e2m1, y, sr(Rounding::sr_fast_f32), r).code);
  }
  EXPECT_EQ(fast, 0.0);
  EXPECT_EQ(fast32, 0.5);
}

TEST(StochasticUnbiased, PhiloxDrivenSamplingIsWithinSixStandardErrors) {
  // N = 2^20 draws with r = random_bits(seed, stream, i, 8). Each result is lo or hi, so the sample
  // mean has standard error q sqrt(p (1 - p) / N) around lo + q p, with p the discretised
  // probability of rounding up. The bound is 6 standard errors (two-sided p ~ 2e-9 for a uniform
  // generator; the seed is fixed, so the outcome is deterministic).
  constexpr std::uint64_t N = 1u << 20;
  const double ys[] = {0.3, 1.1, 2.7, 4.9, 5.999, 0.01};
  for (const Rounding m : {Rounding::sr_fastest, Rounding::sr_fast, Rounding::sr_fast_f32}) {
    for (const double y_decimal : ys) {
      const double y = static_cast<float>(y_decimal);  // the binary32 input the encoder sees
      const Bracket b = e2m1_bracket(y);
      const double q = b.hi - b.lo;
      const double delta = (y - b.lo) / q;
      const double p = (m == Rounding::sr_fastest ? std::floor(delta * 256) : std::floor(delta * 256 + 0.5)) / 256;
      const Float32Encoder enc(formats::e2m1, sr(m));
      double sum = 0;
      for (std::uint64_t i = 0; i < N; ++i) {
        const std::uint32_t r = random_bits(0xC0FFEE, 5, i, 8);
        sum += decode_to_double(formats::e2m1, enc(std::bit_cast<std::uint32_t>(static_cast<float>(y)), r));
      }
      const double mean = sum / N;
      const double se = q * std::sqrt(p * (1 - p) / N);
      const double expected = b.lo + q * p;
      EXPECT_LE(std::fabs(mean - expected), 6 * se + 1e-12)
          << name_of(m) << " y=" << y << " mean " << mean << " expected " << expected << " se " << se;
      // The discretisation error itself is below one 2^-8 step (half a step for sr-fast).
      EXPECT_LE(std::fabs(expected - y), q / 256);
    }
  }
}

}  // namespace
}  // namespace fp4sim
