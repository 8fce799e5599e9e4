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
#include <type_traits>

#include "fp4sim/core/format.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/rounding.hpp"

namespace fp4sim {

// Below this many elements a loop runs on one thread (codec, quantize, dequantize, RHT): the thread
// start-up costs more than it saves, and on a loaded machine OpenMP's waiting threads made replays of
// many small layers and `vectors` several times slower. Not yet measured: the crossover is what
// tools/bench_convert.sh prints (threshold/serial vs threshold/parallel), and on the shared 2-core
// machine of 2026-11-30 the second core was never free enough for the parallel side to win
// (docs/BENCHMARKS.md). Set this from a run on a quiet machine.
inline constexpr std::size_t kParallelThreshold = 1 << 16;

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

// Which convention maps -0 and NaN: hardware (cvt.*.satfinite; docs/semantics.md G3), TE's Python
// reference cast_to_fp4x2 (-0 -> +0 code, NaN -> +0 code), ModelOpt's _cast_fp4 (-0 -> +0 code, the sign
// being x < 0; NaN -> +max finite as the hardware's, searchsorted past every bound; docs/semantics.md §4b), or
// microxcaling's _quantize_elemwise_core (-0 -> +0 code, and its binary32 floor(|y| * 2^k + 0.5) rounds the
// binary32 value just below half the smallest subnormal up under rna and rne: E2M1's 0.25 - 2^-26 gives 0.5;
// docs/semantics.md §3).
enum class SpecialConvention : std::uint8_t { hardware, te_python, modelopt, microxcaling };
std::span<const NameRow<SpecialConvention>> names(SpecialConvention);

// Overflow, Inf and NaN follow one rule for every format, NVIDIA's (docs/semantics.md §0.2, with its
// sources; tests/cuda_host_exhaustive_test.cpp holds e4m3 and e5m2 to cuda_fp8.h on all 2^32 binary32
// inputs): saturating, a magnitude past max finite, +-Inf included, gives +-max finite (IEEE formats
// too); not saturating, +-Inf, else NaN with the sign, else a data error; a NaN input gives the
// canonical NaN in both modes.
struct EncodeOptions {
  Rounding rounding = Rounding::rne;
  bool saturate = true;  // .satfinite (the rule above) or not
  int sr_bits = 8;       // k: random bits per element for stochastic modes, 1..24
  SpecialConvention convention = SpecialConvention::hardware;
};

// The binary32 bits of |x| that SpecialConvention::microxcaling rounds up (the value just below half the
// smallest subnormal) under these options, else a pattern no |x| has.
std::uint32_t microxcaling_round_up_bits(const Format& format, const EncodeOptions& options);

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
    switch (rounding_) {
      case Rounding::rne: return encode_bits<Rounding::rne>(bits, random);
      case Rounding::rna: return encode_bits<Rounding::rna>(bits, random);
      case Rounding::rtz: return encode_bits<Rounding::rtz>(bits, random);
      case Rounding::rup: return encode_bits<Rounding::rup>(bits, random);
      case Rounding::rdown: return encode_bits<Rounding::rdown>(bits, random);
      case Rounding::sr_fast: return encode_bits<Rounding::sr_fast>(bits, random);
      case Rounding::sr_fast_f32: return encode_bits<Rounding::sr_fast_f32>(bits, random);
      case Rounding::sr_fastest: return encode_bits<Rounding::sr_fastest>(bits, random);
    }
    return 0;
  }

  // operator() with the rounding mode fixed at compile time (R must be the mode of the options this
  // encoder was built with). encode_array's loops call it, so the loop body has no branch on the mode
  // and the compiler vectorises it. Always inlined: GCC 12 at -O2 left it out of line (one call per
  // element) in the 32-bit-code loops, which then ran scalar at about 5 ns an element.
  template <Rounding R>
  [[gnu::always_inline]] std::uint32_t encode_bits(std::uint32_t bits, std::uint32_t random = 0) const {
    // Lane width: sig < 2^24, so the deterministic modes decide the same with any shift from 25 up and
    // run in 32-bit lanes (shift clamped to 31); the stochastic ones scale the remainder by 2^k and keep
    // 64 bits (shift clamped to 63).
    using U = std::conditional_t<is_stochastic(R), std::uint64_t, std::uint32_t>;
    using S = std::make_signed_t<U>;
    constexpr std::int32_t kMaxShift = is_stochastic(R) ? 63 : 31;
    const std::uint32_t sign = bits >> 31;
    // microxcaling's artifact: its one binary32 value below half the smallest subnormal moved just above it.
    const std::uint32_t abs = (bits & 0x7FFFFFFFu) + 2u * ((bits & 0x7FFFFFFFu) == round_up_bits_);
    const std::int32_t field = static_cast<std::int32_t>(abs >> 23);
    // value = sig * 2^(e - 23). Binary32 subnormals are written as (mant << 1) * 2^(-127 - 23) so that
    // formats whose smallest normal is 2^-127 (e8m0) see their lowest binade with its own exponent.
    const U mant = abs & 0x7FFFFFu;
    const U sig = field != 0 ? mant | 0x800000u : mant << 1;
    const std::int32_t e = field != 0 ? field - 127 : -127;
    const std::int32_t e_target = e > min_normal_exponent_ ? e : min_normal_exponent_;
    // quantum of the target at this exponent is 2^(e_target - M): drop `shift` low bits of sig.
    //   sig  = [ N ......... | R TTTTTT ]   N kept, R the half bit, T the rest (SoftFloat's picture)
    //   rest = [ R | TTTTTT ]   R at bit shift - 1 (absent when shift = 0), T the `sticky` bits below it
    // Every shift below moves a per-element value by a per-element amount of its own width: GCC
    // vectorises those, but not a constant shifted by a per-element amount (1 << shift), so no mask is
    // built that way.
    const std::int32_t shift32 = 23 - mantissa_bits_ + (e_target - e);  // >= 0
    const U shift = static_cast<U>(shift32 > kMaxShift ? kMaxShift : shift32);
    const U kept = sig >> shift;
    const U rest = sig - (kept << shift);
    const U has_half = shift != 0;
    const U below_half = shift - has_half;                // shift - 1, or 0
    const U round_bit = (rest >> below_half) & has_half;  // rest >= half, half = 2^(shift-1)
    const U sticky = rest - (round_bit << below_half);    // rest - half when round_bit
    // Ties go to the even *code*: the parity of the packed magnitude, which for mantissa-less
    // formats (e8m0) is the exponent's parity, as ml_dtypes and SoftFloat-style packing do.
    // (base + rounded <= 253 * 2^23 + 2^24 fits 32 bits for every format with bias <= 127.)
    const S base = static_cast<S>(e_target + bias_ - 1) << mantissa_bits_;
    const U odd = static_cast<U>(base + static_cast<S>(kept)) & 1u;
    U up = 0;
    if constexpr (R == Rounding::rne) {
      up = round_bit & ((sticky != 0) | odd);  // above half, or a tie with an odd code
    } else if constexpr (R == Rounding::rna) {
      up = round_bit;
    } else if constexpr (R == Rounding::rup) {
      up = static_cast<U>(rest != 0) & (sign ^ 1u);
    } else if constexpr (R == Rounding::rdown) {
      up = static_cast<U>(rest != 0) & sign;
    } else if constexpr (R == Rounding::sr_fastest) {
      // floor(2^k * delta) = rest >> (shift - k) (or << when the fraction has fewer than k bits)
      const U k = static_cast<U>(sr_bits_);
      const U scaled = shift >= k ? rest >> (shift - k) : rest << (k - shift);
      up = scaled + random >= (U{1} << sr_bits_);
    } else if constexpr (R == Rounding::sr_fast) {
      const U k1 = static_cast<U>(sr_bits_ + 1);
      const U scaled = shift >= k1 ? rest >> (shift - k1) : rest << (k1 - shift);
      up = scaled + 2 * U{random} + 1 >= (U{1} << k1);
    } else if constexpr (R == Rounding::sr_fast_f32) {
      // delta = rest / 2^shift is exact in binary32 (rest < 2^24); the sum is one RNE addition.
      const float delta = static_cast<float>(rest) * pow2_neg_[shift];
      const float sum = delta + static_cast<float>(2 * random + 1) * sr_unit_;
      up = sum >= 1.0f;
    }  // rtz: never up
    const U rounded = kept + up;
    // Packing with the hidden bit adds one to the exponent field (SoftFloat's packToF16UI trick), so a
    // carry out of the mantissa, or from subnormal into normal, moves to the next binade by itself.
    const S magnitude = rounded == 0 ? 0 : base + static_cast<S>(rounded);
    // Conditions are 0/1 integers combined with & and ^ and picked with selects, not bools, ifs and &&
    // (the same values): branches and bool conversions keep GCC from vectorising encode_array's loops.
    const std::uint32_t towards_zero = R == Rounding::rtz     ? 1u
                                       : R == Rounding::rup   ? sign
                                       : R == Rounding::rdown ? sign ^ 1u
                                                              : 0u;
    const std::uint32_t overflowed = towards_zero != 0 ? max_finite_ : overflow_code_;
    const std::uint32_t finite_code =
        magnitude > static_cast<S>(max_finite_) ? overflowed : static_cast<std::uint32_t>(magnitude);
    const std::uint32_t is_nan = static_cast<std::uint32_t>(field == 255) & ((abs & 0x7FFFFFu) != 0);
    const std::uint32_t special_code = is_nan != 0 ? nan_input_ : inf_input_;
    std::uint32_t code = field == 255 ? special_code : abs == 0 ? zero_input_ : finite_code;
    // Every result but a NaN input's keeps the input's sign (NaN from overflow too: EncodeOptions' rule).
    const std::uint32_t is_signed = is_signed_, drop_zero_sign = drop_zero_sign_;
    const std::uint32_t keep_sign =
        is_signed & (is_nan ^ 1u) & ((static_cast<std::uint32_t>(abs == 0) & drop_zero_sign) ^ 1u);
    code |= (keep_sign & sign) != 0 ? sign_mask_ : 0u;
    const std::uint32_t unsigned_negative = (is_signed ^ 1u) & sign & (abs != 0) & (is_nan ^ 1u);
    return unsigned_negative != 0 ? unsigned_negative_ : code;
  }

  // Encodes n values; stochastic modes take one random integer per element from `random`.
  // Uses every OpenMP thread for large arrays.
  void encode_array(std::span<const float> in, std::span<std::uint32_t> out,
                    std::span<const std::uint32_t> random = {}) const;
  void encode_array(std::span<const float> in, std::span<std::uint8_t> out,
                    std::span<const std::uint32_t> random = {}) const;
  void encode_array(std::span<const float> in, std::span<std::uint16_t> out,
                    std::span<const std::uint32_t> random = {}) const;

  Rounding rounding() const { return rounding_; }

 private:
  Rounding rounding_;
  std::int32_t mantissa_bits_;
  std::int32_t bias_;
  std::int32_t min_normal_exponent_;
  std::int32_t sr_bits_;
  bool is_signed_;
  bool drop_zero_sign_;
  std::uint32_t round_up_bits_;
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
