// Block-scaled GEMM datapaths: `exact` against an independent Boost.Multiprecision computation
// (random, adversarial and E8M0-extreme operands), hand-derived results that tell fp32-seq,
// probe-matched and exact apart, the §7.1 probes through gemm(), and every fast kernel against the
// plain scalar reference bit for bit on >= 10^5 random dot products per datapath.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/io/npy.hpp"
#include "../src/core/gemm_internal.hpp"

namespace fp4sim {
namespace {

using Big = boost::multiprecision::number<boost::multiprecision::cpp_bin_float<640, boost::multiprecision::digit_base_2>>;

std::string hex(float v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "0x%08X (%.9g)", std::bit_cast<std::uint32_t>(v), static_cast<double>(v));
  return buf;
}

// A quantized tensor built by hand: element codes one per entry (packed here), scale codes per
// [row, block] (1-D blocks along K).
QuantizedTensor make_tensor(std::size_t rows, std::size_t cols, const std::vector<std::uint8_t>& codes,
                            const std::vector<std::uint8_t>& scales, int block, const Format& scale_format,
                            float amax = 0.0f, float target = 448.0f) {
  QuantizedTensor q;
  q.rows = rows;
  q.cols = cols;
  q.block_rows = 1;
  q.block_cols = block;
  q.scale_rows = rows;
  q.scale_cols = (cols + static_cast<std::size_t>(block) - 1) / static_cast<std::size_t>(block);
  q.element = formats::e2m1;
  q.scale = scale_format;
  q.tensor_amax = amax;
  q.target = target;
  q.codes.assign(rows * q.code_cols(), 0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const std::uint8_t code = codes[r * cols + c] & 0xF;
      q.codes[r * q.code_cols() + c / 2] |= static_cast<std::uint8_t>((c & 1) ? code << 4 : code);
    }
  }
  q.scales = scales;
  return q;
}

std::uint8_t e2m1_code(double v) {
  return static_cast<std::uint8_t>(encode(formats::e2m1, v, EncodeOptions{Rounding::rne, true}).code);
}
std::uint8_t scale_code(const Format& f, double v) {
  const Encoded e = encode(f, v, EncodeOptions{Rounding::rne, false});
  EXPECT_EQ(e.flags & flag::inexact, 0) << v;
  return static_cast<std::uint8_t>(e.code);
}

// RNE of an exact value to binary32, written independently of the library (frexp/ldexp on the wide
// binary float, then integer rounding of the 24-bit significand).
float round_big_to_float(const Big& v) {
  if (v == 0) return 0.0f;
  const bool negative = v < 0;
  const Big a = negative ? Big(-v) : v;
  int e = 0;
  (void)boost::multiprecision::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int lead = e - 1;
  const int quantum = std::max(lead, -126) - 23;
  const Big scaled = boost::multiprecision::ldexp(a, -quantum);
  Big ip = boost::multiprecision::trunc(scaled);
  const Big frac = scaled - ip;
  const bool odd = boost::multiprecision::fmod(ip, Big(2)) != 0;
  if (frac > Big(0.5) || (frac == Big(0.5) && odd)) ip += 1;
  if (ip == 0) return negative ? -0.0f : 0.0f;
  const double mag = std::ldexp(ip.convert_to<double>(), quantum);
  if (mag >= 0x1p128) return negative ? -INFINITY : INFINITY;
  const auto f = static_cast<float>(mag);  // exact: mag has at most 24 significant bits
  return negative ? -f : f;
}

// The exact GEMM element by decoding every value to double (exact) and summing in 640-bit binary
// floating point (products span 2^-262..2^262 at most, so 640 bits hold every sum exactly), alpha applied exactly, rounded once.
float boost_exact(const QuantizedTensor& a, std::size_t i, const QuantizedTensor& b, std::size_t j, float alpha) {
  Big sum = 0;
  for (std::size_t c = 0; c < a.cols; ++c) {
    const double va = decode_to_double(a.element, a.code(i, c));
    const double vb = decode_to_double(b.element, b.code(j, c));
    const double sa = decode_to_double(a.scale, a.scale_code(i, c));
    const double sb = decode_to_double(b.scale, b.scale_code(j, c));
    sum += Big(va) * Big(sa) * Big(vb) * Big(sb);
  }
  return round_big_to_float(sum * Big(alpha));
}

GemmOptions options(std::string_view datapath, float alpha = 1.0f, GemmImpl impl = GemmImpl::fast) {
  GemmOptions o;
  o.datapath = find_datapath(datapath);
  o.alpha = alpha;
  o.impl = impl;
  return o;
}

struct RandomOperands {
  QuantizedTensor a, b;
};

// Scale codes drawn from a code range; elements uniformly over all 16 codes.
RandomOperands random_operands(std::mt19937_64& rng, std::size_t m, std::size_t n, std::size_t k, int block,
                               const Format& scale_format, std::uint32_t scale_lo, std::uint32_t scale_hi) {
  std::uniform_int_distribution<int> elem(0, 15);
  std::uniform_int_distribution<std::uint32_t> sc(scale_lo, scale_hi);
  auto make = [&](std::size_t rows) {
    std::vector<std::uint8_t> codes(rows * k), scales(rows * ((k + static_cast<std::size_t>(block) - 1) / static_cast<std::size_t>(block)));
    for (auto& c : codes) c = static_cast<std::uint8_t>(elem(rng));
    for (auto& s : scales) s = static_cast<std::uint8_t>(sc(rng));
    return make_tensor(rows, k, codes, scales, block, scale_format, 1.0f);
  };
  return {make(m), make(n)};
}

void expect_exact_matches_boost(const QuantizedTensor& a, const QuantizedTensor& b, float alpha, const char* what) {
  const auto c = gemm(a, b, options("exact", alpha));
  const auto ref = gemm(a, b, options("exact", alpha, GemmImpl::reference));
  int bad = 0;
  for (std::size_t i = 0; i < a.rows; ++i) {
    for (std::size_t j = 0; j < b.rows; ++j) {
      const float expected = boost_exact(a, i, b, j, alpha);
      const float got = c[i * b.rows + j];
      const float got_ref = ref[i * b.rows + j];
      if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(expected) ||
          std::bit_cast<std::uint32_t>(got_ref) != std::bit_cast<std::uint32_t>(expected)) {
        if (bad++ < 5)
          ADD_FAILURE() << what << " C[" << i << "," << j << "]: Boost " << hex(expected) << ", fast " << hex(got)
                        << ", reference " << hex(got_ref);
      }
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(ExactVsBoost, RandomUe5m3Ue4m3E8m0) {
  std::mt19937_64 rng(1);
  auto ue5 = random_operands(rng, 16, 16, 256, 16, formats::ue5m3, 0x00, 0xF7);
  expect_exact_matches_boost(ue5.a, ue5.b, 1.0f, "ue5m3 full range");
  auto ue4 = random_operands(rng, 16, 16, 256, 16, formats::ue4m3, 0x00, 0x7E);
  expect_exact_matches_boost(ue4.a, ue4.b, 0.37109375f, "ue4m3 full range, alpha");
  auto e8 = random_operands(rng, 16, 12, 256, 32, formats::e8m0, 0x60, 0xA0);
  expect_exact_matches_boost(e8.a, e8.b, 1.0f, "e8m0 mid range");
  auto narrow = random_operands(rng, 24, 24, 512, 16, formats::ue5m3, 0x70, 0x80);
  expect_exact_matches_boost(narrow.a, narrow.b, 3.0517578125e-05f, "ue5m3 narrow range (fast double path)");
}

TEST(ExactVsBoost, E8m0Extremes) {
  std::mt19937_64 rng(2);
  // Scale products from 2^-254 to 2^254: far outside binary32, and both ends in one dot product.
  auto wide = random_operands(rng, 12, 10, 256, 32, formats::e8m0, 0x00, 0xFE);
  expect_exact_matches_boost(wide.a, wide.b, 1.0f, "e8m0 whole range");
  std::vector<std::uint8_t> codes(2 * 64, e2m1_code(6.0)), scales_a{0x00, 0xFE, 0x00, 0xFE}, scales_b{0x00, 0x00, 0xFE, 0xFE};
  const auto a = make_tensor(2, 64, codes, scales_a, 32, formats::e8m0);
  const auto b = make_tensor(2, 64, codes, scales_b, 32, formats::e8m0);
  expect_exact_matches_boost(a, b, 1.0f, "e8m0 corners");
  // alpha pulls an out-of-range sum back into range: only an exact datapath gets it right.
  expect_exact_matches_boost(a, b, 0x1p-100f, "e8m0 corners, tiny alpha");
}

TEST(ExactVsBoost, OverflowMidpoint) {
  // S = sum_{i<25} 2^(i+c) = (2^25 - 1) * 2^c from 25 E8M0 blocks of 32 (one 1*1 product each), and
  // alpha = 2^(103 - c): alpha * S = 2^128 - 2^103, the binary32 overflow midpoint (ties to even: Inf).
  // A 26th block adds -/+ 2^(c-14): just below (FLT_MAX) / just above (Inf). The rows fit the fast
  // binary64 window, so this checks its rounding at the top of the range.
  const int c = 20;
  for (int tail : {0, -1, 1}) {
    const std::size_t blocks = 26, k = blocks * 32;
    std::vector<std::uint8_t> ca(k, 0), cb(k, 0), sa(blocks, 127), sb(blocks, 127);
    for (std::size_t i = 0; i < 25; ++i) {
      ca[i * 32] = cb[i * 32] = e2m1_code(1.0);
      sa[i] = static_cast<std::uint8_t>(127 + c + static_cast<int>(i));
    }
    if (tail != 0) {
      ca[25 * 32] = e2m1_code(tail < 0 ? -1.0 : 1.0);
      cb[25 * 32] = e2m1_code(1.0);
      sa[25] = static_cast<std::uint8_t>(127 + c - 14);
    }
    const auto a = make_tensor(1, k, ca, sa, 32, formats::e8m0);
    const auto b = make_tensor(1, k, cb, sb, 32, formats::e8m0);
    const float alpha = std::ldexp(1.0f, 103 - c);
    expect_exact_matches_boost(a, b, alpha, "overflow midpoint");
    GemmReport report;
    GemmOptions o = options("exact", alpha);
    o.report = &report;
    const float got = gemm(a, b, o)[0];
    EXPECT_EQ(report.reference_outputs, 0u) << "the binary64 window should hold this row pair";
    EXPECT_EQ(got, tail < 0 ? std::numeric_limits<float>::max() : INFINITY) << tail;
  }
}

// The fast RN32(alpha * acc) of the exact datapath (binary64 product, FMA error term, midpoint fix-up)
// against the integer round-pack, on random values and on products built to land on binary32 midpoints.
TEST(ExactRounding, FastEqualsIntegerRounding) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::uint64_t> bits64;
  std::uniform_int_distribution<int> exp_acc(-300, 300), exp_alpha(-140, 120);
  std::uniform_int_distribution<std::uint32_t> sig24(0x800000u, 0xFFFFFFu);
  int checked = 0, midpoints = 0;
  for (int t = 0; t < 2000000; ++t) {
    float alpha;
    double acc;
    if (t % 2 == 0) {
      acc = std::ldexp(static_cast<double>(bits64(rng) >> 11) + 1.0, exp_acc(rng) - 53) * ((t & 2) ? -1 : 1);
      alpha = std::ldexp(static_cast<float>(sig24(rng)), exp_alpha(rng) - 23);
    } else {
      // acc = RN64(m / alpha) for a binary32 midpoint m: alpha * acc lies within a binary64 ulp of m.
      const float f = std::ldexp(static_cast<float>(sig24(rng)), exp_alpha(rng) - 23);
      const double m = (static_cast<double>(f) + static_cast<double>(std::nextafter(f, INFINITY))) * 0.5;
      alpha = std::ldexp(static_cast<float>(sig24(rng)), exp_alpha(rng) / 4 - 23);
      acc = m / static_cast<double>(alpha);
      if (!std::isfinite(acc) || acc == 0) continue;
      midpoints += std::fabs(static_cast<double>(alpha) * acc - m) == 0.0;
    }
    const std::uint32_t fast = detail::round_scaled_alpha(acc, alpha, 0x7FC00000u, true);
    const std::uint32_t slow = detail::round_scaled_alpha(acc, alpha, 0x7FC00000u, false);
    ASSERT_EQ(fast, slow) << std::hexfloat << acc << " * " << alpha;
    ++checked;
  }
  EXPECT_GT(checked, 1900000);
  EXPECT_GT(midpoints, 1000);  // products that round to the midpoint in binary64
}

TEST(ExactVsBoost, MassiveCancellation) {
  // Rows whose big terms cancel exactly, leaving a tiny term from a block at the smallest scale.
  const std::size_t k = 128;
  std::vector<std::uint8_t> ca(2 * k), cb(2 * k);
  std::vector<std::uint8_t> sa(2 * 8), sb(2 * 8);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> elem(0, 15);
  for (std::size_t r = 0; r < 2; ++r) {
    for (std::size_t c = 0; c < 64; ++c) {
      const auto code = static_cast<std::uint8_t>(elem(rng));
      ca[r * k + c] = code;
      ca[r * k + c + 64] = code ^ 0x8;  // the negation
      cb[r * k + c] = cb[r * k + c + 64] = static_cast<std::uint8_t>(elem(rng));
    }
    for (std::size_t kb = 0; kb < 8; ++kb) {
      sa[r * 8 + kb] = scale_code(formats::ue5m3, 61440.0);
      sb[r * 8 + kb] = scale_code(formats::ue5m3, 61440.0);
    }
    // one element of the last block at the smallest scale does not cancel
    sa[r * 8 + 7] = scale_code(formats::ue5m3, std::ldexp(1.0, -17));
    sb[r * 8 + 7] = scale_code(formats::ue5m3, std::ldexp(1.0, -17));
    sa[r * 8 + 3] = scale_code(formats::ue5m3, std::ldexp(1.0, -17));
    sb[r * 8 + 3] = scale_code(formats::ue5m3, std::ldexp(1.0, -17));
    ca[r * k + 63] = 0;  // its negated partner at 127 becomes the survivor
    ca[r * k + 127] = e2m1_code(0.5);
    cb[r * k + 127] = e2m1_code(r ? -0.5 : 0.5);
  }
  const auto a = make_tensor(2, k, ca, sa, 16, formats::ue5m3);
  const auto b = make_tensor(2, k, cb, sb, 16, formats::ue5m3);
  expect_exact_matches_boost(a, b, 1.0f, "massive cancellation");
  const auto c = gemm(a, b, options("exact"));
  EXPECT_EQ(c[0], 0x1p-36f);  // 0.5 * 0.5 * 2^-17 * 2^-17, everything else cancelled
}

TEST(ExactVsBoost, OneDominantTermAndWideSpread) {
  std::mt19937_64 rng(4);
  auto ops = random_operands(rng, 16, 16, 512, 16, formats::ue5m3, 0x00, 0x30);
  // One block at the largest scale in every row.
  for (auto* q : {&ops.a, &ops.b}) {
    for (std::size_t r = 0; r < q->rows; ++r) q->scales[r * q->scale_cols + (r % q->scale_cols)] = 0xF7;
  }
  expect_exact_matches_boost(ops.a, ops.b, 1.0f, "one dominant term");
  auto spread = random_operands(rng, 16, 16, 512, 16, formats::ue5m3, 0x00, 0xF7);
  expect_exact_matches_boost(spread.a, spread.b, 1.0f, "wide exponent spread");
}

// ---------------------------------------------------------------------------------------------------
// Hand-derived cases: each output is a sum of four block terms t0..t3 (K = 64, blocks of 16, one
// block per k16 step), alpha = 1.

struct Terms {
  // per block: element value pairs (a, b) and the two scales
  std::vector<std::vector<std::pair<double, double>>> blocks;
  std::vector<std::pair<double, double>> scales;
};

std::pair<QuantizedTensor, QuantizedTensor> from_terms(const std::vector<Terms>& rows, std::size_t k = 64) {
  const std::size_t nb = k / 16;
  std::vector<std::uint8_t> ca(rows.size() * k, 0), cb(rows.size() * k, 0), sa(rows.size() * nb), sb(rows.size() * nb);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t kb = 0; kb < nb; ++kb) {
      const auto sc = kb < rows[r].scales.size() ? rows[r].scales[kb] : std::pair<double, double>{1.0, 1.0};
      sa[r * nb + kb] = scale_code(formats::ue5m3, sc.first);
      sb[r * nb + kb] = scale_code(formats::ue5m3, sc.second);
      if (kb >= rows[r].blocks.size()) continue;
      const auto& pairs = rows[r].blocks[kb];
      for (std::size_t t = 0; t < pairs.size(); ++t) {
        ca[r * k + kb * 16 + t] = e2m1_code(pairs[t].first);
        cb[r * k + kb * 16 + t] = e2m1_code(pairs[t].second);
      }
    }
  }
  return {make_tensor(rows.size(), k, ca, sa, 16, formats::ue5m3), make_tensor(rows.size(), k, cb, sb, 16, formats::ue5m3)};
}

std::vector<float> diagonal(const std::pair<QuantizedTensor, QuantizedTensor>& ops, GemmOptions o) {
  std::vector<float> d;
  for (GemmImpl impl : {GemmImpl::fast, GemmImpl::reference}) {
    o.impl = impl;
    const auto c = gemm(ops.first, ops.second, o);
    std::vector<float> diag;
    for (std::size_t i = 0; i < ops.first.rows; ++i) diag.push_back(c[i * ops.second.rows + i]);
    if (impl == GemmImpl::fast) d = diag;
    else
      for (std::size_t i = 0; i < diag.size(); ++i)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(diag[i]), std::bit_cast<std::uint32_t>(d[i])) << "fast vs reference, row " << i;
  }
  return d;
}

TEST(HandDerived, Fp32SeqProbeMatchedAndExactDiffer) {
  const double big = 4096.0;  // scales 2^12 * 2^12: one product of 1*1 makes t = 2^24
  const std::vector<Terms> rows = {
      // A: t0 = 2^24, t1 = 1, t2 = 1.
      //   exact 2^24+2; fp32-seq: 2^24+1 ties to 2^24, twice; probe-matched: RZ keeps 2^24.
      {{{{1, 1}}, {{1, 1}}, {{1, 1}}}, {{big, big}, {1, 1}, {1, 1}}},
      // B: t0 = 2^24, t1 = 3 (1.5 * 2).
      //   exact and fp32-seq: 2^24+3 ties to even 2^24+4; probe-matched: RZ gives 2^24+2.
      {{{{1, 1}}, {{1.5, 2}}}, {{big, big}, {1, 1}}},
      // C: t0 = 2^24, t1 = twelve products 0.5*0.5 (sum 3).
      //   exact, fp32-seq: 2^24+4; probe-matched: each 0.25 is cut below the 2^-1 window of E_max = 24
      //   (per-product truncation, not RZ of the block sum, which would give 2^24+2): 2^24.
      {{{{1, 1}}, std::vector<std::pair<double, double>>(12, {0.5, 0.5})}, {{big, big}, {1, 1}}},
      // D: t0 = 1 + 2^-12 (1 + 0.5*0.5 at scales 2^-5 each... built as 1*1 + 0.5*0.5*2^-10).
      {{{{1, 1}}, {{0.5, 0.5}}}, {{1, 1}, {std::ldexp(1.0, -5), std::ldexp(1.0, -5)}}},
  };
  const auto ops = from_terms(rows);
  const float e24 = 16777216.0f;
  const auto exact = diagonal(ops, options("exact"));
  const auto seq = diagonal(ops, options("fp32-seq"));
  auto pm_opts = options("probe-matched");
  const auto pm = diagonal(ops, pm_opts);
  pm_opts.snap = false;
  const auto pm_nosnap = diagonal(ops, pm_opts);
  EXPECT_EQ(exact, (std::vector<float>{e24 + 2, e24 + 4, e24 + 4, 1.0f + 0x1p-12f}));
  EXPECT_EQ(seq, (std::vector<float>{e24, e24 + 4, e24 + 4, 1.0f + 0x1p-12f}));
  EXPECT_EQ(pm, (std::vector<float>{e24, e24 + 2, e24, 1.0f}));  // D: the 1/1024 snap removes 2^-12
  EXPECT_EQ(pm_nosnap, (std::vector<float>{e24, e24 + 2, e24, 1.0f + 0x1p-12f}));
}

TEST(HandDerived, ProbeMatchedCombinesGroupsWithAddRz) {
  // K = 128: group 0 partial 2^24, group 1 partial 3 (its own chain from +0, exact) -> add.rz gives
  // 2^24 + 2; exact gives 2^24 + 4.
  Terms t;
  t.blocks = {{{1, 1}}, {}, {}, {}, {{1.5, 2}}};
  t.scales = {{4096, 4096}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  const auto ops = from_terms({t}, 128);
  EXPECT_EQ(diagonal(ops, options("probe-matched"))[0], 16777218.0f);
  EXPECT_EQ(diagonal(ops, options("exact"))[0], 16777220.0f);
  // K not a multiple of 64 is a data error, not silent padding.
  const auto odd = from_terms({t}, 80);
  EXPECT_THROW(gemm(odd.first, odd.second, options("probe-matched")), DataError);
}

TEST(HandDerived, AlphaRules) {
  // TE reference divides, the paper's code multiplies by a rounded reciprocal: they differ.
  const float amax_a = 10.0f, amax_b = 12.5f;
  const float div = gemm_alpha(AlphaRule::division, amax_a, 448.0f, amax_b, 448.0f, 6.0f);
  const float rec = gemm_alpha(AlphaRule::reciprocal, amax_a, 448.0f, amax_b, 448.0f, 6.0f);
  EXPECT_EQ(div, 125.0f / 7225344.0f);
  EXPECT_EQ(rec, 125.0f * (1.0f / 7225344.0f));
  EXPECT_NE(std::bit_cast<std::uint32_t>(div), std::bit_cast<std::uint32_t>(rec));
  EXPECT_EQ(gemm_alpha(AlphaRule::one, amax_a, 448.0f, amax_b, 448.0f, 6.0f), 1.0f);
  // T = 2048 on one operand (wgrad dY in the paper's configuration): (6*448)*(6*2048) is exact.
  EXPECT_EQ(gemm_alpha(AlphaRule::reciprocal, 1.0f, 448.0f, 1.0f, 2048.0f, 6.0f), 1.0f / 33030144.0f);
}

// ---------------------------------------------------------------------------------------------------
// §7.1 through gemm(): B1 and B2 on hand-built operands with sm100-mxf4nvf4.

TEST(Mxf4nvf4ThroughGemm, B1AndB2) {
  // B1: 15 * 6*6 + 0.5*0.5 in one 16-block, scales 1 (UE4M3 0x38), C = 0: 540.25.
  std::vector<std::uint8_t> ca(64, 0), cb(64, 0);
  for (int t = 0; t < 15; ++t) ca[t] = cb[t] = e2m1_code(6.0);
  ca[15] = cb[15] = e2m1_code(0.5);
  const auto a = make_tensor(1, 64, ca, {0x38, 0x38, 0x38, 0x38}, 16, formats::ue4m3);
  const auto b = make_tensor(1, 64, cb, {0x38, 0x38, 0x38, 0x38}, 16, formats::ue4m3);
  EXPECT_EQ(gemm(a, b, options("sm100-mxf4nvf4"))[0], 540.25f);
  EXPECT_EQ(gemm(a, b, options("sm100-mxf4nvf4", 1.0f, GemmImpl::reference))[0], 540.25f);
  // B2 with UE8M0 block-16 scales: +1, -1 at scale 1, 0.25 at 2^-d.
  for (int d : {0, 20, 33, 34, 40}) {
    std::vector<std::uint8_t> xa(64, 0), xb(64, 0);
    xa[0] = e2m1_code(1.0), xb[0] = e2m1_code(1.0);
    xa[16] = e2m1_code(-1.0), xb[16] = e2m1_code(1.0);
    xa[32] = e2m1_code(0.5), xb[32] = e2m1_code(0.5);
    const auto qa = make_tensor(1, 64, xa, {127, 127, static_cast<std::uint8_t>(127 - d), 127}, 16, formats::e8m0);
    const auto qb = make_tensor(1, 64, xb, {127, 127, 127, 127}, 16, formats::e8m0);
    const float expected = d <= 33 ? std::ldexp(0.25f, -d) : 0.0f;
    EXPECT_EQ(gemm(qa, qb, options("sm100-mxf4nvf4"))[0], expected) << d;
    EXPECT_EQ(gemm(qa, qb, options("sm100-mxf4nvf4", 1.0f, GemmImpl::reference))[0], expected) << d;
    EXPECT_EQ(gemm(qa, qb, options("exact"))[0], std::ldexp(0.25f, -d)) << d;
  }
  // ue5m3 scales are refused by sm100-mxf4nvf4 (and ue4m3 by ue5m3-native).
  const auto u = make_tensor(1, 64, ca, {0x78, 0x78, 0x78, 0x78}, 16, formats::ue5m3);
  EXPECT_THROW(gemm(u, u, options("sm100-mxf4nvf4")), DataError);
  EXPECT_THROW(gemm(a, b, options("ue5m3-native")), DataError);
  EXPECT_NO_THROW(gemm(u, u, options("ue5m3-native")));
}

// ---------------------------------------------------------------------------------------------------
// Fast kernels equal the scalar reference bit for bit.

struct FastCase {
  const char* datapath;
  const char* scale;
  std::uint32_t lo, hi;  // scale code range
  int block;
  std::size_t m, n, k;
  bool simd;  // the SIMD tile kernels must run (false: the documented reference fallback for this data)
};

std::string fast_case_name(const ::testing::TestParamInfo<FastCase>& info) {
  std::string s = std::string(info.param.datapath) + "_" + info.param.scale + "_" + std::to_string(info.param.lo) + "_" +
                  std::to_string(info.param.hi) + "_b" + std::to_string(info.param.block) + "_k" + std::to_string(info.param.k);
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

class FastEqualsReference : public ::testing::TestWithParam<FastCase> {};

TEST_P(FastEqualsReference, BitForBitOnRandomDotProducts) {
  const FastCase& fc = GetParam();
  const Format scale = *parse_format(fc.scale);
  std::mt19937_64 rng(std::hash<std::string>{}(fast_case_name({fc, 0})));
  auto ops = random_operands(rng, fc.m, fc.n, fc.k, fc.block, scale, fc.lo, fc.hi);
  // Sprinkle zero blocks, zero rows and a few extreme scale codes.
  std::uniform_int_distribution<std::size_t> pick(0, ops.a.scales.size() - 1);
  for (int t = 0; t < 20; ++t) ops.a.scales[pick(rng)] = static_cast<std::uint8_t>(fc.lo);
  for (std::size_t c = 0; c < ops.b.code_cols(); ++c) ops.b.codes[3 * ops.b.code_cols() + c] = 0;
  const GemmOptions ref = options(fc.datapath, 0.75f, GemmImpl::reference);
  const auto c_ref = gemm(ops.a, ops.b, ref);
  ASSERT_GE(c_ref.size(), 100000u);
  // The best kernels of this CPU on every case; the other instruction sets on the first 32 rows.
  std::vector<std::string_view> isas{""};
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) isas.push_back("avx2");
#endif
  isas.push_back("portable");
  for (std::string_view isa : isas) {
    GemmReport report;
    GemmOptions fast = options(fc.datapath, 0.75f);
    fast.isa = isa;
    fast.report = &report;
    QuantizedTensor a = ops.a;
    if (!isa.empty()) {
      a.rows = 32;
      a.scale_rows = 32;
      a.codes.resize(32 * a.code_cols());
      a.scales.resize(32 * a.scale_cols);
    }
    const auto c_fast = gemm(a, ops.b, fast);
    EXPECT_EQ(report.simd_kernel, fc.simd) << "isa '" << isa << "'";
    int bad = 0;
    for (std::size_t x = 0; x < c_fast.size(); ++x) {
      if (std::bit_cast<std::uint32_t>(c_fast[x]) != std::bit_cast<std::uint32_t>(c_ref[x]) && bad++ < 5)
        ADD_FAILURE() << fc.datapath << " (" << report.isa << ") C[" << x / fc.n << "," << x % fc.n << "]: reference "
                      << hex(c_ref[x]) << ", fast " << hex(c_fast[x]);
    }
    EXPECT_EQ(bad, 0) << "isa " << report.isa;
    std::printf("  %s %s [%u,%u] isa=%s: golden steps %llu, reference outputs %llu of %zu\n", fc.datapath, fc.scale, fc.lo,
                fc.hi, report.isa.c_str(), static_cast<unsigned long long>(report.golden_steps),
                static_cast<unsigned long long>(report.reference_outputs), c_fast.size());
  }
}

const FastCase kFastCases[] = {
    {"exact", "ue5m3", 0x60, 0x90, 16, 320, 320, 256, true},
    {"exact", "ue5m3", 0x00, 0xF7, 16, 320, 320, 256, true},
    {"exact", "e8m0", 0x00, 0xFE, 32, 320, 320, 256, true},
    {"exact", "ue4m3", 0x00, 0x7E, 16, 320, 320, 256, true},
    {"fp32-seq", "ue5m3", 0x60, 0x90, 16, 320, 320, 256, true},
    {"fp32-seq", "ue4m3", 0x00, 0x7E, 16, 320, 320, 256, true},
    {"fp32-seq", "e8m0", 0x00, 0xFE, 32, 320, 320, 256, false},  // block terms leave binary32
    {"fp32-seq", "e8m0", 0x60, 0xA0, 32, 320, 320, 256, true},
    {"sm90-bf16", "ue5m3", 0x60, 0x90, 16, 320, 320, 256, true},
    {"sm90-bf16", "ue5m3", 0x00, 0xF7, 16, 320, 320, 256, true},
    {"sm90-bf16", "ue4m3", 0x00, 0x7E, 32, 320, 320, 256, true},
    {"sm90-bf16", "e8m0", 0x70, 0x8E, 32, 320, 320, 256, true},
    {"sm100-f16", "ue5m3", 0x30, 0xC0, 16, 320, 320, 128, true},
    {"sm80", "ue4m3", 0x20, 0x60, 16, 320, 320, 128, true},
    {"probe-matched", "ue5m3", 0x60, 0x90, 16, 320, 320, 256, true},
    {"probe-matched", "ue5m3", 0x00, 0xF7, 16, 320, 320, 256, true},
    {"probe-matched", "ue4m3", 0x00, 0x7E, 16, 320, 320, 128, true},
    {"sm100-mxf4nvf4", "ue4m3", 0x00, 0x7E, 16, 320, 320, 256, true},
    {"sm100-mxf4nvf4", "e8m0", 0x60, 0xA0, 32, 320, 320, 256, true},
    {"sm100-mxf4nvf4", "e8m0", 0x00, 0xFE, 16, 320, 320, 128, true},
    {"ue5m3-native", "ue5m3", 0x00, 0xF7, 16, 320, 320, 256, true},
    // K not a multiple of the block or of the GST instruction: partial last blocks and instructions.
    {"exact", "ue5m3", 0x60, 0x90, 16, 320, 320, 200, true},
    {"fp32-seq", "ue5m3", 0x60, 0x90, 16, 320, 320, 200, true},
    {"sm90-bf16", "ue5m3", 0x60, 0x90, 16, 320, 320, 200, true},
    {"sm100-mxf4nvf4", "ue4m3", 0x00, 0x7E, 16, 320, 320, 200, true},
    {"ue5m3-native", "ue5m3", 0x00, 0xF7, 16, 320, 320, 200, true},
    {"sm100-mxf4nvf4", "e8m0", 0x60, 0xA0, 32, 320, 320, 200, true},
};

INSTANTIATE_TEST_SUITE_P(AllDatapaths, FastEqualsReference, ::testing::ValuesIn(kFastCases), fast_case_name);

// ---------------------------------------------------------------------------------------------------
// The CLI (docs/cli.md): `gemm` equals the library bit for bit; exit codes 2 (usage) and 3 (data) with no
// partial output left behind; `mma` reproduces probe 2.

namespace fs = std::filesystem;

struct Cli {
  int rc;
  std::string out;
};

Cli run_cli(const std::string& args, const fs::path& dir) {
  const fs::path log = dir / "cli.log";
  const int raw = std::system((std::string(FP4SIM_BINARY) + " " + args + " >" + log.string() + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str()};
}

fs::path temp_dir(const char* name) {
  const fs::path dir = fs::temp_directory_path() / (std::string("fp4sim_gemm_cli_") + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

TEST(GemmCli, MatchesTheLibraryAndReportsErrors) {
  if (!fs::exists(FP4SIM_BINARY)) GTEST_SKIP() << "fp4sim binary not built: " << FP4SIM_BINARY;
  const fs::path dir = temp_dir("gemm");
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t m = 8, n = 6, k = 128;
  std::vector<float> x(m * k), w(n * k);
  for (auto& v : x) v = normal(rng);
  for (auto& v : w) v = normal(rng) * 0.1f;
  npy::write(dir / "a.npy", npy::DType::f4, {m, k}, x.data());
  npy::write(dir / "b.npy", npy::DType::f4, {n, k}, w.data());
  const Recipe recipe = *find_recipe("ue5m3");
  const GemmOperands ops = operands_for(recipe, Gemm::fprop);
  QuantizeRequest ra, rb;
  ra.spec = ops.a;
  rb.spec = ops.b;
  const QuantizedTensor qa = quantize(recipe, ra, x, m, k), qb = quantize(recipe, rb, w, n, k);
  for (const char* dp : {"exact", "probe-matched", "fp32-seq", "sm90-bf16", "ue5m3-native"}) {
    const fs::path out = dir / (std::string(dp) + ".npy");
    const Cli r = run_cli("gemm --recipe ue5m3 --a " + (dir / "a.npy").string() + " --b " + (dir / "b.npy").string() +
                              " --datapath " + dp + " --out " + out.string(),
                          dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    GemmRequest request;
    request.datapath = find_datapath(dp);
    const std::vector<float> expected = gemm(recipe, qa, qb, request);
    const npy::Array c = npy::read(out);
    ASSERT_EQ(c.shape, (std::vector<std::size_t>{m, n}));
    const std::vector<float> got = npy::as_float32(c, out);
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(expected[i])) << dp << " " << i;
  }
  // --list-datapaths names every row of the table.
  const Cli list = run_cli("gemm --list-datapaths --json", dir);
  EXPECT_EQ(list.rc, 0);
  for (const Datapath* dp : datapath_presets()) EXPECT_NE(list.out.find("\"" + std::string(dp->name) + "\""), std::string::npos);
  // Usage errors: exit 2.
  const std::string ab = " --a " + (dir / "a.npy").string() + " --b " + (dir / "b.npy").string();
  EXPECT_EQ(run_cli("gemm --recipe ue5m3" + ab + " --datapath nope", dir).rc, 2);
  EXPECT_EQ(run_cli("gemm --recipe ue5m3" + ab + " --datapath exact --no-snap", dir).rc, 2);
  EXPECT_EQ(run_cli("gemm --recipe ue5m3" + ab + " --inner nope", dir).rc, 2);
  EXPECT_EQ(run_cli("gemm" + ab, dir).rc, 2);
  // Data errors: exit 3, and no output file. probe-matched needs K % 64 == 0.
  std::vector<float> x80(m * 80, 1.0f), w80(n * 80, 1.0f);
  npy::write(dir / "a80.npy", npy::DType::f4, {m, 80}, x80.data());
  npy::write(dir / "b80.npy", npy::DType::f4, {n, 80}, w80.data());
  const fs::path bad = dir / "bad.npy";
  const Cli r80 = run_cli("gemm --recipe ue5m3 --a " + (dir / "a80.npy").string() + " --b " + (dir / "b80.npy").string() +
                              " --datapath probe-matched --out " + bad.string(),
                          dir);
  EXPECT_EQ(r80.rc, 3) << r80.out;
  EXPECT_FALSE(fs::exists(bad));
  EXPECT_EQ(run_cli("gemm --recipe ue5m3 --a " + (dir / "a.npy").string() + " --b " + (dir / "b80.npy").string() +
                        " --out " + bad.string(),
                    dir)
                .rc,
            3);  // K differs
  EXPECT_FALSE(fs::exists(bad));
  // sm100-mxf4nvf4 does not take UE5M3 scales.
  EXPECT_EQ(run_cli("gemm --recipe ue5m3" + ab + " --datapath sm100-mxf4nvf4 --out " + bad.string(), dir).rc, 3);
  EXPECT_EQ(run_cli("gemm --recipe nvfp4" + ab + " --datapath sm100-mxf4nvf4 --out " + (dir / "nv.npy").string(), dir).rc, 0);
  fs::remove_all(dir);
}

TEST(MmaCli, ProbeTwoAndErrors) {
  if (!fs::exists(FP4SIM_BINARY)) GTEST_SKIP() << "fp4sim binary not built: " << FP4SIM_BINARY;
  const fs::path dir = temp_dir("mma");
  std::vector<float> a(16, 0.0f), b(16, 0.0f);
  a[0] = 128.0f, a[1] = -128.0f, b[0] = b[1] = 128.0f;
  npy::write(dir / "a.npy", npy::DType::f4, {1, 16}, a.data());
  npy::write(dir / "b.npy", npy::DType::f4, {16, 1}, b.data());
  for (int e : {-11, -12}) {
    const float c = std::ldexp(1.0f, e);
    npy::write(dir / "c.npy", npy::DType::f4, {1, 1}, &c);
    const Cli r = run_cli("mma --datapath sm90-bf16 --input-format bf16 --a " + (dir / "a.npy").string() + " --b " +
                              (dir / "b.npy").string() + " --c " + (dir / "c.npy").string() + " --out " +
                              (dir / "d.npy").string(),
                          dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    const npy::Array d = npy::read(dir / "d.npy");
    EXPECT_EQ(std::bit_cast<std::uint32_t>(npy::as_float32(d, dir / "d.npy")[0]), e == -11 ? 0x3A000000u : 0u);
  }
  const std::string ab = " --a " + (dir / "a.npy").string() + " --b " + (dir / "b.npy").string();
  const fs::path bad = dir / "bad.npy";
  EXPECT_EQ(run_cli("mma --datapath exact --input-format bf16" + ab + " --out " + bad.string(), dir).rc, 2);
  EXPECT_EQ(run_cli("mma --datapath sm90-bf16 --input-format e4m3" + ab + " --out " + bad.string(), dir).rc, 2);
  // A value bf16 cannot hold, and K not a multiple of the instruction's 16: data errors, no output.
  std::vector<float> odd(16, 1.0f + 0x1p-10f);
  npy::write(dir / "odd.npy", npy::DType::f4, {1, 16}, odd.data());
  EXPECT_EQ(run_cli("mma --datapath sm90-bf16 --input-format bf16 --a " + (dir / "odd.npy").string() + " --b " +
                        (dir / "b.npy").string() + " --out " + bad.string(),
                    dir)
                .rc,
            3);
  std::vector<float> a8(8, 1.0f), b8(8, 1.0f);
  npy::write(dir / "a8.npy", npy::DType::f4, {1, 8}, a8.data());
  npy::write(dir / "b8.npy", npy::DType::f4, {8, 1}, b8.data());
  EXPECT_EQ(run_cli("mma --datapath sm90-bf16 --input-format bf16 --a " + (dir / "a8.npy").string() + " --b " +
                        (dir / "b8.npy").string() + " --out " + bad.string(),
                    dir)
                .rc,
            3);
  EXPECT_FALSE(fs::exists(bad));
  // An f16-accumulate row needs fp16-representable C.
  const float c_wide = 1.0f + 0x1p-20f;
  npy::write(dir / "cw.npy", npy::DType::f4, {1, 1}, &c_wide);
  std::vector<float> h(16, 0.0f);
  npy::write(dir / "h.npy", npy::DType::f4, {1, 16}, h.data());
  npy::write(dir / "hb.npy", npy::DType::f4, {16, 1}, h.data());
  EXPECT_EQ(run_cli("mma --datapath sm90-f16acc --input-format fp16 --a " + (dir / "h.npy").string() + " --b " +
                        (dir / "hb.npy").string() + " --c " + (dir / "cw.npy").string() + " --out " + bad.string(),
                    dir)
                .rc,
            3);
  fs::remove_all(dir);
}

// A and B in their own formats (wgmma e4m3 x e5m2), and a float32 NaN read bit for bit by a TF32 row
// (docs/datapaths.md §7.4: the H200 truncates 0x7F800001 to +Inf).
TEST(MmaCli, MixedFormatsAndTf32NanPayload) {
  if (!fs::exists(FP4SIM_BINARY)) GTEST_SKIP() << "fp4sim binary not built: " << FP4SIM_BINARY;
  const fs::path dir = temp_dir("mma-mixed");
  std::vector<float> a(32, 0.0f), b(32, 0.0f);
  a[0] = 1.125f;      // e4m3, not e5m2
  b[0] = 0x1p-16f;    // e5m2 (subnormal), not e4m3
  npy::write(dir / "a.npy", npy::DType::f4, {1, 32}, a.data());
  npy::write(dir / "b.npy", npy::DType::f4, {32, 1}, b.data());
  const std::string ab = " --a " + (dir / "a.npy").string() + " --b " + (dir / "b.npy").string();
  const fs::path out = dir / "d.npy";
  const Cli r = run_cli("mma --datapath sm90-fp8 --a-format e4m3 --b-format e5m2" + ab + " --out " + out.string(), dir);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(npy::as_float32(npy::read(out), out)[0], 1.125f * 0x1p-16f);
  fs::remove(out);
  EXPECT_EQ(run_cli("mma --datapath sm90-fp8 --input-format e4m3" + ab + " --out " + out.string(), dir).rc, 3);
  EXPECT_EQ(run_cli("mma --datapath sm90-fp8 --a-format e4m3" + ab + " --out " + out.string(), dir).rc, 2);
  EXPECT_EQ(run_cli("mma --datapath sm90-fp8 --a-format e4m3 --b-format bf16" + ab + " --out " + out.string(), dir).rc, 2);
  EXPECT_FALSE(fs::exists(out));
  std::vector<std::uint32_t> t(8, 0u), u(8, 0u);
  t[0] = 0x7F800001u;  // a signalling NaN whose payload lies below the tf32 cut
  u[0] = 0x3F800000u;
  npy::write(dir / "t.npy", npy::DType::f4, {1, 8}, t.data());
  npy::write(dir / "u.npy", npy::DType::f4, {8, 1}, u.data());
  const Cli n = run_cli("mma --datapath sm90-tf32 --input-format fp32 --a " + (dir / "t.npy").string() + " --b " +
                            (dir / "u.npy").string() + " --out " + out.string(),
                        dir);
  ASSERT_EQ(n.rc, 0) << n.out;
  const npy::Array d = npy::read(out);
  std::uint32_t bits = 0;
  std::memcpy(&bits, d.bytes.data(), 4);
  EXPECT_EQ(bits, 0x7F800000u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fp4sim

namespace fp4sim {
namespace {

// An infinite alpha times an exact zero sum is NaN (0 * Inf) in every implementation of `exact`:
// the fast paths once returned +0 here while the reference and the GPU gave NaN.
TEST(ExactEpilogue, InfiniteAlphaTimesZeroSumIsNan) {
  std::vector<std::uint8_t> zeros(32, 0), ones(32, e2m1_code(1.0));
  const auto a = make_tensor(1, 32, zeros, {scale_code(formats::ue5m3, 1.0), scale_code(formats::ue5m3, 1.0)}, 16,
                             formats::ue5m3);
  const auto b = make_tensor(1, 32, ones, {scale_code(formats::ue5m3, 1.0), scale_code(formats::ue5m3, 1.0)}, 16,
                             formats::ue5m3);
  for (GemmImpl impl : {GemmImpl::fast, GemmImpl::reference}) {
    GemmOptions options;
    options.datapath = find_datapath("exact");
    options.alpha = std::numeric_limits<float>::infinity();
    options.impl = impl;
    const auto c = gemm(a, b, options);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_TRUE(std::isnan(c[0])) << "impl " << static_cast<int>(impl) << " gave " << c[0];
  }
}

}  // namespace
}  // namespace fp4sim
