// Exact decode of any code, and encode from binary32/binary64 under any rounding mode.
//
// Two independent encoders exist on purpose:
//  * the golden path, `round_pack`, takes any exact value sig * 2^exp (SoftFloat's roundPack shape)
//    and is checked against Boost.Multiprecision on every representable value, midpoint and their
//    neighbours;
//  * the fast path, `Float32Encoder`, works on binary32 bit patterns with 32/64-bit integer ops only,
//    vectorises, and is checked against the golden path on all 2^32 inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "fp4sim/format.hpp"
#include "fp4sim/rounding.hpp"

namespace fp4sim {

enum class ValueClass : std::uint8_t { zero, finite, inf, nan, invalid };

// value = (negative ? -1 : 1) * significand * 2^exponent, exactly.
struct Decoded {
  ValueClass cls = ValueClass::zero;
  bool negative = false;
  int exponent = 0;
  std::uint64_t significand = 0;
};

Decoded decode(const Format& format, std::uint32_t code);
// Exact for every format here (all fit binary32); NaN for NaN codes and invalid codes.
double decode_to_double(const Format& format, std::uint32_t code);
float decode_to_float(const Format& format, std::uint32_t code);

// Which convention maps -0 and NaN: hardware (cvt.*.satfinite; semantics.md G3) or TE's Python
// reference cast_to_fp4x2 (-0 -> +0 code, NaN -> +0 code).
enum class SpecialConvention : std::uint8_t { hardware, te_python };

struct EncodeOptions {
  Rounding rounding = Rounding::rne;
  bool saturate = true;  // overflow (and Inf, where the format has none) goes to max finite
  int sr_bits = 8;       // k: random bits per element for stochastic modes, 1..24
  SpecialConvention convention = SpecialConvention::hardware;
};

// Formats whose hardware conversions saturate (cvt.*.satfinite) default to saturating; IEEE formats
// (fp16, bf16, fp32, e5m2) overflow to Inf as IEEE 754 conversions do.
constexpr bool default_saturate(const Format& f) { return f.specials != Specials::ieee; }

struct Encoded {
  std::uint32_t code = 0;
  std::uint8_t flags = 0;  // fp4sim::flag bits
};

// The golden rounding routine: the exact nonzero finite value (negative ? -1 : 1) * sig * 2^exp,
// sig != 0, rounded into `format`. `random` supplies the k-bit integer for stochastic modes.
Encoded round_pack(const Format& format, const EncodeOptions& options, bool negative, int exp,
                   std::uint64_t sig, std::uint32_t random = 0);

Encoded encode(const Format& format, double value, const EncodeOptions& options,
               std::uint32_t random = 0);
Encoded encode(const Format& format, float value, const EncodeOptions& options,
               std::uint32_t random = 0);

// Fast binary32 -> code conversion for one (format, options) pair. Constants are precomputed once;
// `operator()` is branch-free integer code that compilers vectorise. Equal to `encode(format,
// float, options)` on every binary32 input (tests/codec_exhaustive_test.cpp proves it).
class Float32Encoder {
 public:
  Float32Encoder(const Format& format, const EncodeOptions& options);

  std::uint32_t operator()(std::uint32_t bits, std::uint32_t random = 0) const {
    const std::uint32_t sign = bits >> 31;
    const std::uint32_t abs = bits & 0x7FFFFFFFu;
    const std::int32_t field = static_cast<std::int32_t>(abs >> 23);
    // value = sig * 2^(e - 23). Binary32 subnormals are written as (mant << 1) * 2^(-127 - 23) so that
    // formats whose smallest normal is 2^-127 (e8m0) see their lowest binade with its own exponent.
    const std::uint64_t mant = abs & 0x7FFFFFu;
    const std::uint64_t sig = field != 0 ? mant | 0x800000u : mant << 1;
    const std::int32_t e = field != 0 ? field - 127 : -127;
    const std::int32_t e_target = e > min_normal_exponent_ ? e : min_normal_exponent_;
    // quantum of the target at this exponent is 2^(e_target - M): drop `shift` low bits of sig.
    //   sig = [ N ......... | R TTTTTT ]   N kept, R the half bit, T the rest (SoftFloat's picture)
    std::int32_t shift = 23 - mantissa_bits_ + (e_target - e);
    shift = shift > 63 ? 63 : shift;
    const std::uint64_t kept = sig >> shift;
    const std::uint64_t rest = sig & ((std::uint64_t{1} << shift) - 1);
    const std::uint64_t half = (std::uint64_t{1} << shift) >> 1;
    // Ties go to the even *code*: the parity of the packed magnitude, which for mantissa-less
    // formats (e8m0) is the exponent's parity, as ml_dtypes and SoftFloat-style packing do.
    const std::int64_t base = static_cast<std::int64_t>(e_target + bias_ - 1) << mantissa_bits_;
    const std::uint64_t odd = static_cast<std::uint64_t>(base + static_cast<std::int64_t>(kept)) & 1;
    std::uint64_t up = 0;
    switch (rounding_) {
      case Rounding::rne: up = (rest > half) | ((rest == half) & (half != 0) & odd); break;
      case Rounding::rna: up = (half != 0) & (rest >= half); break;
      case Rounding::rtz: break;
      case Rounding::rup: up = (rest != 0) & (sign == 0); break;
      case Rounding::rdown: up = (rest != 0) & (sign != 0); break;
      case Rounding::sr_fastest: {
        // floor(2^k * delta) = rest >> (shift - k) (or << when the fraction has fewer than k bits)
        const std::uint64_t scaled = shift >= sr_bits_ ? rest >> (shift - sr_bits_)
                                                        : rest << (sr_bits_ - shift);
        up = scaled + random >= (std::uint64_t{1} << sr_bits_);
        break;
      }
      case Rounding::sr_fast: {
        const std::int32_t k1 = sr_bits_ + 1;
        const std::uint64_t scaled = shift >= k1 ? rest >> (shift - k1) : rest << (k1 - shift);
        up = scaled + 2 * std::uint64_t{random} + 1 >= (std::uint64_t{1} << k1);
        break;
      }
      case Rounding::sr_fast_f32: {
        // delta = rest / 2^shift is exact in binary32 (rest < 2^24); the sum is one RNE addition.
        const float delta = static_cast<float>(rest) * pow2_neg_[shift];
        const float sum = delta + static_cast<float>(2 * random + 1) * sr_unit_;
        up = sum >= 1.0f;
        break;
      }
    }
    const std::uint64_t rounded = kept + up;
    // Packing with the hidden bit adds one to the exponent field (SoftFloat's packToF16UI trick), so a
    // carry out of the mantissa, or from subnormal into normal, moves to the next binade by itself.
    const std::int64_t magnitude = rounded == 0 ? 0 : base + static_cast<std::int64_t>(rounded);
    const bool towards_zero = rounding_ == Rounding::rtz || (rounding_ == Rounding::rup && sign) ||
                              (rounding_ == Rounding::rdown && !sign);
    const std::uint32_t overflowed = towards_zero ? max_finite_ : overflow_code_;
    std::uint32_t code = magnitude > static_cast<std::int64_t>(max_finite_)
                             ? overflowed
                             : static_cast<std::uint32_t>(magnitude);
    const bool is_nan = field == 255 && (abs & 0x7FFFFFu) != 0;
    if (abs == 0) code = zero_input_;
    if (field == 255) code = is_nan ? nan_input_ : inf_input_;
    // NaN results are canonical (unsigned); a format without NaN keeps the sign of -Inf, -0 and -x.
    const bool keep_sign = is_signed_ && !is_nan && !(has_nan_ && code == nan_code_) &&
                           !(abs == 0 && drop_zero_sign_);
    code |= keep_sign && sign ? sign_mask_ : 0u;
    if (!is_signed_ && sign && abs != 0 && !is_nan) code = unsigned_negative_;
    return code;
  }

  // Encodes n values; stochastic modes take one random integer per element from `random`.
  // Uses every OpenMP thread for large arrays.
  void encode_array(std::span<const float> in, std::span<std::uint32_t> out,
                    std::span<const std::uint32_t> random = {}) const;
  void encode_array(std::span<const float> in, std::span<std::uint8_t> out,
                    std::span<const std::uint32_t> random = {}) const;

 private:
  Rounding rounding_;
  std::int32_t mantissa_bits_;
  std::int32_t bias_;
  std::int32_t min_normal_exponent_;
  std::int32_t sr_bits_;
  bool is_signed_;
  bool has_nan_;
  bool drop_zero_sign_;
  std::uint32_t nan_code_;
  std::uint32_t sign_mask_;
  std::uint32_t max_finite_;
  std::uint32_t overflow_code_;
  std::uint32_t zero_input_;
  std::uint32_t nan_input_;
  std::uint32_t inf_input_;
  std::uint32_t unsigned_negative_;
  float sr_unit_;
  float pow2_neg_[64];
};

}  // namespace fp4sim

namespace fp4sim {

// The golden encoder over an array (OpenMP across elements). `random` is empty or holds one integer
// per element. Returns the index of the first element whose flags include flag::invalid, if any.
std::optional<std::size_t> encode_all(const Format& format, const EncodeOptions& options,
                                      std::span<const double> values, std::span<const std::uint32_t> random,
                                      std::span<std::uint32_t> codes);

}  // namespace fp4sim
