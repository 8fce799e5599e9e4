#include "fp4sim/core/quantize.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/four_over_six.hpp"
#include "fp4sim/core/fp32.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/core/quantize_trace.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/core/scale_chooser.hpp"

namespace fp4sim {

void QuantizeCounts::merge(const QuantizeCounts& o) {
  elements += o.elements;
  nonzero += o.nonzero;
  nan += o.nan;
  inf += o.inf;
  blocks += o.blocks;
  zero_blocks += o.zero_blocks;
  scale_saturated += o.scale_saturated;
  scale_saturated_rounding += o.scale_saturated_rounding;
  scale_underflow += o.scale_underflow;
  scale_repaired += o.scale_repaired;
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
  g.per_tensor = fp32::div_rn(amax_ref, fp32::mul_rn(element_max, target));
  return g;
}

NibbleOrder stored_order(const Format& element, NibbleOrder asked) {
  if (element.storage_bits() <= 4) return asked;
  if (asked == NibbleOrder::high_first) {
    throw UsageError("{nibbles} high-first: " + format_name(element) + " codes take a byte each ({nibbles} unpacked)");
  }
  return NibbleOrder::unpacked;
}

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
                         std::size_t rows, std::size_t cols, QuantizeTrace* trace) {
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
    transformed = random_hadamard_transform(input, rows, cols, recipe.rht_signs, recipe.rht_precision);
    x = transformed;
  }

  QuantizedTensor q = blank_quantized(recipe, request, rows, cols);

  // A held reference amax makes the current one unused: no pass over the tensor for it.
  const bool two_level = has_tensor_scale(recipe);
  const bool row_scaled = fp4sim::row_scaled(recipe, spec);
  if (row_scaled && spec.two_d) throw UsageError("row-scaled amax ({amax_scope} row) needs 1-D blocks ({two_d=false})");
  if (row_scaled && request.amax_ref) throw UsageError("row-scaled amax ({amax_scope} row) takes no held {amax_ref}");
  const float current_amax = two_level && request.amax_ref ? 0.0f : abs_max(x);
  const float element_max = decode_to_float(recipe.element, recipe.element.max_finite_code());

  GlobalScale global;
  if (two_level) {
    q.tensor_amax = request.amax_ref.value_or(current_amax);
    q.tensor_scaled = true;
    global = global_scale(q.tensor_amax, spec.target, element_max);
  } else {
    q.tensor_amax = current_amax;
  }
  q.global_encode_scale = global.encode;
  q.global_decode_scale = global.decode;
  if (row_scaled) {
    q.row_amax.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) q.row_amax[r] = abs_max(x.subspan(r * cols, cols));
  }

  // NanAmax::propagate (TE's reference, ModelOpt): a NaN in the amax's scope, the tensor or a row, makes its G
  // NaN, so every block scale there becomes the scale format's NaN (torch casts it to the E4M3 NaN of its sign,
  // 0x7F or 0xFF) and every element NaN, encoded as the element specials say: code 0 under te-python
  // (cast_to_fp4x2 assigns a code only where a comparison holds, none does for NaN), +max under modelopt
  // (_cast_fp4's searchsorted puts NaN past every bound).
  const bool propagate_nan = two_level && recipe.nan_amax == NanAmax::propagate;
  auto holds_nan = [](std::span<const float> v) {
    return std::any_of(v.begin(), v.end(), [](float e) { return std::isnan(e); });
  };
  std::vector<char> nan_scope(propagate_nan ? (row_scaled ? rows : 1) : 0);
  for (std::size_t i = 0; i < nan_scope.size(); ++i) {
    nan_scope[i] = holds_nan(row_scaled ? x.subspan(i * cols, cols) : x);
  }
  const BlockScale nan_scale{.code = static_cast<std::uint8_t>(recipe.scale.nan_code()),
                             .value = std::numeric_limits<float>::quiet_NaN(),
                             .multiplier = std::numeric_limits<float>::quiet_NaN()};

  EncodeOptions element_options{spec.rounding, true, recipe.sr_bits, recipe.element_specials};
  const Float32Encoder to_element(recipe.element, element_options);
  // The code of a NaN-scope block's elements: the specials' NaN code; under hardware specials 0, TE's
  // reference's (no hardware propagates a NaN amax, so the rule is the reference's alone).
  const auto nan_element_code = static_cast<std::uint8_t>(
      recipe.element_specials == SpecialConvention::hardware
          ? 0
          : encode(recipe.element, std::numeric_limits<float>::quiet_NaN(), element_options).code);
  const std::size_t code_cols = q.code_cols();
  const bool packed = q.packed();
  const bool adaptive = two_level && recipe.block_choice != BlockScaleChoice::single;
  const FourOverSixError error_of{recipe, spec.target};
  if (trace) {
    trace->scale_cols = q.scale_cols;
    trace->x.assign(x.begin(), x.end());
    trace->scaled.assign(rows * cols, 0.0f);
    trace->blocks.assign(q.scale_rows * q.scale_cols, BlockTrace{});
  }

  QuantizeCounts total;
#pragma omp parallel if (rows * cols >= kParallelThreshold)
  {
    QuantizeCounts counts;
    // One block at a time: its scaled values, random integers and codes row by row, so that the
    // encoder's vectorised array loop (one rounding-mode dispatch per row) converts them.
    const std::size_t block_elements = static_cast<std::size_t>(q.block_rows) * q.block_cols;
    std::vector<float> scaled(q.block_cols);
    std::vector<std::uint32_t> drawn(stochastic ? block_elements : 0);
    std::vector<std::uint8_t> codes(block_elements), other_codes(adaptive ? block_elements : 0);
    std::vector<float> row_errors(adaptive ? q.block_rows : 0), other_row_errors(row_errors.size());
    std::optional<ScaleChooser> chooser;
    if (!row_scaled) chooser.emplace(recipe, global);
#pragma omp for schedule(dynamic, 1)
    for (std::size_t sr = 0; sr < q.scale_rows; ++sr) {
      const std::size_t r0 = sr * q.block_rows, r1 = std::min(rows, r0 + q.block_rows);
      float amax_used = q.tensor_amax;
      if (row_scaled) {
        amax_used = q.row_amax[r0];
        chooser.emplace(recipe, global_scale(amax_used, spec.target, element_max));
      }
      for (std::size_t sc = 0; sc < q.scale_cols; ++sc) {
        const std::size_t c0 = sc * q.block_cols, c1 = std::min(cols, c0 + q.block_cols);
        const std::size_t n = c1 - c0;
        // The random integers of the block's rows (both 4over6 candidates round with the same ones).
        auto random_row = [&](std::size_t r) -> std::span<const std::uint32_t> {
          const std::size_t first = r * cols + c0;  // the element index random_integer() is keyed by
          if (!stochastic) return {};
          if (!request.random.explicit_bits.empty()) return request.random.explicit_bits.subspan(first, n);
          // random_integer(request.random, first + j, sr_bits) for every j, one Philox block per 16.
          const auto out = std::span(drawn).subspan((r - r0) * n, n);
          fill_random_bits(request.random.seed, request.random.stream, first, recipe.sr_bits, out);
          return out;
        };
        // The codes of every row of the block under one scale, into out [rows of the block][n]; returns
        // how many scaled values exceeded the element max.
        auto encode_block = [&](const BlockScale& scale, std::span<std::uint8_t> out) {
          std::size_t saturated = 0;
          for (std::size_t r = r0; r < r1; ++r) {
            ScaleChooser::scale(x.subspan(r * cols + c0, n), scale, std::span(scaled).first(n));
            for (std::size_t j = 0; j < n; ++j) saturated += std::fabs(scaled[j]) > element_max;
            to_element.encode_array(std::span(scaled).first(n), out.subspan((r - r0) * n, n), random_row(r));
          }
          return saturated;
        };
        const auto [block, nonfinite] = block_amax(x, cols, r0, r1, c0, c1);
        BlockTrace* traced = trace ? &trace->blocks[sr * q.scale_cols + sc] : nullptr;
        BlockScale scale;
        std::size_t saturated = 0;
        if (propagate_nan && nan_scope[row_scaled ? r0 : 0]) {
          scale = nan_scale;
          std::fill(codes.begin(), codes.end(), nan_element_code);
        } else if (!adaptive) {
          scale = chooser->choose(block, nonfinite, traced ? &traced->trace : nullptr);
          saturated = encode_block(scale, codes);
        } else {
          FourOverSixTrace* both = traced ? &traced->four_over_six.emplace() : nullptr;
          const auto [map4, map6] =
              chooser->four_over_six(block, both ? &both->map4_trace : nullptr, both ? &both->map6_trace : nullptr);
          saturated = encode_block(map6, codes);
          const std::size_t other_saturated = encode_block(map4, other_codes);
          for (std::size_t r = r0; r < r1; ++r) {
            const auto xr = x.subspan(r * cols + c0, n);
            const std::size_t at = (r - r0) * n;
            const float encode = chooser->global().encode;
            row_errors[r - r0] = error_of(xr, std::span(codes).subspan(at, n), map6.value, amax_used, encode);
            other_row_errors[r - r0] =
                error_of(xr, std::span(other_codes).subspan(at, n), map4.value, amax_used, encode);
          }
          const std::size_t block_rows = r1 - r0;
          const float map4_error = FourOverSixError::block_sum(std::span(other_row_errors).first(block_rows));
          const float map6_error = FourOverSixError::block_sum(std::span(row_errors).first(block_rows));
          const bool pick_map4 = map4_error < map6_error;
          scale = pick_map4 ? map4 : map6;
          if (pick_map4) {
            codes.swap(other_codes);
            saturated = other_saturated;
          }
          if (both) {
            both->map4 = map4;
            both->map6 = map6;
            both->map4_error = map4_error;
            both->map6_error = map6_error;
            both->map4_chosen = pick_map4;
            traced->trace = pick_map4 ? both->map4_trace : both->map6_trace;
          }
        }
        if (traced) {
          traced->amax = {block, nonfinite};
          traced->global_amax = two_level ? amax_used : 0.0f;
          traced->global = chooser->global();
          traced->scale = scale;
          for (std::size_t r = r0; r < r1; ++r) {
            ScaleChooser::scale(x.subspan(r * cols + c0, n), scale, std::span(trace->scaled).subspan(r * cols + c0, n));
          }
        }
        counts.saturated += saturated;
        q.scales[sr * q.scale_cols + sc] = scale.code;
        ++counts.blocks;
        counts.zero_blocks += block == 0.0f && !nonfinite;
        counts.scale_saturated += scale.saturated;
        counts.scale_saturated_rounding += scale.saturated_rounding;
        counts.scale_underflow += scale.underflow;
        counts.scale_repaired += scale.repaired;
        for (std::size_t r = r0; r < r1; ++r) {
          const float* v = x.data() + r * cols + c0;
          std::size_t nan = 0, inf = 0, nonzero = 0;
          for (std::size_t j = 0; j < n; ++j) {
            nan += std::isnan(v[j]);
            inf += std::isinf(v[j]);
            nonzero += v[j] != 0.0f;
          }
          counts.nan += nan;
          counts.inf += inf;
          counts.nonzero += nonzero;
          const std::uint8_t* block_codes = codes.data() + (r - r0) * n;
          std::uint8_t* row_codes = q.codes.data() + r * code_cols;
          for (std::size_t j = 0; j < n; ++j) {
            const std::size_t c = c0 + j;
            if (!packed) row_codes[c] = block_codes[j];
            else row_codes[c / 2] |= static_cast<std::uint8_t>((c & 1) ? block_codes[j] << 4 : block_codes[j]);
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
  std::array<float, 256> element_values{};
  for (std::uint32_t code = 0; code < q.element.code_count() && code < 256; ++code) {
    element_values[code] = decode_to_float(q.element, code);
  }
  std::array<float, 256> scale_values{};
  for (std::uint32_t code = 0; code < 256; ++code) scale_values[code] = decode_to_float(q.scale, code);
  const float element_max = decode_to_float(q.element, q.element.max_finite_code());
  const float te_factor = fp32::div_rn(1.0f, fp32::mul_rn(element_max, q.target));  // RN(1/(F*T))
  const bool two_level = q.scale.specials != Specials::pow2_nan;
#pragma omp parallel for schedule(static) if (q.rows * q.cols >= kParallelThreshold)
  for (std::size_t r = 0; r < q.rows; ++r) {
    const bool row_scaled = !q.row_amax.empty();
    const float amax = row_scaled ? q.row_amax[r] : q.tensor_amax;
    const float gd = row_scaled ? global_scale(amax, q.target, element_max).decode : q.global_decode_scale;
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
