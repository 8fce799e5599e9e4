// The device-pointer API of the emu/ kernels (link fp4sim::emu): launches on memory the caller owns, for
// callers whose tensors live on the GPU (fp4sim.torch through python/cuda_ops.cpp, the benchmarks of
// tools/probes/gpu_bench.cu). The host-memory API (fp4sim/emu/gpu.hpp) is these launches between copies.
//
// For every call:
//  * d_* pointers are device memory of the current device (cudaMalloc, or a framework's allocator), row-major;
//  * `stream` is a cudaStream_t (nullptr: the legacy default stream). A launch only queues work: it never
//    allocates, copies to the host or synchronises (wgmma_available's first call aside), so a sequence of
//    launches can be captured in a CUDA graph, and the tensor scalars can stay on the device throughout;
//  * the Status says whether the work was queued: unsupported_format / unsupported_options before anything
//    runs, invalid_argument for a shape or alignment the kernel does not take, cuda_error when the launch
//    failed (a fault inside the kernel shows at the caller's next synchronisation).
// Which GEMM kernel serves which golden datapath, its K rule and its workspaces: fp4sim/emu/gemm_kernels.hpp.
// No CUDA headers here, so host-only translation units can include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/element_convert.hpp"
#include "fp4sim/emu/gpu.hpp"

namespace fp4sim::gpu {

// ---- Quantize (emu/quantize_plan.cpp, emu/quantize.cu, emu/device_scalars.cu) ----

// Which element rounding a quantize kernel instantiates.
enum class ElementRound : std::uint8_t { rne, sr_fast, sr_fast_f32, sr_fastest };
// Which kind of block scale a quantize kernel instantiates: two-level (UE4M3/UE5M3 and a tensor scale), TE's
// 4over6 choice between two two-level candidates (BlockScaleChoice::four_over_six_*; RNE elements only), or a
// power of two (E8M0) by one of the recipe's power-of-two scale rules (QuantizePlan::pow2_rule).
enum class ScaleKind : std::uint8_t { two_level, four_over_six, pow2 };

// Everything a quantize launch needs, resolved on the host from (recipe, request, shape).
struct QuantizePlan {
  std::size_t rows = 0, cols = 0;
  int block_cols = 16, block_rows = 1;
  std::size_t code_cols = 0, scale_rows = 0, scale_cols = 0;
  ElementRound rounding = ElementRound::rne;
  ScaleKind scale_kind = ScaleKind::two_level;
  ScaleRule pow2_rule = ScaleRule::pow2_floor;  // pow2: floor, ceil, ceil-exponent, even or rceil
  bool rht = false;
  bool tensor_scaled = false;
  bool row_scaled = false;           // AmaxScope::row: each row's amax (launch_row_amax) makes its G and Gd
  bool four_over_six_mse = false;    // four_over_six: summed squared error (else summed |error|)
  bool four_over_six_fast_math = false;  // four_over_six: the error in the fast-math domain (else the input's)
  bool zero_scale_to_one = true;
  emu::SmallFormat scale_format{};   // two-level: the block-scale format's bit-path constants
  std::uint32_t one_code = 0;        // the scale code of 1.0 (zero-scale repair)
  float target = 448.0f;
  std::optional<float> amax_ref;     // held amax; else the current amax is measured on the device
  std::uint64_t seed = 0, stream = 0;
  int sr_bits = 8;
};

// Resolves a plan; unsupported_* when the GPU has no kernel for the recipe (element format other than
// e2m1, a power-of-two rule with a scale format other than e8m0, RHT with 2-D tiles or a block that is not
// 16 or 32, 4over6 with stochastic rounding, row-scaled amax with 2-D blocks, or a setting
// cpu_only_settings names); invalid_argument for row-scaled amax with a held amax (the golden model refuses
// both).
Status make_plan(const Recipe& recipe, const QuantizeRequest& request, std::size_t rows, std::size_t cols,
                 QuantizePlan& plan);

// The scalars the plan resolves to once the tensor amax is known (host arithmetic, binary32 RN).
struct TensorScalars {
  float tensor_amax = 0.0f;
  float encode = 1.0f, decode = 1.0f;  // G, Gd
  float block_multiplier = 1.0f;       // RN(G * RN(1/6))
};
TensorScalars tensor_scalars(const QuantizePlan& plan, float amax);

// Tensor scalars kept in device memory (float[kDeviceScalars], in this order), for callers that never
// synchronise with the host (fp4sim.torch): the amax stays on the GPU, and every kernel that needs G, Gd or
// alpha reads them from there.
enum DeviceScalar : int { kTensorAmax = 0, kEncode = 1, kDecode = 2, kBlockMultiplier = 3, kDeviceScalars = 4 };

// tensor_scalars on the device, the same binary32 arithmetic: d_scalars from the held amax *d_held when
// given (plan.tensor_scaled), else from the measured amax *d_measured (launch_amax's output).
Status launch_tensor_scalars(const QuantizePlan& plan, const float* d_measured, const float* d_held, float* d_scalars,
                             void* stream);

// The tensor a quantizer reads, row-major [rows, cols] in device memory: binary32 elements, or bfloat16 bit
// patterns, widened exactly to binary32 as they are loaded (a BF16 activation or gradient is quantized where
// it lies, without a binary32 copy; the result is that of its binary32 widening).
struct QuantizeInput {
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
  QuantizeInput() = default;
  QuantizeInput(const float* x) : f32(x) {}
  QuantizeInput(const std::uint16_t* x) : bf16(x) {}
};

// Current amax of x (after the RHT when plan.rht), NaN-ignoring, into *d_amax (device float).
Status launch_amax(const QuantizePlan& plan, QuantizeInput d_x, float* d_amax, void* stream);
// plan.row_scaled: the amax of each row of x (after the RHT when plan.rht), NaN-ignoring, into
// d_row_amax[plan.rows] (QuantizedTensor::row_amax). The tensor amax (launch_amax) is still what G, Gd and
// tensor_amax record.
Status launch_row_amax(const QuantizePlan& plan, QuantizeInput d_x, float* d_row_amax, void* stream);
// Codes and scales of x under the plan and scalars. explicit_bits: nullptr or one integer per element.
// d_row_amax: launch_row_amax's output, given exactly when plan.row_scaled (else invalid_argument).
Status launch_quantize(const QuantizePlan& plan, const TensorScalars& scalars, QuantizeInput d_x,
                       const std::uint32_t* d_explicit_bits, std::uint8_t* d_codes, std::uint8_t* d_scales,
                       void* stream, const float* d_row_amax = nullptr);
// The same with the scalars read from device memory (DeviceScalar order) instead.
Status launch_quantize(const QuantizePlan& plan, const float* d_scalars, QuantizeInput d_x,
                       const std::uint32_t* d_explicit_bits, std::uint8_t* d_codes, std::uint8_t* d_scales,
                       void* stream, const float* d_row_amax = nullptr);
// Dequantize (codes, scales) of q's shape and settings into d_out (float [rows, cols]). d_row_amax: q.row_amax
// in device memory, given exactly when q has one (row-scaled: each row's amax and Gd), else invalid_argument.
Status launch_dequantize(const QuantizedTensor& q, const std::uint8_t* d_codes, const std::uint8_t* d_scales,
                         float* d_out, void* stream, const float* d_row_amax = nullptr);
// The same with Gd and the tensor amax read from d_scalars (DeviceScalar order) instead of q.
Status launch_dequantize(const QuantizedTensor& q, const std::uint8_t* d_codes, const std::uint8_t* d_scales,
                         const float* d_scalars, float* d_out, void* stream, const float* d_row_amax = nullptr);

// out [cols, rows] = the transpose of in [rows, cols] (row-major, element_bytes 2 or 4; rows < 2^22).
Status launch_transpose(const void* d_in, void* d_out, std::size_t rows, std::size_t cols, int element_bytes,
                        void* stream);

// ---- GEMM (emu/gemm.cu, emu/gemm_wgmma.cu, emu/gemm_probe_wgmma.cu) ----

// gemm_alpha (src/core/gemm.cpp) on the device into *d_alpha, from two operands' device scalars.
Status launch_gemm_alpha(AlphaRule rule, const float* d_scalars_a, float target_a, const float* d_scalars_b,
                         float target_b, float element_max, float* d_alpha, void* stream);
// gemm_row_alpha on the device: d_row_alpha[i] from row i's amax of a row-scaled A (launch_row_amax's output,
// `rows` of them) and B's device scalars.
Status launch_gemm_row_alpha(AlphaRule rule, const float* d_row_amax_a, std::size_t rows, float target_a,
                             const float* d_scalars_b, float target_b, float element_max, float* d_row_alpha,
                             void* stream);

// What a GEMM kernel does with each accumulated output (emu/epilogue.cuh): RN(C·alpha) with alpha = `alpha`,
// or *alpha_device when set (fp4sim.torch keeps alpha in device memory, written by launch_gemm_alpha, so that
// nothing waits for the host), or, when row_alpha is set (a row-scaled A: gemm_row_alpha), row_alpha[row] for
// output row `row` (every kernel of gemm_kernels.hpp takes it); then, with a bias [N], RN(· + bias[col]) in binary32, as torch adds a Linear's
// bias to a float32 output; stored as binary32, or rounded to nearest even BF16 when bf16_out (C then holds
// [M, N] uint16 bit patterns).
struct Epilogue {
  float alpha = 1.0f;
  const float* alpha_device = nullptr;
  const float* bias = nullptr;
  bool bf16_out = false;
  const float* row_alpha = nullptr;  // device float [M]
};

// Encoded-domain operand: out[r, k] = BF16(element value * block scale value) (exact for the presets),
// as uint16 bit patterns, [rows, k_padded] with zeros in k >= cols: the BF16 workspace of a kernel with
// workspace_k_align != 0, k_padded = GemmKernel::workspace_cols(cols). Needs k_padded % 16 == 0 and d_out
// 16-byte aligned.
Status launch_encode_bf16(const QuantizedTensor& q, const std::uint8_t* d_codes, const std::uint8_t* d_scales,
                          std::uint16_t* d_out, std::size_t k_padded, void* stream);

// C [M, N] (row-major) = epilogue(A [M, Kp] . B [N, Kp]^T) with BF16 operands (uint16 bits) through
// the wgmma kernels (when wgmma_available()) or mma.sync.m16n8k16, FP32 accumulation chained in
// ascending k from +0. group_k is the kernel row's (gemm_kernels.hpp):
//   group_k == 0: bf16-tc: C = epilogue(acc)
//   group_k == 64: probe-matched: group partials (4 chained k16 steps from +0) summed with add.rz from +0,
//   optional snap RNE(C*1024)/1024, then the epilogue.
Status launch_gemm_bf16(const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c, std::size_t m,
                        std::size_t n, std::size_t k_padded, int group_k, bool snap, Epilogue epilogue,
                        void* stream);

// Exact block-scaled GEMM on CUDA cores: C = RN(RN_exact(sum) * alpha), from codes and scales.
Status launch_gemm_exact(const QuantizedTensor& a, const std::uint8_t* d_a_codes, const std::uint8_t* d_a_scales,
                         const QuantizedTensor& b, const std::uint8_t* d_b_codes, const std::uint8_t* d_b_scales,
                         void* d_c, Epilogue epilogue, void* stream);

// Whether the wgmma kernels (emu/gemm_wgmma.cu, emu/gemm_probe_wgmma.cu) can run: emu/ was built for
// sm_90a, the device loaded that image and the driver has cuTensorMapEncodeTiled. Decided once, by a
// one-thread kernel and a copy back: call it before capturing launches in a CUDA graph.
bool wgmma_available();

// For benchmarks and A/B runs: launch_gemm_bf16 through one fixed tile configuration (0: 128x128, 1: 128x256,
// 2: 256x128, 3: probe-matched 128x128, 4: wgmma 128x256, 5-8: wgmma probe-matched configs 0-3 of
// emu/gemm_probe_wgmma.cu; 4-8 only when wgmma_available()), alpha 1. The probe-matched variants snap.
Status launch_gemm_bf16_variant(int variant, const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c,
                                std::size_t m, std::size_t n, std::size_t kp, void* stream);

}  // namespace fp4sim::gpu
