// Element conversion binary32 -> small-format code as the GPU kernels compute it (emu/convert.cu, and the
// quantize kernels of emu/quantize.cu). Host and device code alike, so that tests/gpu_*_test.cpp (and a
// user's own kernels) run the very functions the kernels run.
//
// This is the GPU's own arithmetic, written independently of the golden encoder (`round_pack`) and of
// the CPU fast path (`Float32Encoder`): those two are what it is judged against
// (tests/gpu_convert_test.cpp). Three shapes, as a GPU implementation would pick them:
//  * e2m1: seven binary32 threshold bit patterns compared with |x| as integers, the shape of CUTLASS's
//    software fallback `e2m1_mag_f32_rne` (sm_90 has no FP4 convert instruction, so this *is* the path);
//  * other formats with a mantissa (e4m3, e5m2, ue4m3, ue5m3, ue5m3fn, e2m3, e3m2): a rounding increment
//    added to the binary32 bit pattern and a truncation (ml_dtypes' RoundBitsToNearestEven shape), with
//    a separate shift for results below the target's smallest normal;
//  * e8m0: the binary32 exponent field plus a carry decided from the mantissa field.
// Every function is integer-only: no float arithmetic can decide a bit.
//
// Semantics are those of `encode(format, float, options)` with the hardware convention for -0 and NaN,
// for the deterministic roundings rne, rna, rtz, rup, rdown; saturating (cvt.*.satfinite), and for
// f32_to_small also not, by the overflow rule of docs/semantics.md §0.2 as SmallFormat encodes it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "fp4sim/core/format.hpp"
#include "fp4sim/core/host_device.hpp"

#if defined(__CUDACC__)
#define FP4SIM_EMU_UNROLL _Pragma("unroll")
#else
#define FP4SIM_EMU_UNROLL
#endif

namespace fp4sim::emu {

// Which rounding the kernel instantiates (a template argument, so the choice costs nothing per element).
enum class Round : std::uint8_t { rne, rna, rtz, rup, rdown };

// The format-dependent constants of the bit-pattern path, filled on the host by small_format_of.
struct SmallFormat {
  std::uint32_t mantissa_bits;       // M >= 1
  std::int32_t bias;                 // <= 126, so binary32 subnormals always take the shift path
  std::uint32_t max_magnitude;       // largest finite magnitude code
  std::uint32_t overflow_magnitude;  // magnitude code past max_magnitude and of +-Inf: max_magnitude when
                                     // saturating, else the Inf code, or the NaN code without Inf
  std::uint32_t sign_mask;           // 0 for unsigned formats
  std::uint32_t nan_result;          // code for a NaN input (canonical NaN, or +max finite without NaN)
  std::uint32_t negative_result;     // code for a negative nonzero input to an unsigned format
};

// The constants of `f` (at most 8 bits, a mantissa, bias <= 126) under saturation or not. Without
// saturation the format must have Inf or NaN (a format with neither makes overflow a data error, which
// the bit-pattern path cannot report).
inline SmallFormat small_format_of(const Format& f, bool saturate) {
  SmallFormat s{};
  s.mantissa_bits = static_cast<std::uint32_t>(f.mantissa_bits);
  s.bias = f.bias;
  s.max_magnitude = f.max_finite_code();
  s.overflow_magnitude = saturate ? f.max_finite_code() : f.has_inf() ? f.inf_code() : f.nan_code();
  s.sign_mask = f.sign_mask();
  // NaN: the canonical NaN, else +max finite under satfinite. Negative input to an unsigned format:
  // NaN where there is one, else 0 (the golden encoder's choices; both are flagged invalid there).
  s.nan_result = f.has_nan() ? f.nan_code() : f.max_finite_code();
  s.negative_result = f.has_nan() ? f.nan_code() : 0u;
  return s;
}

namespace detail {

constexpr std::uint32_t kF32Inf = 0x7F800000u;  // |x| above this is NaN

// The increment that, added to x and followed by dropping the low `s` bits (1 <= s <= 31), rounds
// x / 2^s in mode R.
//   x = [ K ........ K | H LLLLLL ]   K kept, H the half bit (bit s-1), L the rest
// rne adds H-1 = 0b0111..1 plus K's last bit: a tie carries only into an odd K (ml_dtypes' picture).
template <Round R>
FP4SIM_HOST_DEVICE std::uint32_t round_increment(std::uint32_t x, std::uint32_t s, bool negative) {
  const std::uint32_t all_low = (std::uint32_t{1} << s) - 1;  // 0b0..01..1, s ones
  if constexpr (R == Round::rne) return (all_low >> 1) + ((x >> s) & 1u);
  if constexpr (R == Round::rna) return std::uint32_t{1} << (s - 1);
  if constexpr (R == Round::rtz) return 0;
  if constexpr (R == Round::rup) return negative ? 0 : all_low;
  if constexpr (R == Round::rdown) return negative ? all_low : 0;
  return 0;
}

}  // namespace detail

// E2M1 (bias 1, codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; no Inf/NaN). The magnitude code is the number
// of thresholds |x| passes. Thresholds are binary32 bit patterns, compared as unsigned integers (for
// non-negative finite floats integer order is value order).
template <Round R>
FP4SIM_HOST_DEVICE std::uint32_t f32_to_e2m1(std::uint32_t bits) {
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > detail::kF32Inf) return 0x7u;  // NaN: +max finite (cvt.rn.satfinite.e2m1x2.f32)
  const bool negative = (bits >> 31) != 0;
  // Midpoints 0.25 0.75 1.25 1.75 2.5 3.5 5 between consecutive codes i and i+1.
  constexpr std::uint32_t kMid[7] = {0x3E800000u, 0x3F400000u, 0x3FA00000u, 0x3FE00000u,
                                     0x40200000u, 0x40600000u, 0x40A00000u};
  // The representable magnitudes 0.5 1 1.5 2 3 4 6 (codes 1..7).
  constexpr std::uint32_t kValue[7] = {0x3F000000u, 0x3F800000u, 0x3FC00000u, 0x40000000u,
                                       0x40400000u, 0x40800000u, 0x40C00000u};
  const bool away = (R == Round::rup && !negative) || (R == Round::rdown && negative);
  const bool toward = R == Round::rtz || (R == Round::rup && negative) || (R == Round::rdown && !negative);
  std::uint32_t code = 0;
  FP4SIM_EMU_UNROLL
  for (int i = 0; i < 7; ++i) {
    std::uint32_t pass = 0;
    if constexpr (R == Round::rne) {
      // A tie between codes i and i+1 goes to the even one: stay at even i, step up from odd i.
      pass = (i % 2 == 0) ? (abs > kMid[i]) : (abs >= kMid[i]);
    } else if constexpr (R == Round::rna) {
      pass = abs >= kMid[i];
    } else if (toward) {
      pass = abs >= kValue[i];
    } else if (away) {
      pass = abs > (i == 0 ? 0u : kValue[i - 1]);
    }
    code += pass;
  }
  // Inf passes every threshold: +-6, as satfinite gives. -0 and negatives rounding to 0 keep the sign.
  return code | (negative ? 0x8u : 0u);
}

// Formats of at most 8 bits with a mantissa and exponent bias <= 126 (Specials ieee, fn, finite,
// reserved_top). Every result but a NaN input's keeps the sign, overflow NaN included.
template <Round R>
FP4SIM_HOST_DEVICE std::uint32_t f32_to_small(const SmallFormat& f, std::uint32_t bits) {
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  const bool negative = (bits >> 31) != 0;
  if (abs > detail::kF32Inf) return f.nan_result;
  if (negative && abs != 0 && f.sign_mask == 0) return f.negative_result;
  const std::uint32_t sign = negative ? f.sign_mask : 0u;
  if (abs == detail::kF32Inf) return f.overflow_magnitude | sign;

  const std::uint32_t field = abs >> 23;
  const std::uint32_t drop = 23 - f.mantissa_bits;  // binary32 mantissa bits below the target's
  std::uint32_t magnitude;
  // Smallest binary32 exponent field whose values are normal in the target: 2^(field - 127) >= 2^(1 - bias).
  const std::int32_t first_normal_field = 128 - f.bias;
  if (static_cast<std::int32_t>(field) >= first_normal_field) {
    // Same binade layout: round the bit pattern at `drop`, then move the exponent to the target bias.
    // A carry out of the mantissa lands in the exponent field by itself.
    const std::uint32_t rounded = abs + detail::round_increment<R>(abs, drop, negative);
    magnitude = (rounded >> drop) - (static_cast<std::uint32_t>(127 - f.bias) << f.mantissa_bits);
  } else {
    // Below the target's normals: the value is sig * 2^(e - 150) with the hidden bit written out; the
    // target's quantum there is 2^(1 - bias - M), so `shift` bits go. sig < 2^24, so any shift past 25
    // decides the same as 31 (clamped to keep the shift defined). Rounding up to 2^M yields the smallest
    // normal's code, which is the right answer.
    const std::uint32_t e = field != 0 ? field : 1u;
    const std::uint32_t sig = field != 0 ? (abs & 0x7FFFFFu) | 0x800000u : abs;
    const std::int32_t wanted = 151 - f.bias - static_cast<std::int32_t>(f.mantissa_bits) - static_cast<std::int32_t>(e);
    const std::uint32_t shift = wanted > 31 ? 31u : static_cast<std::uint32_t>(wanted);
    magnitude = (sig + detail::round_increment<R>(sig, shift, negative)) >> shift;
  }
  // Past max finite (Inf and NaN codes included): max finite when rounding toward zero, else overflow.
  const bool toward_zero = R == Round::rtz || (R == Round::rup && negative) || (R == Round::rdown && !negative);
  if (magnitude > f.max_magnitude) magnitude = toward_zero ? f.max_magnitude : f.overflow_magnitude;
  return magnitude | sign;
}

// E8M0 (unsigned, bias 127, code c = 2^(c - 127) for c in 0..254, 0xFF NaN, no zero): the code is the
// binary32 exponent field, plus one when the mantissa field says round up. Ties go to the even code.
// Binary32 subnormals (field 0) lie in [0, 2^-126): code 0 (2^-127) or code 1 (2^-126), with the
// midpoint 1.5 * 2^-127 = mantissa field 0x600000 and 2^-127 itself = 0x400000.
template <Round R>
FP4SIM_HOST_DEVICE std::uint32_t f32_to_e8m0(std::uint32_t bits) {
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > detail::kF32Inf) return 0xFFu;
  if ((bits >> 31) != 0 && abs != 0) return 0xFFu;  // negative: NaN
  if (abs == detail::kF32Inf) return 0xFEu;         // satfinite
  const std::uint32_t field = abs >> 23;
  const std::uint32_t mant = abs & 0x7FFFFFu;
  std::uint32_t code;
  if (field == 0) {
    // Round |x| / 2^-127 in [0, 2) to 1 or 2 (0 has no code: saturate to the minimum, code 0).
    std::uint32_t up = 0;
    if constexpr (R == Round::rne) up = mant > 0x600000u;  // the tie goes to code 0 (even)
    if constexpr (R == Round::rna) up = mant >= 0x600000u;
    if constexpr (R == Round::rup) up = mant > 0x400000u;
    code = up;
  } else {
    std::uint32_t up = 0;
    if constexpr (R == Round::rne) up = mant > 0x400000u || (mant == 0x400000u && (field & 1u));
    if constexpr (R == Round::rna) up = mant >= 0x400000u;
    if constexpr (R == Round::rup) up = mant != 0;
    code = field + up;
  }
  return code > 0xFEu ? 0xFEu : code;
}

// E2M1 RNE without branches or threshold chains (the quantize kernels' element conversion); the same
// code as f32_to_e2m1<Round::rne> for every binary32 input (tests/gpu_quantize_test.cpp, EmuHost.*):
//  * |x| >= 1 (Inf too): round the bit pattern at bit 22 (one mantissa bit kept, ties to the even kept
//    bit = the even code), then code = (exponent field, kept bit) - 0xFC, saturated at 7 (6.0);
//  * |x| < 1: RN(|x| + 2^22) has quantum 0.5, so its low bits count the multiples of 0.5 (codes 0, 1, 2),
//    ties to the even multiple = the even code;
//  * NaN: 7 (+max finite, satfinite); otherwise the sign of x (so -0 and small negatives give 0x8).
FP4SIM_HOST_DEVICE std::uint32_t f32_to_e2m1_rne_fast(std::uint32_t bits) {
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  const std::uint32_t r = (abs + 0x1FFFFFu + ((abs >> 22) & 1u)) >> 22;
  const std::uint32_t hi = (r < 0x103u ? r : 0x103u) - 0xFCu;
#if defined(__CUDA_ARCH__)
  const std::uint32_t lo = __float_as_uint(__fadd_rn(__uint_as_float(abs & 0x3FFFFFFFu), 4194304.0f)) - 0x4A800000u;
#else
  float f;
  const std::uint32_t small = abs & 0x3FFFFFFFu;
  std::memcpy(&f, &small, 4);
  const volatile float sum = f + 4194304.0f;  // binary32 RNE (no excess precision on x86-64 SSE)
  const float g = sum;
  std::uint32_t gb;
  std::memcpy(&gb, &g, 4);
  const std::uint32_t lo = gb - 0x4A800000u;
#endif
  const std::uint32_t code = (abs >= 0x3F800000u ? hi : lo) | ((bits >> 28) & 0x8u);
  return abs > 0x7F800000u ? 0x7u : code;
}

// floor(2^p * |y|) for |y| < 1 (abs = the bit pattern of |y|) and 1 <= p <= 22: the sum 2^(23-p) + |y| lies in
// [2^(23-p), 2^(24-p)), where binary32's quantum is 2^-p, so rounding it toward zero keeps exactly the
// multiples of 2^-p in |y|; its bit pattern minus that of 2^(23-p) counts them. One FADD.RZ on the GPU; the
// host computes the same rounding from an RN sum (stepped down when it rounded up; t - 2^(23-p) is exact by
// Sterbenz). For |y| >= 1 the result is meaningless but defined.
FP4SIM_HOST_DEVICE std::uint32_t floor_scaled_below_one(std::uint32_t abs, int p) {
  const std::uint32_t base = static_cast<std::uint32_t>(127 + 23 - p) << 23;
#if defined(__CUDA_ARCH__)
  return __float_as_uint(__fadd_rz(__uint_as_float(abs), __uint_as_float(base))) - base;
#else
  float a, b;
  std::memcpy(&a, &abs, 4);
  std::memcpy(&b, &base, 4);
  const volatile float sum = a + b;  // binary32 RNE (no excess precision on x86-64 SSE)
  float t = sum;
  const volatile float back = t - b;
  if (back > a) t = std::nextafter(t, 0.0f);
  std::uint32_t tb;
  std::memcpy(&tb, &t, 4);
  return tb - base;
#endif
}

// E2M1 stochastic rounding of the binary32 bit pattern with the k-bit integer r (r < 2^k, 1 <= k <= 16), the
// quantize kernels' form with Philox bits, without branches. delta is |y|'s position between its lower code
// and the next (step 0.5 below 2, 1 below 4, 2 above); with scaled_P = floor(2^P * delta):
//   sr-fastest   up = scaled_k + r >= 2^k
//   sr-fast      up = scaled_(k+1) + 2r + 1 >= 2^(k+1)
//   sr-fast-f32  RN32(delta + (2r+1) 2^-(k+1)) >= 1  <=>  delta + (2r+1) 2^-(k+1) >= 1 - 2^-25 (the tie at
//                1 - 2^-25 rounds to the even 1.0; both terms are exact binary32)
//                <=> scaled_25 + (2r+1) 2^(24-k) >= 2^25 - 1 (the right side of the middle form is an
//                integer multiple of 2^-25, so flooring the left side keeps the comparison).
// Each decision is "a fixed-point count of |y| plus an offset carries into the code's position":
//  * |y| >= 1 (Inf too): the 22 mantissa bits below E2M1's one kept bit are 2^22 delta exactly, so adding
//    the offset r 2^(22-k) (sr-fastest) or (2r+1) 2^(21-k) (sr-fast; sr-fast-f32 too, since delta + offset
//    has at most 22 fraction bits here and RN32 is exact) to the bit pattern carries into the kept bit
//    exactly when the value rounds up; then code = (pattern >> 22) - 0xFC, saturated at 7 (6.0), as in
//    f32_to_e2m1_rne_fast below;
//  * |y| < 1 (step 0.5, codes 0, 1, 2): with F = floor(2^(P+1) |y|) (= 2^P lower code + scaled_P),
//    code = (F + r) >> k (sr-fastest, P = k), (F + 2r + 1) >> (k+1) (sr-fast, P = k+1); sr-fast-f32 is
//    its own definition in binary32: delta = 2|y| - lower (exact: Sterbenz), the offset (2r+1) 2^-(k+1)
//    (exact, built from bits), one RN addition and a comparison with 1;
//  * NaN: 7 (+max finite, satfinite); otherwise the sign of y.
// Judged against the golden Float32Encoder on the host (tests/gpu_quantize_test.cpp, EmuHost.*).
enum class Sr : std::uint8_t { fastest, fast, fast_f32 };
template <Sr S>
FP4SIM_HOST_DEVICE std::uint32_t f32_to_e2m1_sr(std::uint32_t bits, std::uint32_t r, int k) {
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  const std::uint32_t sign = (bits >> 28) & 0x8u;
  const std::uint32_t odd = 2u * r + 1u;
  const std::uint32_t offset = S == Sr::fastest ? r << (22 - k) : odd << (21 - k);
  const std::uint32_t carried = (abs + offset) >> 22;
  const std::uint32_t hi = (carried < 0x103u ? carried : 0x103u) - 0xFCu;
  std::uint32_t lo;
  if constexpr (S == Sr::fastest) {
    lo = (floor_scaled_below_one(abs, k + 1) + r) >> k;
  } else if constexpr (S == Sr::fast) {
    lo = (floor_scaled_below_one(abs, k + 2) + odd) >> (k + 1);
  } else {
    // (2r+1) 2^-(k+1) = (2^(22-k) + (2r+1) 2^-(k+1)) - 2^(22-k), the first term's bits being those of
    // 2^(22-k) with 2r+1 (< 2^23) in the mantissa. For |y| >= 1 (lo unused) the arithmetic stays defined.
    const std::uint32_t lower = abs >= 0x3F000000u ? 1u : 0u;
    const std::uint32_t magic = static_cast<std::uint32_t>(127 + 22 - k) << 23;
#if defined(__CUDA_ARCH__)
    const float delta = __fmaf_rn(__uint_as_float(abs), 2.0f, -static_cast<float>(lower));
    const float offset_f = __fsub_rn(__uint_as_float(magic | odd), __uint_as_float(magic));
    lo = lower + (__fadd_rn(delta, offset_f) >= 1.0f ? 1u : 0u);
#else
    float a, with_odd, base;
    std::memcpy(&a, &abs, 4);
    const std::uint32_t magic_odd = magic | odd;
    std::memcpy(&with_odd, &magic_odd, 4);
    std::memcpy(&base, &magic, 4);
    const volatile float twice = a * 2.0f;
    const volatile float delta = twice - static_cast<float>(lower);
    const volatile float offset_f = with_odd - base;
    const volatile float sum = delta + offset_f;
    lo = lower + (sum >= 1.0f ? 1u : 0u);
#endif
  }
  const std::uint32_t code = (abs >= 0x3F800000u ? hi : lo) | sign;
  return abs > 0x7F800000u ? 0x7u : code;
}

}  // namespace fp4sim::emu
