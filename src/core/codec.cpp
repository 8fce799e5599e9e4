#include "fp4sim/core/codec.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include <omp.h>

namespace fp4sim {

Decoded decode(const Format& f, std::uint32_t code) {
  Decoded d;
  if ((code & ~(f.sign_mask() | f.magnitude_mask())) != 0) {
    d.cls = ValueClass::invalid;
    return d;
  }
  d.negative = (code & f.sign_mask()) != 0;
  const std::uint32_t magnitude = code & f.magnitude_mask();
  const std::uint32_t field = magnitude >> f.mantissa_bits;
  const std::uint32_t fraction = magnitude & ((std::uint32_t{1} << f.mantissa_bits) - 1);
  const std::uint32_t top_field = (std::uint32_t{1} << f.exponent_bits) - 1;
  switch (f.specials) {
    case Specials::ieee:
      if (field == top_field) {
        d.cls = fraction ? ValueClass::nan : ValueClass::inf;
        return d;
      }
      break;
    case Specials::fn:
    case Specials::pow2_nan:
      if (magnitude == f.nan_code()) {
        d.cls = ValueClass::nan;
        return d;
      }
      break;
    case Specials::reserved_top:
      if (field == top_field) {
        d.cls = ValueClass::invalid;
        return d;
      }
      break;
    case Specials::finite: break;
  }
  if (f.specials == Specials::pow2_nan) {
    d.cls = ValueClass::finite;
    d.significand = 1;
    d.exponent = static_cast<int>(field) - f.bias;
    return d;
  }
  if (field == 0 && fraction == 0) {
    d.cls = ValueClass::zero;
    return d;
  }
  d.cls = ValueClass::finite;
  if (field == 0) {
    d.significand = fraction;
    d.exponent = 1 - f.bias - f.mantissa_bits;
  } else {
    d.significand = fraction | (std::uint64_t{1} << f.mantissa_bits);
    d.exponent = static_cast<int>(field) - f.bias - f.mantissa_bits;
  }
  return d;
}

double decode_to_double(const Format& f, std::uint32_t code) {
  const Decoded d = decode(f, code);
  switch (d.cls) {
    case ValueClass::zero: return d.negative ? -0.0 : 0.0;
    case ValueClass::inf: return d.negative ? -HUGE_VAL : HUGE_VAL;
    case ValueClass::nan:
    case ValueClass::invalid: return std::nan("");
    case ValueClass::finite: break;
  }
  // Tests and I/O only: the significand has at most 24 bits, so the scaling is exact.
  const double magnitude = std::ldexp(static_cast<double>(d.significand), d.exponent);
  return d.negative ? -magnitude : magnitude;
}

float decode_to_float(const Format& f, std::uint32_t code) {
  return static_cast<float>(decode_to_double(f, code));
}

namespace {

bool toward_zero(Rounding r, bool negative) {
  return r == Rounding::rtz || (r == Rounding::rup && negative) || (r == Rounding::rdown && !negative);
}

std::uint32_t with_sign(const Format& f, std::uint32_t magnitude, bool negative) {
  return negative ? magnitude | f.sign_mask() : magnitude;
}

// The value a zero input becomes. pow2_nan formats have no zero: NaN, or their minimum when saturating
// (ml_dtypes' rule for float8_e8m0fnu).
Encoded encode_zero(const Format& f, const EncodeOptions& o, bool negative) {
  if (!f.has_zero()) {
    return o.saturate ? Encoded{0, static_cast<std::uint8_t>(flag::inexact | flag::underflow)}
                      : Encoded{f.nan_code(), flag::invalid};
  }
  const bool keep_sign = f.is_signed && o.convention == SpecialConvention::hardware;
  return {with_sign(f, 0, negative && keep_sign), 0};
}

// NaN becomes the canonical NaN; a format without NaN takes +max finite under satfinite (cvt.rn.satfinite
// e2m1: NaN -> 0x7, docs/semantics.md G3) and is a data error otherwise.
Encoded encode_nan(const Format& f, const EncodeOptions& o) {
  if (o.convention == SpecialConvention::te_python && !f.has_nan()) return {0, 0};
  if (f.has_nan()) return {f.nan_code(), 0};
  return o.saturate ? Encoded{f.max_finite_code(), 0} : Encoded{0, flag::invalid};
}

// +-Inf under EncodeOptions' rule: +-max finite when saturating (Inf formats too), else +-Inf, else NaN
// with the sign, else a data error.
Encoded encode_inf(const Format& f, const EncodeOptions& o, bool negative) {
  if (o.saturate) return {with_sign(f, f.max_finite_code(), negative), flag::overflow};
  if (f.has_inf()) return {with_sign(f, f.inf_code(), negative), 0};
  if (f.has_nan()) return {with_sign(f, f.nan_code(), negative), flag::overflow};
  return {with_sign(f, f.max_finite_code(), negative), flag::invalid};
}

Encoded encode_unsigned_negative(const Format& f) {
  return {f.has_nan() ? f.nan_code() : 0, flag::invalid};
}

// fl32 of a 0.64 fixed-point fraction whose lower bits were folded into `sticky`. Jamming the sticky
// bit into the LSB keeps RNE exact: 64 bits are far more than binary32's 24.
float fraction_to_float(std::uint64_t fraction, bool sticky) {
  const std::uint64_t jammed = fraction | (sticky ? 1u : 0u);
  return static_cast<float>(jammed) * 0x1p-64f;
}

}  // namespace

Encoded round_pack(const Format& f, const EncodeOptions& o, bool negative, int exp, std::uint64_t sig,
                   std::uint32_t random) {
  const int msb = 63 - std::countl_zero(sig);
  const int e = exp + msb;  // the value lies in [2^e, 2^(e+1))
  const int emin = f.min_normal_exponent();
  const int e_target = std::max(e, emin);
  const int shift = e_target - f.mantissa_bits - exp;  // bits of sig below the target's quantum

  // kept . fraction (0.64 fixed point) + sticky: the value in units of the target's quantum.
  //   sig = [ kept ........ | R TTTTTTTTTT ]  R = fraction's top bit (half), T folded into sticky
  std::uint64_t kept = 0, fraction = 0;
  bool sticky = false;
  if (shift <= 0) {
    kept = sig << -shift;
  } else if (shift < 64) {
    kept = sig >> shift;
    fraction = sig << (64 - shift);
  } else if (shift == 64) {
    fraction = sig;
  } else if (shift < 128) {
    fraction = sig >> (shift - 64);
    sticky = (sig << (128 - shift)) != 0;
  } else {
    sticky = true;
  }

  const std::int64_t base = static_cast<std::int64_t>(e_target + f.bias - 1) << f.mantissa_bits;
  const bool odd = ((base + static_cast<std::int64_t>(kept)) & 1) != 0;  // parity of the code
  const bool inexact = fraction != 0 || sticky;
  constexpr std::uint64_t half = std::uint64_t{1} << 63;
  const int k = o.sr_bits;
  bool up = false;
  switch (o.rounding) {
    case Rounding::rne: up = fraction > half || (fraction == half && (sticky || odd)); break;
    case Rounding::rna: up = fraction >= half; break;
    case Rounding::rtz: break;
    case Rounding::rup: up = inexact && !negative; break;
    case Rounding::rdown: up = inexact && negative; break;
    case Rounding::sr_fastest: up = (fraction >> (64 - k)) + random >= (std::uint64_t{1} << k); break;
    case Rounding::sr_fast:
      up = (fraction >> (63 - k)) + 2 * std::uint64_t{random} + 1 >= (std::uint64_t{1} << (k + 1));
      break;
    case Rounding::sr_fast_f32: {
      const float delta = fraction_to_float(fraction, sticky);
      const float offset = std::ldexp(static_cast<float>(2 * random + 1), -(k + 1));
      up = delta + offset >= 1.0f;  // one binary32 RNE addition, as the paper's reference does
      break;
    }
  }

  Encoded out;
  if (inexact) out.flags |= flag::inexact;
  if (inexact && e < emin) out.flags |= flag::underflow;
  const std::uint64_t rounded = kept + (up ? 1 : 0);
  if (rounded == 0) {
    // Underflow to zero; a format without zero keeps its minimum (code 0).
    out.code = f.has_zero() ? with_sign(f, 0, negative && f.is_signed) : 0;
    return out;
  }
  const std::int64_t magnitude = base + static_cast<std::int64_t>(rounded);
  if (magnitude <= static_cast<std::int64_t>(f.max_finite_code())) {
    out.code = with_sign(f, static_cast<std::uint32_t>(magnitude), negative);
    return out;
  }
  out.flags |= flag::overflow | flag::inexact;
  if (o.saturate || toward_zero(o.rounding, negative)) {
    out.code = with_sign(f, f.max_finite_code(), negative);
  } else if (f.has_inf()) {
    out.code = with_sign(f, f.inf_code(), negative);
  } else if (f.has_nan()) {
    out.code = with_sign(f, f.nan_code(), negative);
  } else {
    out.flags |= flag::invalid;
    out.code = with_sign(f, f.max_finite_code(), negative);
  }
  return out;
}

std::uint32_t microxcaling_round_up_bits(const Format& f, const EncodeOptions& o) {
  constexpr std::uint32_t kNone = 0xFFFFFFFFu;  // no |x| has the sign bit set
  if (o.convention != SpecialConvention::microxcaling || (o.rounding != Rounding::rna && o.rounding != Rounding::rne)) {
    return kNone;
  }
  // microxcaling rounds k = |y| * 2^(mantissa bits - min exponent) as floor(k + 0.5) in binary32: k = 0.5 - 2^-25
  // (the binary32 just below half the smallest subnormal) gives 1 - 2^-25, a tie that rounds to 1.0.
  const float half_smallest = std::ldexp(1.0f, f.min_normal_exponent() - f.mantissa_bits - 1);
  if (half_smallest < 0x1p-125f) return kNone;  // the value below it is no binary32 normal
  return std::bit_cast<std::uint32_t>(half_smallest) - 1u;
}

Encoded encode(const Format& f, double value, const EncodeOptions& o, std::uint32_t random) {
  const auto bits = std::bit_cast<std::uint64_t>(value);
  const bool negative = (bits >> 63) != 0;
  const auto field = static_cast<int>((bits >> 52) & 0x7FF);
  const std::uint64_t mant = bits & ((std::uint64_t{1} << 52) - 1);
  if (field == 0x7FF && mant != 0) return encode_nan(f, o);
  if (negative && !f.is_signed && (field != 0 || mant != 0)) return encode_unsigned_negative(f);
  if (field == 0x7FF) return encode_inf(f, o, negative);
  if (field == 0 && mant == 0) return encode_zero(f, o, negative);
  const auto narrow = static_cast<float>(value);
  const std::uint32_t narrow_bits = std::bit_cast<std::uint32_t>(narrow);
  if (narrow == value && (narrow_bits & 0x7FFFFFFFu) == microxcaling_round_up_bits(f, o)) {
    // microxcaling's artifact: the value just below half the smallest subnormal moved just above it.
    return encode(f, std::bit_cast<float>(narrow_bits + 2u), o, random);
  }
  const std::uint64_t sig = field ? mant | (std::uint64_t{1} << 52) : mant;
  const int exp = (field ? field : 1) - 1075;
  return round_pack(f, o, negative && f.is_signed, exp, sig, random);
}

Encoded encode(const Format& f, float value, const EncodeOptions& o, std::uint32_t random) {
  return encode(f, static_cast<double>(value), o, random);  // binary32 -> binary64 is exact
}

Float32Encoder::Float32Encoder(const Format& f, const EncodeOptions& o)
    : rounding_(o.rounding),
      mantissa_bits_(f.mantissa_bits),
      bias_(f.bias),
      min_normal_exponent_(f.min_normal_exponent()),
      sr_bits_(o.sr_bits),
      is_signed_(f.is_signed),
      drop_zero_sign_(o.convention != SpecialConvention::hardware),
      round_up_bits_(microxcaling_round_up_bits(f, o)),
      sign_mask_(f.sign_mask()),
      max_finite_(f.max_finite_code()),
      overflow_code_(o.saturate ? f.max_finite_code()
                     : f.has_inf() ? f.inf_code()
                     : f.has_nan() ? f.nan_code()
                                   : f.max_finite_code()),
      zero_input_(encode_zero(f, o, false).code),
      nan_input_(encode_nan(f, o).code),
      inf_input_(encode_inf(f, o, false).code),
      unsigned_negative_(encode_unsigned_negative(f).code),
      sr_unit_(std::ldexp(1.0f, -(o.sr_bits + 1))) {
  for (int i = 0; i < 64; ++i) pow2_neg_[i] = std::ldexp(1.0f, -i);
}

namespace {


// One loop per rounding mode (the mode is a template argument, so the body is branch-free and vectorises),
// compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time. clang (14) multiversions no
// function template: built by clang (the fuzzers, FP4SIM_FUZZ), the loop is baseline x86-64 only; off
// x86 (aarch64) it is compiled once, for the baseline of the target.
#if defined(__clang__) || !(defined(__x86_64__) || defined(__i386__))
#define FP4SIM_ENCODE_CLONES
#else
#define FP4SIM_ENCODE_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
template <Rounding R, class Code>
FP4SIM_ENCODE_CLONES void encode_range_as(
    const Float32Encoder& shared, const float* in, Code* out, const std::uint32_t* random, std::size_t n) {
  // A local copy: stores through `out` (uint8_t may alias anything) cannot change its constants, so the
  // compiler keeps them in registers instead of reloading them for every element.
  const Float32Encoder encoder = shared;
  if constexpr (sizeof(Code) == sizeof(std::uint32_t)) {
    if (random) {
      for (std::size_t i = 0; i < n; ++i) out[i] = encoder.encode_bits<R>(std::bit_cast<std::uint32_t>(in[i]), random[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) out[i] = encoder.encode_bits<R>(std::bit_cast<std::uint32_t>(in[i]));
    }
  } else {
    // Narrower codes are computed in 32-bit lanes into a small buffer and narrowed in a second pass: one
    // loop doing both holds four vectors of elements per narrowed store and runs out of registers.
    constexpr std::size_t kBlock = 256;
    std::uint32_t codes[kBlock];
    for (std::size_t begin = 0; begin < n; begin += kBlock) {
      const std::size_t len = std::min(kBlock, n - begin);
      const float* x = in + begin;
      if (random) {
        const std::uint32_t* r = random + begin;
        for (std::size_t i = 0; i < len; ++i) codes[i] = encoder.encode_bits<R>(std::bit_cast<std::uint32_t>(x[i]), r[i]);
      } else {
        for (std::size_t i = 0; i < len; ++i) codes[i] = encoder.encode_bits<R>(std::bit_cast<std::uint32_t>(x[i]));
      }
      Code* y = out + begin;
      for (std::size_t i = 0; i < len; ++i) y[i] = static_cast<Code>(codes[i]);
    }
  }
}

template <class Code>
void encode_range(const Float32Encoder& encoder, const float* in, Code* out, const std::uint32_t* random,
                  std::size_t n) {
  switch (encoder.rounding()) {
    case Rounding::rne: return encode_range_as<Rounding::rne>(encoder, in, out, random, n);
    case Rounding::rna: return encode_range_as<Rounding::rna>(encoder, in, out, random, n);
    case Rounding::rtz: return encode_range_as<Rounding::rtz>(encoder, in, out, random, n);
    case Rounding::rup: return encode_range_as<Rounding::rup>(encoder, in, out, random, n);
    case Rounding::rdown: return encode_range_as<Rounding::rdown>(encoder, in, out, random, n);
    case Rounding::sr_fast: return encode_range_as<Rounding::sr_fast>(encoder, in, out, random, n);
    case Rounding::sr_fast_f32: return encode_range_as<Rounding::sr_fast_f32>(encoder, in, out, random, n);
    case Rounding::sr_fastest: return encode_range_as<Rounding::sr_fastest>(encoder, in, out, random, n);
  }
}

template <class Code>
void encode_parallel(const Float32Encoder& encoder, std::span<const float> in, std::span<Code> out,
                     std::span<const std::uint32_t> random) {
  const std::size_t n = std::min(in.size(), out.size());
  const std::uint32_t* r = random.empty() ? nullptr : random.data();
  if (n < kParallelThreshold) {
    encode_range(encoder, in.data(), out.data(), r, n);
    return;
  }
  constexpr std::size_t chunk = 1 << 14;
  const auto chunks = static_cast<std::int64_t>((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * chunk;
    const std::size_t len = std::min(chunk, n - begin);
    encode_range(encoder, in.data() + begin, out.data() + begin, r ? r + begin : nullptr, len);
  }
}

}  // namespace

void Float32Encoder::encode_array(std::span<const float> in, std::span<std::uint32_t> out,
                                  std::span<const std::uint32_t> random) const {
  encode_parallel(*this, in, out, random);
}

void Float32Encoder::encode_array(std::span<const float> in, std::span<std::uint8_t> out,
                                  std::span<const std::uint32_t> random) const {
  encode_parallel(*this, in, out, random);
}

void Float32Encoder::encode_array(std::span<const float> in, std::span<std::uint16_t> out,
                                  std::span<const std::uint32_t> random) const {
  encode_parallel(*this, in, out, random);
}

}  // namespace fp4sim

namespace fp4sim {

std::optional<std::size_t> encode_all(const Format& format, const EncodeOptions& options,
                                      std::span<const double> values, std::span<const std::uint32_t> random,
                                      std::span<std::uint32_t> codes) {
  const auto n = static_cast<std::int64_t>(values.size());
  std::int64_t first_invalid = n;
#pragma omp parallel for schedule(static) reduction(min : first_invalid) if (values.size() >= kParallelThreshold)
  for (std::int64_t i = 0; i < n; ++i) {
    const Encoded e = encode(format, values[i], options, random.empty() ? 0u : random[i]);
    codes[i] = e.code;
    if ((e.flags & flag::invalid) && i < first_invalid) first_invalid = i;
  }
  if (first_invalid < n) return static_cast<std::size_t>(first_invalid);
  return std::nullopt;
}

}  // namespace fp4sim

namespace fp4sim {

namespace {
constexpr NameRow<SpecialConvention> kConventions[] = {
    {"hardware", SpecialConvention::hardware, "-0 and NaN kept as the hardware converts them (cvt.*.satfinite)"},
    {"te-python", SpecialConvention::te_python, "TransformerEngine's cast_to_fp4x2: -0 and NaN become +0"},
    {"modelopt", SpecialConvention::modelopt, "ModelOpt's _cast_fp4: -0 becomes +0, NaN +max finite as the hardware"},
    {"microxcaling", SpecialConvention::microxcaling,
     "microxcaling's elementwise rounding: -0 becomes +0; under rna/rne the binary32 just below half the smallest "
     "subnormal rounds up (E2M1: 0.25 - 2^-26 -> 0.5)"}};
}  // namespace

std::span<const NameRow<SpecialConvention>> names(SpecialConvention) { return kConventions; }

}  // namespace fp4sim
