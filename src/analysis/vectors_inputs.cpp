// The input families of `fp4sim vectors`: each builds the tensors that reach one kind of edge of a
// recipe (ties, scale ties, binade edges, underflow, zeros, specials, extremes) or plain random ones.
#include <algorithm>
#include <cmath>
#include <limits>

#include "vectors_internal.hpp"

namespace fp4sim::vectors::detail {

namespace {

// The E2M1 midpoints (ties of round-to-nearest) and grid values, in units of the block scale.
constexpr float kE2m1Ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
constexpr float kE2m1Grid[] = {0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

}  // namespace

float current_amax(std::span<const float> x) {
  float amax = 0.0f;
  for (float v : x) amax = std::fabs(v) > amax ? std::fabs(v) : amax;  // NaN-ignoring, as quantize()
  return amax;
}

// Random values over a few binades around 1: every element code and many block scales.
Input random_tensor(Context& c, std::size_t rows, std::size_t cols) {
  Input in(rows, cols);
  for (float& v : in.x) v = c.draw.value(-6, 3);
  return in;
}

// Each block's amax is 6·2^j (j: powers of two the scale format holds), so its scale is exactly 2^j and
// every element lands on an E2M1 midpoint or grid value after scaling. Under a tensor scale G = 2^k the
// last block holds the tensor amax F·T·2^-k that makes G so.
Input element_ties(Context& c, bool edge_bits) {
  const Format& sf = c.recipe.scale;
  std::vector<int> js;
  int k = 0;
  if (c.two_level()) {
    const int smallest = sf.min_normal_exponent() - sf.mantissa_bits;
    const int largest = std::min(sf.max_exponent(), static_cast<int>(std::floor(std::log2(c.spec.target))));
    js = {smallest, smallest + 1, sf.min_normal_exponent(), -3, 0, 3, largest};
    k = c.draw.between(-20, 20);
  } else {
    js = {-125, -100, -60, -3, 0, 2, 60, 125};
  }
  const std::size_t B = c.block(), rows = c.spec.two_d ? B : 3;
  const std::size_t blocks = js.size() + (c.tensor_scaled() ? 1 : 0);
  Input in(rows, B * blocks);
  for (std::size_t b = 0; b < js.size(); ++b) {
    const int e = js[b] - k;
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < B; ++i) {
        const std::uint32_t pick = c.draw.below(2 * std::size(kE2m1Ties) + 2 * std::size(kE2m1Grid) + 2);
        float v = pick < 2 * std::size(kE2m1Ties) ? kE2m1Ties[pick / 2]
                  : pick < 2 * (std::size(kE2m1Ties) + std::size(kE2m1Grid))
                      ? kE2m1Grid[(pick - 2 * std::size(kE2m1Ties)) / 2]
                      : 0.0f;
        if (pick & 1) v = -v;
        in.at(r, b * B + i) = std::ldexp(v, e);
      }
      if (r == 0 || !c.spec.two_d) in.at(r, b * B) = std::ldexp(c.draw.coin() ? 6.0f : -6.0f, e);
    }
  }
  if (c.tensor_scaled()) {
    const float amax = c.amax_for_pow2_g(k);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < B; ++i) in.at(r, js.size() * B + i) = std::ldexp(c.draw.value(-2, 10), -k);
    }
    in.at(0, in.cols - 1) = amax;
  }
  in.covers.push_back("element_tie");
  if (edge_bits && is_stochastic(c.spec.rounding)) {
    // The extremes of the random integer, and both sides of its midpoint.
    const std::uint32_t top = (std::uint32_t{1} << c.recipe.sr_bits) - 1, half = top / 2;
    const std::uint32_t edges[] = {0, 1, half, half + 1, top - 1, top};
    in.rbits.resize(in.x.size());
    for (auto& r : in.rbits) r = edges[c.draw.below(std::size(edges))];
    in.covers.push_back("sr_edge_bits");
  }
  return in;
}

// Two-level rules: blocks whose ideal scale u is exactly a midpoint of the scale grid (the one between 0
// and the smallest subnormal rounds to 0: underflow), the largest scale and values above it (saturation).
// The held amax F·T·2^-k makes G = 2^k, so u = amax_b · 2^k / F exactly for amax_b = F·M·2^-k.
Input scale_ties(Context& c, std::size_t stride) {
  const Format& sf = c.recipe.scale;
  const std::uint32_t top = sf.max_finite_code();
  const double max = decode_to_double(sf, top);
  std::vector<double> targets;
  for (std::uint32_t code = 0; code < top; code += static_cast<std::uint32_t>(stride)) {
    targets.push_back((decode_to_double(sf, code) + decode_to_double(sf, code + 1)) / 2);
  }
  const double ulp = max - decode_to_double(sf, top - 1);
  for (double above : {max, max + ulp / 2, max + ulp, 2 * max}) targets.push_back(above);
  const int k = c.draw.between(-30, 30);
  const std::size_t B = c.block(), rows = c.block_rows();
  Input in(rows, B * targets.size());
  const double element_max = decode_to_double(c.recipe.element, c.recipe.element.max_finite_code());
  for (std::size_t b = 0; b < targets.size(); ++b) {
    const float amax = static_cast<float>(std::ldexp(element_max * targets[b], -k));  // exact: few bits
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < B; ++i) {
        const float sign = c.draw.coin() ? -1.0f : 1.0f;
        in.at(r, b * B + i) = sign * amax * c.draw.fraction();
      }
    }
    const std::size_t r = c.draw.below(static_cast<std::uint32_t>(rows));
    const std::size_t i = c.draw.below(static_cast<std::uint32_t>(B));
    in.at(r, b * B + i) = c.draw.coin() ? amax : -amax;
  }
  in.amax_ref = c.amax_for_pow2_g(k);
  in.covers.push_back("scale_tie");
  return in;
}

// Power-of-two rules: one block per binade edge, its amax just below 2^n, at 2^n and just above, from the
// binary32 subnormals to 2^127, where a float log2 (rather than the exponent field) rounds up just below.
Input scale_binade_edges(Context& c) {
  std::vector<float> amaxes;
  for (int n = -149; n <= 127; n += 4) {
    const float p = std::ldexp(1.0f, n);
    for (float a : {std::nextafter(p, 0.0f), p, std::nextafter(p, std::numeric_limits<float>::infinity())}) {
      if (a > 0.0f && std::isfinite(a)) amaxes.push_back(a);
    }
  }
  const std::size_t B = c.block();
  Input in(1, B * amaxes.size());
  for (std::size_t b = 0; b < amaxes.size(); ++b) {
    for (std::size_t i = 0; i < B; ++i) {
      const float sign = c.draw.coin() ? -1.0f : 1.0f;
      in.at(0, b * B + i) = sign * amaxes[b] * c.draw.fraction();
    }
    const std::size_t i = c.draw.below(static_cast<std::uint32_t>(B));
    in.at(0, b * B + i) = c.draw.coin() ? amaxes[b] : -amaxes[b];
  }
  in.covers.push_back("scale_binade_edge");
  return in;
}

// A random tensor quantized with a held amax `factor` times its own.
Input held_amax(Context& c, std::size_t rows, std::size_t cols, float factor, bool tiny_blocks) {
  Input in = random_tensor(c, rows, cols);
  if (tiny_blocks) {
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < c.block(); ++i) in.at(r, i) = std::ldexp(in.at(r, i), -30);
    }
  }
  in.amax_ref = current_amax(in.x) * factor;
  return in;
}

// Blocks spread over many binades below the largest: their scales underflow (two-level: relative to the
// tensor amax; power-of-two: block amaxes below 2^-125, binary32 subnormals included).
Input scale_underflow(Context& c) {
  const std::vector<int> shifts = c.two_level() ? std::vector<int>{0, -10, -20, -30, -40, -50, -60}
                                                : std::vector<int>{0, -124, -126, -128, -135, -146};
  const std::size_t B = c.block(), rows = 2;
  Input in(rows, B * shifts.size());
  for (std::size_t b = 0; b < shifts.size(); ++b) {
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < B; ++i) in.at(r, b * B + i) = std::ldexp(c.draw.value(-3, 1), shifts[b]);
    }
  }
  return in;
}

// Zero blocks (+0 and -0) among sparse random ones.
Input zero_blocks(Context& c) {
  const std::size_t B = c.block(), rows = 4, blocks = 5;
  Input in(rows, B * blocks);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t col = 0; col < in.cols; ++col) {
      const std::size_t b = col / B;
      float v = (col & 1) ? -0.0f : 0.0f;  // blocks 1 and 3 stay zero
      if (b != 1 && b != 3) v = c.draw.below(4) == 0 ? c.draw.value(-4, 2) : (c.draw.coin() ? -0.0f : 0.0f);
      in.at(r, col) = v;
    }
  }
  return in;
}

Input all_zero(std::size_t rows, std::size_t cols) {
  Input in(rows, cols);
  in.at(rows - 1, cols - 1) = -0.0f;
  return in;
}

// NaN, +Inf and -Inf in separate blocks and together in one, among finite blocks; `held` quantizes with
// a finite held amax (the finite part's), else the current amax is +Inf.
Input nan_inf(Context& c, bool held) {
  const std::size_t B = c.block(), rows = c.block_rows() == 1 ? 2 : c.block_rows(), blocks = 6;
  Input in = random_tensor(c, rows, B * blocks);
  const float finite_amax = current_amax(in.x);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto pos = [&](std::size_t b) {
    const std::size_t r = c.draw.below(static_cast<std::uint32_t>(rows));
    return std::pair{r, b * B + c.draw.below(static_cast<std::uint32_t>(B))};
  };
  auto set = [&](std::pair<std::size_t, std::size_t> p, float v) { in.at(p.first, p.second) = v; };
  set(pos(0), nan);
  set(pos(1), inf);
  set(pos(2), -inf);
  set({0, 4 * B}, nan);
  set({rows - 1, 4 * B + B - 1}, -inf);
  set({0, 4 * B + 1}, inf);
  if (held && c.tensor_scaled()) in.amax_ref = finite_amax;
  return in;
}

// Binary32 subnormal inputs only: a tensor scale G clamps at FLT_MAX, power-of-two scales underflow.
Input subnormal_tensor(Context& c) {
  Input in(2, 3 * c.block());
  for (float& v : in.x) v = c.draw.value(-149, -127, 23 - 3);
  in.at(0, 0) = std::numeric_limits<float>::denorm_min();
  return in;
}

// Values near FLT_MAX: the largest scales and a tiny G.
Input huge_tensor(Context& c) {
  Input in(2, 3 * c.block());
  for (float& v : in.x) v = c.draw.value(120, 127);
  in.at(1, 1) = std::numeric_limits<float>::max();
  return in;
}

// BF16-valued inputs (the RHT's products are then exact and the transform is well defined), groups of 16.
Input bf16_tensor(Context& c, std::size_t rows, std::size_t cols) {
  Input in(rows, cols);
  for (float& v : in.x) v = c.draw.value(-6, 3, 7);
  return in;
}

}  // namespace fp4sim::vectors::detail
