// The host side of the GPU quantizer (fp4sim::gpu::make_plan / tensor_scalars / packed_operand): which
// recipes and requests have a kernel path, the plan the kernels of quantize.cu run, and the tensor
// scalars in the same binary32 arithmetic as the device's launch_tensor_scalars.
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/emu/device.hpp"
#include "kernels.hpp"

namespace fp4sim::gpu {
namespace {

// Value of a code of an 8-bit-or-less unsigned/signed small format with a mantissa, or e8m0 (host).
float decode_small_host(const Format& f, std::uint32_t code) {
  if (f.specials == Specials::pow2_nan) {
    if (code == 0xFFu) return NAN;
    return std::ldexp(1.0f, static_cast<int>(code) - f.bias);
  }
  const std::uint32_t sign = code & f.sign_mask();
  const std::uint32_t mag = code & f.magnitude_mask();
  const std::uint32_t field = mag >> f.mantissa_bits;
  const std::uint32_t mant = mag & ((1u << f.mantissa_bits) - 1u);
  float v = field == 0 ? std::ldexp(static_cast<float>(mant), 1 - f.bias - f.mantissa_bits)
                       : std::ldexp(static_cast<float>(mant | (1u << f.mantissa_bits)),
                                    static_cast<int>(field) - f.bias - f.mantissa_bits);
  if (f.specials == Specials::fn && mag == f.nan_code()) v = NAN;
  return sign ? -v : v;
}

}  // namespace

PackedOperand packed_operand(const QuantizedTensor& q, const std::uint8_t* d_codes, const std::uint8_t* d_scales) {
  PackedOperand p;
  p.codes = d_codes;
  p.scales = d_scales;
  p.rows = q.rows;
  p.cols = q.cols;
  p.code_cols = q.code_cols();
  p.scale_cols = q.scale_cols;
  p.block_rows = q.block_rows;
  p.block_cols = q.block_cols;
  for (std::uint32_t c = 0; c < 16; ++c) p.element[c] = decode_small_host(q.element, c);
  for (std::uint32_t c = 0; c < 256; ++c) p.scale[c] = decode_small_host(q.scale, c);
  return p;
}

Status make_plan(const Recipe& recipe, const QuantizeRequest& request, std::size_t rows, std::size_t cols,
                 QuantizePlan& p) {
  if (recipe.element != formats::e2m1) return Status::unsupported_format;
  if (!cpu_only_settings(recipe).empty()) return Status::unsupported_options;  // no kernel path for them
  p = QuantizePlan{};
  p.rows = rows;
  p.cols = cols;
  p.block_cols = recipe.block;
  p.block_rows = request.spec.two_d ? recipe.block : 1;
  p.code_cols = (cols + 1) / 2;
  p.scale_rows = (rows + p.block_rows - 1) / p.block_rows;
  p.scale_cols = (cols + p.block_cols - 1) / p.block_cols;
  switch (request.spec.rounding) {
    case Rounding::rne: p.rounding = ElementRound::rne; break;
    case Rounding::sr_fast: p.rounding = ElementRound::sr_fast; break;
    case Rounding::sr_fast_f32: p.rounding = ElementRound::sr_fast_f32; break;
    case Rounding::sr_fastest: p.rounding = ElementRound::sr_fastest; break;
    default: return Status::unsupported_options;
  }
  if (recipe.sr_bits < 1 || recipe.sr_bits > 16) return Status::unsupported_options;
  if (recipe.scale_rule == ScaleRule::two_level) {
    const Format& sf = recipe.scale;
    const bool no_inf = sf.specials == Specials::fn || sf.specials == Specials::finite ||
                        sf.specials == Specials::reserved_top;
    if (!no_inf || sf.is_signed || sf.mantissa_bits < 1 || sf.bits() > 8 || sf.bias > 126) {
      return Status::unsupported_format;
    }
    p.scale_kind = recipe.block_choice == BlockScaleChoice::single ? ScaleKind::two_level : ScaleKind::four_over_six;
    p.four_over_six_mse = recipe.block_choice == BlockScaleChoice::four_over_six_mse;
    p.four_over_six_fast_math = recipe.four_over_six_error == FourOverSixErrorDomain::fast_math;
    p.scale_format.mantissa_bits = static_cast<std::uint32_t>(sf.mantissa_bits);
    p.scale_format.bias = sf.bias;
    p.scale_format.max_magnitude = sf.max_finite_code();
    p.scale_format.overflow_magnitude = sf.max_finite_code();  // saturating
    p.scale_format.sign_mask = 0;
    p.scale_format.nan_result = sf.has_nan() ? sf.nan_code() : sf.max_finite_code();
    p.scale_format.negative_result = 0;
    // Code of 1.0: field = bias, mantissa 0.
    p.one_code = static_cast<std::uint32_t>(sf.bias) << sf.mantissa_bits;
    p.tensor_scaled = recipe.tensor_scale != TensorScalePolicy::none;
  } else if (recipe.scale == formats::e8m0) {  // validate(): every other rule is a power-of-two one
    p.scale_kind = ScaleKind::pow2;
    p.pow2_rule = recipe.scale_rule;
    p.tensor_scaled = false;
  } else {
    return Status::unsupported_options;
  }
  if (recipe.element_scaling != ElementScaling::reciprocal) return Status::unsupported_options;
  p.zero_scale_to_one = recipe.zero_scale == ZeroScale::one;
  p.rht = request.spec.rht;
  if (p.rht && (p.block_rows != 1 || p.block_cols % 16 != 0)) return Status::unsupported_options;
  // 4over6 rounds to nearest even only (TE's kernel has no stochastic path, and the presets use none).
  if (p.scale_kind == ScaleKind::four_over_six && p.rounding != ElementRound::rne) return Status::unsupported_options;
  p.row_scaled = p.tensor_scaled && fp4sim::row_scaled(recipe, request.spec);
  if (p.row_scaled && p.block_rows != 1) return Status::unsupported_options;
  if (p.row_scaled && request.amax_ref) return Status::invalid_argument;
  p.target = request.spec.target;
  p.amax_ref = request.amax_ref;
  p.seed = request.random.seed;
  p.stream = request.random.stream;
  p.sr_bits = recipe.sr_bits;
  return Status::success;
}

TensorScalars tensor_scalars(const QuantizePlan& p, float current_amax) {
  TensorScalars s;
  s.tensor_amax = current_amax;
  if (p.tensor_scaled) {
    const float ref = p.amax_ref ? *p.amax_ref : current_amax;
    s.tensor_amax = ref;
    if (ref != 0.0f) {
      volatile float ft = 6.0f * p.target;  // exact for the targets in use
      float g = ft / ref;
      g = g > FLT_MAX ? FLT_MAX : g;
      if (g != 0.0f && !std::isnan(g)) {
        s.encode = g;
        s.decode = 1.0f / g;
      }
    }
  }
  const volatile float inv6 = 1.0f / 6.0f;
  s.block_multiplier = s.encode * inv6;
  return s;
}

}  // namespace fp4sim::gpu
