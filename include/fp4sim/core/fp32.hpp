// Single binary32 operations with the rounding named in the function, as recipes are written as the
// exact operation sequence of the kernels they model (CUDA __fmul_rn, __fdiv_rn, add.rz.f32).
// The host's binary32 arithmetic is IEEE RNE (SSE, no FMA contraction: CMake passes -ffp-contract=off),
// so the _rn forms are the plain operators; the _rz forms derive the exact error by TwoSum.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace fp4sim::fp32 {

inline float mul_rn(float a, float b) { return a * b; }
inline float div_rn(float a, float b) { return a / b; }
inline float add_rn(float a, float b) { return a + b; }
inline float sub_rn(float a, float b) { return a - b; }
inline float min(float a, float b) { return b < a ? b : a; }  // fminf for non-NaN operands

inline std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
inline float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// a + b rounded toward zero. TwoSum gives the exact error of the RNE sum; when it points toward zero
// the RNE result was rounded away and steps back one ulp. Overflow to Inf under RNE becomes FLT_MAX.
inline float add_rz(float a, float b) {
  const float s = a + b;
  if (std::isnan(s) || std::isinf(a) || std::isinf(b)) return s;
  if (std::isinf(s)) return std::copysign(std::numeric_limits<float>::max(), s);
  const float bb = s - a;
  const float err = (a - (s - bb)) + (b - bb);
  if (err == 0.0f || s == 0.0f) return s;
  if ((err < 0.0f) == (s > 0.0f)) return from_bits(bits(s) - 1);  // |s| too large: toward zero
  return s;
}

}  // namespace fp4sim::fp32
