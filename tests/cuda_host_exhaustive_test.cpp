// All 2^32 binary32 inputs through NVIDIA's host conversion functions (cuda_fp4.h, cuda_fp6.h,
// cuda_fp8.h of the CUDA toolkit: __host__ __device__ inline C++ that g++ compiles on the host) against
// fp4sim's Float32Encoder, wherever their modes overlap ours: cudaRoundNearest -> rne, cudaRoundZero
// -> rtz, cudaRoundPosInf -> rup; __NV_SATFINITE -> saturating, __NV_NOSAT -> not.
// (Float32Encoder equals the golden encode() by tests/codec_exhaustive_test.cpp; a mismatch message
// prints the golden code too.) On the host these functions are NVIDIA's own software emulation; the
// device instructions (cvt.rn.satfinite.e2m1x2.f32 ...) need sm_100a/sm_120a, which we do not have.
//
// e4m3 and e5m2 agree on every input in both saturation modes: fp4sim's overflow rule is NVIDIA's
// (docs/semantics.md §0.2): __NV_SATFINITE gives +-MAXNORM for +-Inf too, __NV_NOSAT keeps the
// sign of an overflow NaN (e4m3: 0xFF for a negative value or -Inf), and a NaN input gives the canonical
// 0x7F in both (the float path canonicalises it first).
//
// Where NVIDIA disagrees with fp4sim's semantics, the inputs concerned are named below, NVIDIA's
// behaviour on them is asserted (so a change in a CUDA release shows up), and they are counted in the
// output. Only e8m0 has such inputs, two convention choices:
//  * __nv_cvt_float_to_e8m0 converts |x|: a negative input gives the code of its magnitude, where
//    fp4sim reports a negative value in an unsigned format as invalid (a data error); and a zero
//    input gives code 0x00 (2^-127) even with __NV_NOSAT, where fp4sim without saturation follows
//    ml_dtypes float8_e8m0fnu (zero -> NaN 0xFF, invalid). Saturating, both give 0x00. MX recipes
//    compute E8M0 scales from the amax, which is never negative, and saturate.
// ue4m3 has no conversion of its own; it is E4M3FN with the sign bit 0 (docs/design.md), so it is checked
// against __NV_E4M3/__NV_SATFINITE on every input whose sign bit is clear and on every NaN.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/format.hpp"

#if defined(FP4SIM_HAVE_CUDA_HEADERS)
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>
#endif

namespace fp4sim {
namespace {

enum class NvOp {
  fp4_e2m1_rn,
  fp4_e2m1_rz,
  fp6_e2m3_rn,
  fp6_e2m3_rz,
  fp6_e3m2_rn,
  fp6_e3m2_rz,
  fp8_e4m3_satfinite,
  fp8_e4m3_nosat,
  fp8_e5m2_satfinite,
  fp8_e5m2_nosat,
  ue4m3_via_e4m3_satfinite,
  e8m0_rz_satfinite,
  e8m0_rz_nosat,
  e8m0_rp_satfinite,
  e8m0_rp_nosat,
};

struct NvConfig {
  const char* name;
  NvOp op;
  Format format;
  Rounding rounding;
  bool saturate;
};

void PrintTo(const NvConfig& c, std::ostream* os) { *os << c.name; }

const NvConfig kConfigs[] = {
    {"e2m1_rn", NvOp::fp4_e2m1_rn, formats::e2m1, Rounding::rne, true},
    {"e2m1_rz", NvOp::fp4_e2m1_rz, formats::e2m1, Rounding::rtz, true},
    {"e2m3_rn", NvOp::fp6_e2m3_rn, formats::e2m3, Rounding::rne, true},
    {"e2m3_rz", NvOp::fp6_e2m3_rz, formats::e2m3, Rounding::rtz, true},
    {"e3m2_rn", NvOp::fp6_e3m2_rn, formats::e3m2, Rounding::rne, true},
    {"e3m2_rz", NvOp::fp6_e3m2_rz, formats::e3m2, Rounding::rtz, true},
    {"e4m3_satfinite", NvOp::fp8_e4m3_satfinite, formats::e4m3, Rounding::rne, true},
    {"e4m3_nosat", NvOp::fp8_e4m3_nosat, formats::e4m3, Rounding::rne, false},
    {"e5m2_satfinite", NvOp::fp8_e5m2_satfinite, formats::e5m2, Rounding::rne, true},
    {"e5m2_nosat", NvOp::fp8_e5m2_nosat, formats::e5m2, Rounding::rne, false},
    {"ue4m3_satfinite", NvOp::ue4m3_via_e4m3_satfinite, formats::ue4m3, Rounding::rne, true},
    {"e8m0_rz_satfinite", NvOp::e8m0_rz_satfinite, formats::e8m0, Rounding::rtz, true},
    {"e8m0_rz_nosat", NvOp::e8m0_rz_nosat, formats::e8m0, Rounding::rtz, false},
    {"e8m0_rp_satfinite", NvOp::e8m0_rp_satfinite, formats::e8m0, Rounding::rup, true},
    {"e8m0_rp_nosat", NvOp::e8m0_rp_nosat, formats::e8m0, Rounding::rup, false},
};

#if defined(FP4SIM_HAVE_CUDA_HEADERS)

// Inlined into nv_convert_block<op>, where `op` is a constant and the switch folds away.
inline std::uint32_t nv_convert(NvOp op, float x) {
  switch (op) {
    case NvOp::fp4_e2m1_rn: return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
    case NvOp::fp4_e2m1_rz: return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundZero);
    case NvOp::fp6_e2m3_rn: return __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest);
    case NvOp::fp6_e2m3_rz: return __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundZero);
    case NvOp::fp6_e3m2_rn: return __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest);
    case NvOp::fp6_e3m2_rz: return __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundZero);
    case NvOp::fp8_e4m3_satfinite:
    case NvOp::ue4m3_via_e4m3_satfinite: return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    case NvOp::fp8_e4m3_nosat: return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
    case NvOp::fp8_e5m2_satfinite: return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
    case NvOp::fp8_e5m2_nosat: return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
    case NvOp::e8m0_rz_satfinite: return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero);
    case NvOp::e8m0_rz_nosat: return __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero);
    case NvOp::e8m0_rp_satfinite: return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
    case NvOp::e8m0_rp_nosat: return __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf);
  }
  return 0xFFFFFFFFu;
}

// One loop per conversion: NVIDIA's function inlined into a loop without a branch on the mode. flatten makes
// the inlining certain: without it GCC 12 left __nv_cvt_double_to_fp6 out of line in this file, and the
// e2m3 sweep took 2.6 times as long.
using NvBlock = void (*)(const float* in, std::uint32_t* out, std::uint32_t n);
template <NvOp op>
[[gnu::flatten]] void nv_convert_block(const float* in, std::uint32_t* out, std::uint32_t n) {
  for (std::uint32_t j = 0; j < n; ++j) out[j] = nv_convert(op, in[j]);
}
template <std::size_t... I>
constexpr std::array<NvBlock, sizeof...(I)> nv_blocks(std::index_sequence<I...>) {
  return {&nv_convert_block<static_cast<NvOp>(I)>...};
}
constexpr auto kNvBlocks = nv_blocks(std::make_index_sequence<static_cast<std::size_t>(NvOp::e8m0_rp_nosat) + 1>{});

bool is_e8m0(NvOp op) {
  return op == NvOp::e8m0_rz_satfinite || op == NvOp::e8m0_rz_nosat || op == NvOp::e8m0_rp_satfinite ||
         op == NvOp::e8m0_rp_nosat;
}

enum class Verdict { compare, documented, skip };

// Which inputs fall under a documented difference, and what NVIDIA is expected to give for them.
struct Expectation {
  Verdict verdict;
  std::uint32_t nv_code;  // for `documented`: NVIDIA's expected code
};

// abs_code: fp4sim's code of |x| (read only for e8m0's negative inputs).
Expectation expectation(const NvConfig& c, std::uint32_t bits, std::uint32_t abs_code) {
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  const bool nan = abs > 0x7F800000u;
  const bool negative = (bits >> 31) != 0;
  if (c.op == NvOp::ue4m3_via_e4m3_satfinite) {
    return {negative && !nan ? Verdict::skip : Verdict::compare, 0};
  }
  if (is_e8m0(c.op) && !nan) {
    if (abs == 0) return {c.saturate ? Verdict::compare : Verdict::documented, 0x00u};  // NVIDIA: zero -> 2^-127
    if (negative) return {Verdict::documented, abs_code};  // NVIDIA: the code of |x|
  }
  return {Verdict::compare, 0};
}

class CudaHostExhaustive : public ::testing::TestWithParam<NvConfig> {};

TEST_P(CudaHostExhaustive, AllBinary32InputsAgree) {
  const NvConfig& c = GetParam();
  EncodeOptions o;
  o.rounding = c.rounding;
  o.saturate = c.saturate;
  const Float32Encoder fast(c.format, o);
  const NvBlock nv_convert_all = kNvBlocks[static_cast<std::size_t>(c.op)];
  const bool every_input_compared = c.op != NvOp::ue4m3_via_e4m3_satfinite && !is_e8m0(c.op);
  constexpr std::uint32_t kBlock = 1u << 15;
  constexpr std::int64_t kBlocks = std::int64_t{1} << 17;
  std::uint64_t mismatches = 0, compared = 0, documented = 0, skipped = 0;
  std::mutex mutex;
  std::vector<std::string> first;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel
  {
    std::vector<float> in(kBlock), in_abs(kBlock);
    std::vector<std::uint32_t> out(kBlock), nv(kBlock), out_abs(kBlock, 0);
#pragma omp for schedule(dynamic, 8) reduction(+ : mismatches, compared, documented, skipped)
    for (std::int64_t b = 0; b < kBlocks; ++b) {
      const std::uint32_t base = static_cast<std::uint32_t>(b) << 15;
      for (std::uint32_t j = 0; j < kBlock; ++j) in[j] = std::bit_cast<float>(base | j);
      fast.encode_array(in, out);
      nv_convert_all(in.data(), nv.data(), kBlock);
      const bool negative_block = (base >> 31) != 0;  // a block shares its sign bit
      if (negative_block && is_e8m0(c.op)) {
        for (std::uint32_t j = 0; j < kBlock; ++j) in_abs[j] = std::bit_cast<float>((base | j) & 0x7FFFFFFFu);
        fast.encode_array(in_abs, out_abs);
      }
      // One pass with no branch on the data counts the differences (and, where some inputs are skipped or
      // under a documented difference, the verdicts); the second pass, which reports the differences, runs
      // only for a block that has one.
      std::uint32_t differ = 0;
      if (every_input_compared) {
        for (std::uint32_t j = 0; j < kBlock; ++j) differ += nv[j] != out[j];
        compared += kBlock;
      } else {
        for (std::uint32_t j = 0; j < kBlock; ++j) {
          const Expectation e = expectation(c, base | j, out_abs[j]);
          const std::uint32_t want = e.verdict == Verdict::documented ? e.nv_code : out[j];
          differ += e.verdict != Verdict::skip && nv[j] != want;
          compared += e.verdict == Verdict::compare;
          documented += e.verdict == Verdict::documented;
          skipped += e.verdict == Verdict::skip;
        }
      }
      if (differ == 0) continue;
      for (std::uint32_t j = 0; j < kBlock; ++j) {
        const std::uint32_t bits = base | j;
        const Expectation e = expectation(c, bits, out_abs[j]);
        const std::uint32_t want = e.verdict == Verdict::documented ? e.nv_code : out[j];
        if (e.verdict == Verdict::skip || nv[j] == want) continue;
        ++mismatches;
        std::lock_guard lock(mutex);
        if (first.size() < 10) {
          char buf[224];
          std::snprintf(buf, sizeof buf,
                        "input 0x%08X (%a): NVIDIA 0x%02X, %s 0x%02X (fp4sim Float32Encoder 0x%02X, golden 0x%02X)",
                        bits, static_cast<double>(in[j]), nv[j],
                        e.verdict == Verdict::documented ? "documented NVIDIA behaviour" : "expected", want, out[j],
                        encode(c.format, in[j], o).code);
          first.emplace_back(buf);
        }
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(first.begin(), first.end());
  for (const auto& m : first) ADD_FAILURE() << c.name << ": " << m;
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(compared + documented + skipped, std::uint64_t{1} << 32);
  std::printf("[ %s ] %llu inputs equal, %llu under a documented difference, %llu outside the format, %.1f s on %d threads\n",
              c.name, static_cast<unsigned long long>(compared), static_cast<unsigned long long>(documented),
              static_cast<unsigned long long>(skipped), seconds, omp_get_max_threads());
}

INSTANTIATE_TEST_SUITE_P(Cuda13, CudaHostExhaustive, ::testing::ValuesIn(kConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

// The binary64 entry points (__nv_cvt_double_to_*) against encode(double): the double-rounding trap
// and binary64 inputs just off every midpoint, where a conversion through binary32 would err.
TEST(CudaHostBinary64, DoubleRoundingAndMidpointNeighbours) {
  EncodeOptions rne;
  EXPECT_EQ(__nv_cvt_double_to_fp8(-431.99999999999994, __NV_SATFINITE, __NV_E4M3), 0xFDu);
  EXPECT_EQ(encode(formats::e4m3, -431.99999999999994, rne).code, 0xFDu);
  struct Case {
    const char* name;
    Format f;
    Rounding r;
    bool sat;
    std::uint32_t (*nv)(double);
  };
  const Case cases[] = {
      {"e2m1_rn", formats::e2m1, Rounding::rne, true,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_fp4(x, __NV_E2M1, cudaRoundNearest); }},
      {"e2m1_rz", formats::e2m1, Rounding::rtz, true,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_fp4(x, __NV_E2M1, cudaRoundZero); }},
      {"e2m3_rn", formats::e2m3, Rounding::rne, true,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_fp6(x, __NV_E2M3, cudaRoundNearest); }},
      {"e3m2_rz", formats::e3m2, Rounding::rtz, true,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_fp6(x, __NV_E3M2, cudaRoundZero); }},
      {"e4m3_satfinite", formats::e4m3, Rounding::rne, true,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }},
      {"e4m3_nosat", formats::e4m3, Rounding::rne, false,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E4M3); }},
      {"e5m2_satfinite", formats::e5m2, Rounding::rne, true,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }},
      {"e5m2_nosat", formats::e5m2, Rounding::rne, false,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E5M2); }},
      {"e8m0_rz_satfinite", formats::e8m0, Rounding::rtz, true,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_e8m0(x, __NV_SATFINITE, cudaRoundZero); }},
      {"e8m0_rp_satfinite", formats::e8m0, Rounding::rup, true,
       [](double x) -> std::uint32_t { return __nv_cvt_double_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf); }},
  };
  for (const Case& k : cases) {
    EncodeOptions o;
    o.rounding = k.r;
    o.saturate = k.sat;
    int checked = 0;
    // Every finite non-negative value v of the format and every midpoint m, each +-1 and +-2 binary64
    // ulps, both signs (positive only for e8m0, whose NVIDIA conversion takes |x|).
    std::vector<double> centres;
    double prev = -1.0;
    for (std::uint32_t code = 0; code < (1u << (k.f.exponent_bits + k.f.mantissa_bits)); ++code) {
      const Decoded d = decode(k.f, code);
      if (d.cls != ValueClass::finite && d.cls != ValueClass::zero) continue;
      const double v = decode_to_double(k.f, code);
      centres.push_back(v);
      if (prev >= 0.0) centres.push_back((prev + v) / 2);
      prev = v;
    }
    for (const double centre : centres) {
      for (int step = -2; step <= 2; ++step) {
        const double x = std::bit_cast<double>(std::bit_cast<std::uint64_t>(centre) + static_cast<std::uint64_t>(step));
        if (!(x > 0.0) || !std::isfinite(x)) continue;
        for (const double s : {x, -x}) {
          if (k.f.specials == Specials::pow2_nan && s < 0) continue;
          const std::uint32_t nv = k.nv(s);
          const std::uint32_t ours = encode(k.f, s, o).code;
          EXPECT_EQ(nv, ours) << k.name << " input " << std::hexfloat << s << " (0x" << std::hex
                              << std::bit_cast<std::uint64_t>(s) << "): NVIDIA 0x" << nv << ", fp4sim 0x" << ours;
          ++checked;
        }
      }
    }
    // +-Inf: the overflow rule, as for binary32.
    for (const double s : {HUGE_VAL, -HUGE_VAL}) {
      if (k.f.specials == Specials::pow2_nan && s < 0) continue;
      EXPECT_EQ(k.nv(s), encode(k.f, s, o).code) << k.name << " input " << s;
    }
    EXPECT_GT(checked, 0) << k.name;
  }
}

// A binary64 NaN: NVIDIA's binary64 host path, unlike its binary32 one, does not canonicalise: it keeps
// the NaN's sign, and for e5m2 the NaN's top two payload bits (0x7E for the default quiet NaN, whose
// payload is 10...). fp4sim gives the canonical NaN 0x7F for every NaN input, binary32 or binary64
// (docs/semantics.md §0.2). Both sides asserted, so a change in either shows.
TEST(CudaHostBinary64, NanInputsAreCanonicalInFp4simOnly) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto sat : {__NV_SATFINITE, __NV_NOSAT}) {
    EXPECT_EQ(__nv_cvt_double_to_fp8(nan, sat, __NV_E4M3), 0x7Fu);
    EXPECT_EQ(__nv_cvt_double_to_fp8(-nan, sat, __NV_E4M3), 0xFFu);
    EXPECT_EQ(__nv_cvt_double_to_fp8(nan, sat, __NV_E5M2), 0x7Eu);
    EXPECT_EQ(__nv_cvt_double_to_fp8(-nan, sat, __NV_E5M2), 0xFEu);
    // The binary32 entry point canonicalises first.
    EXPECT_EQ(__nv_cvt_float_to_fp8(-std::numeric_limits<float>::quiet_NaN(), sat, __NV_E4M3), 0x7Fu);
    EXPECT_EQ(__nv_cvt_float_to_fp8(-std::numeric_limits<float>::quiet_NaN(), sat, __NV_E5M2), 0x7Fu);
  }
  for (const bool saturate : {true, false}) {
    EncodeOptions o;
    o.saturate = saturate;
    for (const double x : {nan, -nan}) {
      EXPECT_EQ(encode(formats::e4m3, x, o).code, 0x7Fu);
      EXPECT_EQ(encode(formats::e5m2, x, o).code, 0x7Fu);
    }
  }
}

#else  // no CUDA headers

TEST(CudaHostExhaustive, AllBinary32InputsAgree) {
  GTEST_SKIP() << "the CUDA toolkit's cuda_fp4.h/cuda_fp6.h/cuda_fp8.h were not found at configure time";
}

#endif

}  // namespace
}  // namespace fp4sim
