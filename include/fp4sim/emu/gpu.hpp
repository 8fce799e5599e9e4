// The host API of the CUDA kernels in emu/ (built when FP4SIM_CUDA is ON; link fp4sim_emu).
//
// Every call returns a Status, as cutlass::Status does: nothing here exits, throws or prints. The
// kernels are independent GPU code (fp4sim/emu/element_convert.hpp), judged against the golden encoder by
// tests/gpu_convert_test.cpp. The same kernels on device memory the caller owns: fp4sim/emu/device.hpp.
// This header needs no CUDA headers.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"

namespace fp4sim::gpu {

enum class Status : std::uint8_t {
  success,
  no_device,            // no CUDA device, or none that can run this build's sm_90 kernels
  unsupported_format,   // the GPU path has no kernel for this format
  unsupported_options,  // a rounding mode or special-value policy the GPU path does not implement
  invalid_argument,     // e.g. output shorter than input
  cuda_error,           // a CUDA runtime call failed (allocation, copy, launch)
};

std::string_view status_name(Status status);

// True when a CUDA device is present and this build's kernels can be launched on it.
bool device_available();

// Whether `convert` implements (format, options): formats of at most 8 bits with a mantissa (e2m1,
// e2m3, e3m2, e4m3, e5m2, ue4m3, ue5m3, ue5m3fn, and descriptors like them) and e8m0; rounding rne, rna,
// rtz, rup or rdown; saturation on, or off for a format with Inf or NaN other than e2m1 and e8m0
// (e4m3, e5m2, ue4m3, ue5m3fn); the hardware convention for -0 and NaN. Needs no device.
Status supports(const Format& format, const EncodeOptions& options);

// out[i] = the code of in[i] (binary32) in `format` under `options`, computed on the GPU; equal to
// encode(format, in[i], options).code. `in` and `out` are host memory; out.size() >= in.size().
Status convert(const Format& format, const EncodeOptions& options, std::span<const float> in,
               std::span<std::uint8_t> out);

// ---- Block quantization (emu/quantize.cu) ----
//
// The same QuantizedTensor bytes as fp4sim::quantize (codes, scales, tensor_amax, G, Gd, row_amax and the recipe
// settings); the GPU fills counts.elements and counts.blocks only. Supports E2M1 elements with block 16
// or 32, 1-D and 2-D blocks, two-level scales in any unsigned small format with a mantissa and no Inf
// (ue5m3, ue4m3, ...), with TE's 4over6 block choice (RNE elements only) and row-scaled amax (1-D blocks;
// row_amax filled) too, every power-of-two scale rule with E8M0, element rounding rne / sr-fast / sr-fast-f32 /
// sr-fastest (Philox bits as random_bits(), or request.random.explicit_bits), and the 16-point RHT on
// 1-D blocks. Anything else: unsupported_format / unsupported_options. x is host memory.
Status quantize(const Recipe& recipe, const QuantizeRequest& request, std::span<const float> x, std::size_t rows,
                std::size_t cols, QuantizedTensor& out);
// The same from bfloat16 bit patterns, read as the kernels read a BF16 tensor (fp4sim.torch): the result is
// that of their binary32 widening.
Status quantize(const Recipe& recipe, const QuantizeRequest& request, std::span<const std::uint16_t> x_bf16,
                std::size_t rows, std::size_t cols, QuantizedTensor& out);

// Decoded values in q's dequantize order (dequantize(q) of the golden model); out.size() >= rows * cols.
Status dequantize(const QuantizedTensor& q, std::span<float> out);

// ---- GEMM (emu/gemm.cu): C [M, N] = A [M, K] . B [N, K]^T from two quantized operands, through a kernel of
// gemm_kernels.hpp ----
struct GemmOptions {
  GemmPath path = GemmPath::bf16_tc;
  float alpha = 1.0f;  // the recipe's alpha, formed by the caller (gemm_alpha below)
  std::vector<float> row_alpha;  // a row-scaled A: one alpha per row of A instead (fp4sim::gemm_row_alpha)
  bool snap = true;    // probe-matched only
};

// alpha from the two operands' tensor amaxes and targets under the recipe's rule (host binary32):
// reciprocal RN(RN(Aa*Ab) * RN(1/(RN(6*Ta)*RN(6*Tb)))), division RN(RN(Aa*Ab) / (RN(6*Ta)*RN(6*Tb))), one 1.
// 1 when either operand carries no tensor scale.
float gemm_alpha(AlphaRule rule, const QuantizedTensor& a, const QuantizedTensor& b);

// c.size() >= a.rows * b.rows; a.cols == b.cols, a multiple of the kernel's k_multiple; both E2M1 with the
// same block shape along K. A row-scaled A needs row_alpha (one per row, else invalid_argument); a row-scaled
// B is unsupported_options (it would need a per-column alpha).
Status gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& options, std::span<float> c);

}  // namespace fp4sim::gpu
