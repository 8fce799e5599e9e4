// Internals of `fp4sim vectors` shared by vectors.cpp (the cases), vectors_inputs.cpp (the input
// families) and vectors_write.cpp (the files) (not public).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fp4sim/analysis/vectors.hpp"
#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/random.hpp"

namespace fp4sim::vectors::detail {

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

// The amax of a tensor, NaN-ignoring as quantize() takes it.
float current_amax(std::span<const float> x);

// Random values over a few binades around 1: every element code and many block scales.
Input random_tensor(Context& c, std::size_t rows, std::size_t cols);

// Each block's amax is 6·2^j (j: powers of two the scale format holds), so its scale is exactly 2^j and
// every element lands on an E2M1 midpoint or grid value after scaling. Under a tensor scale G = 2^k the
// last block holds the tensor amax F·T·2^-k that makes G so.
Input element_ties(Context& c, bool edge_bits);

// Two-level rules: blocks whose ideal scale u is exactly a midpoint of the scale grid (the one between 0
// and the smallest subnormal rounds to 0: underflow), the largest scale and values above it (saturation).
// The held amax F·T·2^-k makes G = 2^k, so u = amax_b · 2^k / F exactly for amax_b = F·M·2^-k.
Input scale_ties(Context& c, std::size_t stride);

// Power-of-two rules: one block per binade edge, its amax just below 2^n, at 2^n and just above, from the
// binary32 subnormals to 2^127, where a float log2 (rather than the exponent field) rounds up just below.
Input scale_binade_edges(Context& c);

// A random tensor quantized with a held amax `factor` times its own.
Input held_amax(Context& c, std::size_t rows, std::size_t cols, float factor, bool tiny_blocks);

// Blocks spread over many binades below the largest: their scales underflow (two-level: relative to the
// tensor amax; power-of-two: block amaxes below 2^-125, binary32 subnormals included).
Input scale_underflow(Context& c);

// Zero blocks (+0 and -0) among sparse random ones.
Input zero_blocks(Context& c);

// A tensor of +0 only.
Input all_zero(std::size_t rows, std::size_t cols);

// NaN, +Inf and -Inf in separate blocks and together in one, among finite blocks; `held` quantizes with
// a finite held amax (the finite part's), else the current amax is +Inf.
Input nan_inf(Context& c, bool held);

// Binary32 subnormal inputs only: a tensor scale G clamps at FLT_MAX, power-of-two scales underflow.
Input subnormal_tensor(Context& c);

// Values near FLT_MAX: the largest scales and a tiny G.
Input huge_tensor(Context& c);

// BF16-valued inputs (the RHT's products are then exact and the transform is well defined), groups of 16.
Input bf16_tensor(Context& c, std::size_t rows, std::size_t cols);

// The number of cases asked for: at least the edge cases, at most what a disk holds.
void check_cases(const Recipe& recipe, std::size_t cases);
// The rows and number of cases of `vectors --discriminate` (UsageError: fewer than two rows, one named
// twice, cases outside 1..1000, a recipe whose elements are not E2M1).
void check_discriminate(const Recipe& recipe, const std::vector<const Datapath*>& rows, std::size_t cases);

// "07_title": a case's name, its index first so that the files sort in case order.
std::string case_name(std::size_t index, const std::string& title);

// The input quantized under `spec` with everything the golden model makes of it: codes, scales,
// dequantized values, the RHT'd tensor, the edge categories reached. Stochastic rounding draws from
// Philox (seed, stream) unless the input brings its own bits.
QuantizeCase quantize_case(const Recipe& recipe, std::string name, const OperandSpec& spec, Input in,
                           std::uint64_t seed, std::uint64_t stream);

}  // namespace fp4sim::vectors::detail
