// Block quantization and dequantization of a 2-D row-major tensor under a recipe (docs/design.md picture).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fp4sim/core/host_device.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim {

// Counts gathered while quantizing, mergeable across tensors and threads.
struct QuantizeCounts {
  std::uint64_t elements = 0;
  std::uint64_t nonzero = 0;
  std::uint64_t nan = 0;
  std::uint64_t inf = 0;
  std::uint64_t blocks = 0;
  std::uint64_t zero_blocks = 0;
  std::uint64_t scale_saturated = 0;  // ideal scale above the scale format's max before rounding
  std::uint64_t scale_saturated_rounding = 0;  // of those, within FP32 rounding of it (saturated_by_rounding)
  std::uint64_t scale_underflow = 0;  // ideal scale nonzero, rounded to 0 (before any repair)
  std::uint64_t scale_repaired = 0;   // zero scales (zero blocks and underflows) replaced by 1.0
  std::uint64_t saturated = 0;        // elements whose scaled value exceeded the element max

  void merge(const QuantizeCounts& other);
};

// Payload codes, block scale codes, the tensor scale, and the recipe settings that made them: the same
// bytes on the CPU and from emu/ kernels. Elements of at most 4 bits are packed two to a byte (element 2j
// in the low nibble); wider ones (MXFP8's E4M3 and E5M2) take a byte each.
struct QuantizedTensor {
  std::size_t rows = 0, cols = 0;
  std::vector<std::uint8_t> codes;   // [rows, code_cols()]
  std::vector<std::uint8_t> scales;  // [scale_rows, scale_cols]
  std::size_t scale_rows = 0, scale_cols = 0;
  int block_rows = 1, block_cols = 16;
  Format element = formats::e2m1;
  Format scale = formats::ue5m3;
  float tensor_amax = 0.0f;           // the reference actually used (held or current); without a
                                      // tensor scale, the current amax (for statistics only)
  bool tensor_scaled = false;         // a tensor scale (G, Gd) is part of the encoding
  float global_encode_scale = 1.0f;   // G
  float global_decode_scale = 1.0f;   // Gd = RN(1/G)
  std::vector<float> row_amax;        // AmaxScope::row: the amax of each row, which makes that row's G and
                                      // Gd (global_scale); tensor_amax and G, Gd above are then the whole
                                      // tensor's, for statistics only. Empty otherwise.
  float target = 448.0f;
  std::string recipe;
  OperandSpec spec;
  DequantizeOrder dequantize_order = DequantizeOrder::portable;
  std::uint64_t seed = 0;
  QuantizeCounts counts;

  bool packed() const { return element.storage_bits() <= 4; }
  std::size_t code_cols() const { return packed() ? (cols + 1) / 2 : cols; }
  std::uint8_t code(std::size_t r, std::size_t c) const {
    if (!packed()) return codes[r * cols + c];
    const std::uint8_t byte = codes[r * code_cols() + c / 2];
    return (c & 1) ? byte >> 4 : byte & 0xF;
  }
  std::uint8_t scale_code(std::size_t r, std::size_t c) const {
    return scales[(r / block_rows) * scale_cols + c / block_cols];
  }
};

// The order a tensor's codes are stored in when `asked` is requested: as asked for elements of at most 4
// bits; for wider ones (a byte each) unpacked, which the default low-first also means there; UsageError
// for high-first, which would say that bytes hold two codes.
NibbleOrder stored_order(const Format& element, NibbleOrder asked);

// Where stochastic-rounding integers come from: an explicit array shaped like the operand, or
// Philox(seed, stream, linear element index) with the recipe's sr_bits (docs/random-bits.md).
struct RandomSource {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::span<const std::uint32_t> explicit_bits;
};

// The stochastic-rounding integer element `index` of the operand draws.
inline std::uint32_t random_integer(const RandomSource& source, std::uint64_t index, int sr_bits) {
  return source.explicit_bits.empty() ? random_bits(source.seed, source.stream, index, sr_bits)
                                      : source.explicit_bits[index];
}

struct QuantizeRequest {
  OperandSpec spec;
  std::optional<float> amax_ref;  // held tensor amax for periodic scaling; current amax otherwise
  RandomSource random;
};

// A tensor's quantized form before any code is chosen: shape, block grid, formats and the recipe
// settings that will make it, codes and scales zero (the golden quantizer and emu/ fill it alike).
QuantizedTensor blank_quantized(const Recipe& recipe, const QuantizeRequest& request, std::size_t rows,
                                std::size_t cols);

// The NaN-ignoring max |x| (a NaN never compares greater), as the NVFP4 kernels' fmaxf / max.xorsign.abs
// (docs/semantics.md N2): a tensor's amax (OpenMP across elements for large tensors), and a block's, with
// whether the block holds a NaN or an Inf.
float abs_max(std::span<const float> x);
struct BlockAmax {
  float amax = 0.0f;
  bool nonfinite = false;
};
// The block rows [r0, r1) x columns [c0, c1) of x [rows, cols] (row-major).
BlockAmax block_amax(std::span<const float> x, std::size_t cols, std::size_t r0, std::size_t r1, std::size_t c0,
                     std::size_t c1);

struct QuantizeTrace;  // quantize_trace.hpp

// Quantizes x [rows, cols] (row-major, blocks along cols). With spec.rht the 16-point random Hadamard
// transform is applied first (hadamard.hpp) and the tensor amax is that of the transformed tensor.
// With a trace, also reports what each block and element used (quantize_trace.hpp); without, costs nothing.
QuantizedTensor quantize(const Recipe& recipe, const QuantizeRequest& request, std::span<const float> x,
                         std::size_t rows, std::size_t cols, QuantizeTrace* trace = nullptr);

// The decoded value of every element (tensor scale included), in the tensor's dequantize order.
std::vector<float> dequantize(const QuantizedTensor& q);

// The block scale as a float (decoded scale code, after the zero-scale repair already stored in it).
float decoded_scale(const QuantizedTensor& q, std::size_t r, std::size_t c);

// The tensor-scale multipliers of the two-level rule for a reference amax and target T:
// G = min(RN(RN(F*T) / amax), FLT_MAX), 1 when amax is 0 or G underflows to 0; Gd = RN(1/G).
struct GlobalScale {
  float encode = 1.0f;
  float decode = 1.0f;
  float per_tensor = 1.0f;  // P = RN(amax_ref / RN(F*T)): the per-tensor scale of ScaleOrder torchao / modelopt
};
GlobalScale global_scale(float amax_ref, float target, float element_max);

}  // namespace fp4sim
