// Every code of every enumerable preset decodes to the value its fields say and re-encodes to itself
// under every rounding mode (ml_dtypes float8_test.cc `CastThroughFloat`; an Inf code, saturating, to
// max finite with its sign, as cvt .satfinite gives), plus one named test per
// known trap (ml_dtypes `DoubleRound`, `SmallCastToDenormal`): double rounding, exact ties,
// saturation, -0, NaN, Inf, e8m0's missing zero, and the te_python convention of e2m1.
//
// Expected values never come from the code under test: code values are computed here from the
// sign/exponent/mantissa fields with ldexp (as CPFloat's tests build reference values), neighbours
// and ties come from integer stepping of codes, and special codes are classified by the rules of
// docs/design.md / docs/semantics.md written out again below.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/core/rounding.hpp"

namespace fp4sim {

// gtest prints a parameter with PrintTo (ctest shows it beside each test's name).
void PrintTo(const NamedFormat& f, std::ostream* os) { *os << f.name; }

namespace {

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llX", static_cast<unsigned long long>(v));
  return buf;
}

std::string hexfloat(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (%.17g, bits 0x%016llX)", v, v,
                static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(v)));
  return buf;
}

// Every preset whose codes can be enumerated (<= 16 bits): the <= 8-bit formats and bf16/fp16.
std::vector<NamedFormat> enumerable_presets() {
  std::vector<NamedFormat> out;
  for (const auto& p : format_presets()) {
    if (p.format.storage_bits() <= 16) out.push_back(p);
  }
  return out;
}

std::string preset_test_name(const ::testing::TestParamInfo<NamedFormat>& info) {
  return std::string(info.param.name);
}

// --- An independent reading of a code ------------------------------------------------------------

enum class Kind { zero, finite, inf, nan, invalid };

struct Reading {
  Kind kind = Kind::invalid;
  double value = 0.0;  // exact; signed; meaningful for zero/finite/inf
};

// The rules of docs/design.md / format.hpp's Specials comments, written again from the fields.
Reading read_code(const Format& f, std::uint32_t code) {
  const int width = f.bits();
  if (width < 32 && (code >> width) != 0) return {Kind::invalid, 0.0};
  const int M = f.mantissa_bits, E = f.exponent_bits;
  const bool negative = f.is_signed && ((code >> (E + M)) & 1) != 0;
  const std::uint32_t field = (code >> M) & ((1u << E) - 1);
  const std::uint32_t frac = code & ((1u << M) - 1);
  const std::uint32_t top = (1u << E) - 1;
  const double sign = negative ? -1.0 : 1.0;
  switch (f.specials) {
    case Specials::ieee:
      if (field == top) return frac ? Reading{Kind::nan, 0.0} : Reading{Kind::inf, sign * HUGE_VAL};
      break;
    case Specials::fn:
      if (field == top && frac == (1u << M) - 1) return {Kind::nan, 0.0};
      break;
    case Specials::pow2_nan:
      if (field == top) return {Kind::nan, 0.0};
      return {Kind::finite, std::ldexp(1.0, static_cast<int>(field) - f.bias)};  // no zero, no sign
    case Specials::reserved_top:
      if (field == top) return {Kind::invalid, 0.0};
      break;
    case Specials::finite: break;
  }
  if (field == 0 && frac == 0) return {Kind::zero, negative ? -0.0 : 0.0};
  const double magnitude = field == 0 ? std::ldexp(static_cast<double>(frac), 1 - f.bias - M)
                                      : std::ldexp(static_cast<double>(frac + (1u << M)),
                                                   static_cast<int>(field) - f.bias - M);
  return {Kind::finite, sign * magnitude};
}

// The canonical NaN: the all-ones positive magnitude (0x7F e4m3/e5m2, 0xFF e8m0/ue5m3fn, 0x7FFF fp16/bf16).
std::uint32_t canonical_nan(const Format& f) { return (1u << (f.exponent_bits + f.mantissa_bits)) - 1; }

std::uint32_t code_count(const Format& f) { return 1u << f.storage_bits(); }

// Random integers exercised for each stochastic mode and k.
std::vector<std::uint32_t> random_integers(int k) {
  const std::uint32_t top = (1u << k) - 1;
  std::vector<std::uint32_t> r{0, top};
  if (k > 1) {
    r.push_back(1);
    r.push_back(top / 2);
    r.push_back(top / 2 + 1);
    r.push_back(top - 1);
  }
  return r;
}

class CodecRoundTrip : public ::testing::TestWithParam<NamedFormat> {};

TEST_P(CodecRoundTrip, DecodeMatchesTheFieldFormula) {
  const Format& f = GetParam().format;
  for (std::uint32_t code = 0; code < code_count(f); ++code) {
    const Reading want = read_code(f, code);
    const Decoded got = decode(f, code);
    const double value = decode_to_double(f, code);
    SCOPED_TRACE("code " + hex(code));
    switch (want.kind) {
      case Kind::invalid:
        EXPECT_EQ(got.cls, ValueClass::invalid);
        EXPECT_TRUE(std::isnan(value));
        break;
      case Kind::nan:
        EXPECT_EQ(got.cls, ValueClass::nan);
        EXPECT_TRUE(std::isnan(value));
        break;
      case Kind::inf:
        EXPECT_EQ(got.cls, ValueClass::inf);
        EXPECT_EQ(value, want.value);
        break;
      case Kind::zero:
        EXPECT_EQ(got.cls, ValueClass::zero);
        EXPECT_EQ(value, 0.0);
        EXPECT_EQ(std::signbit(value), std::signbit(want.value)) << "sign of zero";
        break;
      case Kind::finite:
        EXPECT_EQ(got.cls, ValueClass::finite);
        EXPECT_EQ(value, want.value) << "decoded " << hexfloat(value) << " expected " << hexfloat(want.value);
        // The exact triple agrees with the value too.
        if (got.cls == ValueClass::finite) {
          const double triple = (got.negative ? -1.0 : 1.0) *
                                std::ldexp(static_cast<double>(got.significand), got.exponent);
          EXPECT_EQ(triple, want.value);
        }
        break;
    }
    // decode_to_float is exact for every enumerable format (all values fit binary32).
    if (want.kind == Kind::finite || want.kind == Kind::zero || want.kind == Kind::inf) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(static_cast<double>(decode_to_float(f, code))),
                std::bit_cast<std::uint64_t>(value));
    }
  }
}

TEST_P(CodecRoundTrip, EveryCodeReencodesToItselfUnderEveryMode) {
  const Format& f = GetParam().format;
  std::uint64_t checked = 0;
  for (const auto& mode : names(Rounding{})) {
    const std::vector<int> ks = is_stochastic(mode.value) ? std::vector<int>{1, 8, 16} : std::vector<int>{8};
    for (const int k : ks) {
      const std::vector<std::uint32_t> randoms =
          is_stochastic(mode.value) ? random_integers(k) : std::vector<std::uint32_t>{0};
      for (const bool saturate : {true, false}) {
        EncodeOptions o;
        o.rounding = mode.value;
        o.saturate = saturate;
        o.sr_bits = k;
        const Float32Encoder fast(f, o);
        for (const std::uint32_t r : randoms) {
          for (std::uint32_t code = 0; code < code_count(f); ++code) {
            const Reading in = read_code(f, code);
            if (in.kind == Kind::invalid) continue;  // checked by DecodeMatchesTheFieldFormula
            const double v = decode_to_double(f, code);
            const bool clamped_inf = in.kind == Kind::inf && saturate;
            const std::uint32_t want = in.kind == Kind::nan ? canonical_nan(f)
                                       : clamped_inf       ? (code & f.sign_mask()) | f.max_finite_code()
                                                           : code;
            const Encoded got = encode(f, v, o, r);
            const Encoded got32 = encode(f, static_cast<float>(v), o, r);
            const std::uint32_t got_fast = fast(std::bit_cast<std::uint32_t>(static_cast<float>(v)), r);
            const auto where = [&] {
              return std::string(GetParam().name) + " " + std::string(mode.name) + " k=" + std::to_string(k) +
                     " r=" + std::to_string(r) + (saturate ? " saturating" : " non-saturating") + ": code " +
                     hex(code) + " = " + hexfloat(v) + " expected " + hex(want);
            };
            ASSERT_EQ(got.code, want) << where() << " golden(double) gave " << hex(got.code);
            ASSERT_EQ(got.flags, clamped_inf ? flag::overflow : 0) << where() << " flags " << hex(got.flags);
            ASSERT_EQ(got32.code, want) << where() << " golden(float) gave " << hex(got32.code);
            ASSERT_EQ(got_fast, want) << where() << " Float32Encoder gave " << hex(got_fast);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0u);
}

TEST_P(CodecRoundTrip, InvalidCodesAreReportedInvalid) {
  const Format& f = GetParam().format;
  int invalid = 0;
  for (std::uint32_t code = 0; code < code_count(f); ++code) {
    if (read_code(f, code).kind != Kind::invalid) continue;
    ++invalid;
    EXPECT_EQ(decode(f, code).cls, ValueClass::invalid) << hex(code);
  }
  // The formats with invalid codes, counted by hand: ue4m3 has a byte but 7 value bits (0x80-0xFF);
  // ue5m3 reserves its top exponent field (0xF8-0xFF); e2m3/e3m2 live in 6 of 6 bits, e2m1 in 4 of 4.
  const std::string name(GetParam().name);
  const int expected = name == "ue4m3" ? 128 : name == "ue5m3" ? 8 : 0;
  EXPECT_EQ(invalid, expected);
  // Codes past the storage width are invalid everywhere.
  EXPECT_EQ(decode(f, code_count(f)).cls, ValueClass::invalid);
}

TEST_P(CodecRoundTrip, NanInputsGiveTheCanonicalNanOrTheFormatsPolicy) {
  const Format& f = GetParam().format;
  const double nans[] = {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                         std::bit_cast<double>(std::uint64_t{0x7FF0000000000001}),   // signalling payload
                         std::bit_cast<double>(std::uint64_t{0xFFF8000000000123})};  // negative quiet payload
  for (const double nan : nans) {
    for (const bool saturate : {true, false}) {
      EncodeOptions o;
      o.saturate = saturate;
      const Encoded e = encode(f, nan, o);
      SCOPED_TRACE(hexfloat(nan) + (saturate ? " saturating" : " non-saturating"));
      if (f.has_nan()) {
        EXPECT_EQ(e.code, canonical_nan(f));
        EXPECT_EQ(e.flags, 0);
      } else if (saturate) {
        // G3: NaN -> +max finite (0x7 for e2m1), sign dropped.
        EXPECT_EQ(decode_to_double(f, e.code), read_code(f, f.max_finite_code()).value);
        EXPECT_FALSE(std::signbit(decode_to_double(f, e.code)));
        EXPECT_EQ(e.flags & flag::invalid, 0);
      } else {
        EXPECT_NE(e.flags & flag::invalid, 0) << "no NaN to go to: a data error";
      }
      const Float32Encoder fast(f, o);
      EXPECT_EQ(fast(std::bit_cast<std::uint32_t>(static_cast<float>(nan))), e.code);
    }
  }
}

TEST_P(CodecRoundTrip, NegativeZeroKeepsItsSign) {
  const Format& f = GetParam().format;
  for (const auto& mode : names(Rounding{})) {
    EncodeOptions o;
    o.rounding = mode.value;
    const Encoded e = encode(f, -0.0, o, 0);
    SCOPED_TRACE(std::string(mode.name));
    if (!f.has_zero()) {
      EXPECT_EQ(e.code, 0u) << "e8m0: zero saturates to its minimum, code 0";
    } else if (f.is_signed) {
      EXPECT_EQ(e.code, f.sign_mask()) << "-0 keeps its sign";
      EXPECT_EQ(e.flags, 0);
    } else {
      EXPECT_EQ(e.code, 0u) << "-0 into an unsigned format is +0, not an error";
      EXPECT_EQ(e.flags, 0);
    }
    EXPECT_EQ(Float32Encoder(f, o)(0x80000000u), e.code);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, CodecRoundTrip, ::testing::ValuesIn(enumerable_presets()), preset_test_name);

// --- Named traps ------------------------------------------------------------------------------------

EncodeOptions opts(Rounding r, bool saturate = true) {
  EncodeOptions o;
  o.rounding = r;
  o.saturate = saturate;
  return o;
}

// Checks golden(double), golden(float) when the input is a float, and the fast path, with hex messages.
void expect_code(const Format& f, double x, const EncodeOptions& o, std::uint32_t want, std::uint32_t random = 0) {
  const Encoded e = encode(f, x, o, random);
  EXPECT_EQ(e.code, want) << format_name(f) << " " << name_of(o.rounding) << (o.saturate ? " sat" : " nosat")
                          << " input " << hexfloat(x) << " expected " << hex(want) << " got " << hex(e.code);
  const float xf = static_cast<float>(x);
  if (static_cast<double>(xf) == x || std::isnan(x)) {
    const std::uint32_t fast = Float32Encoder(f, o)(std::bit_cast<std::uint32_t>(xf), random);
    EXPECT_EQ(fast, want) << format_name(f) << " " << name_of(o.rounding) << " Float32Encoder input "
                          << hexfloat(x) << " expected " << hex(want) << " got " << hex(fast);
    EXPECT_EQ(encode(f, xf, o, random).code, want) << "golden(float) " << hexfloat(x);
  }
}

TEST(CodecTraps, DoubleRounding) {
  // -431.99999999999994 lies just below the e4m3 midpoint 432 between 416 (0x7D) and 448 (0x7E):
  // rounding it once gives -416. Rounding through binary32 first gives exactly -432, a tie, which
  // goes to the even code -448 — the double-rounding error the golden path must not make.
  const double x = -431.99999999999994;
  ASSERT_EQ(std::bit_cast<std::uint64_t>(x), 0xC07AFFFFFFFFFFFFull);
  ASSERT_EQ(static_cast<float>(x), -432.0f);
  expect_code(formats::e4m3, x, opts(Rounding::rne), 0b1'1111'101);             // -416
  EXPECT_EQ(encode(formats::e4m3, static_cast<float>(x), opts(Rounding::rne)).code, 0b1'1111'110u);  // -448
  // The same trap in e2m1: 0.7499999999999999 -> 0.5, while float(x) = 0.75 is a tie -> 1.0.
  expect_code(formats::e2m1, 0.7499999999999999, opts(Rounding::rne), 0b0'00'1);
  EXPECT_EQ(encode(formats::e2m1, static_cast<float>(0.7499999999999999), opts(Rounding::rne)).code, 0b0'01'0u);
  // And in bf16 (binary32 has more bits, but rounding a binary64 twice still errs): 1 + 2^-8 + 2^-40
  // is above the bf16 midpoint 1 + 2^-8; via binary32 the 2^-40 is lost and the tie goes to 1.0.
  const double y = 1.0 + 0x1p-8 + 0x1p-40;
  EXPECT_EQ(encode(formats::bf16, y, opts(Rounding::rne, false)).code, 0x3F81u);
  EXPECT_EQ(encode(formats::bf16, static_cast<float>(y), opts(Rounding::rne, false)).code, 0x3F80u);
}

TEST(CodecTraps, ExactTiesE2m1) {
  // docs/semantics.md G3: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4 (RNE);
  // ties away (rna): 0.25->0.5, 0.75->1, 1.25->1.5, 1.75->2, 2.5->3, 3.5->4, 5->6.
  struct Tie {
    double x;
    std::uint32_t rne, rna;
  };
  const Tie ties[] = {{0.25, 0b0'00'0, 0b0'00'1}, {0.75, 0b0'01'0, 0b0'01'0}, {1.25, 0b0'01'0, 0b0'01'1},
                      {1.75, 0b0'10'0, 0b0'10'0}, {2.5, 0b0'10'0, 0b0'10'1},  {3.5, 0b0'11'0, 0b0'11'0},
                      {5.0, 0b0'11'0, 0b0'11'1}};
  for (const Tie& t : ties) {
    expect_code(formats::e2m1, t.x, opts(Rounding::rne), t.rne);
    expect_code(formats::e2m1, -t.x, opts(Rounding::rne), t.rne | 0b1'00'0);
    expect_code(formats::e2m1, t.x, opts(Rounding::rna), t.rna);
    expect_code(formats::e2m1, -t.x, opts(Rounding::rna), t.rna | 0b1'00'0);
  }
}

TEST(CodecTraps, ExactTiesNamedFormats) {
  // e4m3: subnormal tie 1.5 * 2^-9 between 2^-9 (0x01, odd) and 2^-8 (0x02, even) -> 0x02;
  // 2^-10, half the smallest subnormal, ties to +0 (docs/semantics.md N5).
  expect_code(formats::e4m3, 0x1.8p-9, opts(Rounding::rne), 0b0'0000'010);
  expect_code(formats::e4m3, 0x1p-10, opts(Rounding::rne), 0b0'0000'000);
  expect_code(formats::e4m3, -0x1p-10, opts(Rounding::rne), 0b1'0000'000);
  expect_code(formats::e4m3, 0x1p-10, opts(Rounding::rna), 0b0'0000'001);
  // Normal tie across a binade: 15.5 between 15 (0x57, odd) and 16 (0x58) -> 16.
  expect_code(formats::e4m3, 15.5, opts(Rounding::rne), 0b0'1011'000);
  // e5m2: 1.125 between 1.0 (0x3C) and 1.25 (0x3D) -> 1.0; 1.375 -> 1.5.
  expect_code(formats::e5m2, 1.125, opts(Rounding::rne), 0b0'01111'00);
  expect_code(formats::e5m2, 1.375, opts(Rounding::rne), 0b0'01111'10);
  // e2m3: 7.25 between 7.0 (0x1E) and 7.5 (0x1F) -> 7.0; e3m2: 26 between 24 (0x1E) and 28 (0x1F) -> 24.
  expect_code(formats::e2m3, 7.25, opts(Rounding::rne), 0b0'11'110);
  expect_code(formats::e3m2, 26.0, opts(Rounding::rne), 0b0'111'10);
  // ue5m3 / ue5m3fn: 1.0625 between 1.0 (0x78) and 1.125 (0x79) -> 1.0.
  expect_code(formats::ue5m3, 1.0625, opts(Rounding::rne), 0b01111'000);
  expect_code(formats::ue5m3fn, 1.0625, opts(Rounding::rne), 0b01111'000);
  // e8m0 has no mantissa: the tie 1.5 * 2^e goes to the even code, i.e. the even exponent field, as
  // ml_dtypes float8_e8m0fnu does. 1.5 -> 2 (0x80, even) not 1 (0x7F); 3 -> 2 (0x80), not 4 (0x81).
  // gfloat's round_float rounds every 1.5 * 2^e up (it compares the tie with the significand's
  // parity, which is always 1 for p = 1): tests/oracle_test.py documents that deviation; we do not copy it.
  expect_code(formats::e8m0, 1.5, opts(Rounding::rne), 0x80);
  expect_code(formats::e8m0, 3.0, opts(Rounding::rne), 0x80);
  expect_code(formats::e8m0, 6.0, opts(Rounding::rne), 0x82);
  expect_code(formats::e8m0, 1.5, opts(Rounding::rna), 0x80);
  expect_code(formats::e8m0, 3.0, opts(Rounding::rna), 0x81);
  // bf16: 1 + 2^-8 ties to 1.0 (0x3F80); 1 + 3 * 2^-8 ties to 1 + 2^-6 (0x3F82).
  expect_code(formats::bf16, 1.0 + 0x1p-8, opts(Rounding::rne, false), 0x3F80);
  expect_code(formats::bf16, 1.0 + 3 * 0x1p-8, opts(Rounding::rne, false), 0x3F82);
}

// The generic tie test: for every pair of adjacent positive finite codes (c, c+1), the exact
// midpoint of their values (exact in binary64: two values with <= 11 significand bits) goes to the
// even code under rne, to c+1 under rna/rup, to c under rtz/rdown; mirrored for negative values.
class CodecTies : public ::testing::TestWithParam<NamedFormat> {};

TEST_P(CodecTies, EveryMidpointGoesWhereItsModeSays) {
  const Format& f = GetParam().format;
  const std::uint32_t magnitude_codes = 1u << (f.exponent_bits + f.mantissa_bits);
  int ties = 0;
  for (std::uint32_t c = 0; c + 1 < magnitude_codes; ++c) {
    const Reading lo = read_code(f, c), hi = read_code(f, c + 1);
    if ((lo.kind != Kind::finite && lo.kind != Kind::zero) || hi.kind != Kind::finite) continue;
    const double mid = (lo.value + hi.value) / 2;  // exact
    ASSERT_TRUE(lo.value < mid && mid < hi.value);
    const std::uint32_t even = (c % 2 == 0) ? c : c + 1;
    for (const bool saturate : {true, false}) {
      expect_code(f, mid, opts(Rounding::rne, saturate), even);
      expect_code(f, mid, opts(Rounding::rna, saturate), c + 1);
      expect_code(f, mid, opts(Rounding::rtz, saturate), c);
      expect_code(f, mid, opts(Rounding::rup, saturate), c + 1);
      expect_code(f, mid, opts(Rounding::rdown, saturate), c);
      if (f.is_signed) {
        const std::uint32_t s = f.sign_mask();
        expect_code(f, -mid, opts(Rounding::rne, saturate), even | s);
        expect_code(f, -mid, opts(Rounding::rna, saturate), (c + 1) | s);
        expect_code(f, -mid, opts(Rounding::rtz, saturate), c | s);
        expect_code(f, -mid, opts(Rounding::rup, saturate), c | s);
        expect_code(f, -mid, opts(Rounding::rdown, saturate), (c + 1) | s);
      }
    }
    ++ties;
  }
  EXPECT_GT(ties, 0);
}

INSTANTIATE_TEST_SUITE_P(Presets, CodecTies, ::testing::ValuesIn(enumerable_presets()), preset_test_name);

TEST(CodecTraps, SaturationAndOverflow) {
  const auto& e4m3 = formats::e4m3;
  // 464 is the tie between 448 (0x7E, even) and the would-be 480 (0x7F, the NaN code): RNE keeps 448
  // even without saturation; anything above 464 overflows: 448 when saturating, NaN with the input's
  // sign when not (0xFF for a negative value, as cuda_fp8.h's __NV_NOSAT, ml_dtypes and gfloat give).
  expect_code(e4m3, 464.0, opts(Rounding::rne, false), 0x7E);
  expect_code(e4m3, 464.00000000000006, opts(Rounding::rne, false), 0x7F);
  expect_code(e4m3, -464.00000000000006, opts(Rounding::rne, false), 0xFF);
  expect_code(e4m3, 464.00000000000006, opts(Rounding::rne, true), 0x7E);
  expect_code(e4m3, -1e30, opts(Rounding::rne, true), 0xFE);
  expect_code(e4m3, 1e30, opts(Rounding::rtz, false), 0x7E);  // toward zero never overflows to NaN
  expect_code(e4m3, -1e30, opts(Rounding::rup, false), 0xFE);
  expect_code(e4m3, -1e30, opts(Rounding::rdown, false), 0xFF);
  expect_code(e4m3, -1e30, opts(Rounding::rna, false), 0xFF);
  expect_code(e4m3, 449.0, opts(Rounding::rup, false), 0x7F);
  expect_code(e4m3, 449.0, opts(Rounding::rup, true), 0x7E);
  {
    const Encoded e = encode(e4m3, 1e30, opts(Rounding::rne, true));
    EXPECT_EQ(e.flags, flag::overflow | flag::inexact) << hex(e.flags);
  }
  // e5m2: 61440 ties between 57344 (0x7B, odd) and 65536 (Inf, 0x7C): IEEE RNE overflows to Inf.
  expect_code(formats::e5m2, 61440.0, opts(Rounding::rne, false), 0x7C);
  expect_code(formats::e5m2, -61440.0, opts(Rounding::rne, false), 0xFC);
  expect_code(formats::e5m2, 61439.99999999999, opts(Rounding::rne, false), 0x7B);
  expect_code(formats::e5m2, 61440.0, opts(Rounding::rne, true), 0x7B);
  expect_code(formats::e5m2, 1e30, opts(Rounding::rtz, false), 0x7B);
  // e2m1: 6.5 rounds to 6 without overflowing; 7 ties to the would-be 8 and overflows. Saturating:
  // 6; not saturating: a data error (no Inf, no NaN).
  expect_code(formats::e2m1, 6.5, opts(Rounding::rne, false), 0x7);
  expect_code(formats::e2m1, 7.0, opts(Rounding::rne, true), 0x7);
  expect_code(formats::e2m1, -7.0, opts(Rounding::rne, true), 0xF);
  EXPECT_NE(encode(formats::e2m1, 7.0, opts(Rounding::rne, false)).flags & flag::invalid, 0);
  EXPECT_EQ(encode(formats::e2m1, 6.5, opts(Rounding::rne, false)).flags & flag::invalid, 0);
  EXPECT_EQ(encode(formats::e2m1, 100.0, opts(Rounding::rtz, false)).code, 0x7u);
  EXPECT_EQ(encode(formats::e2m1, 100.0, opts(Rounding::rtz, false)).flags & flag::invalid, 0);
  // ue5m3 (paper): max 61440 = 0xF7; 63488 ties up to the reserved 65536 and overflows.
  expect_code(formats::ue5m3, 63487.99999999999, opts(Rounding::rne, false), 0xF7);
  expect_code(formats::ue5m3, 63488.0, opts(Rounding::rne, true), 0xF7);
  EXPECT_NE(encode(formats::ue5m3, 63488.0, opts(Rounding::rne, false)).flags & flag::invalid, 0)
      << "docs/design.md: above 61,440 with --no-saturate is a data error for ue5m3";
  // ue5m3fn: max 114688 = 0xFE; 118784 ties to the even 0xFE; above it is NaN without saturation
  // (unsigned: no sign bit to keep).
  expect_code(formats::ue5m3fn, 118784.0, opts(Rounding::rne, false), 0xFE);
  expect_code(formats::ue5m3fn, 118784.00000000001, opts(Rounding::rne, false), 0xFF);
  expect_code(formats::ue5m3fn, 118784.00000000001, opts(Rounding::rne, true), 0xFE);
  // e8m0: max 2^127 = 0xFE; 1.5 * 2^127 ties to 0xFE (even); above it NaN unless saturating.
  expect_code(formats::e8m0, 0x1.8p127, opts(Rounding::rne, false), 0xFE);
  expect_code(formats::e8m0, 0x1.8000000000001p127, opts(Rounding::rne, false), 0xFF);
  expect_code(formats::e8m0, 0x1.8000000000001p127, opts(Rounding::rne, true), 0xFE);
  // bf16 / fp16 are IEEE: overflow to Inf when not saturating.
  expect_code(formats::fp16, 65520.0, opts(Rounding::rne, false), 0x7C00);
  expect_code(formats::fp16, 65519.99999999999, opts(Rounding::rne, false), 0x7BFF);
  expect_code(formats::bf16, 0x1.FFp127, opts(Rounding::rne, false), 0x7F80);
  expect_code(formats::bf16, 0x1.FFp127, opts(Rounding::rne, true), 0x7F7F);
}

TEST(CodecTraps, InfinityInputs) {
  const double inf = HUGE_VAL;
  // Saturating, every format gives +-max finite, IEEE formats too (PTX cvt .satfinite, cuda_fp8.h
  // __NV_SATFINITE: +-Inf -> +-MAXNORM). Not saturating, IEEE formats keep Inf in every rounding mode.
  for (const Rounding r : {Rounding::rne, Rounding::rtz, Rounding::rup, Rounding::rdown}) {
    expect_code(formats::e5m2, inf, opts(r, true), 0x7B);
    expect_code(formats::e5m2, -inf, opts(r, true), 0xFB);
    expect_code(formats::fp16, -inf, opts(r, true), 0xFBFF);
    expect_code(formats::bf16, inf, opts(r, true), 0x7F7F);
    expect_code(formats::fp32, -inf, opts(r, true), 0xFF7FFFFF);
    expect_code(formats::e5m2, inf, opts(r, false), 0x7C);
    expect_code(formats::e5m2, -inf, opts(r, false), 0xFC);
    expect_code(formats::fp16, -inf, opts(r, false), 0xFC00);
    expect_code(formats::bf16, inf, opts(r, false), 0x7F80);
  }
  EXPECT_EQ(encode(formats::e5m2, inf, opts(Rounding::rne, true)).flags, flag::overflow);
  EXPECT_EQ(encode(formats::e5m2, inf, opts(Rounding::rne, false)).flags, 0);
  // Others: +-max when saturating; NaN with the sign (fn formats) when not; a data error when neither
  // exists.
  expect_code(formats::e4m3, -inf, opts(Rounding::rne, true), 0xFE);
  expect_code(formats::e4m3, inf, opts(Rounding::rne, false), 0x7F);
  expect_code(formats::e4m3, -inf, opts(Rounding::rne, false), 0xFF);
  expect_code(formats::e4m3, -inf, opts(Rounding::rtz, false), 0xFF);
  expect_code(formats::e2m1, inf, opts(Rounding::rne, true), 0x7);
  expect_code(formats::e2m1, -inf, opts(Rounding::rne, true), 0xF);
  EXPECT_NE(encode(formats::e2m1, inf, opts(Rounding::rne, false)).flags & flag::invalid, 0);
  expect_code(formats::e8m0, inf, opts(Rounding::rne, true), 0xFE);
  expect_code(formats::e8m0, inf, opts(Rounding::rne, false), 0xFF);
  expect_code(formats::ue5m3, inf, opts(Rounding::rne, true), 0xF7);
  EXPECT_NE(encode(formats::ue5m3, inf, opts(Rounding::rne, false)).flags & flag::invalid, 0);
  // -Inf into an unsigned format is a negative value: invalid.
  EXPECT_NE(encode(formats::ue4m3, -inf, opts(Rounding::rne, true)).flags & flag::invalid, 0);
}

TEST(CodecTraps, NegativeZeroAndSmallNegatives) {
  // -0 keeps its sign (0x8 in e2m1); so does a negative value that rounds to zero (docs/semantics.md G3).
  expect_code(formats::e2m1, -0.0, opts(Rounding::rne), 0x8);
  expect_code(formats::e2m1, -0.25, opts(Rounding::rne), 0x8);
  expect_code(formats::e2m1, -0.1, opts(Rounding::rup), 0x8);
  expect_code(formats::e2m1, -0.1, opts(Rounding::rtz), 0x8);
  expect_code(formats::e2m1, -0.1, opts(Rounding::rdown), 0x9);
  expect_code(formats::e4m3, -0x1p-40, opts(Rounding::rne), 0x80);
  expect_code(formats::fp16, -0x1p-40, opts(Rounding::rne, false), 0x8000);
  expect_code(formats::bf16, -0.0, opts(Rounding::rne, false), 0x8000);
  // Unsigned formats: -0 is +0; a negative nonzero value is invalid, even one that would round to 0.
  expect_code(formats::ue4m3, -0.0, opts(Rounding::rne), 0x00);
  EXPECT_EQ(encode(formats::ue4m3, -0.0, opts(Rounding::rne)).flags, 0);
  for (const auto& p : format_presets()) {
    if (p.format.is_signed) continue;
    for (const double x : {-1.0, -0x1p-60, -1e30}) {
      const Encoded e = encode(p.format, x, opts(Rounding::rne, true));
      EXPECT_NE(e.flags & flag::invalid, 0) << p.name << " " << hexfloat(x);
      // The fast path has no flags; it must still give the golden code.
      EXPECT_EQ(Float32Encoder(p.format, opts(Rounding::rne, true))(std::bit_cast<std::uint32_t>(static_cast<float>(x))),
                e.code)
          << p.name << " " << hexfloat(x);
    }
  }
}

TEST(CodecTraps, E8m0ZeroTinyAndNegative) {
  const auto& f = formats::e8m0;
  // No zero: a zero input is code 0 (2^-127) when saturating (ml_dtypes kSaturate: denorm_min), NaN
  // (0xFF, invalid) when not (ml_dtypes astype).
  for (const auto& mode : names(Rounding{})) {
    EncodeOptions sat = opts(mode.value, true), nosat = opts(mode.value, false);
    EXPECT_EQ(encode(f, 0.0, sat).code, 0x00u) << mode.name;
    EXPECT_EQ(encode(f, -0.0, sat).code, 0x00u) << mode.name;
    EXPECT_EQ(encode(f, 0.0, nosat).code, 0xFFu) << mode.name;
    EXPECT_NE(encode(f, 0.0, nosat).flags & flag::invalid, 0) << mode.name;
    EXPECT_EQ(Float32Encoder(f, sat)(0u), 0x00u);
    EXPECT_EQ(Float32Encoder(f, nosat)(0u), 0xFFu);
    // Values below 2^-127 give code 0 in every mode, saturating or not, and are not errors.
    for (const double tiny : {0x1p-1074, 0x1p-149, 0x1p-130, 0x1.8p-128, 0x1.fffffffffffffp-128, 0x1p-127}) {
      for (const EncodeOptions& o : {sat, nosat}) {
        const Encoded e = encode(f, tiny, o);
        EXPECT_EQ(e.code, 0x00u) << mode.name << " " << hexfloat(tiny);
        EXPECT_EQ(e.flags & flag::invalid, 0) << mode.name << " " << hexfloat(tiny);
      }
    }
    // Negative nonzero: invalid, NaN code.
    const Encoded neg = encode(f, -2.0, sat);
    EXPECT_NE(neg.flags & flag::invalid, 0);
    EXPECT_EQ(neg.code, 0xFFu);
  }
  // Just above the minimum: 1.5 * 2^-127 ties between 0x00 (even) and 0x01.
  expect_code(f, 0x1.8p-127, opts(Rounding::rne), 0x00);
  expect_code(f, 0x1.8p-127, opts(Rounding::rna), 0x01);
  expect_code(f, 0x1.0000000000001p-127, opts(Rounding::rup), 0x01);
  expect_code(f, 0x1.fffffep-127, opts(Rounding::rtz), 0x00);
  // Binary32 subnormals: every one is below 2^-127 or in [2^-127, 2^-126).
  expect_code(f, 0x1.8p-127, opts(Rounding::rtz), 0x00);
  expect_code(f, 0x1p-127 + 0x1p-149, opts(Rounding::rup), 0x01);
  expect_code(f, 0x1p-148, opts(Rounding::rup), 0x00);
}

TEST(CodecTraps, TePythonConventionForE2m1) {
  // TE's Python cast_to_fp4x2: -0.0 -> 0x0 and NaN -> 0x0 (every comparison is false); small negatives
  // keep their sign (0x8) exactly as in the hardware convention; everything else is unchanged.
  EncodeOptions te = opts(Rounding::rne, true);
  te.convention = SpecialConvention::te_python;
  expect_code(formats::e2m1, -0.0, te, 0x0);
  expect_code(formats::e2m1, std::numeric_limits<double>::quiet_NaN(), te, 0x0);
  expect_code(formats::e2m1, -std::numeric_limits<double>::quiet_NaN(), te, 0x0);
  expect_code(formats::e2m1, -0.1, te, 0x8);
  expect_code(formats::e2m1, -0.25, te, 0x8);
  expect_code(formats::e2m1, -0.3, te, 0x9);
  expect_code(formats::e2m1, -HUGE_VAL, te, 0xF);
  expect_code(formats::e2m1, 2.5, te, 0x4);
  // Against the hardware convention on all 16 codes: only 0x8 differs.
  EncodeOptions hw = opts(Rounding::rne, true);
  for (std::uint32_t code = 0; code < 16; ++code) {
    const double v = decode_to_double(formats::e2m1, code);
    EXPECT_EQ(encode(formats::e2m1, v, te).code, code == 0x8 ? 0x0u : code) << hex(code);
    EXPECT_EQ(encode(formats::e2m1, v, hw).code, code) << hex(code);
  }
}

TEST(CodecTraps, MicroxcalingConventionForE2m1) {
  // microxcaling's _round_mantissa (mx/elemwise_ops.py, 7bc4195): sign(A) * floor(|A| + 0.5) on A = 2y in
  // binary32 below 1. torch.sign(-0) = 0, so an exact -0 gives 0x0 while -0.1 keeps 0x8; 0.25 - 2^-26 gives
  // A + 0.5 = 1 - 2^-25, a binary32 tie that rounds to 1.0: 0.5 (0x1) under rna and rne, not 0; rtz ("floor")
  // has no addition. Its neighbours and every E2M1 value encode as in the hardware convention.
  for (Rounding rounding : {Rounding::rna, Rounding::rne, Rounding::rtz}) {
    EncodeOptions mx = opts(rounding, true), hw = opts(rounding, true);
    mx.convention = SpecialConvention::microxcaling;
    const std::uint32_t up = rounding == Rounding::rtz ? 0x0 : 0x1;
    expect_code(formats::e2m1, 0x1p-2 - 0x1p-26, mx, up);
    expect_code(formats::e2m1, -(0x1p-2 - 0x1p-26), mx, up | 0x8);
    expect_code(formats::e2m1, 0x1p-2 - 0x1p-26, hw, 0x0);
    expect_code(formats::e2m1, 0x1p-2 - 0x1p-25, mx, 0x0);
    expect_code(formats::e2m1, 0x1p-2, mx, rounding == Rounding::rna ? 0x1 : 0x0);
    expect_code(formats::e2m1, -0.0, mx, 0x0);
    expect_code(formats::e2m1, -0.1, mx, 0x8);
    for (std::uint32_t code = 0; code < 16; ++code) {
      const double v = decode_to_double(formats::e2m1, code);
      EXPECT_EQ(encode(formats::e2m1, v, mx).code, code == 0x8 ? 0x0u : code) << hex(code);
    }
  }
}

TEST(CodecTraps, SmallCastToSubnormal) {
  // ml_dtypes SmallCastToDenormal: values in the subnormal range round on the subnormal grid.
  expect_code(formats::e4m3, 0x1.4p-8, opts(Rounding::rne), 0b0'0000'010);  // 2.5 * 2^-9: tie -> 2 * 2^-9 (even)
  expect_code(formats::e4m3, 0x1.cp-7, opts(Rounding::rne), 0b0'0000'111);  // 7 * 2^-9 exactly: the top subnormal
  expect_code(formats::e4m3, 0x1.fp-7, opts(Rounding::rne), 0b0'0001'000);  // 7.75 * 2^-9 rounds up into 2^-6
  expect_code(formats::e5m2, 0x1.8p-17, opts(Rounding::rne), 0b0'00000'01);  // 1.5 * 2^-17 > half of 2^-16
  expect_code(formats::e2m1, 0.3, opts(Rounding::rne), 0b0'00'1);
  expect_code(formats::fp16, 0x1p-25, opts(Rounding::rne, false), 0x0000);   // tie with 0
  expect_code(formats::fp16, 0x1.000002p-25, opts(Rounding::rne, false), 0x0001);
}

}  // namespace
}  // namespace fp4sim
