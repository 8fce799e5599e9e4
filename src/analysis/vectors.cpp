#include "fp4sim/analysis/vectors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include <omp.h>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/float_text.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/io/npy.hpp"
#include "fp4sim/io/output_file.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/analysis/stats.hpp"

namespace fp4sim::vectors {

namespace {

// Input values are drawn from Philox (random.hpp) and built with exact integer arithmetic and ldexp, never
// from <random>'s distributions or libm, so the bytes do not depend on the standard library or the CPU.
// Input draws use streams with the top bit set; stochastic-rounding bits use stream 2·case + operand.
constexpr std::uint64_t kInputStreams = std::uint64_t{1} << 63;

class Draw {
 public:
  Draw(std::uint64_t seed, std::uint64_t stream) : seed_(seed), stream_(stream) {}

  std::uint32_t bits() { return random_bits(seed_, stream_, index_++, 32); }
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>((std::uint64_t{bits()} * n) >> 32); }
  int between(int lo, int hi) { return lo + static_cast<int>(below(static_cast<std::uint32_t>(hi - lo + 1))); }
  bool coin() { return bits() & 1; }
  // ±m · 2^e with m uniform on [1, 2) in steps of 2^-mantissa_bits and e uniform on [lo, hi].
  float value(int lo, int hi, int mantissa_bits = 23) {
    const std::uint32_t m = bits() >> (32 - mantissa_bits);
    const float significand = std::ldexp(static_cast<float>((std::uint32_t{1} << mantissa_bits) + m), -mantissa_bits);
    const float v = std::ldexp(significand, between(lo, hi));
    return coin() ? -v : v;
  }
  // A value in [0, 1) on a 2^-24 grid.
  float fraction() { return std::ldexp(static_cast<float>(bits() >> 8), -24); }

 private:
  std::uint64_t seed_, stream_, index_ = 0;
};

// The E2M1 midpoints (ties of round-to-nearest) and grid values, in units of the block scale.
constexpr float kE2m1Ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
constexpr float kE2m1Grid[] = {0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// An input before quantization: the tensor, an optional held amax, explicit random bits (else Philox).
struct Input {
  std::size_t rows = 0, cols = 0;
  std::vector<float> x;
  std::optional<float> amax_ref;
  std::vector<std::uint32_t> rbits;
  std::vector<std::string> covers;  // categories only the construction knows (ties, edge random bits)

  Input(std::size_t r, std::size_t c) : rows(r), cols(c), x(r * c, 0.0f) {}
  float& at(std::size_t r, std::size_t c) { return x[r * cols + c]; }
};

struct Context {
  const Recipe& recipe;
  OperandSpec spec;
  Draw& draw;
  std::size_t block_rows() const { return spec.two_d ? static_cast<std::size_t>(recipe.block) : 1; }
  std::size_t block() const { return static_cast<std::size_t>(recipe.block); }
  bool two_level() const { return recipe.scale_rule == ScaleRule::two_level; }
  bool tensor_scaled() const { return has_tensor_scale(recipe); }
  // The tensor amax whose encode scale G is exactly 2^k: RN(F·T) · 2^-k.
  float amax_for_pow2_g(int k) const {
    const float element_max = decode_to_float(recipe.element, recipe.element.max_finite_code());
    return std::ldexp(element_max * spec.target, -k);
  }
};

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

struct Plan {
  std::string title;
  Role role = Role::activation;
  std::optional<Gemm> spec_from;  // the spec of this GEMM's operand A (or B, with b_operand)
  bool b_operand = false;
  std::function<Input(Context&)> build;
};

struct GemmPlan {
  std::string title;
  Gemm gemm;
  std::function<Input(Context&)> a, b;
};

struct Plans {
  std::vector<Plan> quantize;
  std::vector<GemmPlan> gemm;
};

Plans edge_plans(const Recipe& r) {
  const bool two_level = r.scale_rule == ScaleRule::two_level;
  const bool tensor_scaled = two_level && r.tensor_scale != TensorScalePolicy::none;
  const std::size_t B = static_cast<std::size_t>(r.block);
  Plans p;
  auto q = [&](std::string title, Role role, std::function<Input(Context&)> build) {
    p.quantize.push_back({std::move(title), role, std::nullopt, false, std::move(build)});
  };
  q("activation_random", Role::activation, [B](Context& c) { return random_tensor(c, 8, 4 * B); });
  q("weight_random", Role::weight, [B](Context& c) { return random_tensor(c, 2 * B, 4 * B); });
  q("grad_output_random", Role::grad_output, [B](Context& c) { return random_tensor(c, 8, 4 * B); });
  q("activation_element_ties", Role::activation, [](Context& c) { return element_ties(c, false); });
  q("weight_element_ties", Role::weight, [](Context& c) { return element_ties(c, false); });
  q("grad_output_element_ties", Role::grad_output, [](Context& c) { return element_ties(c, true); });
  if (two_level) {
    q("activation_scale_ties", Role::activation, [](Context& c) { return scale_ties(c, 1); });
    q("weight_scale_ties", Role::weight, [](Context& c) { return scale_ties(c, 9); });
  }
  if (!two_level) q("activation_scale_binade_edges", Role::activation, scale_binade_edges);
  if (tensor_scaled) {
    q("activation_held_amax_1024x_below", Role::activation,
      [B](Context& c) { return held_amax(c, 4, 4 * B, 1.0f / 1024, false); });
    q("weight_held_amax_8x_below", Role::weight,
      [B](Context& c) { return held_amax(c, 2 * B, 2 * B, 1.0f / 8, false); });
    q("grad_output_held_amax_1024x_above", Role::grad_output,
      [B](Context& c) { return held_amax(c, 4, 4 * B, 1024.0f, true); });
  }
  q("activation_scale_underflow", Role::activation, scale_underflow);
  q("activation_zero_blocks", Role::activation, zero_blocks);
  q("weight_all_zero", Role::weight, [B](Context&) { return all_zero(B, 2 * B); });
  q("activation_nan_inf", Role::activation, [](Context& c) { return nan_inf(c, false); });
  if (tensor_scaled) {
    q("grad_output_nan_inf_held_amax", Role::grad_output, [](Context& c) { return nan_inf(c, true); });
  } else {
    q("weight_nan_inf", Role::weight, [](Context& c) { return nan_inf(c, false); });
  }
  q("activation_partial_blocks", Role::activation, [B](Context& c) { return random_tensor(c, 3, 2 * B + B / 2 + 3); });
  q("weight_partial_blocks", Role::weight, [B](Context& c) { return random_tensor(c, B + 3, B + B / 2 + 5); });
  q("activation_subnormal_inputs", Role::activation, subnormal_tensor);
  q("activation_near_flt_max", Role::activation, huge_tensor);
  if (r.rht_wgrad) {
    // The wgrad operands as quantized: dYᵀ (operand A) and Xᵀ (operand B), both through the RHT.
    p.quantize.push_back({"wgrad_grad_output_rht", Role::grad_output, Gemm::wgrad, false,
                          [B](Context& c) { return bf16_tensor(c, 8, 4 * B); }});
    p.quantize.push_back({"wgrad_activation_rht", Role::activation, Gemm::wgrad, true,
                          [B](Context& c) { return bf16_tensor(c, 8, 4 * B); }});
  }

  // GEMMs: M = N = 16, K = 128 (a multiple of every block and of the probe-matched group of 64).
  constexpr std::size_t M = 16, N = 16, K = 128;
  auto rnd = [](std::size_t rows) { return [rows](Context& c) { return random_tensor(c, rows, K); }; };
  auto bf16 = [](std::size_t rows) { return [rows](Context& c) { return bf16_tensor(c, rows, K); }; };
  p.gemm.push_back({"gemm_fprop", Gemm::fprop, rnd(M), rnd(N)});
  p.gemm.push_back({"gemm_dgrad", Gemm::dgrad, rnd(M), rnd(N)});
  p.gemm.push_back({"gemm_wgrad", Gemm::wgrad, bf16(M), bf16(N)});
  // Zero and tiny blocks in A; with a tensor scale, both operands quantized with held amaxes.
  p.gemm.push_back({tensor_scaled ? "gemm_fprop_sparse_held_amax" : "gemm_fprop_sparse", Gemm::fprop,
                    [tensor_scaled](Context& c) {
                      Input in = random_tensor(c, M, K);
                      for (std::size_t r = 0; r < M; ++r) {
                        for (std::size_t i = 0; i < c.block(); ++i) {
                          in.at(r, i) = 0.0f;
                          in.at(r, K - 1 - i) = std::ldexp(in.at(r, K - 1 - i), -40);
                        }
                      }
                      if (tensor_scaled) in.amax_ref = current_amax(in.x) * 0.25f;
                      return in;
                    },
                    [tensor_scaled](Context& c) {
                      Input in = random_tensor(c, N, K);
                      if (tensor_scaled) in.amax_ref = current_amax(in.x) * 2.0f;
                      return in;
                    }});
  return p;
}

std::size_t edge_count(const Plans& p) { return p.quantize.size() + p.gemm.size(); }

std::string case_name(std::size_t index, const std::string& title) {
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "%02zu_", index);
  return prefix + title;
}

bool is_subnormal(float v) { return v != 0.0f && std::fpclassify(v) == FP_SUBNORMAL; }

QuantizeCase quantize_case(const Recipe& recipe, std::string name, const OperandSpec& spec, Input in,
                           std::uint64_t seed, std::uint64_t stream) {
  QuantizeCase c;
  c.name = std::move(name);
  c.spec = spec;
  c.amax_ref = in.amax_ref;
  c.rows = in.rows;
  c.cols = in.cols;
  c.x = std::move(in.x);
  c.covers = std::move(in.covers);
  if (is_stochastic(spec.rounding)) {
    if (in.rbits.empty()) {
      c.philox = PhiloxKey{seed, stream, recipe.sr_bits};
      c.rbits.resize(c.x.size());
      for (std::size_t i = 0; i < c.rbits.size(); ++i) c.rbits[i] = random_bits(seed, stream, i, recipe.sr_bits);
    } else {
      c.rbits = std::move(in.rbits);
    }
  }
  QuantizeRequest request;
  request.spec = spec;
  request.amax_ref = c.amax_ref;
  request.random.seed = seed;
  request.random.stream = stream;
  request.random.explicit_bits = c.rbits;
  c.q = quantize(recipe, request, c.x, c.rows, c.cols);
  c.dequantized = dequantize(c.q);
  if (spec.rht) c.transformed = random_hadamard_transform(c.x, c.rows, c.cols, recipe.rht_signs);

  // Power-of-two scale formats mark a block holding NaN or Inf with the NaN scale; the codes of its finite
  // elements are left to the implementation by the OCP MX specification.
  if (recipe.scale.specials == Specials::pow2_nan) {
    c.defined.assign(c.x.size(), 1);
    bool any = false;
    for (std::size_t r = 0; r < c.rows; ++r) {
      for (std::size_t col = 0; col < c.cols; ++col) {
        if (c.q.scale_code(r, col) == recipe.scale.nan_code() && std::isfinite(c.x[r * c.cols + col])) {
          c.defined[r * c.cols + col] = 0;
          any = true;
        }
      }
    }
    if (!any) c.defined.clear();
  }

  const QuantizeCounts& n = c.q.counts;
  const std::span<const float> quantized =
      spec.rht ? std::span<const float>(c.transformed) : std::span<const float>(c.x);
  const float current = current_amax(quantized);
  auto add = [&](bool when, const char* category) {
    if (when) c.covers.push_back(category);
  };
  add(n.saturated > 0, "element_saturation");
  add(n.scale_saturated > 0, "scale_saturation");
  add(n.scale_underflow > 0, "scale_underflow");
  add(n.zero_blocks > 0, "zero_block");
  add(std::all_of(c.x.begin(), c.x.end(), [](float v) { return v == 0.0f; }), "all_zero_tensor");
  add(n.nan > 0, "nan");
  add(n.inf > 0, "inf");
  add(c.amax_ref && *c.amax_ref < current, "stale_amax_smaller");
  add(c.amax_ref && *c.amax_ref > current, "stale_amax_larger");
  add(is_stochastic(spec.rounding), "stochastic_rounding");
  add(spec.rht, "rht");
  add(spec.two_d, "two_d");
  add(c.cols % c.q.block_cols != 0 || c.rows % static_cast<std::size_t>(c.q.block_rows) != 0, "partial_block");
  add(std::any_of(c.x.begin(), c.x.end(), is_subnormal), "subnormal_input");
  const auto& order = edge_category_names();
  std::sort(c.covers.begin(), c.covers.end(), [&](const std::string& a, const std::string& b) {
    return std::find(order.begin(), order.end(), a) < std::find(order.begin(), order.end(), b);
  });
  return c;
}

std::vector<const Datapath*> gemm_datapaths(const Recipe& recipe) {
  std::vector<const Datapath*> rows{recipe.default_datapath};
  for (const Datapath* also : {&datapaths::exact, &datapaths::fp32_seq}) {
    if (std::find(rows.begin(), rows.end(), also) == rows.end()) rows.push_back(also);
  }
  return rows;
}

// Random tensors for the cases after the edge cases: every role in turn, assorted shapes, and with a
// tensor scale every third one quantized with a held amax 2^-6 .. 2^6 times its own.
Input fill_tensor(Context& c, std::size_t ordinal) {
  const std::size_t B = c.block();
  const std::size_t rows = 1 + c.draw.below(static_cast<std::uint32_t>(2 * B));
  const std::size_t whole_blocks = 1 + c.draw.below(4);
  const std::size_t cols = B * whole_blocks + (ordinal % 2 ? c.draw.below(static_cast<std::uint32_t>(B)) : 0);
  Input in(rows, cols);
  const int lo = c.draw.between(-40, 10);
  const int hi = lo + c.draw.between(1, 12);
  for (float& v : in.x) v = c.draw.value(lo, hi);
  if (c.tensor_scaled() && ordinal % 3 == 2) in.amax_ref = std::ldexp(current_amax(in.x), c.draw.between(-6, 6));
  return in;
}

}  // namespace

const std::vector<std::string>& edge_category_names() {
  // clang-format off
  static const std::vector<std::string> names{
      "element_tie", "scale_tie", "scale_binade_edge",                     // rounding boundaries
      "element_saturation", "scale_saturation", "scale_underflow",        // range limits
      "zero_block", "all_zero_tensor", "nan", "inf", "subnormal_input",    // special inputs
      "stale_amax_smaller", "stale_amax_larger",                          // held tensor amax
      "stochastic_rounding", "sr_edge_bits", "rht", "two_d", "partial_block"};  // operand settings
  // clang-format on
  return names;
}

std::size_t minimum_cases(const Recipe& recipe) { return edge_count(edge_plans(recipe)); }
std::size_t default_cases(const Recipe& recipe) { return minimum_cases(recipe) + 4; }

namespace {

// The number of cases asked for: at least the edge cases, at most what a disk holds.
void check_cases(const Recipe& recipe, std::size_t cases) {
  if (recipe.element != formats::e2m1) throw UsageError("vectors: only E2M1 element formats are supported");
  const Plans plans = edge_plans(recipe);
  if (cases < edge_count(plans)) {
    throw UsageError("{cases}: recipe " + recipe.name + " has " + std::to_string(edge_count(plans)) +
                     " edge cases; give at least that many (got " + std::to_string(cases) + ")");
  }
  // Each case is a handful of files of at most a few KiB: a million cases is already gigabytes.
  constexpr std::size_t kMaxCases = 1'000'000;
  if (cases > kMaxCases) {
    throw UsageError("{cases}: at most " + std::to_string(kMaxCases) + " (got " + std::to_string(cases) + ")");
  }
}

}  // namespace

void generate(const Recipe& recipe, std::uint64_t seed, std::size_t cases, const std::function<void(Case&&)>& sink) {
  check_cases(recipe, cases);
  const Plans plans = edge_plans(recipe);
  std::size_t index = 0;
  for (const Plan& plan : plans.quantize) {
    OperandSpec spec = operand_for_role(recipe, plan.role);
    if (plan.spec_from) {
      const GemmOperands ops = operands_for(recipe, *plan.spec_from);
      spec = plan.b_operand ? ops.b : ops.a;
    }
    Draw draw(seed, kInputStreams | index);
    Context context{recipe, spec, draw};
    Case c;
    c.quantize = quantize_case(recipe, case_name(index, plan.title), spec, plan.build(context), seed, 2 * index);
    sink(std::move(c));
    ++index;
  }
  for (const GemmPlan& plan : plans.gemm) {
    const GemmOperands ops = operands_for(recipe, plan.gemm);
    Draw draw(seed, kInputStreams | index);
    Context ca{recipe, ops.a, draw}, cb{recipe, ops.b, draw};
    GemmCase g;
    g.name = case_name(index, plan.title);
    g.gemm = plan.gemm;
    g.a = quantize_case(recipe, g.name + ".a", ops.a, plan.a(ca), seed, 2 * index);
    g.b = quantize_case(recipe, g.name + ".b", ops.b, plan.b(cb), seed, 2 * index + 1);
    for (const Datapath* datapath : gemm_datapaths(recipe)) {
      GemmRequest request;
      request.datapath = datapath;
      GemmOutput out;
      out.datapath = datapath->name;
      out.alpha = resolve_gemm(recipe, g.a.q, g.b.q, request).alpha;
      out.c = gemm(recipe, g.a.q, g.b.q, request);
      g.outputs.push_back(std::move(out));
    }
    Case c;
    c.gemm = std::move(g);
    sink(std::move(c));
    ++index;
  }
  const Role roles[] = {Role::activation, Role::weight, Role::grad_output};
  for (std::size_t ordinal = 0; index < cases; ++ordinal, ++index) {
    const Role role = roles[ordinal % 3];
    const OperandSpec spec = operand_for_role(recipe, role);
    Draw draw(seed, kInputStreams | index);
    Context context{recipe, spec, draw};
    Case c;
    c.quantize = quantize_case(recipe, case_name(index, std::string(name_of(role)) + "_random_fill"), spec,
                               fill_tensor(context, ordinal), seed, 2 * index);
    sink(std::move(c));
  }
}

VectorSet generate(const Recipe& recipe, std::uint64_t seed, std::size_t cases) {
  VectorSet set;
  set.recipe = recipe;
  set.seed = seed;
  generate(recipe, seed, cases, [&](Case&& c) { set.cases.push_back(std::move(c)); });
  return set;
}

// ---------------------------------------------------------------------------------------------------
// Writing

namespace {

// A binary32 value as a JSON number (exact: the shortest decimal of the widened double) and its bit
// pattern; non-finite values are null and the bits say which.
void float_field(stats::JsonWriter& j, std::string_view key, float v) {
  j.field(key, static_cast<double>(v));
  j.field(std::string(key) + "_bits", hex_bits(v));
}

class Writer {
 public:
  explicit Writer(const OutputDirectory& dir) : dir_(dir) {}
  std::size_t files() const { return files_; }

  std::string f32(const std::string& name, std::size_t rows, std::size_t cols, const std::vector<float>& v) {
    npy::write(dir_.file(name), npy::DType::f4, {rows, cols}, v.data());
    ++files_;
    return name;
  }
  std::string u8(const std::string& name, std::size_t rows, std::size_t cols, const std::vector<std::uint8_t>& v) {
    npy::write(dir_.file(name), npy::DType::u1, {rows, cols}, v.data());
    ++files_;
    return name;
  }
  std::string rbits(const std::string& name, std::size_t rows, std::size_t cols, const std::vector<std::uint32_t>& v,
                    int bits) {
    if (bits <= 8) return u8(name, rows, cols, std::vector<std::uint8_t>(v.begin(), v.end()));
    const std::vector<std::uint16_t> wide(v.begin(), v.end());
    npy::write(dir_.file(name), npy::DType::u2, {rows, cols}, wide.data());
    ++files_;
    return name;
  }

 private:
  const OutputDirectory& dir_;
  std::size_t files_ = 0;
};

// The quantize record of a case or of one GEMM operand: the spec, the scalars and the files.
void write_quantize(stats::JsonWriter& j, Writer& w, const Recipe& recipe, const QuantizeCase& c,
                    const std::string& x_file) {
  const QuantizedTensor& q = c.q;
  j.field("recipe", recipe.name);
  j.field("role", name_of(c.spec.role));
  j.field("two_d", c.spec.two_d);
  j.field("rounding", name_of(c.spec.rounding));
  j.field("block", recipe.block);
  j.field("block_rows", q.block_rows);
  j.field("block_cols", q.block_cols);
  j.key("amax_ref");
  if (c.amax_ref) {
    j.value(static_cast<double>(*c.amax_ref));
    j.field("amax_ref_bits", hex_bits(*c.amax_ref));
  } else {
    j.null();
  }
  j.field("rht", c.spec.rht);
  float_field(j, "target", q.target);
  j.key("shape")
      .begin_array()
      .value(static_cast<std::uint64_t>(c.rows))
      .value(static_cast<std::uint64_t>(c.cols))
      .end_array();
  j.key("scale_shape")
      .begin_array()
      .value(static_cast<std::uint64_t>(q.scale_rows))
      .value(static_cast<std::uint64_t>(q.scale_cols))
      .end_array();
  j.field("tensor_scaled", q.tensor_scaled);
  float_field(j, "tensor_amax", q.tensor_amax);
  float_field(j, "global_encode_scale", q.global_encode_scale);
  float_field(j, "global_decode_scale", q.global_decode_scale);
  j.key("philox");
  if (c.philox) {
    j.begin_object()
        .field("seed", c.philox->seed)
        .field("stream", c.philox->stream)
        .field("bits", c.philox->bits)
        .end_object();
  } else {
    j.null();
  }
  j.key("counts")
      .begin_object()
      .field("blocks", q.counts.blocks)
      .field("zero_blocks", q.counts.zero_blocks)
      .field("scale_saturated", q.counts.scale_saturated)
      .field("scale_underflow", q.counts.scale_underflow)
      .field("saturated", q.counts.saturated)
      .field("nan", q.counts.nan)
      .field("inf", q.counts.inf)
      .end_object();
  j.key("covers").begin_array();
  for (const auto& category : c.covers) j.value(category);
  j.end_array();

  std::vector<std::uint8_t> codes(c.rows * c.cols);
  for (std::size_t r = 0; r < c.rows; ++r) {
    for (std::size_t col = 0; col < c.cols; ++col) codes[r * c.cols + col] = q.code(r, col);
  }
  j.key("files").begin_object();
  j.field("x", x_file);
  j.field("codes", w.u8(c.name + ".codes.npy", c.rows, c.cols, codes));
  j.field("scales", w.u8(c.name + ".scales.npy", q.scale_rows, q.scale_cols, q.scales));
  j.field("dequantized", w.f32(c.name + ".dequantized.npy", c.rows, c.cols, c.dequantized));
  if (!c.rbits.empty()) j.field("rbits", w.rbits(c.name + ".rbits.npy", c.rows, c.cols, c.rbits, recipe.sr_bits));
  if (!c.transformed.empty()) j.field("transformed", w.f32(c.name + ".transformed.npy", c.rows, c.cols, c.transformed));
  if (!c.defined.empty()) j.field("defined", w.u8(c.name + ".defined.npy", c.rows, c.cols, c.defined));
  j.end_object();
}

constexpr const char* kConventions[][2] = {
    {"arrays", "NumPy .npy, little-endian, C order, always 2-D [rows, cols]"},
    {"x", "float32 input tensor as given to the quantizer (before any RHT); blocks run along the last dimension"},
    {"codes", "uint8, one unpacked element code per input element (low 4 bits; bit 3 is the sign), shape of x"},
    {"scales",
     "uint8 block scale codes, one per 1 x block_cols block or block_rows x block_cols tile, row-major "
     "[ceil(rows/block_rows), ceil(cols/block_cols)]"},
    {"rbits",
     "stochastic rounding only: the random integer (< 2^bits) each element was rounded with, shape of x; "
     "philox names the Philox4x32-10 key (seed, stream, element index = row-major index) that drew them, "
     "null when they were chosen outright"},
    {"dequantized", "float32 decoded value of every element, tensor scale included, in the recipe's dequantize order"},
    {"transformed", "rht only: float32 RHT(x), the tensor actually quantized"},
    {"defined",
     "uint8 1 where the recipe's source fixes the element code, 0 where it leaves it to the "
     "implementation; absent when every code is fixed"},
    {"amax_ref",
     "the held tensor amax the quantizer must use (bits in amax_ref_bits); null: the current amax of the "
     "tensor quantized (NaN-ignoring)"},
    {"scalars",
     "binary32 values are JSON numbers that parse to the exact value, with their bit patterns in *_bits; "
     "non-finite values are null there"},
    {"gemm",
     "C [M, N] = A·Bᵀ, float32; files.a = A [M, K] and files.b = B [N, K] as given to the quantizer (K last); "
     "operands.a / operands.b are their quantize records; files.c maps each datapath to its C, and "
     "alpha[datapath] is the epilogue multiplier it applied"},
};

}  // namespace

namespace {

// A case is a few KiB: OpenMP's threads only wait on one another there, and on a loaded machine the
// waiting made `vectors` 8x slower than one thread. The cases are made on one; the setting is restored.
class OneThread {
 public:
  OneThread() : threads_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(threads_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int threads_;
};

}  // namespace

std::size_t write(const Recipe& r, std::uint64_t seed, std::size_t cases, const std::filesystem::path& path) {
  check_cases(r, cases);
  const OneThread one_thread;
  OutputDirectory dir(path);  // a non-empty directory is refused here, before any case is made
  Writer w(dir);
  OutputFile manifest(dir.file("manifest.json"));
  stats::JsonWriter j(manifest.stream(), true);
  j.begin_object();
  j.field("format", "fp4sim conformance vectors");
  j.field("version", 1);
  j.field("seed", seed);
  j.key("recipe")
      .begin_object()
      .field("name", r.name)
      .field("source", r.source)
      .field("element_format", format_name(r.element))
      .field("scale_format", format_name(r.scale))
      .field("block", r.block)
      .field("weight_two_d", r.weight_two_d)
      .field("scale_rule", name_of(r.scale_rule))
      .field("zero_scale", r.zero_scale == ZeroScale::one ? "one" : "keep")
      .field("tensor_scale", name_of(r.tensor_scale))
      .field("period", r.period)
      .field("element_rounding", name_of(r.element_rounding))
      .field("grad_rounding", name_of(r.grad_rounding))
      .field("sr_bits", r.sr_bits)
      .field("rht_wgrad", r.rht_wgrad)
      .field("dequantize_order", name_of(r.dequantize_order))
      .field("alpha_rule", name_of(r.alpha))
      .field("default_datapath", r.default_datapath->name)
      .end_object();
  j.key("conventions").begin_object();
  for (const auto& [key, text] : kConventions) j.field(key, text);
  j.end_object();
  j.key("categories").begin_array();
  for (const auto& category : edge_category_names()) j.value(category);
  j.end_array();
  j.key("cases").begin_array();
  // Each case is written as it is made and then dropped: the memory held does not grow with --cases.
  generate(r, seed, cases, [&](Case&& c) {
    j.begin_object();
    j.field("name", c.name());
    if (c.quantize) {
      j.field("kind", "quantize");
      write_quantize(j, w, r, *c.quantize,
                     w.f32(c.quantize->name + ".x.npy", c.quantize->rows, c.quantize->cols, c.quantize->x));
    } else {
      const GemmCase& g = *c.gemm;
      j.field("kind", "gemm");
      j.field("recipe", r.name);
      j.field("gemm", name_of(g.gemm));
      j.field("m", static_cast<std::uint64_t>(g.a.rows));
      j.field("n", static_cast<std::uint64_t>(g.b.rows));
      j.field("k", static_cast<std::uint64_t>(g.a.cols));
      const std::string a = w.f32(g.name + ".a.npy", g.a.rows, g.a.cols, g.a.x);
      const std::string b = w.f32(g.name + ".b.npy", g.b.rows, g.b.cols, g.b.x);
      j.key("alpha").begin_object();
      for (const GemmOutput& out : g.outputs) float_field(j, out.datapath, out.alpha);
      j.end_object();
      j.key("operands").begin_object();
      j.key("a").begin_object();
      write_quantize(j, w, r, g.a, a);
      j.end_object();
      j.key("b").begin_object();
      write_quantize(j, w, r, g.b, b);
      j.end_object();
      j.end_object();
      j.key("files").begin_object().field("a", a).field("b", b);
      j.key("c").begin_object();
      for (const GemmOutput& out : g.outputs) {
        j.field(out.datapath, w.f32(g.name + ".c." + out.datapath + ".npy", g.a.rows, g.b.rows, out.c));
      }
      j.end_object();
      j.end_object();
    }
    j.end_object();
  });
  j.end_array();
  j.end_object();
  manifest.stream() << '\n';
  manifest.commit();
  dir.commit();
  return w.files() + 1;
}

}  // namespace fp4sim::vectors
