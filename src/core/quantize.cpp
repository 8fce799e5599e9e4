#include "fp4sim/core/quantize.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/fp32.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/core/random.hpp"

namespace fp4sim {

void QuantizeCounts::merge(const QuantizeCounts& o) {
  elements += o.elements;
  nonzero += o.nonzero;
  nan += o.nan;
  inf += o.inf;
  blocks += o.blocks;
  zero_blocks += o.zero_blocks;
  scale_saturated += o.scale_saturated;
  scale_underflow += o.scale_underflow;
  saturated += o.saturated;
}

GlobalScale global_scale(float amax_ref, float target, float element_max) {
  GlobalScale g;
  if (amax_ref == 0.0f) return g;
  // RN(F*T) is exact for the targets in use (2688, 12288); TE folds 448*6 the same way.
  float encode = fp32::div_rn(fp32::mul_rn(element_max, target), amax_ref);
  encode = fp32::min(encode, std::numeric_limits<float>::max());
  if (encode == 0.0f || std::isnan(encode)) return g;  // amax_ref = +Inf (TE returns 1)
  g.encode = encode;
  g.decode = fp32::div_rn(1.0f, encode);
  return g;
}

namespace {

constexpr float kFltMax = std::numeric_limits<float>::max();

struct BlockScale {
  std::uint8_t code = 0;
  float value = 0.0f;       // decoded scale (after any zero repair)
  float multiplier = 0.0f;  // what each element is multiplied by before rounding
  bool saturated = false;
  bool underflow = false;
};

class ScaleChooser {
 public:
  ScaleChooser(const Recipe& r, const GlobalScale& g)
      : recipe_(r),
        global_(g),
        element_max_(decode_to_float(r.element, r.element.max_finite_code())),
        scale_max_(decode_to_float(r.scale, r.scale.max_finite_code())),
        to_scale_(r.scale, {Rounding::rne, true}),
        block_multiplier_(fp32::mul_rn(g.encode, fp32::div_rn(1.0f, element_max_))),
        one_code_(static_cast<std::uint8_t>(encode(r.scale, 1.0f, {Rounding::rne, true}).code)) {}

  float element_max() const { return element_max_; }

  BlockScale choose(float block_amax, bool has_nonfinite) const {
    return recipe_.scale_rule == ScaleRule::two_level ? two_level(block_amax) : pow2(block_amax, has_nonfinite);
  }

 private:
  // The UE5M3 paper's / TE's FP32 order: u = RN(amax_b * RN(G * RN(1/F))), saturating RNE into the scale
  // format (clamping to the max before RNE, as the paper does, gives the same code), then
  // mult = min(RN(1 / RN(s * Gd)), FLT_MAX).
  BlockScale two_level(float block_amax) const {
    BlockScale b;
    const float ideal = fp32::min(fp32::mul_rn(block_amax, block_multiplier_), kFltMax);
    b.saturated = ideal > scale_max_;
    b.code = static_cast<std::uint8_t>(to_scale_(std::bit_cast<std::uint32_t>(ideal)));
    b.value = decode_to_float(recipe_.scale, b.code);
    b.underflow = ideal > 0.0f && b.value == 0.0f;
    if (b.value == 0.0f && recipe_.zero_scale == ZeroScale::one) {
      b.code = one_code_;
      b.value = 1.0f;
    }
    b.multiplier = fp32::min(fp32::div_rn(1.0f, fp32::mul_rn(b.value, global_.decode)), kFltMax);
    return b;
  }

  // Power-of-two scales (E8M0). shared = the unbiased scale exponent before clamping to [-127, 127].
  BlockScale pow2(float block_amax, bool has_nonfinite) const {
    BlockScale b;
    const Format& el = recipe_.element;
    const int emax_element = floor_log2(element_max_);
    if (has_nonfinite) {
      // torchao / OCP: NaN or Inf in the block marks the whole block NaN. The element codes of such a
      // block are implementation-defined (docs/semantics.md M5); unscaled, NaN -> 0x7 and Inf -> +-6 as G3.
      b.code = static_cast<std::uint8_t>(recipe_.scale.nan_code());
      b.value = std::numeric_limits<float>::quiet_NaN();
      b.multiplier = 1.0f;
      return b;
    }
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
        case ScaleRule::pow2_even: {
          // torchao EVEN: add half an element-precision ulp to amax's bits, keep the exponent field.
          const std::uint32_t bits = std::bit_cast<std::uint32_t>(block_amax);
          const std::uint32_t rounded = (bits + (1u << (22 - el.mantissa_bits))) & 0x7F800000u;
          shared = static_cast<int>(rounded >> 23) - 127 - emax_element;
          break;
        }
        case ScaleRule::pow2_rceil: {
          // cuBLAS / cvt.rp.satfinite.ue8m0: RN(amax * RN(1/max)) rounded up to a power of two.
          const float descale = fp32::mul_rn(block_amax, fp32::div_rn(1.0f, element_max_));
          const Encoded e = encode(recipe_.scale, descale, {Rounding::rup, true});
          b.code = static_cast<std::uint8_t>(e.code);
          b.saturated = (e.flags & flag::overflow) != 0;
          b.underflow = descale < 0x1p-127f;
          from_code = true;
          break;
        }
        case ScaleRule::two_level: break;
      }
    }
    if (!from_code) {
      const int bias = recipe_.scale.bias;
      const int lo = -bias, hi = static_cast<int>(recipe_.scale.max_finite_code()) - bias;
      b.saturated = shared > hi;
      b.underflow = block_amax > 0.0f && shared < lo;
      shared = std::clamp(shared, lo, hi);
      b.code = static_cast<std::uint8_t>(shared + bias);
    }
    const int exponent = static_cast<int>(b.code) - recipe_.scale.bias;
    b.value = std::ldexp(1.0f, exponent);              // exact: 2^-127 .. 2^127
    b.multiplier = std::ldexp(1.0f, -exponent);        // exact: the binary32 2^(bias - code)
    return b;
  }

  const Recipe& recipe_;
  GlobalScale global_;
  float element_max_;
  float scale_max_;
  Float32Encoder to_scale_;
  float block_multiplier_;
  std::uint8_t one_code_;
};

}  // namespace

QuantizedTensor blank_quantized(const Recipe& recipe, const QuantizeRequest& request, std::size_t rows,
                                std::size_t cols) {
  QuantizedTensor q;
  q.rows = rows;
  q.cols = cols;
  q.element = recipe.element;
  q.scale = recipe.scale;
  q.recipe = recipe.name;
  q.spec = request.spec;
  q.target = request.spec.target;
  q.dequantize_order = recipe.dequantize_order;
  q.seed = request.random.seed;
  q.block_cols = recipe.block;
  q.block_rows = request.spec.two_d ? recipe.block : 1;
  q.scale_rows = (rows + q.block_rows - 1) / q.block_rows;
  q.scale_cols = (cols + q.block_cols - 1) / q.block_cols;
  q.codes.assign(rows * q.code_cols(), 0);
  q.scales.assign(q.scale_rows * q.scale_cols, 0);
  return q;
}

float abs_max(std::span<const float> x) {
  float m = 0.0f;
#pragma omp parallel for simd reduction(max : m) schedule(static) if (x.size() > (std::size_t{1} << 18))
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

BlockAmax block_amax(std::span<const float> x, std::size_t cols, std::size_t r0, std::size_t r1, std::size_t c0,
                     std::size_t c1) {
  BlockAmax b;
  for (std::size_t r = r0; r < r1; ++r) {
    for (std::size_t c = c0; c < c1; ++c) {
      const float a = std::fabs(x[r * cols + c]);
      b.amax = a > b.amax ? a : b.amax;
      b.nonfinite |= !std::isfinite(a);
    }
  }
  return b;
}

QuantizedTensor quantize(const Recipe& recipe, const QuantizeRequest& request, std::span<const float> input,
                         std::size_t rows, std::size_t cols) {
  if (input.size() != rows * cols) throw DataError("quantize: tensor holds " + std::to_string(input.size()) +
                                                   " values, shape says " + std::to_string(rows * cols));
  const OperandSpec& spec = request.spec;
  const bool stochastic = is_stochastic(spec.rounding);
  if (stochastic && !request.random.explicit_bits.empty() && request.random.explicit_bits.size() != rows * cols) {
    throw DataError("quantize: random bits hold " + std::to_string(request.random.explicit_bits.size()) +
                    " values for a tensor of " + std::to_string(rows * cols));
  }

  std::vector<float> transformed;
  std::span<const float> x = input;
  if (spec.rht) {
    transformed = random_hadamard_transform(input, rows, cols);
    x = transformed;
  }

  QuantizedTensor q = blank_quantized(recipe, request, rows, cols);

  const float current_amax = abs_max(x);

  GlobalScale global;
  if (recipe.tensor_scale != TensorScalePolicy::none && recipe.scale_rule == ScaleRule::two_level) {
    q.tensor_amax = request.amax_ref.value_or(current_amax);
    q.tensor_scaled = true;
    const float element_max = decode_to_float(recipe.element, recipe.element.max_finite_code());
    global = global_scale(q.tensor_amax, spec.target, element_max);
  } else {
    q.tensor_amax = current_amax;
  }
  q.global_encode_scale = global.encode;
  q.global_decode_scale = global.decode;

  const ScaleChooser chooser(recipe, global);
  EncodeOptions element_options{spec.rounding, true, recipe.sr_bits};
  const Float32Encoder to_element(recipe.element, element_options);
  const float element_max = chooser.element_max();
  const std::size_t code_cols = q.code_cols();

  QuantizeCounts total;
#pragma omp parallel
  {
    QuantizeCounts counts;
#pragma omp for schedule(dynamic, 1)
    for (std::size_t sr = 0; sr < q.scale_rows; ++sr) {
      const std::size_t r0 = sr * q.block_rows, r1 = std::min(rows, r0 + q.block_rows);
      for (std::size_t sc = 0; sc < q.scale_cols; ++sc) {
        const std::size_t c0 = sc * q.block_cols, c1 = std::min(cols, c0 + q.block_cols);
        const auto [block, nonfinite] = block_amax(x, cols, r0, r1, c0, c1);
        const BlockScale scale = chooser.choose(block, nonfinite);
        q.scales[sr * q.scale_cols + sc] = scale.code;
        ++counts.blocks;
        counts.zero_blocks += block == 0.0f && !nonfinite;
        counts.scale_saturated += scale.saturated;
        counts.scale_underflow += scale.underflow;
        for (std::size_t r = r0; r < r1; ++r) {
          for (std::size_t c = c0; c < c1; ++c) {
            const std::size_t index = r * cols + c;
            const float v = x[index];
            counts.nan += std::isnan(v);
            counts.inf += std::isinf(v);
            counts.nonzero += v != 0.0f;
            const float y = fp32::mul_rn(v, scale.multiplier);
            counts.saturated += std::fabs(y) > element_max;
            std::uint32_t random = 0;
            if (stochastic) {
              random = request.random.explicit_bits.empty()
                           ? random_bits(request.random.seed, request.random.stream, index, recipe.sr_bits)
                           : request.random.explicit_bits[index];
            }
            const auto code = static_cast<std::uint8_t>(to_element(std::bit_cast<std::uint32_t>(y), random));
            q.codes[r * code_cols + c / 2] |= static_cast<std::uint8_t>((c & 1) ? code << 4 : code);
          }
        }
      }
    }
#pragma omp critical
    total.merge(counts);
  }
  total.elements = rows * cols;
  q.counts = total;
  return q;
}

float decoded_scale(const QuantizedTensor& q, std::size_t r, std::size_t c) {
  return decode_to_float(q.scale, q.scale_code(r, c));
}

std::vector<float> dequantize(const QuantizedTensor& q) {
  std::vector<float> out(q.rows * q.cols);
  std::array<float, 16> element_values{};
  for (std::uint32_t code = 0; code < q.element.code_count() && code < 16; ++code) {
    element_values[code] = decode_to_float(q.element, code);
  }
  std::array<float, 256> scale_values{};
  for (std::uint32_t code = 0; code < 256; ++code) scale_values[code] = decode_to_float(q.scale, code);
  const float gd = q.global_decode_scale;
  const float element_max = decode_to_float(q.element, q.element.max_finite_code());
  const float te_factor = fp32::div_rn(1.0f, fp32::mul_rn(element_max, q.target));  // RN(1/(F*T))
  const float amax = q.tensor_amax;
  const bool two_level = q.scale.specials != Specials::pow2_nan;
#pragma omp parallel for schedule(static)
  for (std::size_t r = 0; r < q.rows; ++r) {
    for (std::size_t c = 0; c < q.cols; ++c) {
      const float e = element_values[q.code(r, c)];
      const float s = scale_values[q.scale_code(r, c)];
      float v = 0.0f;
      if (!two_level) {
        v = fp32::mul_rn(e, s);
      } else {
        switch (q.dequantize_order) {
          case DequantizeOrder::portable: v = fp32::mul_rn(e, fp32::mul_rn(s, gd)); break;
          case DequantizeOrder::kernel: v = fp32::mul_rn(fp32::mul_rn(e, s), gd); break;
          case DequantizeOrder::te_kernel:
            v = q.tensor_scaled ? fp32::mul_rn(e, fp32::mul_rn(fp32::mul_rn(s, amax), te_factor))
                                : fp32::mul_rn(e, s);
            break;
        }
      }
      out[r * q.cols + c] = v;
    }
  }
  return out;
}

}  // namespace fp4sim
