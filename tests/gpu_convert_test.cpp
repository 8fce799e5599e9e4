// The GPU conversion (emu/convert.cu) judged by the golden encoder, in the manner of CUTLASS's
// test/unit/core/numeric_conversion.cu: same inputs on both sides, compared code by code, every
// mismatch printed with format, rounding, input and both codes in hex.
//
// Three kinds of test:
//  * Device.*: the kernels on the GPU. Without a usable CUDA device they GTEST_SKIP (ctest reports them
//    skipped, never passed).
//  * HostEmulation.*: the same per-element functions (fp4sim/emu/element_convert.hpp), compiled for the host, against the
//    golden encoder on the same inputs. This is the GPU's algorithm (not the golden code compiled twice),
//    so it is checked in CI on machines without a GPU; Device.* then checks what nvcc made of it.
//  * Api.*: status codes that need no device.
// Cases are drawn from the preset table, the rounding table and both saturation settings, filtered by
// gpu::supports, so a new supported row adds its tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/emu/element_convert.hpp"
#include "fp4sim/emu/gpu.hpp"

namespace fp4sim {
namespace {

struct Case {
  std::string format_name;
  Format format;
  Rounding rounding;
  bool saturate;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.format_name << " " << name_of(c.rounding) << (c.saturate ? "" : " non-saturating");
}

EncodeOptions options_of(const Case& c) {
  EncodeOptions o;
  o.rounding = c.rounding;
  o.saturate = c.saturate;
  o.convention = SpecialConvention::hardware;
  return o;
}

std::vector<Case> supported_cases() {
  std::vector<Case> cases;
  for (const auto& preset : format_presets()) {
    for (const auto& mode : names(Rounding{})) {
      for (const bool saturate : {true, false}) {
        const Case c{std::string(preset.name), preset.format, mode.value, saturate};
        if (gpu::supports(c.format, options_of(c)) == gpu::Status::success) cases.push_back(c);
      }
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.format_name + "_" + std::string(name_of(info.param.rounding)) +
                     (info.param.saturate ? "" : "_nosat");
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

void add_bits(std::vector<float>& v, std::uint32_t bits) { v.push_back(std::bit_cast<float>(bits)); }

// Special values, every representable value of the format with its midpoints, and one binary32 ulp
// either side of each (CPFloat's deterministic_rounding_normal_numbers), both signs.
std::vector<float> special_inputs(const Format& f) {
  std::vector<float> v;
  for (std::uint32_t bits : {0x00000000u, 0x00000001u, 0x00000002u, 0x003FFFFFu, 0x00400000u, 0x00400001u,
                             0x005FFFFFu, 0x00600000u, 0x00600001u, 0x007FFFFFu, 0x00800000u, 0x00800001u,
                             0x00C00000u, 0x3F800000u, 0x7F7FFFFFu, 0x7F000000u, 0x7F400000u, 0x7F400001u,
                             0x7F800000u, 0x7F800001u, 0x7FC00000u, 0x7FFFFFFFu, 0x7FA00000u}) {
    add_bits(v, bits);
    add_bits(v, bits | 0x80000000u);
  }
  std::vector<double> values;
  for (std::uint32_t code = 0; code <= f.magnitude_mask(); ++code) {
    const double d = decode_to_double(f, code);
    if (std::isfinite(d)) values.push_back(d);
  }
  std::sort(values.begin(), values.end());
  const std::size_t count = values.size();
  for (std::size_t i = 0; i + 1 < count; ++i) values.push_back((values[i] + values[i + 1]) / 2);  // exact
  values.push_back(values[count - 1] * 1.5);  // past max finite, and its overflow midpoint
  values.push_back(values[count - 1] * 2.0);
  for (double d : values) {
    const float x = static_cast<float>(d);  // exact, or Inf past binary32 (e8m0's 2^128)
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFu;
    for (std::uint32_t b : {bits - 1, bits, bits + 1}) {
      if (bits == 0 && b == bits - 1) continue;
      add_bits(v, b);
      add_bits(v, b | 0x80000000u);
    }
  }
  return v;
}

// Every binary32 exponent field and sign, crossed with mantissa patterns that put a tie, and one unit
// either side of it, at every bit position (TestFloat's exponent x significand-pattern cases).
std::vector<float> pattern_inputs() {
  std::vector<std::uint32_t> mantissas;
  for (std::uint32_t top = 0; top < 16; ++top) {
    const std::uint32_t high = top << 19;
    mantissas.push_back(high);
    for (int j = 0; j < 19; ++j) {
      const std::uint32_t tie = std::uint32_t{1} << j;
      mantissas.push_back(high | (tie - 1));
      mantissas.push_back(high | tie);
      mantissas.push_back(high | (tie + 1));
    }
    mantissas.push_back(high | 0x7FFFFu);
  }
  std::vector<float> v;
  v.reserve(512 * mantissas.size());
  for (std::uint32_t sign_exp = 0; sign_exp < 512; ++sign_exp) {
    for (std::uint32_t m : mantissas) add_bits(v, (sign_exp << 23) | (m & 0x7FFFFFu));
  }
  return v;
}

// Random bit patterns (mostly far outside small formats' range) and random values within +-4x max finite.
std::vector<float> random_inputs(const Format& f, std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> v;
  v.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) add_bits(v, static_cast<std::uint32_t>(gen()));
  const double max_finite = decode_to_double(f, f.max_finite_code());
  std::uniform_real_distribution<double> dist(-4 * max_finite, 4 * max_finite);
  for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<float>(dist(gen)));
  return v;
}

std::vector<float> all_inputs(const Format& f) {
  std::vector<float> v = special_inputs(f);
  const std::vector<float> p = pattern_inputs();
  const std::vector<float> r = random_inputs(f, 1 << 18, 20240607u);
  v.insert(v.end(), p.begin(), p.end());
  v.insert(v.end(), r.begin(), r.end());
  return v;
}

// Compares actual[i] with the golden code of in[i]; prints the first mismatches, returns their count.
std::size_t count_mismatches(const Case& c, const std::vector<float>& in, const std::vector<std::uint32_t>& actual,
                             const char* side) {
  const EncodeOptions o = options_of(c);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint32_t expected = encode(c.format, in[i], o).code;
    if (actual[i] == expected) continue;
    if (++mismatches <= 10) {
      ADD_FAILURE() << side << " " << c.format_name << " " << name_of(c.rounding) << ": input 0x" << std::hex
                    << std::bit_cast<std::uint32_t>(in[i]) << " (" << std::hexfloat << in[i] << ") expected 0x"
                    << expected << " got 0x" << actual[i];
    }
  }
  return mismatches;
}

template <emu::Round R>
std::uint32_t host_emulation(const Case& c, const emu::SmallFormat& sf, std::uint32_t bits) {
  if (c.format == formats::e2m1) return emu::f32_to_e2m1<R>(bits);
  if (c.format == formats::e8m0) return emu::f32_to_e8m0<R>(bits);
  return emu::f32_to_small<R>(sf, bits);
}

std::uint32_t host_emulation(const Case& c, std::uint32_t bits) {
  const emu::SmallFormat sf = emu::small_format_of(c.format, c.saturate);  // as the host API fills it
  switch (c.rounding) {
    case Rounding::rne: return host_emulation<emu::Round::rne>(c, sf, bits);
    case Rounding::rna: return host_emulation<emu::Round::rna>(c, sf, bits);
    case Rounding::rtz: return host_emulation<emu::Round::rtz>(c, sf, bits);
    case Rounding::rup: return host_emulation<emu::Round::rup>(c, sf, bits);
    case Rounding::rdown: return host_emulation<emu::Round::rdown>(c, sf, bits);
    default: ADD_FAILURE() << "no emulation for " << name_of(c.rounding); return 0;
  }
}

class HostEmulation : public ::testing::TestWithParam<Case> {};

TEST_P(HostEmulation, MatchesGoldenEncoder) {
  const Case& c = GetParam();
  const std::vector<float> in = all_inputs(c.format);
  std::vector<std::uint32_t> actual(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) actual[i] = host_emulation(c, std::bit_cast<std::uint32_t>(in[i]));
  EXPECT_EQ(count_mismatches(c, in, actual, "host emulation"), 0u) << "of " << in.size() << " inputs";
}

INSTANTIATE_TEST_SUITE_P(Supported, HostEmulation, ::testing::ValuesIn(supported_cases()), case_name);

class Device : public ::testing::TestWithParam<Case> {};

TEST_P(Device, MatchesGoldenEncoder) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that runs sm_90 kernels";
  const Case& c = GetParam();
  std::vector<float> in = all_inputs(c.format);
  // Lengths that are not a multiple of 4 exercise the kernel's scalar tail.
  for (std::size_t extra = 0; extra < 3; ++extra) {
    std::vector<std::uint8_t> out(in.size(), 0xAA);
    const gpu::Status s = gpu::convert(c.format, options_of(c), in, out);
    ASSERT_EQ(s, gpu::Status::success) << gpu::status_name(s);
    const std::vector<std::uint32_t> actual(out.begin(), out.end());
    EXPECT_EQ(count_mismatches(c, in, actual, "GPU"), 0u) << "of " << in.size() << " inputs";
    in.pop_back();
  }
}

INSTANTIATE_TEST_SUITE_P(Supported, Device, ::testing::ValuesIn(supported_cases()), case_name);

TEST(Device, EmptyAndTinyArrays) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that runs sm_90 kernels";
  std::vector<std::uint8_t> out(3, 0xAA);
  EXPECT_EQ(gpu::convert(formats::e2m1, {}, std::span<const float>{}, out), gpu::Status::success);
  const std::vector<float> in{1.0f, -6.0f, 0.25f};
  ASSERT_EQ(gpu::convert(formats::e2m1, {}, in, out), gpu::Status::success);
  EXPECT_EQ(out, (std::vector<std::uint8_t>{0b0'01'0, 0b1'11'1, 0b0'00'0}));
}

TEST(Api, ExpectedFormatsAndModesAreSupported) {
  for (const Format& f : {formats::e2m1, formats::e4m3, formats::e5m2, formats::ue4m3, formats::ue5m3, formats::e8m0}) {
    for (Rounding r : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdown}) {
      EncodeOptions o;
      o.rounding = r;
      EXPECT_EQ(gpu::supports(f, o), gpu::Status::success) << format_name(f) << " " << name_of(r);
    }
  }
  // Without saturation: the formats whose overflow has an Inf or NaN code to go to.
  for (const Format& f : {formats::e4m3, formats::e5m2, formats::ue4m3, formats::ue5m3fn}) {
    EncodeOptions o;
    o.saturate = false;
    EXPECT_EQ(gpu::supports(f, o), gpu::Status::success) << format_name(f);
  }
}

TEST(Api, UnsupportedRequestsReturnAStatus) {
  const std::vector<float> in(8, 1.0f);
  std::vector<std::uint8_t> out(8);
  EncodeOptions rne;
  EXPECT_EQ(gpu::convert(formats::bf16, rne, in, out), gpu::Status::unsupported_format);
  EXPECT_EQ(gpu::convert(formats::fp16, rne, in, out), gpu::Status::unsupported_format);
  EncodeOptions stochastic;
  stochastic.rounding = Rounding::sr_fast;
  EXPECT_EQ(gpu::convert(formats::e2m1, stochastic, in, out), gpu::Status::unsupported_options);
  EncodeOptions no_saturate;
  no_saturate.saturate = false;
  // Overflow without Inf or NaN is a data error, which a kernel cannot report; e8m0's kernel saturates only.
  for (const Format& f : {formats::e2m1, formats::e2m3, formats::e3m2, formats::ue5m3, formats::e8m0}) {
    EXPECT_EQ(gpu::convert(f, no_saturate, in, out), gpu::Status::unsupported_options) << format_name(f);
  }
  EncodeOptions te;
  te.convention = SpecialConvention::te_python;
  EXPECT_EQ(gpu::convert(formats::e2m1, te, in, out), gpu::Status::unsupported_options);
  std::vector<std::uint8_t> short_out(7);
  EXPECT_EQ(gpu::convert(formats::e2m1, rne, in, short_out), gpu::Status::invalid_argument);
}

TEST(Api, NoDeviceIsAStatusNotAnExit) {
  if (gpu::device_available()) GTEST_SKIP() << "a device is present; Device.* cover this path";
  const std::vector<float> in(8, 1.0f);
  std::vector<std::uint8_t> out(8);
  EXPECT_EQ(gpu::convert(formats::e2m1, {}, in, out), gpu::Status::no_device);
}

}  // namespace
}  // namespace fp4sim
