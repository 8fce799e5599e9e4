#include "fp4sim/core/scale_chooser.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "fp4sim/core/fp32.hpp"
#include "fp4sim/core/primitives.hpp"

namespace fp4sim {

namespace {
constexpr float kFltMax = std::numeric_limits<float>::max();
constexpr float kBf16Max = 0x1.fep127f;  // 0x7F7F
}  // namespace

ScaleChooser::ScaleChooser(const Recipe& r, const GlobalScale& g)
    : recipe_(r),
      global_(g),
      element_max_(decode_to_float(r.element, r.element.max_finite_code())),
      scale_max_(decode_to_float(r.scale, r.scale.max_finite_code())),
      to_scale_(r.scale, {Rounding::rne, true}),
      to_bf16_(formats::bf16, {Rounding::rne, true}),
      block_multiplier_(fp32::mul_rn(g.encode, fp32::div_rn(1.0f, element_max_))),
      per_tensor_reciprocal_(fp32::div_rn(1.0f, g.per_tensor)),
      one_code_(static_cast<std::uint8_t>(encode(r.scale, 1.0f, {Rounding::rne, true}).code)) {}

BlockScale ScaleChooser::choose(float block_amax, bool has_nonfinite, ScaleTrace* trace) const {
  return recipe_.scale_rule == ScaleRule::two_level ? two_level(block_amax, trace)
                                                    : pow2(block_amax, has_nonfinite, trace);
}

std::uint8_t ScaleChooser::repaired(std::uint32_t code) const {
  const bool zero = decode_to_float(recipe_.scale, code) == 0.0f;
  return static_cast<std::uint8_t>(zero && recipe_.zero_scale == ZeroScale::one ? one_code_ : code);
}

float ScaleChooser::two_level_multiplier(float value) const {
  if (recipe_.element_scaling == ElementScaling::bf16_coefficient) {
    // TE's fast-math coefficient: G / s in binary32 (s = 0 gives +Inf), clamped to the BF16 max, RNE to BF16.
    const float coefficient = fp32::min(fp32::div_rn(global_.encode, value), kBf16Max);
    return std::bit_cast<float>(to_bf16_(std::bit_cast<std::uint32_t>(coefficient)) << 16);
  }
  return fp32::min(fp32::div_rn(1.0f, fp32::mul_rn(value, global_.decode)), kFltMax);
}

void ScaleChooser::set_element_scaling(BlockScale& b) const {
  if (recipe_.scale_order == ScaleOrder::torchao) {
    b.multiplier = fp32::div_rn(per_tensor_reciprocal_, b.value);
    return;
  }
  if (recipe_.scale_order == ScaleOrder::modelopt) {
    b.divisor = fp32::mul_rn(b.value, global_.per_tensor);
    b.multiplier = fp32::min(fp32::div_rn(1.0f, b.divisor), kFltMax);  // only where the divisor is 0
    return;
  }
  b.multiplier = two_level_multiplier(b.value);
  if (recipe_.element_scaling == ElementScaling::division) b.divisor = fp32::mul_rn(b.value, global_.decode);
}

BlockScale ScaleChooser::from_code(std::uint32_t code) const {
  BlockScale b;
  b.code = static_cast<std::uint8_t>(code);
  if (recipe_.scale_rule != ScaleRule::two_level) {
    const bool nan = code == recipe_.scale.nan_code();
    const int exponent = static_cast<int>(code) - recipe_.scale.bias;
    b.value = nan ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, exponent);
    b.multiplier = nan ? 1.0f : std::ldexp(1.0f, -exponent);
    return b;
  }
  b.value = decode_to_float(recipe_.scale, code);
  if (b.value == 0.0f && recipe_.zero_scale == ZeroScale::one) b.value = 1.0f;
  set_element_scaling(b);
  return b;
}

// The UE5M3 paper's / TE's FP32 order: u = RN(amax_b * RN(G * RN(1/F))), saturating RNE into the scale
// format (clamping to the max before RNE, as the paper does, gives the same code), then
// mult = min(RN(1 / RN(s * Gd)), FLT_MAX); or, with ElementScaling::division, the divisor RN(s * Gd).
BlockScale ScaleChooser::two_level(float block_amax, ScaleTrace* trace) const {
  return two_level_from_ideal(ideal_scale(block_amax), trace);
}

float ScaleChooser::ideal_scale(float block_amax) const {
  switch (recipe_.scale_order) {
    case ScaleOrder::torchao:
      return fp32::min(fp32::div_rn(fp32::div_rn(block_amax, element_max_), global_.per_tensor), kFltMax);
    case ScaleOrder::modelopt:
      return fp32::min(fp32::div_rn(block_amax, fp32::mul_rn(element_max_, global_.per_tensor)), kFltMax);
    case ScaleOrder::te: break;
  }
  return fp32::min(fp32::mul_rn(block_amax, block_multiplier_), kFltMax);
}

// TE quantize_4over6_kernel.cuh compute_scale_pair: the division order amax / 6 * S_enc, and 1.5 x that
// for map-to-4. TE clamps each to 448 before the saturating RNE; the saturating RNE alone gives the same
// code (as in two_level) and keeps the saturation visible in the counts.
ScaleChooser::Candidates ScaleChooser::four_over_six(float block_amax, ScaleTrace* map4_trace,
                                                     ScaleTrace* map6_trace) const {
  const float base = fp32::min(fp32::mul_rn(fp32::div_rn(block_amax, element_max_), global_.encode), kFltMax);
  return {two_level_from_ideal(fp32::min(fp32::mul_rn(base, 1.5f), kFltMax), map4_trace),
          two_level_from_ideal(base, map6_trace)};
}

BlockScale ScaleChooser::two_level_from_ideal(float ideal, ScaleTrace* trace) const {
  // torch.clamp(u, min=scale_min) before the cast; a NaN u stays NaN; a zero u that ZeroScale::one repairs
  // is left to that repair (ModelOpt sets it to 1.0 before its clamp).
  if (ideal < recipe_.scale_min && !(ideal == 0.0f && recipe_.zero_scale == ZeroScale::one)) {
    ideal = recipe_.scale_min;
  }
  BlockScale b;
  b.saturated = ideal > scale_max_;
  b.saturated_rounding = saturated_by_rounding(ideal, scale_max_);
  b.code = static_cast<std::uint8_t>(to_scale_(std::bit_cast<std::uint32_t>(ideal)));
  b.value = decode_to_float(recipe_.scale, b.code);
  b.underflow = ideal > 0.0f && b.value == 0.0f;
  if (trace) {
    trace->ideal = ideal;
    trace->rounded_code = b.code;
  }
  if (b.value == 0.0f && recipe_.zero_scale == ZeroScale::one) {
    b.code = one_code_;
    b.value = 1.0f;
    b.repaired = true;
    if (trace) trace->repaired = true;
  }
  set_element_scaling(b);
  return b;
}

// Power-of-two scales (E8M0). shared = the unbiased scale exponent before clamping to [-127, 127].
BlockScale ScaleChooser::pow2(float block_amax, bool has_nonfinite, ScaleTrace* trace) const {
  BlockScale b;
  const Format& el = recipe_.element;
  const int emax_element = floor_log2(element_max_);
  // torchao / OCP: NaN or Inf in the block marks the whole block NaN. The element codes of such a block
  // are implementation-defined (docs/semantics.md M5); unscaled, NaN -> 0x7 and Inf -> +-6 as G3.
  auto nan_block = [&] {
    b.code = static_cast<std::uint8_t>(recipe_.scale.nan_code());
    b.value = std::numeric_limits<float>::quiet_NaN();
    b.multiplier = 1.0f;
    return b;
  };
  if (has_nonfinite) return nan_block();
  int shared = -127 - emax_element;  // amax == 0: the smallest scale
  bool from_code = false;
  if (block_amax > 0.0f) {
    switch (recipe_.scale_rule) {
      case ScaleRule::pow2_floor: {
        // OCP: from the exponent field; a binary32-subnormal amax reads as -127.
        const int field = static_cast<int>(std::bit_cast<std::uint32_t>(block_amax) >> 23);
        shared = field - 127 - emax_element;
        break;
      }
      case ScaleRule::pow2_ceil: {
        shared = floor_log2(block_amax) - emax_element;
        if (static_cast<double>(block_amax) > std::ldexp(static_cast<double>(element_max_), shared)) ++shared;
        break;
      }
      case ScaleRule::pow2_ceil_exponent: {
        // torchao CEIL: the exponent field, one more when any mantissa bit is set (a binary32-subnormal
        // amax reads -127 + 1), so amax <= 2^emax_elem * 2^e: block [5.0] -> 2^1, not 6 * 2^e's 2^0.
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(block_amax);
        shared = static_cast<int>(bits >> 23) - 127 + ((bits & 0x7FFFFFu) != 0) - emax_element;
        break;
      }
      case ScaleRule::pow2_even: {
        // torchao EVEN: add half an element-precision ulp to amax's bits, keep the exponent field.
        //   amax   0 EEEEEEEE MMMMMMMMM...   (+ 1 << (22 - mbits): half an ulp of an mbits mantissa)
        // A carry out of the top exponent makes the rounded amax +Inf (amax >= (2 - 2^-(mbits+1)) * 2^127,
        // E2M1: 1.75 * 2^127); torchao's isfinite test then gives the block the NaN scale 0xFF, so a
        // finite block decodes to NaN there, where the unclamped exponent would give 0xFD and a code that
        // decodes to +Inf. fp4sim reports torchao's NaN block (docs/semantics.md M7).
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(block_amax);
        const std::uint32_t rounded = (bits + (1u << (22 - el.mantissa_bits))) & 0x7F800000u;
        if (rounded == 0x7F800000u) {
          b.saturated = true;
          if (trace) trace->shared_exponent = 128 - emax_element;
          return nan_block();
        }
        shared = static_cast<int>(rounded >> 23) - 127 - emax_element;
        break;
      }
      case ScaleRule::pow2_float_log2: {
        // microxcaling mx_ops.py _shared_exponents: torch.floor(torch.log2(amax)) in binary32. torch's log2
        // is correctly rounded where it matters (tools/microxcaling_oracle.py), so an amax within half a
        // binary32 ulp of log2 below 2^k (|k| >= 3) reads k: the scale one binade too high. In binary64 and
        // then rounded, the correctly rounded binary32 log2 (no binary64 log2 lands on a binary32 midpoint).
        const float log2_amax = static_cast<float>(std::log2(static_cast<double>(block_amax)));
        shared = static_cast<int>(std::floor(log2_amax)) - emax_element;
        break;
      }
      case ScaleRule::pow2_rceil: {
        // cuBLAS / cvt.rp.satfinite.ue8m0: RN(amax * RN(1/max)) rounded up to a power of two.
        const float descale = fp32::mul_rn(block_amax, fp32::div_rn(1.0f, element_max_));
        const Encoded e = encode(recipe_.scale, descale, {Rounding::rup, true});
        b.code = static_cast<std::uint8_t>(e.code);
        b.saturated = (e.flags & flag::overflow) != 0;
        b.underflow = descale < 0x1p-127f;
        if (trace) trace->shared_exponent = floor_log2(descale);
        from_code = true;
        break;
      }
      case ScaleRule::two_level: break;
    }
  }
  if (!from_code) {
    if (trace) trace->shared_exponent = shared;
    const int bias = recipe_.scale.bias;
    const int lo = -bias, hi = static_cast<int>(recipe_.scale.max_finite_code()) - bias;
    b.saturated = shared > hi;
    b.underflow = block_amax > 0.0f && shared < lo;
    shared = std::clamp(shared, lo, hi);
    b.code = static_cast<std::uint8_t>(shared + bias);
  }
  const int exponent = static_cast<int>(b.code) - recipe_.scale.bias;
  b.value = std::ldexp(1.0f, exponent);        // exact: 2^-127 .. 2^127
  b.multiplier = std::ldexp(1.0f, -exponent);  // exact: the binary32 2^(bias - code)
  return b;
}

}  // namespace fp4sim
