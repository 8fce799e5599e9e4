// The facts CUTLASS's float_subbyte.h comment blocks and the OCP/NVIDIA docs state for each preset,
// checked against what the format data derives.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/format.hpp"

namespace fp4sim {
namespace {

struct Facts {
  const char* name;
  double max_finite, min_normal, min_subnormal;  // min_subnormal 0: none
  bool has_inf, has_nan;
};

const Facts kFacts[] = {
    {"e2m1", 6.0, 1.0, 0.5, false, false},
    {"e2m3", 7.5, 1.0, 0.125, false, false},
    {"e3m2", 28.0, 0.25, 0.0625, false, false},
    {"e4m3", 448.0, 0x1p-6, 0x1p-9, false, true},
    {"e5m2", 57344.0, 0x1p-14, 0x1p-16, true, true},
    {"ue4m3", 448.0, 0x1p-6, 0x1p-9, false, true},
    {"ue5m3", 61440.0, 0x1p-14, 0x1p-17, false, false},
    {"ue5m3fn", 114688.0, 0x1p-14, 0x1p-17, false, true},
    {"e8m0", 0x1p127, 0x1p-127, 0.0, false, true},
    {"bf16", 0x1.FEp127, 0x1p-126, 0x1p-133, true, true},
    {"fp16", 65504.0, 0x1p-14, 0x1p-24, true, true},
    {"fp32", 0x1.FFFFFEp127, 0x1p-126, 0x1p-149, true, true},
};

class FormatFacts : public ::testing::TestWithParam<Facts> {};

TEST_P(FormatFacts, DerivedLimitsMatchTheSpecifications) {
  const Facts& facts = GetParam();
  const auto f = parse_format(facts.name);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(decode_to_double(*f, f->max_finite_code()), facts.max_finite);
  const std::uint32_t min_normal_code = f->specials == Specials::pow2_nan ? 0u : 1u << f->mantissa_bits;
  EXPECT_EQ(decode_to_double(*f, min_normal_code), facts.min_normal);
  if (facts.min_subnormal != 0.0) {
    ASSERT_TRUE(f->has_subnormals());
    EXPECT_EQ(decode_to_double(*f, 1), facts.min_subnormal);
  } else {
    EXPECT_FALSE(f->has_subnormals());
  }
  EXPECT_EQ(f->has_inf(), facts.has_inf);
  EXPECT_EQ(f->has_nan(), facts.has_nan);
  EXPECT_EQ(format_name(*f), facts.name);
}

INSTANTIATE_TEST_SUITE_P(Presets, FormatFacts, ::testing::ValuesIn(kFacts),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(FormatTable, EveryPresetHasFacts) {
  for (const auto& preset : format_presets()) {
    bool found = false;
    for (const auto& facts : kFacts) found |= preset.name == facts.name;
    EXPECT_TRUE(found) << preset.name;
  }
}

TEST(FormatParse, DescriptorsAndBiasOverride) {
  EXPECT_EQ(parse_format("e4m3"), formats::e4m3);
  EXPECT_EQ(parse_format("ue8m0"), formats::e8m0);
  const auto e4m3b11 = parse_format("e4m3b11fn");
  ASSERT_TRUE(e4m3b11);
  EXPECT_EQ(e4m3b11->bias, 11);
  EXPECT_EQ(e4m3b11->specials, Specials::fn);
  EXPECT_EQ(format_name(*e4m3b11), "e4m3b11fn");
  const auto e3m4 = parse_format("e3m4");
  ASSERT_TRUE(e3m4);
  EXPECT_EQ(e3m4->bias, 3);
  EXPECT_EQ(e3m4->specials, Specials::ieee);
  for (const char* bad : {"", "e", "e4", "m3", "e0m3", "e9m1", "e4m3x", "x4m3", "e4m3b", "e4m3b300", "E4M3", "fp8"}) {
    EXPECT_FALSE(parse_format(bad).has_value()) << bad;
  }
}

// A descriptor spelled like a preset of other specials names that preset, so the name of such a format
// states its bias (found by tests/fuzz/format_parse_fuzz.cpp: "e08m0" was named "e8m0", the E8M0 scale).
TEST(FormatParse, NamesOfFormatsSpelledLikePresetsParseBack) {
  for (const auto& [text, name] : {std::pair{"e08m0", "e8m0b127"}, std::pair{"e04m3", "e4m3b7"},
                                   std::pair{"e02m1", "e2m1b1"}, std::pair{"e3m4", "e3m4"}}) {
    const auto f = parse_format(text);
    ASSERT_TRUE(f) << text;
    EXPECT_EQ(format_name(*f), name) << text;
    EXPECT_EQ(parse_format(format_name(*f)), f) << text;
  }
}

// ml_dtypes', MLIR's and PyTorch's names mean their formats (tests/python/test_ml_dtypes.py checks every
// code against ml_dtypes); "e2m1fn" is ml_dtypes' float4_e2m1fn without its prefix, so the descriptor of
// e2m1 with NaN at the all-ones code is named with its bias.
TEST(FormatParse, EcosystemNames) {
  for (const char* name : {"float4_e2m1fn", "f4E2M1FN", "e2m1fn"}) EXPECT_EQ(parse_format(name), formats::e2m1) << name;
  for (const char* name : {"float8_e4m3fn", "f8E4M3FN", "torch.float8_e4m3fn"}) {
    EXPECT_EQ(parse_format(name), formats::e4m3) << name;
  }
  EXPECT_EQ(parse_format("float8_e8m0fnu"), formats::e8m0);
  EXPECT_EQ(parse_format("f6E3M2FN"), formats::e3m2);
  const auto e4m3_ieee = parse_format("float8_e4m3");
  ASSERT_TRUE(e4m3_ieee);
  EXPECT_EQ(e4m3_ieee->specials, Specials::ieee);
  EXPECT_EQ(format_name(*e4m3_ieee), "e4m3b7");
  const Format e2m1_nan{2, 1, 1, true, Specials::fn};
  EXPECT_EQ(format_name(e2m1_nan), "e2m1b1fn");
  EXPECT_EQ(parse_format("e2m1b1fn"), e2m1_nan);
}

TEST(FormatParse, RefusalsSayWhatToWrite) {
  const auto message = [](const char* text) {
    try {
      format_argument(text, "--format");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("float8_e4m3fnuz").find("NaN at the negative-zero code 0x80"), std::string::npos);
  EXPECT_NE(message("f8E4M3B11FNUZ").find("NaN at the negative-zero code 0x80"), std::string::npos);
  EXPECT_NE(message("torch.float4_e2m1fn_x2").find("float4_e2m1fn or e2m1"), std::string::npos);
  EXPECT_EQ(message("e1m2"), "--format: 'e1m2' has a 1-bit exponent, which leaves no room for Inf and NaN beside "
                             "the finite numbers: write 'e1m2fin' (every code finite) or 'e1m2fn' (NaN at the "
                             "all-ones code)");
  EXPECT_NE(message("e9m9").find("unknown format 'e9m9'"), std::string::npos);
}

TEST(FormatDecode, SpecialCodes) {
  // Binary literals as sign'exponent'mantissa, as ml_dtypes writes them.
  EXPECT_EQ(decode(formats::e4m3, 0b0'1111'111).cls, ValueClass::nan);
  EXPECT_EQ(decode(formats::e4m3, 0b1'1111'111).cls, ValueClass::nan);
  EXPECT_EQ(decode_to_double(formats::e4m3, 0b1'1111'110), -448.0);
  EXPECT_EQ(decode(formats::e5m2, 0b0'11111'00).cls, ValueClass::inf);
  EXPECT_EQ(decode(formats::e5m2, 0b0'11111'01).cls, ValueClass::nan);
  EXPECT_EQ(decode(formats::ue5m3, 0b11111'000).cls, ValueClass::invalid);
  EXPECT_EQ(decode_to_double(formats::ue5m3, 0b11110'111), 61440.0);
  EXPECT_EQ(decode_to_double(formats::ue5m3fn, 0b11111'110), 114688.0);
  EXPECT_EQ(decode(formats::ue5m3fn, 0xFF).cls, ValueClass::nan);
  EXPECT_EQ(decode(formats::ue4m3, 0x80).cls, ValueClass::invalid);
  EXPECT_EQ(decode(formats::e8m0, 0xFF).cls, ValueClass::nan);
  EXPECT_EQ(decode_to_double(formats::e8m0, 0x00), 0x1p-127);
  EXPECT_EQ(decode_to_double(formats::e8m0, 0x7F), 1.0);
  EXPECT_TRUE(std::signbit(decode_to_double(formats::e2m1, 0b1'00'0)));
  EXPECT_EQ(decode(formats::e2m1, 0x10).cls, ValueClass::invalid);
}

}  // namespace
}  // namespace fp4sim
