// Element conversion binary32 -> small-format code as the GPU kernels compute it (emu/convert.cu).
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

#include <cstdint>
#include <cstring>

#include "fp4sim/format.hpp"
#include "fp4sim/host_device.hpp"

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

// E2M1 stochastic rounding of the binary32 bit pattern with the k-bit integer r (r < 2^k, 1 <= k <= 16), in
// integers only (no conversions, no float rounding), as the quantize kernels use it with Philox bits: the golden encoder's picture (include/fp4sim/codec.hpp) of |y| = sig * 2^(e - 23):
// lower code and the fraction rest / 2^shift, with shift = 22 for |y| >= 1, 149 - field below (capped
// at 63). With scaled_P = floor(2^P * delta):
//   sr-fastest   up = scaled_k + r >= 2^k
//   sr-fast      up = scaled_(k+1) + 2r + 1 >= 2^(k+1)
//   sr-fast-f32  RN32(delta + (2r+1) 2^-(k+1)) >= 1  <=>  delta + (2r+1) 2^-(k+1) >= 1 - 2^-25 (the tie at
//                1 - 2^-25 rounds to the even 1.0; both terms are exact binary32)
//                <=> scaled_25 + (2r+1) 2^(24-k) >= 2^25 - 1 (the right side of the middle form is an
//                integer multiple of 2^-25, so flooring the left side keeps the comparison).
// Judged against the golden Float32Encoder on the host (tests/gpu_quantize_test.cpp, EmuHost.*).
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

enum class Sr : std::uint8_t { fastest, fast, fast_f32 };
template <Sr S>
FP4SIM_HOST_DEVICE std::uint32_t f32_to_e2m1_sr(std::uint32_t bits, std::uint32_t r, int k) {
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  const std::uint32_t sign = (bits >> 28) & 0x8u;
  if (abs > 0x7F800000u) return 0x7u;          // NaN: +max finite (satfinite)
  if (abs >= 0x40C00000u) return 0x7u | sign;  // |y| >= 6 (Inf too): saturate
  const std::uint32_t field = abs >> 23, mant = abs & 0x7FFFFFu;
  std::uint32_t lower, rest, shift;
  if (field >= 127) {
    lower = 2u * (field - 127u) + 2u + (mant >> 22);
    rest = mant & 0x3FFFFFu;
    shift = 22;
  } else {
    lower = field == 126 ? 1u : 0u;
    rest = field == 126 ? mant : (field != 0 ? mant | 0x800000u : mant);
    shift = 149u - field;
  }
  constexpr int kP = S == Sr::fast_f32 ? 25 : 0;
  const int p = S == Sr::fastest ? k : (S == Sr::fast ? k + 1 : kP);
  std::uint32_t drop = shift + 25u - static_cast<std::uint32_t>(p);  // >= 22
  drop = drop > 63u ? 63u : drop;
  const std::uint32_t scaled = static_cast<std::uint32_t>((static_cast<std::uint64_t>(rest) << 25) >> drop);
  bool up;
  if constexpr (S == Sr::fastest) {
    up = scaled + r >= (1u << k);
  } else if constexpr (S == Sr::fast) {
    up = scaled + 2u * r + 1u >= (2u << k);
  } else {
    up = scaled + ((2u * r + 1u) << (24 - k)) >= (1u << 25) - 1u;
  }
  return (lower + (up ? 1u : 0u)) | sign;
}

}  // namespace fp4sim::emu
