// The golden encoder against an exact reference written here independently with Boost.Multiprecision
// (TestFloat's slowfloat role): each format's representable magnitudes are enumerated from their
// sign/exponent/mantissa fields as exact binary floating-point numbers, and the result of a
// deterministic rounding mode is the neighbour that an exact comparison with the exact midpoint picks.
//
// Inputs (CPFloat test/cpfloat_test.ts `deterministic_rounding_normal_numbers`, TestFloat genCases):
//  * every representable value, every midpoint between neighbours (including 0..min and max..the
//    first unrepresentable value), and their +-1 binary32-ulp and +-1 binary64-ulp neighbours, both
//    signs, for every preset with <= 16-bit codes, every deterministic mode, saturating and not;
//  * 10^7 random binary32 inputs per format (fixed seed, weighted toward the format's range, its
//    values and midpoints, TestFloat-style significand patterns, and raw bit patterns) for RNE,
//    saturating and not, and 10^6 per format for each other deterministic mode;
//  * 10^6 random binary64 inputs per format near midpoints (bits below binary32's precision).
// The golden path is checked through encode(double), encode(float) and Float32Encoder.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/core/rounding.hpp"

namespace fp4sim {

// gtest prints a parameter with PrintTo (ctest shows it beside each test's name).
void PrintTo(const NamedFormat& f, std::ostream* os) { *os << f.name; }

namespace {

namespace mp = boost::multiprecision;
// 64 significand bits: every number formed here is exact in it (inputs are binary64, table values
// have <= 24 significand bits, and a midpoint of two neighbours has at most 2 more bits than they do).
using Exact = mp::number<mp::backends::cpp_bin_float<64, mp::backends::digit_base_2, void, std::int32_t, -16000, 16000>,
                         mp::et_off>;

constexpr std::uint64_t kSeed = 0x5EED'F0F4'0000'0001ull;

// The sanitizer build (tools/test.sh, -fsanitize=address,undefined) checks memory and UB, not coverage:
// it runs a twentieth of the random inputs. The release build runs them all.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kRandomScale = 20;
#else
constexpr std::uint64_t kRandomScale = 1;
#endif

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llX", static_cast<unsigned long long>(v));
  return buf;
}

std::string describe_input(double x) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%a (binary64 0x%016llX", x, static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(x)));
  std::string s = buf;
  const float xf = static_cast<float>(x);
  if (static_cast<double>(xf) == x || std::isnan(x)) {
    std::snprintf(buf, sizeof buf, ", binary32 0x%08X", std::bit_cast<std::uint32_t>(xf));
    s += buf;
  }
  return s + ")";
}

// --- The reference ----------------------------------------------------------------------------------

struct Magnitude {
  double value;        // exact (every value of a <= 16-bit format is a binary64)
  Exact exact;         // the same value built in Boost from the fields
  std::uint32_t code;  // magnitude code; the virtual value past max has max_code + 1
  Exact mid_above;     // exact midpoint between this value and the next one (unused for the last)
};

struct Reference {
  std::string name;
  Format f;  // read only for its parameters (E, M, bias, signedness, specials)
  std::vector<Magnitude> mags;  // ascending non-negative finite values, then the virtual "next" past max
  std::uint32_t sign_bit = 0;
  std::uint32_t max_code = 0;
  std::uint32_t nan_code = 0;  // canonical: all-ones positive magnitude
  std::uint32_t inf_code = 0;
  bool has_zero = true, has_inf = false, has_nan = false;
  Exact min_normal;

  const Magnitude& max() const { return mags[mags.size() - 2]; }
  const Magnitude& next() const { return mags.back(); }
};

Exact exact_pow2_times(std::uint64_t integer, int exponent) {
  Exact v(integer);
  return mp::ldexp(v, exponent);
}

Reference build_reference(const std::string& name, const Format& f) {
  Reference r;
  r.name = name;
  r.f = f;
  const int E = f.exponent_bits, M = f.mantissa_bits;
  const std::uint32_t top = (1u << E) - 1;
  r.sign_bit = f.is_signed ? 1u << (E + M) : 0;
  r.nan_code = (1u << (E + M)) - 1;
  r.inf_code = top << M;
  r.has_inf = f.specials == Specials::ieee;
  r.has_nan = f.specials == Specials::ieee || f.specials == Specials::fn || f.specials == Specials::pow2_nan;
  r.has_zero = f.specials != Specials::pow2_nan;
  r.min_normal = f.specials == Specials::pow2_nan ? exact_pow2_times(1, -f.bias) : exact_pow2_times(1, 1 - f.bias);
  std::uint64_t last_sig = 0;
  int last_exp = 0;
  for (std::uint32_t code = 0; code < (1u << (E + M)); ++code) {
    const std::uint32_t field = code >> M, frac = code & ((1u << M) - 1);
    // Which magnitude codes are numbers (docs/design.md, format.hpp's Specials comments).
    bool number = true;
    switch (f.specials) {
      case Specials::ieee: number = field != top; break;
      case Specials::fn: number = code != r.nan_code; break;
      case Specials::pow2_nan: number = field != top; break;
      case Specials::reserved_top: number = field != top; break;
      case Specials::finite: break;
    }
    if (!number) continue;
    std::uint64_t sig;
    int exp;
    if (f.specials == Specials::pow2_nan) {
      sig = 1;
      exp = static_cast<int>(field) - f.bias;
    } else if (field == 0) {
      sig = frac;
      exp = 1 - f.bias - M;
    } else {
      sig = (std::uint64_t{1} << M) | frac;
      exp = static_cast<int>(field) - f.bias - M;
    }
    const Exact v = exact_pow2_times(sig, exp);
    r.mags.push_back({v.convert_to<double>(), v, code, Exact(0)});
    r.max_code = code;
    last_sig = sig;
    last_exp = exp;
  }
  // The first value past max: one more unit in max's last place (the would-be next code).
  const Exact next = exact_pow2_times(last_sig + 1, last_exp);
  r.mags.push_back({next.convert_to<double>(), next, r.max_code + 1, Exact(0)});
  for (std::size_t i = 0; i + 1 < r.mags.size(); ++i) r.mags[i].mid_above = (r.mags[i].exact + r.mags[i + 1].exact) / 2;
  for (std::size_t i = 0; i < r.mags.size(); ++i) {
    if (Exact(r.mags[i].value) != r.mags[i].exact) throw std::logic_error(name + ": value not exact in binary64");
    if (i > 0 && !(r.mags[i - 1].exact < r.mags[i].exact)) throw std::logic_error(name + ": codes not monotone");
  }
  return r;
}

struct Expected {
  bool invalid = false;     // a data error: only the invalid flag is checked
  std::uint32_t code = 0;
  bool check_flags = false;  // inexact/underflow/overflow are checked for finite nonzero inputs
  std::uint8_t flags = 0;
};

Expected reference_encode(const Reference& R, double x, Rounding mode, bool saturate) {
  Expected out;
  const bool negative = std::signbit(x);
  if (std::isnan(x)) {
    if (R.has_nan) return {false, R.nan_code};
    if (saturate) return {false, R.max().code};  // docs/semantics.md G3: NaN -> +max
    return {true};
  }
  if (!R.f.is_signed && negative && x != 0.0) return {true};  // negative into unsigned (-Inf too)
  const std::uint32_t sign = negative ? R.sign_bit : 0;
  if (x == 0.0) {
    if (R.has_zero) return {false, sign};
    if (saturate) return {false, 0};  // e8m0: its minimum, code 0
    return {true};
  }
  // Overflow and +-Inf (NVIDIA's rule, docs/semantics.md §0.2): +-max when saturating, IEEE formats too;
  // else +-Inf, else NaN with the sign, else a data error.
  if (std::isinf(x)) {
    if (saturate) return {false, R.max().code | sign};
    if (R.has_inf) return {false, R.inf_code | sign};
    if (R.has_nan) return {false, R.nan_code | sign};
    return {true};
  }
  const double a = std::fabs(x);
  const Exact A(a);
  out.check_flags = true;
  // Bracket: the last magnitude <= a, by exact binary64 comparison.
  const auto it = std::upper_bound(R.mags.begin(), R.mags.end(), a,
                                   [](double v, const Magnitude& m) { return v < m.value; });
  if (it == R.mags.begin()) {
    // Below the smallest value of a format without zero (e8m0): code 0 in every mode.
    out.code = R.mags.front().code;
    out.flags = flag::inexact | flag::underflow;
    return out;
  }
  const std::size_t i = static_cast<std::size_t>(it - R.mags.begin()) - 1;
  const std::size_t last_finite = R.mags.size() - 2;
  std::size_t lo = std::min(i, last_finite), hi = lo + 1;
  bool chose_hi = false;
  const bool exact = i <= last_finite && R.mags[i].exact == A;
  if (!exact) {
    // a lies strictly between mags[lo] and mags[hi], or at/after the virtual next value.
    const bool beyond = i > last_finite;  // a >= next
    const Exact& mid = R.mags[lo].mid_above;
    switch (mode) {
      case Rounding::rne:
        chose_hi = beyond || A > mid || (A == mid && (R.mags[hi].code % 2 == 0));
        break;
      case Rounding::rna: chose_hi = beyond || A >= mid; break;
      case Rounding::rtz: chose_hi = false; break;
      case Rounding::rup: chose_hi = !negative; break;
      case Rounding::rdown: chose_hi = negative; break;
      default: throw std::logic_error("deterministic modes only");
    }
    out.flags |= flag::inexact;
    if (A < R.min_normal) out.flags |= flag::underflow;
    if (beyond || (chose_hi && hi == R.mags.size() - 1)) {
      // Overflow: the result in an unbounded exponent range is past max.
      out.flags |= flag::overflow;
      const bool toward_zero = !chose_hi;
      if (saturate || toward_zero) {
        out.code = R.max().code | sign;
      } else if (R.has_inf) {
        out.code = R.inf_code | sign;
      } else if (R.has_nan) {
        out.code = R.nan_code | sign;
      } else {
        out.invalid = true;
      }
      return out;
    }
  }
  out.code = R.mags[chose_hi ? hi : lo].code | sign;
  return out;
}

// --- Checking ---------------------------------------------------------------------------------------

struct Failures {
  std::atomic<std::uint64_t> count{0};
  std::mutex mutex;
  std::vector<std::string> first;

  void add(std::string message) {
    if (count.fetch_add(1) < 20) {
      std::lock_guard lock(mutex);
      first.push_back(std::move(message));
    }
  }
  void report(std::uint64_t checked) {
    for (const auto& m : first) ADD_FAILURE() << m;
    EXPECT_EQ(count.load(), 0u) << "mismatches out of " << checked << " checks";
  }
};

const char* mode_name(Rounding r) { return rounding_name(r).data(); }

// Checks every golden entry point on x; returns the number of comparisons made.
int check_one(const Reference& R, double x, Rounding mode, bool saturate, Failures& failures,
              const Float32Encoder* fast) {
  const Expected want = reference_encode(R, x, mode, saturate);
  EncodeOptions o;
  o.rounding = mode;
  o.saturate = saturate;
  const auto compare = [&](const char* path, std::uint32_t code, int flags) {
    const bool flag_invalid = flags >= 0 && (flags & flag::invalid) != 0;
    bool ok;
    if (want.invalid) {
      ok = flags < 0 || flag_invalid;  // the fast path has no flags: any code
    } else {
      ok = code == want.code && !flag_invalid;
      if (ok && want.check_flags && flags >= 0) {
        constexpr int kChecked = flag::inexact | flag::underflow | flag::overflow | flag::invalid;
        ok = (flags & kChecked) == want.flags;
      }
    }
    if (!ok) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s %s %s %s: input ", R.name.c_str(), mode_name(mode),
                    saturate ? "saturating" : "non-saturating", path);
      std::string message = buf + describe_input(x);
      message += want.invalid ? " expected invalid" : " expected code " + hex(want.code) + " flags " + hex(want.flags);
      message += " got code " + hex(code) + (flags >= 0 ? " flags " + hex(static_cast<std::uint32_t>(flags)) : "");
      failures.add(std::move(message));
    }
  };
  const Encoded g = encode(R.f, x, o);
  compare("encode(double)", g.code, g.flags);
  int checks = 1;
  const float xf = static_cast<float>(x);
  if (static_cast<double>(xf) == x || std::isnan(x)) {
    const Encoded g32 = encode(R.f, xf, o);
    compare("encode(float)", g32.code, g32.flags);
    if (fast) compare("Float32Encoder", (*fast)(std::bit_cast<std::uint32_t>(xf)), -1);
    checks += fast ? 2 : 1;
  }
  return checks;
}

std::vector<NamedFormat> enumerable_presets() {
  std::vector<NamedFormat> out;
  for (const auto& p : format_presets()) {
    if (p.format.storage_bits() <= 16) out.push_back(p);
  }
  return out;
}

constexpr Rounding kDeterministic[] = {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdown};

class BoostReference : public ::testing::TestWithParam<NamedFormat> {
 protected:
  void SetUp() override { ref_ = build_reference(std::string(GetParam().name), GetParam().format); }
  Reference ref_;
};

// The reference itself, on hand-computed cases, so that the comparison below checks two things
// that were each checked.
TEST(BoostReferenceSelfCheck, HandCases) {
  const Reference e2m1 = build_reference("e2m1", formats::e2m1);
  EXPECT_EQ(e2m1.mags.size(), 9u);  // 0 0.5 1 1.5 2 3 4 6, then 8
  EXPECT_EQ(e2m1.next().value, 8.0);
  EXPECT_EQ(reference_encode(e2m1, 2.5, Rounding::rne, true).code, 0x4u);
  EXPECT_EQ(reference_encode(e2m1, 2.5, Rounding::rna, true).code, 0x5u);
  EXPECT_EQ(reference_encode(e2m1, -0.25, Rounding::rne, true).code, 0x8u);
  EXPECT_EQ(reference_encode(e2m1, -0.2, Rounding::rdown, true).code, 0x9u);
  EXPECT_EQ(reference_encode(e2m1, 7.0, Rounding::rne, true).code, 0x7u);
  EXPECT_TRUE(reference_encode(e2m1, 7.0, Rounding::rne, false).invalid);
  EXPECT_FALSE(reference_encode(e2m1, 6.9, Rounding::rne, false).invalid);
  const Reference e4m3 = build_reference("e4m3", formats::e4m3);
  EXPECT_EQ(e4m3.next().value, 480.0);
  EXPECT_EQ(reference_encode(e4m3, -431.99999999999994, Rounding::rne, true).code, 0xFDu);
  EXPECT_EQ(reference_encode(e4m3, 464.0, Rounding::rne, false).code, 0x7Eu);
  EXPECT_EQ(reference_encode(e4m3, 465.0, Rounding::rne, false).code, 0x7Fu);
  const Reference e8m0 = build_reference("e8m0", formats::e8m0);
  EXPECT_EQ(e8m0.mags.front().value, 0x1p-127);
  EXPECT_EQ(e8m0.next().value, 0x1p128);
  EXPECT_EQ(reference_encode(e8m0, 3.0, Rounding::rne, true).code, 0x80u);
  EXPECT_EQ(reference_encode(e8m0, 0x1p-140, Rounding::rup, true).code, 0x00u);
  const Reference ue5m3 = build_reference("ue5m3", formats::ue5m3);
  EXPECT_EQ(ue5m3.max().value, 61440.0);
  EXPECT_EQ(ue5m3.next().value, 65536.0);
  const Reference fp16 = build_reference("fp16", formats::fp16);
  EXPECT_EQ(fp16.max().value, 65504.0);
  EXPECT_EQ(reference_encode(fp16, 65520.0, Rounding::rne, false).code, 0x7C00u);
  EXPECT_EQ(reference_encode(fp16, 65520.0, Rounding::rtz, false).code, 0x7BFFu);
}

TEST_P(BoostReference, RepresentableValuesMidpointsAndTheirNeighbours) {
  const Reference& R = ref_;
  // Inputs: each value and each midpoint (with the virtual next value as the last neighbour), plus
  // their binary64 and binary32 neighbours, both signs, and the specials.
  std::vector<double> points;
  std::vector<double> centres;
  for (std::size_t i = 0; i < R.mags.size(); ++i) {
    centres.push_back(R.mags[i].value);
    if (i + 1 < R.mags.size()) {
      const Exact& mid = R.mags[i].mid_above;
      const double m = mid.convert_to<double>();
      ASSERT_EQ(Exact(m), mid) << "midpoint not exact in binary64";
      centres.push_back(m);
    }
  }
  for (const double c : centres) {
    points.push_back(c);
    points.push_back(std::nextafter(c, 0.0));
    points.push_back(std::nextafter(c, HUGE_VAL));
    const float cf = static_cast<float>(c);
    if (static_cast<double>(cf) == c) {
      points.push_back(std::nextafterf(cf, 0.0f));
      points.push_back(std::nextafterf(cf, HUGE_VALF));
    }
  }
  for (const double s : {std::numeric_limits<double>::max(), static_cast<double>(std::numeric_limits<float>::max()),
                         HUGE_VAL, std::numeric_limits<double>::quiet_NaN(), 0.0}) {
    points.push_back(s);
  }
  const std::size_t n = points.size();
  for (std::size_t i = 0; i < n; ++i) points.push_back(-points[i]);

  Failures failures;
  std::uint64_t checked = 0;
  for (const Rounding mode : kDeterministic) {
    for (const bool saturate : {true, false}) {
      EncodeOptions o;
      o.rounding = mode;
      o.saturate = saturate;
      const Float32Encoder fast(R.f, o);
      const auto count = static_cast<std::int64_t>(points.size());
#pragma omp parallel for schedule(static) reduction(+ : checked)
      for (std::int64_t i = 0; i < count; ++i) {
        checked += static_cast<std::uint64_t>(check_one(R, points[i], mode, saturate, failures, &fast));
      }
    }
  }
  failures.report(checked);
  RecordProperty("checks", std::to_string(checked));
  std::printf("[ %s ] %zu inputs, %llu checks\n", R.name.c_str(), points.size(), static_cast<unsigned long long>(checked));
}

// --- Random inputs (TestFloat genCases style) ----------------------------------------------------

struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(next() % n); }
};

// Significand patterns after TestFloat's f32P1/f32P2: single bits, runs of ones from the top or the
// bottom, and those with a small perturbation.
std::uint32_t significand_pattern(SplitMix64& g) {
  const std::uint32_t j = g.below(24);
  std::uint32_t m;
  switch (g.below(4)) {
    case 0: m = j < 23 ? 1u << j : 0; break;                         // one bit
    case 1: m = (1u << j) - 1; break;                                // ones at the bottom
    case 2: m = 0x7FFFFFu & ~((1u << j) - 1); break;                 // ones at the top
    default: m = ((1u << j) - 1) ^ (j ? 1u << g.below(j) : 0); break;  // a run with a hole
  }
  if (g.below(4) == 0) m += g.below(3) - 1;  // +-1
  return m & 0x7FFFFFu;
}

float random_float(const Reference& R, SplitMix64& g) {
  const std::uint32_t sign = static_cast<std::uint32_t>(g.next() >> 63) << 31;
  // The format's exponent range, widened to cover underflow to zero and overflow.
  const int emin = R.f.specials == Specials::pow2_nan ? -R.f.bias : 1 - R.f.bias;
  const int lo = emin - R.f.mantissa_bits - 4;
  const int hi = static_cast<int>(std::ilogb(R.max().value)) + 2;
  const auto field_in_range = [&] {
    const int e = lo + static_cast<int>(g.below(static_cast<std::uint32_t>(hi - lo + 1)));
    return static_cast<std::uint32_t>(std::clamp(e + 127, 0, 254)) << 23;
  };
  switch (g.below(4)) {
    case 0: return std::bit_cast<float>(sign | field_in_range() | (static_cast<std::uint32_t>(g.next()) & 0x7FFFFFu));
    case 1: return std::bit_cast<float>(sign | field_in_range() | significand_pattern(g));
    case 2: {
      // Near a value or a midpoint: a few binary32 ulps either side.
      const std::size_t i = g.below(static_cast<std::uint32_t>(R.mags.size() - 1));
      const Exact& c = g.below(2) ? R.mags[i].exact : R.mags[i].mid_above;
      const float cf = c.convert_to<float>();  // exact when in binary32's range
      const std::int32_t step = static_cast<std::int32_t>(g.below(7)) - 3;
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(cf);
      if ((bits & 0x7F800000u) == 0x7F800000u) return std::bit_cast<float>(sign | bits);
      return std::bit_cast<float>(sign | static_cast<std::uint32_t>(static_cast<std::int64_t>(bits) + step));
    }
    default: return std::bit_cast<float>(static_cast<std::uint32_t>(g.next()));
  }
}

void run_random(const Reference& R, const std::vector<Rounding>& modes, std::uint64_t count, std::uint64_t salt,
                bool binary64) {
  Failures failures;
  std::uint64_t checked = 0;
  constexpr std::uint64_t kChunk = 1 << 14;
  for (const Rounding mode : modes) {
    for (const bool saturate : {true, false}) {
      EncodeOptions o;
      o.rounding = mode;
      o.saturate = saturate;
      const Float32Encoder fast(R.f, o);
      const auto chunks = static_cast<std::int64_t>((count + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(dynamic) reduction(+ : checked)
      for (std::int64_t c = 0; c < chunks; ++c) {
        // One stream per chunk: the inputs do not depend on the number of threads.
        SplitMix64 g{kSeed ^ (salt * 0x100000001B3ull) ^ (static_cast<std::uint64_t>(c) << 20) ^
                     (static_cast<std::uint64_t>(mode) << 8) ^ (saturate ? 1 : 0)};
        const std::uint64_t end = std::min<std::uint64_t>(count, (static_cast<std::uint64_t>(c) + 1) * kChunk);
        for (std::uint64_t i = static_cast<std::uint64_t>(c) * kChunk; i < end; ++i) {
          double x;
          if (binary64) {
            // A value or midpoint plus a few binary64 ulps, or a binary32 input with random bits below
            // binary32's precision (sticky bits that binary32 cannot see).
            const std::size_t k = g.below(static_cast<std::uint32_t>(R.mags.size() - 1));
            const Exact& centre = g.below(2) ? R.mags[k].exact : R.mags[k].mid_above;
            const double cd = centre.convert_to<double>();
            if (g.below(2)) {
              const std::int64_t step = static_cast<std::int64_t>(g.below(9)) - 4;
              x = std::bit_cast<double>(std::bit_cast<std::uint64_t>(cd) + static_cast<std::uint64_t>(step));
            } else {
              const double base = random_float(R, g);
              x = std::isfinite(base) && base != 0.0
                      ? std::bit_cast<double>(std::bit_cast<std::uint64_t>(base) ^ (g.next() & 0x1FFFFFFFull))
                      : base;
            }
            if (g.next() >> 63) x = -x;
          } else {
            x = random_float(R, g);
          }
          checked += static_cast<std::uint64_t>(check_one(R, x, mode, saturate, failures, &fast));
        }
      }
    }
  }
  failures.report(checked);
  std::printf("[ %s ] %llu random %s inputs per mode, %llu checks\n", R.name.c_str(),
              static_cast<unsigned long long>(count), binary64 ? "binary64" : "binary32",
              static_cast<unsigned long long>(checked));
}

TEST_P(BoostReference, RandomBinary32RoundToNearestEven) {
  run_random(ref_, {Rounding::rne}, 10'000'000 / kRandomScale, 1, false);
}

TEST_P(BoostReference, RandomBinary32OtherModes) {
  run_random(ref_, {Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdown}, 1'000'000 / kRandomScale, 2, false);
}

TEST_P(BoostReference, RandomBinary64NearValuesAndMidpoints) {
  run_random(ref_, {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdown}, 200'000 / kRandomScale, 3, true);
}

INSTANTIATE_TEST_SUITE_P(Presets, BoostReference, ::testing::ValuesIn(enumerable_presets()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fp4sim
